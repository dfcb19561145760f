"""RecordColumns: slicing, gathering, concatenation and compaction keep every row's
columns and payload together, whether offsets start at 0 or index a larger buffer, and
Arrow gets the same rows."""

from __future__ import annotations

import numpy as np
import pytest

from logdevice.record_columns import RecordColumns
from logdevice.records import DataRecord


def make(payloads, first_lsn=1, lead=b"", batch_offsets=None):
    """Rows with the given payloads; ``lead`` bytes before them make the offsets absolute
    into a larger buffer."""
    n = len(payloads)
    buf = np.frombuffer(lead + b"".join(payloads) + b"tail", dtype=np.uint8)
    offs = np.zeros(n + 1, np.uint64)
    np.cumsum([len(p) for p in payloads], out=offs[1:])
    offs += np.uint64(len(lead))
    bo = None if batch_offsets is None else np.asarray(batch_offsets, np.uint32)
    return RecordColumns(np.arange(first_lsn, first_lsn + n, dtype=np.uint64),
                         np.arange(100, 100 + n, dtype=np.int64),
                         np.arange(n, dtype=np.uint32) * np.uint32(2), buf, offs, bo)


def rows(c: RecordColumns):
    return [(int(c.lsns[i]), int(c.timestamps[i]), int(c.flags[i]),
             int(c.batch_offsets_or_zeros()[i]), bytes(c.payload(i))) for i in range(len(c))]


PAYLOADS = [b"a", b"", b"ccc", b"dd", b"", b"ffff"]


@pytest.mark.parametrize("lead", [b"", b"xyz"])
def test_slice_is_a_view_with_the_same_rows(lead):
    c = make(PAYLOADS, lead=lead)
    assert len(c) == 6 and c.nbytes == 10
    s = c.slice(2, 5)
    assert rows(s) == rows(c)[2:5]
    assert s.payloads is c.payloads and s.nbytes == 5
    assert len(c.slice(3, 3)) == 0 and c.slice(3, 3).nbytes == 0
    assert rows(c.take(slice(1, 4))) == rows(c)[1:4]


@pytest.mark.parametrize("lead", [b"", b"xyz"])
def test_take_gathers_only_the_rows_payloads(lead):
    c = make(PAYLOADS, lead=lead, batch_offsets=[0, 1, 2, 0, 1, 0])
    idx = np.array([5, 0, 2, 2])
    t = c.take(idx)
    assert rows(t) == [rows(c)[i] for i in idx]
    assert t.offsets[0] == 0 and bytes(t.payloads) == b"ffffacccccc"
    assert rows(c.take(slice(0, 6, 2))) == rows(c)[0:6:2]
    assert len(c.take(np.array([], np.int64))) == 0


def test_compact_rebases_offsets_without_copying():
    c = make(PAYLOADS, lead=b"xyz")
    k = c.compact()
    assert rows(k) == rows(c)
    assert k.offsets[0] == 0 and len(k.payloads) == k.nbytes == 10
    assert np.shares_memory(k.payloads, c.payloads)
    assert k.compact() is k


def test_concat_keeps_order_and_batch_offsets():
    a = make(PAYLOADS[:3], lead=b"zz")
    b = make(PAYLOADS[3:], first_lsn=4, batch_offsets=[1, 2, 3])
    both = RecordColumns.concat([a, RecordColumns.empty(), b])
    assert rows(both) == rows(a) + rows(b)
    assert both.offsets[0] == 0 and bytes(both.payloads) == b"acccddffff"
    assert both.batch_offsets is not None
    assert both.batch_offsets.tolist() == [0, 0, 0, 1, 2, 3]
    # Plain parts stay plain (batch_offsets None), one part is not copied.
    plain = RecordColumns.concat([a, a.slice(1, 3)])
    assert plain.batch_offsets is None and len(plain) == 5
    one = RecordColumns.concat([a])
    assert np.shares_memory(one.payloads, a.payloads) and rows(one) == rows(a)
    assert len(RecordColumns.concat([])) == 0


def test_concat_of_slices_is_the_original():
    c = make(PAYLOADS, lead=b"q", batch_offsets=[0, 1, 0, 1, 0, 1])
    parts = [c.slice(0, 2), c.slice(2, 2), c.slice(2, 5), c.slice(5, 6)]
    assert rows(RecordColumns.concat(parts)) == rows(c)


