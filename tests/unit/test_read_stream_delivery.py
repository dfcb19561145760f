"""ReadStream: epochs and bridges, BufferedWriter blobs, batched input and columnar output."""

from __future__ import annotations

import numpy as np

from ldcore import codec
from logdevice.protocol.flags import FLAG_BRIDGE, FLAG_BUFFERED_WRITER_BLOB, FLAG_HOLE
from logdevice.readstream import SendWindow
from logdevice.readstream.window import RecordWindow
from logdevice.records import DataRecord, GapRecord, GapType
from tests.unit.test_read_stream import LOG, lsn, make, records, show

EMAX = 0xFFFFFFFF


# ------------------------------------------------------------------ epochs


def test_epoch_bump_with_bridge_record():
    rs, _ = make(nodes=(0, 1, 2), r=2, start=lsn(1, 1), until=lsn(9, 0), scd=True,
                 buffer_size=8)
    rs.take_actions()
    records(rs, 0, lsn(1, 1), lsn(1, 2))
    rs.on_record(1, lsn(1, 3), b"", FLAG_BRIDGE | FLAG_HOLE)
    # No f-majority needed (and none possible in SCD mode): the bridge ends epoch 1.
    assert show(rs.poll()) == [lsn(1, 1), lsn(1, 2),
                               ("BRIDGE", lsn(1, 3), lsn(1, EMAX))]
    acts = rs.take_actions()  # the window moved into epoch 2
    assert acts == [SendWindow(n, lsn(2, 7), 1) for n in (0, 1, 2)]
    records(rs, 2, lsn(2, 1))
    # ESN 0 holds no record: epoch 2 begins at its first record.
    assert show(rs.poll()) == [("BRIDGE", lsn(2, 0), lsn(2, 0)), lsn(2, 1)]
    assert rs.scd_active and rs.filter_version == 1


def test_epoch_bump_by_fmajority_is_a_bridge():
    rs, _ = make(nodes=(0, 1, 2), r=2, start=lsn(1, 1), until=lsn(9, 0), sequencer_window=1000)
    for n in (0, 1, 2):
        records(rs, n, lsn(1, 1), lsn(1, 2))
        rs.on_gap(n, lsn(1, 3), lsn(2, 0))
    records(rs, 0, lsn(2, 1))
    assert show(rs.poll()) == [lsn(1, 1), lsn(1, 2), ("BRIDGE", lsn(1, 3), lsn(2, 0)),
                               lsn(2, 1)]


def test_gap_at_start_of_epoch_is_a_bridge_by_default():
    rs, _ = make(nodes=(0, 1, 2), r=2, start=lsn(3, 1), until=lsn(9, 0), sequencer_window=1000)
    for n in (0, 1, 2):
        records(rs, n, lsn(3, 5))
    assert show(rs.poll()) == [("BRIDGE", lsn(3, 1), lsn(3, 4)), lsn(3, 5)]


def test_gap_at_start_of_epoch_strict_is_dataloss():
    rs, _ = make(nodes=(0, 1, 2), r=2, start=lsn(3, 1), until=lsn(9, 0), sequencer_window=0)
    for n in (0, 1, 2):
        records(rs, n, lsn(3, 5))
    assert show(rs.poll()) == [("DATALOSS", lsn(3, 1), lsn(3, 4)), lsn(3, 5)]


def test_epoch_crossing_gap_default_vs_strict():
    def run(window):
        rs, _ = make(nodes=(0, 1), r=1, start=lsn(1, 1), until=lsn(9, 0), sequencer_window=window)
        for n in (0, 1):
            records(rs, n, lsn(1, 1))
            rs.on_gap(n, lsn(1, 2), lsn(2, 2))  # the next record is past the window
        out = show(rs.poll())
        records(rs, 0, lsn(2, 3))  # after the window slid
        return out + show(rs.poll())

    assert run(1000) == [lsn(1, 1), ("BRIDGE", lsn(1, 2), lsn(2, 2)), lsn(2, 3)]
    assert run(0) == [lsn(1, 1), ("BRIDGE", lsn(1, 2), lsn(2, 0)),
                      ("DATALOSS", lsn(2, 1), lsn(2, 2)), lsn(2, 3)]