def test_concat_of_parts_whose_offsets_differ_in_type():
    """Offsets from the wire are uint64, a read stream's int64: joined, they index the
    joined payloads exactly (no float promotion)."""
    c = make(PAYLOADS, lead=b"qq")
    wire = c.slice(0, 3).replace(offsets=c.offsets[:4].astype(np.uint64))
    local = c.slice(3, 6).replace(offsets=c.offsets[3:].astype(np.int64))
    both = RecordColumns.concat([wire, local])
    assert both.offsets.dtype == np.uint64 and rows(both) == rows(c)


def test_data_records():
    c = make(PAYLOADS[:3], lead=b"q", batch_offsets=[0, 1, 2])
    assert c.data_records(9, 1, 3) == [DataRecord(9, 2, 101, b"", 1),
                                       DataRecord(9, 3, 102, b"ccc", 2)]
    ids = np.array([4, 5, 6], np.uint64)
    assert [r.log_id for r in c.data_records(ids)] == [4, 5, 6]


@pytest.mark.parametrize("large", [None, True])
def test_to_arrow_round_trip(large):
    pa = pytest.importorskip("pyarrow")
    c = make(PAYLOADS, lead=b"xyz", batch_offsets=[0, 1, 2, 0, 1, 0])
    t = c.to_arrow(large_binary=large)
    assert t.schema.names == ["lsn", "timestamp", "batch_offset", "payload"]
    assert t.column("lsn").to_pylist() == c.lsns.tolist()
    assert t.column("batch_offset").to_pylist() == [0, 1, 2, 0, 1, 0]
    assert t.column("payload").to_pylist() == PAYLOADS
    assert t.column("payload").type == (pa.large_binary() if large else pa.binary())
    with_ids = make(PAYLOADS[:2]).to_arrow(log_id=7)
    assert with_ids.schema.names[0] == "log_id"
    assert with_ids.column("log_id").to_pylist() == [7, 7]
    assert with_ids.column("batch_offset").to_pylist() == [0, 0]
    assert RecordColumns.empty().to_arrow().num_rows == 0


def test_a_subclass_keeps_its_row_columns_together():
    from logdevice.storage.batch import RecordBatch

    def batch(first, payloads, width):
        c = make(payloads, first_lsn=first, lead=b"#")
        n = len(c)
        return RecordBatch(3, c.lsns, c.timestamps, c.flags, c.lsns.astype(np.uint32),
                           np.full((n, width), first, np.int16), c.flags + np.uint32(7),
                           c.payloads, c.offsets, 0)

    a, b = batch(1, PAYLOADS[:2], 2), batch(10, PAYLOADS[2:5], 3)
    both = RecordBatch.concat_reads(3, [a, b], 99)
    assert both.log_id == 3 and both.next_lsn == 99 and rows(both) == rows(a) + rows(b)
    assert both.waves.tolist() == [1, 2, 10, 11, 12]
    # The narrower copysets padded with -1.
    assert both.copysets.tolist()[1] == [1, 1, -1] and both.copysets.tolist()[2] == [10] * 3
    picked = both.take(np.array([4, 0]))
    assert picked.waves.tolist() == [12, 1] and picked.copysets.shape == (2, 3)
    assert picked.checksums.tolist() == [both.checksums[4], both.checksums[0]]
    assert both.slice(1, 3).waves.tolist() == [2, 10]
    # Through the base class too: the parts' own columns are concatenated.
    assert RecordColumns.concat([a, b]).waves.tolist() == [1, 2, 10, 11, 12]
    empty = RecordBatch.concat_reads(3, [a.slice(0, 0)], 5)
    assert len(empty) == 0 and (empty.log_id, empty.next_lsn) == (3, 5)


def test_interleave_takes_rows_from_several_parts_in_any_order():
    a = make([b"a0", b"", b"a2"], lead=b"xx", batch_offsets=[0, 1, 2])
    b = make([b"b0", b"b1"], first_lsn=10)
    part = np.array([1, 0, 0, 1, 0])
    row = np.array([1, 2, 0, 0, 1])
    got = RecordColumns.interleave([a, b], part, row)
    want = [rows(p)[r] for p, r in zip([[a, b][k] for k in part], row.tolist(), strict=True)]
    assert rows(got) == want
    assert int(got.offsets[0]) == 0 and len(got.payloads) == int(got.offsets[-1])
    plain = RecordColumns.interleave([b], np.array([0, 0]), np.array([1, 0]))
    assert plain.batch_offsets is None and rows(plain) == [rows(b)[1], rows(b)[0]]
    assert len(RecordColumns.interleave([a], np.zeros(0, np.int64), np.zeros(0, np.int64))) == 0


def test_joining_kernels_refuse_columns_that_do_not_fit():
    from ldcore.columns import concat_columns, split_handles, take_columns
    a = make([b"a0", b"a1"], lead=b"xx")
    short = a.replace(offsets=a.offsets[:2])  # two rows, two offsets
    with pytest.raises(ValueError, match="offsets: 2 items, 3 needed"):
        concat_columns([a, short])
    outside = a.replace(offsets=a.offsets + np.uint64(100))
    with pytest.raises(ValueError, match="part 1: payload bytes"):
        concat_columns([a, outside])
    i64 = np.int64
    with pytest.raises(ValueError, match="no row 2 of part 0"):
        take_columns([a], np.array([0], i64), np.array([2], i64))
    with pytest.raises(ValueError, match="no row 0 of part 1"):
        take_columns([a], np.array([1], i64), np.array([0], i64))
    with pytest.raises(ValueError, match="differ in length"):
        take_columns([a], np.array([0, 0], i64), np.array([0], i64))
    backwards = a.replace(offsets=np.array([4, 2, 6], np.uint64))
    with pytest.raises(ValueError, match=r"row 0: payload bytes \[4, 2\)"):
        take_columns([backwards], np.array([0], i64), np.array([0], i64))
    with pytest.raises(ValueError, match="negative"):
        split_handles(np.array([1 << 32, -1], i64))


def test_handles_split_into_batches_in_order_of_first_appearance():
    from ldcore.columns import split_handles
    handles = np.array([7 << 32 | 3, 2 << 32, 7 << 32 | 4, 9 << 32 | 1, 2 << 32 | 1], np.int64)
    ids, part, row, counts = split_handles(handles)
    assert ids == [7, 2, 9] and counts == [2, 2, 1]
    assert part.tolist() == [0, 1, 0, 2, 1] and row.tolist() == [3, 0, 4, 1, 1]
    assert split_handles(np.zeros(0, np.int64))[0] == []


def test_payload_gather_refuses_ranges_outside_the_buffers():
    from ldcore.columns import gather_payloads
    src = np.frombuffer(b"hello", np.uint8)
    dst = np.zeros(4, np.uint8)
    u = np.uint64
    with pytest.raises(ValueError, match="do not fit"):
        gather_payloads(src, np.array([0], u), np.array([6], u), dst, np.array([0], u))
    with pytest.raises(ValueError, match="do not fit"):
        gather_payloads(src, np.array([0], u), np.array([3], u), dst, np.array([2], u))
    with pytest.raises(ValueError, match="do not fit"):
        gather_payloads(src, np.array([3], u), np.array([2], u), dst, np.array([0], u))
    assert not dst.any()  # nothing copied
    gather_payloads(src, np.array([1], u), np.array([5], u), dst, np.array([0], u))
    assert dst.tobytes() == b"ello"


def test_packed_write_owns_its_columns_with_checksums_and_trimmed_copysets():
    from ldcore.checksum import crc32c
    from ldcore.columns import pack_written, unpack_written

    def copy(*columns):
        buf, width = pack_written(*columns)
        return unpack_written(buf, len(columns[0]), width)

    frame = bytearray(b"....hello, world!...")
    offsets = np.array([4, 9, 16], np.uint64)  # two payloads inside a larger frame
    lsns = np.array([7, 9], np.uint64)
    copysets = np.array([[2, 0, -1, -1], [1, -1, -1, -1]], np.int16)
    ts, fl = np.array([100, 101], np.int64), np.array([0, 4], np.uint32)
    buf, width = pack_written(lsns, ts, fl, None, copysets, frame, offsets)
    assert width == 2 and buf.dtype == np.uint8
    ls, ts_, fl_, wv, cs, crc, body, offs = unpack_written(buf, 2, width)
    assert ls.tolist() == [7, 9] and ts_.tolist() == [100, 101] and fl_.tolist() == [0, 4]
    assert wv.tolist() == [1, 1]  # no waves given: every record's first
    assert cs.tolist() == [[2, 0], [1, -1]]  # as wide as the widest copyset
    assert bytes(body) == b"hello, world" and offs.tolist() == [0, 5, 12]
    assert crc.tolist() == [crc32c(b"hello"), crc32c(b", world")]
    assert all(a.base is buf for a in (ls, ts_, fl_, wv, cs, crc, body, offs))
    frame[4:9] = b"HELLO"  # the copy shares nothing with the frame
    assert bytes(body[:5]) == b"hello"
    del buf
    assert bytes(body) == b"hello, world"  # the views keep the buffer alive
    strided = np.array([[3, 0], [5, 0]], np.uint32)[:, 0]  # any column layout is taken
    assert copy(lsns, ts, fl, strided, copysets, frame, offsets)[3].tolist() == [3, 5]
    empty = copy(lsns[:0], ts[:0], fl[:0], None, copysets[:0], frame, offsets[:1])
    assert [len(c) for c in empty] == [0, 0, 0, 0, 0, 0, 0, 1]
    with pytest.raises(ValueError, match="differ in length"):
        pack_written(lsns[:1], ts, fl, None, copysets, frame, offsets)
    with pytest.raises(ValueError, match="outside a buffer"):
        pack_written(lsns, ts, fl, None, copysets, frame[:10], offsets)
    with pytest.raises(ValueError, match="not a packed write"):
        unpack_written(np.zeros(10, np.uint8), 2, 2)