def test_dataloss_in_middle_of_epoch_even_by_default():
    rs, _ = make(nodes=(0, 1), r=1, start=lsn(1, 1), until=lsn(9, 0), sequencer_window=1000)
    for n in (0, 1):
        records(rs, n, lsn(1, 1), lsn(1, 4))
    assert show(rs.poll()) == [lsn(1, 1), ("DATALOSS", lsn(1, 2), lsn(1, 3)), lsn(1, 4)]


# ------------------------------------------------------------------- blobs


def test_blob_unpacked_with_batch_offsets():
    rs, _ = make(nodes=(0,), r=1)
    blob = codec.encode([b"a", b"bc", b"def"])
    rs.on_record(0, 1, blob, FLAG_BUFFERED_WRITER_BLOB, timestamp=5)
    rs.on_record(0, 2, b"plain", timestamp=6)
    assert rs.poll() == [DataRecord(LOG, 1, 5, b"a", 0), DataRecord(LOG, 1, 5, b"bc", 1),
                         DataRecord(LOG, 1, 5, b"def", 2), DataRecord(LOG, 2, 6, b"plain")]


def test_blob_in_poll_batch_and_split_across_calls():
    rs, _ = make(nodes=(0,), r=1)
    blob = codec.encode([b"x" * 10, b"y" * 20], compression="none")
    zblob = codec.encode([b"z" * 1000], compression="zstd")
    bufs = [b"p1", blob, b"p3", zblob]
    offs = np.cumsum([0] + [len(b) for b in bufs])
    flags = [0, FLAG_BUFFERED_WRITER_BLOB, 0, FLAG_BUFFERED_WRITER_BLOB]
    rs.on_records(0, [1, 2, 3, 4], [10, 20, 30, 40], flags, b"".join(bufs), offs)
    b1 = rs.poll_batch(max_records=2)
    assert b1.lsns.tolist() == [1, 2] and b1.batch_offsets.tolist() == [0, 0]
    b2 = rs.poll_batch()
    assert b2.lsns.tolist() == [2, 3, 4]
    assert b2.batch_offsets.tolist() == [1, 0, 0]
    assert b2.timestamps.tolist() == [20, 30, 40]
    assert [bytes(b2.payload(i)) for i in range(3)] == [b"y" * 20, b"p3", b"z" * 1000]
    assert int(b2.offsets[0]) == 0 and len(b2.offsets) == 4
    assert not (b2.flags & FLAG_BUFFERED_WRITER_BLOB).any()


def test_corrupt_blob_is_dataloss():
    rs, _ = make(nodes=(0,), r=1)
    rs.on_record(0, 1, b"\xb1garbage", FLAG_BUFFERED_WRITER_BLOB)
    rs.on_record(0, 2, b"ok")
    assert show(rs.poll()) == [("DATALOSS", 1, 1), 2]


# ------------------------------------------------------------- batched input


def _batch(lsns, payloads):
    offs = np.cumsum([0] + [len(p) for p in payloads]).astype(np.uint64)
    n = len(lsns)
    return (np.asarray(lsns, dtype=np.uint64), np.arange(n, dtype=np.int64) + 100,
            np.zeros(n, dtype=np.uint32), b"".join(payloads), offs)


def test_on_records_and_poll_batch_columns():
    rs, _ = make(nodes=(0, 1), r=2, grace_period=0)
    rs.on_records(0, *_batch([1, 2, 3, 6], [b"a", b"bb", b"", b"dddd"]))
    rs.on_records(1, *_batch([2, 3, 6, 7], [b"B", b"C", b"D", b"E"]))
    b = rs.poll_batch()
    assert b.log_id == LOG
    assert b.lsns.dtype == np.uint64 and b.lsns.tolist() == [1, 2, 3, 6, 7]
    assert b.timestamps.tolist() == [100, 101, 102, 103, 103]
    assert [bytes(b.payload(i)) for i in range(len(b))] == [b"a", b"bb", b"", b"dddd", b"E"]
    assert bytes(b.payloads) == b"abbddddE"
    assert b.offsets.tolist() == [0, 1, 3, 3, 7, 8]
    assert b.gaps == [GapRecord(LOG, GapType.DATALOSS, 4, 5)]


def test_single_batch_poll_batch_is_zero_copy():
    rs, _ = make(nodes=(0,), r=1)
    buf = np.frombuffer(b"aabbcc", dtype=np.uint8)
    rs.on_records(0, [1, 2, 3], [0, 0, 0], [0, 0, 0], buf, [0, 2, 4, 6])
    b = rs.poll_batch()
    assert np.shares_memory(b.payloads, buf)
    assert b.offsets.tolist() == [0, 2, 4, 6]


def test_poll_max_items_splits_chunks():
    rs, _ = make(nodes=(0,), r=1)
    rs.on_records(0, *_batch([1, 2, 3, 4, 5], [b"1", b"2", b"3", b"4", b"5"]))
    assert show(rs.poll(max_items=2)) == [1, 2]
    assert [r.payload for r in rs.poll(max_items=2)] == [b"3", b"4"]
    assert show(rs.poll()) == [5]
    assert rs.poll_batch().lsns.tolist() == []


def test_on_records_bad_mask_repacks_payloads():
    rs, _ = make(nodes=(0, 1), r=2)
    rs.on_records(0, *_batch([1, 2, 3], [b"a", b"BAD", b"c"]),
                  bad=np.array([False, True, False]))
    rs.on_record(1, 2, b"b")
    got = rs.poll()
    assert [(r.lsn, r.payload) for r in got] == [(1, b"a"), (2, b"b"), (3, b"c")]


def _window_insert(win: RecordWindow, lsns: list[int], payloads: list[bytes]) -> int:
    arr, ts, fl, buf, offs = _batch(lsns, payloads)
    return win.insert(np.asarray(arr, dtype=np.uint64), np.asarray(ts, dtype=np.int64),
                      np.asarray(fl, dtype=np.uint32), np.frombuffer(buf, dtype=np.uint8),
                      np.asarray(offs, dtype=np.int64))


def test_batches_are_released():
    # The stream's window part keeps a batch while records of it are buffered.
    win = RecordWindow(1, 100, 8, 0.7)
    assert _window_insert(win, [2, 3], [b"x", b"y"]) == 2
    assert _window_insert(win, [2, 3], [b"x", b"y"]) == 2  # all duplicates: not kept
    assert win.held_batches == 1
    assert _window_insert(win, [1], [b"w"]) == 1
    chunk = win.pop_run()
    assert chunk is not None and chunk.lsns.tolist() == [1, 2, 3]
    assert [bytes(chunk.payload(i)) for i in range(3)] == [b"w", b"x", b"y"]
    assert win.held_batches == 0 and win.pop_run() is None
    # Past the buffer (LSN 12 and on for head 4, size 8) and past until: cut off.
    assert _window_insert(win, [11, 12, 13], [b"a", b"b", b"c"]) == 1
    assert RecordWindow(1, 5, 8, 0.7).high == 5
    assert _window_insert(RecordWindow(1, 5, 8, 0.7), [6], [b"z"]) == 0
    # Through a stream, batches are released as records are delivered.
    rs, _ = make(nodes=(0, 1, 2), r=2)
    rs.on_records(0, *_batch([2, 3], [b"x", b"y"]))
    rs.on_records(1, *_batch([2, 3], [b"x", b"y"]))
    rs.on_records(2, *_batch([1], [b"w"]))
    assert show(rs.poll()) == [1, 2, 3]


def test_empty_payload_column():
    rs, _ = make(nodes=(0,), r=1)
    rs.on_records(0, [1, 2], [0, 0], [0, 0], b"", [])
    assert [r.payload for r in rs.poll()] == [b"", b""]


def _deliver(win: RecordWindow, first: int, n: int, size: int, node_batches: int = 1) -> int:
    """Insert LSNs ``first .. first + n - 1`` with ``size``-byte payloads, spread record
    by record over ``node_batches`` batches (as single copy delivery from that many
    nodes sends them), pop them, and slide the window past them; the new high."""
    lsns = list(range(first, first + n))
    for k in range(node_batches):
        mine = lsns[k::node_batches]
        assert _window_insert(win, mine, [bytes([k]) * size] * len(mine)) == len(mine)
    run = win.pop_run()
    assert run is not None and run.lsns.tolist() == lsns
    assert [bytes(run.payload(i)) for i in range(n)] == \
        [bytes([i % node_batches]) * size for i in range(n)]
    assert win.held_batches == 0
    win.slide(first + n)
    return win.high