def packed_pair():
    from ldcore.columns import pack_written

    first = pack_written(np.array([3, 4], np.uint64), np.array([10, 11], np.int64),
                         np.array([0, 1], np.uint32), np.array([1, 2], np.uint32),
                         np.array([[0, 1], [1, 2]], np.int16), b"abcde",
                         np.array([0, 2, 5], np.uint64))
    second = pack_written(np.array([9], np.uint64), np.array([12], np.int64),
                          np.array([4], np.uint32), None, np.array([[2, 0, 1]], np.int16),
                          b"xyz", np.array([1, 3], np.uint64))
    return [first[0], second[0]], [2, 1], [first[1], second[1]]


def test_packed_writes_read_as_one_in_order_with_copysets_padded():
    from ldcore.columns import read_packed, unpack_written

    bufs, ns, widths = packed_pair()
    buf, n, width, cut = read_packed(bufs, ns, widths, 0, 2**64 - 1, 100, 0)
    assert (n, width, cut) == (3, 3, False)
    ls, ts, fl, wv, cs, crc, body, offs = unpack_written(buf, n, width)
    parts = [unpack_written(b, k, w) for b, k, w in zip(bufs, ns, widths, strict=True)]
    assert ls.tolist() == [3, 4, 9] and ts.tolist() == [10, 11, 12]
    assert fl.tolist() == [0, 1, 4] and wv.tolist() == [1, 2, 1]
    assert cs.tolist() == [[0, 1, -1], [1, 2, -1], [2, 0, 1]]
    assert crc.tolist() == parts[0][5].tolist() + parts[1][5].tolist()
    assert bytes(body) == b"abcdeyz" and offs.tolist() == [0, 2, 5, 7]
    assert read_packed([], [], [], 0, 10, 5, 0)[1:] == (0, 0, False)
    with pytest.raises(ValueError, match="not a packed write"):
        read_packed([np.zeros(4, np.uint8)], [2], [2], 0, 10, 5, 0)
    with pytest.raises(ValueError, match="differ in length"):
        read_packed(bufs, [2], widths, 0, 10, 5, 0)


@pytest.mark.parametrize(("lo", "hi", "max_records", "max_bytes", "want", "cut"), [
    (4, 9, 100, 0, [4, 9], False),  # a range inside the writes
    (5, 8, 100, 0, [], False),  # between them: nothing
    (0, 99, 2, 0, [3, 4], True),  # the record limit
    (0, 99, 100, 3, [3, 4], True),  # 2 bytes before record 4: under the limit, taken
    (0, 99, 100, 2, [3], True),  # ... not at it (the limit is on where a payload starts)
    (4, 99, 100, 1, [4], True),  # the first record always goes
    (0, 99, 100, 6, [3, 4, 9], False),
])
def test_packed_writes_read_within_a_range_and_limits(lo, hi, max_records, max_bytes, want,
                                                      cut):
    from ldcore.columns import read_packed, unpack_written

    bufs, ns, widths = packed_pair()
    payloads = {3: b"ab", 4: b"cde", 9: b"yz"}
    buf, n, width, was_cut = read_packed(bufs, ns, widths, lo, hi, max_records, max_bytes)
    ls, *_, body, offs = unpack_written(buf, n, width)
    assert ls.tolist() == want and was_cut == cut
    assert bytes(body) == b"".join(payloads[x] for x in want)
    assert offs[0] == 0 and offs[-1] == len(body)