def test_window_grows_for_small_records_and_not_past_its_bytes():
    until = 10**9
    small = RecordWindow(1, until, 16, 0.7, window_bytes=16 * 1024)
    # 100-byte records (132 bytes with their cost): 16 KiB hold 124 LSNs, within 16..512.
    assert _deliver(small, 1, 16, 100, node_batches=3) == 17 + 124 - 1
    assert small.size == 124
    # Tiny records: the window stops at 32 times its size.
    tiny = RecordWindow(1, until, 16, 0.7, window_bytes=1 << 30)
    _deliver(tiny, 1, 16, 1)
    assert tiny.size == 16 * 32
    # Large records: never below the size asked for.
    large = RecordWindow(1, until, 16, 0.7, window_bytes=16 * 1024)
    _deliver(large, 1, 4, 8192)
    assert large.size == 16
    # Without window_bytes the window keeps its size, whatever the records.
    fixed = RecordWindow(1, until, 16, 0.7)
    _deliver(fixed, 1, 16, 1)
    assert fixed.size == 16 and fixed.high == 17 + 16 - 1
    # A grown window takes what the nodes send up to its new high.
    lsns = list(range(17, 17 + 124))
    assert _window_insert(small, lsns, [b"x"] * len(lsns)) == len(lsns)


def test_window_shrinks_at_once_when_records_get_larger():
    win = RecordWindow(1, 10**9, 16, 0.7, window_bytes=64 * 1024)
    _deliver(win, 1, 16, 1)
    assert win.size == 16 * 32
    _deliver(win, 17, 4, 4096)  # large records: the next slide is back at the minimum
    assert win.size == 16
    _deliver(win, 21, 16, 1)  # small again: it grows back a quarter at a time
    assert 16 < win.size < 16 * 32


# ------------------------------------------------------------------ newer epochs


def test_no_gap_into_an_epoch_the_placement_does_not_cover():
    # The stream reads nodes 0-2, whose nodeset covered epochs up to 1.  Epoch 2 was
    # activated on nodes 0-3: its first record went to N3 and N0, and N0 is slow.  N1 and
    # N2 (an f-majority of nodes 0-2, not of epoch 2's nodeset) have nothing from e1n2 to
    # e2n1: a bridge over e2n1 would skip an acknowledged record.
    def run(known_epoch):
        rs, _ = make(nodes=(0, 1, 2), r=2, start=lsn(1, 1), until=lsn(9, 0),
                     known_epoch=known_epoch, sequencer_window=1000)
        for n in (1, 2):
            records(rs, n, lsn(1, 1))
            rs.on_gap(n, lsn(1, 2), lsn(2, 1))
        return rs, show(rs.poll())

    rs, got = run(known_epoch=None)  # what a stream without the limit does
    assert got == [lsn(1, 1), ("BRIDGE", lsn(1, 2), lsn(2, 1))]
    rs, got = run(known_epoch=1)
    assert got == [lsn(1, 1)] and rs.wants_epoch == 2  # waits for epoch 2's placement
    rs.on_gap(0, lsn(1, 2), lsn(2, 0))  # N0 has nothing before epoch 2 either
    assert show(rs.poll()) == [("BRIDGE", lsn(1, 2), lsn(2, 0))]  # ESN 0: no record
    assert rs.next_lsn == lsn(2, 1)  # e2n1 is not skipped


def test_gaps_within_the_known_epochs_need_no_lookup():
    rs, _ = make(nodes=(0, 1, 2), r=2, start=lsn(2, 1), until=lsn(2, 9), known_epoch=2)
    for n in (0, 1, 2):
        records(rs, n, lsn(2, 5))
    assert show(rs.poll()) == [("DATALOSS", lsn(2, 1), lsn(2, 4)), lsn(2, 5)]
    assert rs.wants_epoch == 0
