"""The storage-node side of read streams against a real LogsDB in a tmp dir (no sockets):
``ServerReadStream`` (SCD decisions, gaps, window, until, checksums, NO_PAYLOAD, rewinds,
tailing) and ``ReadStreamsRole`` driven through its handlers with an in-process peer."""

import asyncio

import numpy as np
import pytest

from ldcore.scd import FLAG_BRIDGE, FLAG_DRAINED, FLAG_HOLE, ship_mask
from logdevice.config import make_local_config
from logdevice.errors import E
from logdevice.node.roles.read_streams_role import ReadStreamRow, ReadStreamsRole
from logdevice.node.transport.server import Node
from logdevice.protocol import (
    FrameDecoder,
    Gap,
    GapReason,
    GetReadStreams,
    ReadStreamList,
    RecordFlag,
    Records,
    Start,
    Started,
    StartFlag,
    Stop,
    Window,
    encode,
    table_columns,
)
from logdevice.readstream.server import ServerReadStream, StreamState
from logdevice.storage import keys as K
from logdevice.storage.logsdb import LogsDB
from tests.waiting import async_wait_until

LOG = 7
LSN_MAX = 2**64 - 1
SCD = StartFlag.SINGLE_COPY_DELIVERY

# The SCD worked example's DB content of N0 (and, for local SCD, of N1).
EXAMPLE_LSNS = np.arange(42, 49, dtype=np.uint64)
EXAMPLE_COPYSETS = np.array(
    [[1, 0, 2, 3], [3, 5, 0, 1], [0, 1, 2, 3], [4, 0, 5, 2], [0, 3, 2, 1], [4, 3, 2, 5],
     [1, 4, 0, 5]],
    dtype=np.int16,
)


# ------------------------------------------------------------------------------ helpers


def payload_of(lsn: int, size: int = 8) -> bytes:
    return (b"%d:" % lsn + b"x" * size)[: max(size, 3)]


def write(db, lsns, copysets, *, flags=None, sizes=None, sticky=False, log_id=LOG):
    lsns = np.asarray(lsns, np.uint64)
    n = len(lsns)
    sizes = [8] * n if sizes is None else list(sizes)
    payloads = [payload_of(int(lsn), s) for lsn, s in zip(lsns.tolist(), sizes, strict=True)]
    offsets = np.zeros(n + 1, np.uint64)
    np.cumsum([len(p) for p in payloads], out=offsets[1:])
    fl = np.zeros(n, np.uint32) if flags is None else np.asarray(flags, np.uint32)
    cs = np.asarray(copysets, np.int16)
    if cs.ndim == 1:
        cs = np.tile(cs, (n, 1))
    db.write_records(log_id, lsns, np.full(n, 1_000, np.int64), fl, cs, b"".join(payloads),
                     offsets, sticky_block=sticky)
    return payloads


def start(start_lsn=1, until_lsn=LSN_MAX, window_high=LSN_MAX, flags=0, **kw) -> Start:
    return Start(read_stream_id=kw.pop("read_stream_id", 1), log_id=kw.pop("log_id", LOG),
                 start_lsn=start_lsn, until_lsn=until_lsn, window_high=window_high,
                 flags=int(flags), **kw)


def wire(msgs):
    """Encode and decode every message: what the client receives."""
    dec = FrameDecoder()
    out = []
    for m in msgs:
        out += dec.feed(b"".join(bytes(b) for b in encode(m)))
    assert len(out) == len(msgs)
    return out


def summary(msgs):
    """[("R", [lsns]) | ("G", reason name, lo, hi)], consecutive RECORDS frames merged."""
    out = []
    for m in wire(msgs):
        if isinstance(m, Records):
            lsns = m.lsns.tolist()
            if out and out[-1][0] == "R":
                out[-1] = ("R", out[-1][1] + lsns)
            else:
                out.append(("R", lsns))
        else:
            assert isinstance(m, Gap)
            out.append(("G", GapReason(m.reason).name, m.lo, m.hi))
    return out


def run(stream, db, released, trim=None, budget=1 << 20, max_steps=1000):
    """Step until the stream waits for something; all messages sent."""
    msgs = []
    for _ in range(max_steps):
        t = db.trim_point(stream.log_id) if trim is None else trim
        if stream.state(released, t) is not StreamState.READY:
            return msgs
        got = stream.step(db, released, t, budget)
        assert got, "a READY stream must make progress"
        msgs += got
    raise AssertionError("stream did not settle")


def shipped(msgs):
    return [lsn for kind, *rest in summary(msgs) if kind == "R" for lsn in rest[0]]


def payloads_sent(msgs):
    out = {}
    for m in wire(msgs):
        if isinstance(m, Records):
            offs = m.payload_offsets.tolist()
            buf = bytes(m.payloads)
            for i, lsn in enumerate(m.lsns.tolist()):
                out[lsn] = buf[offs[i]:offs[i + 1]]
    return out


def corrupt(db, lsn, log_id=LOG):
    """Flip the last payload byte of a stored record, straight in RocksDB."""
    key = K.data_key(log_id, lsn)
    for cf in db.parts.families():
        value = db.parts.db.get(key, cf)
        if value is not None:
            db.parts.db.put(key, value[:-1] + bytes([value[-1] ^ 0xFF]), cf)
            return
    raise AssertionError(f"no record at {lsn}")


@pytest.fixture
def db(tmp_path):
    with LogsDB(tmp_path / "db", compression="none") as store:
        yield store


@pytest.fixture
def example_db(db):
    write(db, EXAMPLE_LSNS, EXAMPLE_COPYSETS)
    db.set_last_released(LOG, 48)
    return db


# ------------------------------------------------------------------------------ SCD


@pytest.mark.parametrize(("known_down", "expected"), [
    ((), [44, 46]),
    ((1,), [42, 44, 46]),
    ((1, 4), [42, 44, 45, 46, 48]),
])
def test_example_scd_known_down(example_db, known_down, expected):
    s = ServerReadStream(start(flags=SCD, known_down=list(known_down)), me=0)
    msgs = run(s, example_db, 48)
    assert shipped(msgs) == expected
    # Only the shipped records' data was read; the decision came from the CSI.
    assert s.stats.records_read == len(expected) and s.stats.range_reads == 0
    assert s.stats.payload_bytes_read == sum(len(payload_of(x)) for x in expected)
    assert payloads_sent(msgs) == {x: payload_of(x) for x in expected}
    assert s.state(48) is StreamState.RELEASE


@pytest.mark.parametrize(("me", "known_down", "expected"), [
    (1, (), [42, 48]),
    (0, (), [43, 44, 45, 46]),
    (1, (0,), [42, 43, 44, 48]),
    (1, (0, 2), [42, 43, 44, 46, 48]),  # the worked example names N0 here; the sender is N1
])
def test_example_local_scd(example_db, me, known_down, expected):
    flags = SCD | StartFlag.LOCAL_SCD_ENABLED
    s = ServerReadStream(start(flags=flags, known_down=list(known_down)), me=me,
                         local_nodes=[0, 1, 2])
    assert shipped(run(s, example_db, 48)) == expected


def test_local_nodes_ignored_without_flag(example_db):
    s = ServerReadStream(start(flags=SCD), me=0, local_nodes=[0, 1, 2])
    assert s.local_nodes is None
    assert shipped(run(s, example_db, 48)) == [44, 46]


def test_all_send_all_ships_everything(example_db):
    s = ServerReadStream(start(), me=0)
    msgs = run(s, example_db, 48)
    assert summary(msgs) == [("R", list(range(42, 49)))]
    assert s.stats.range_reads >= 1 and s.stats.point_reads == 0


def test_every_record_shipped_once_across_nodes(tmp_path):
    """Each node holds the records whose copyset names it; with the same START (seed,
    known-down list) the nodes' SCD streams partition the log between them."""
    rng = np.random.default_rng(5)
    n_nodes, n = 5, 600
    lsns = np.arange(1, n + 1, dtype=np.uint64)
    cs = np.array([rng.choice(n_nodes, 3, replace=False) for _ in range(n)], np.int16)
    flags = rng.choice([0, 0, 0, 0, FLAG_HOLE, FLAG_BRIDGE], n).astype(np.uint32)
    for seed, known_down in ((None, ()), (11, ()), (11, (2,)), (None, (0, 3))):
        seen = []
        for me in range(n_nodes):
            mine = np.flatnonzero((cs == me).any(axis=1))
            with LogsDB(tmp_path / f"n{me}-{seed}-{len(known_down)}", compression="none") as db:
                write(db, lsns[mine], cs[mine], flags=flags[mine])
                s = ServerReadStream(start(flags=SCD, known_down=list(known_down),
                                           reorder_seed=seed), me=me, csi_chunk=97)
                got = shipped(run(s, db, n, budget=4096))
                expect = lsns[mine][ship_mask(cs[mine], me, known_down, seed=seed,
                                              flags=flags[mine])]
                assert got == expect.tolist()
                assert s.stats.records_read == len(got)
                seen += got
        special = set(lsns[(flags & (FLAG_HOLE | FLAG_BRIDGE)) != 0].tolist())
        plain = [x for x in seen if x not in special]
        assert set(seen) == set(lsns.tolist())  # every record reaches the reader
        if not known_down:
            # Plain records exactly once overall; holes and bridges by every holder.
            assert sorted(plain) == sorted(set(lsns.tolist()) - special)


def test_sticky_block_decided_whole(db):
    write(db, range(1, 101), [2, 0, 1], sticky=True)
    write(db, range(101, 201), [0, 2, 1], sticky=True)
    s = ServerReadStream(start(flags=SCD), me=0)
    msgs = run(s, db, 200)
    assert summary(msgs) == [("R", list(range(101, 201)))]
    assert s.stats.records_read == 100
    s = ServerReadStream(start(flags=SCD, known_down=[2]), me=0)
    assert shipped(run(s, db, 200)) == list(range(1, 201))


def test_hole_and_bridge_always_ship_drained_never(db):
    flags = [0, FLAG_HOLE, FLAG_BRIDGE, FLAG_DRAINED, 0]
    write(db, range(1, 6), [1, 0], flags=flags)
    s = ServerReadStream(start(flags=SCD), me=0)
    assert shipped(run(s, db, 5)) == [2, 3]
    s = ServerReadStream(start(), me=0)  # all-send-all: drained copies still stay home
    assert shipped(run(s, db, 5)) == [1, 2, 3, 5]
    got = [m for m in wire(run(ServerReadStream(start(), me=0), db, 5)) if isinstance(m, Records)]
    sent_flags = np.concatenate([m.flags for m in got])
    assert (sent_flags[1] & FLAG_HOLE) and (sent_flags[2] & FLAG_BRIDGE)


# ------------------------------------------------------------------------------ release, gaps


def test_only_released_records_then_tail_gap(db):
    write(db, range(1, 11), [0, 1])
    s = ServerReadStream(start(), me=0)
    assert summary(run(s, db, 6)) == [("R", [1, 2, 3, 4, 5, 6])]
    assert s.state(6) is StreamState.RELEASE
    assert s.step(db, 6, 0) == []
    s = ServerReadStream(start(), me=0)
    assert summary(run(s, db, 15)) == [("R", list(range(1, 11))), ("G", "NO_RECORDS", 11, 15)]
    s = ServerReadStream(start(), me=0)
    assert run(s, db, 0) == []  # nothing released yet: nothing said


def test_tail_gap_when_node_ships_nothing(example_db):
    s = ServerReadStream(start(flags=SCD), me=5)  # N5 is never first
    assert summary(run(s, example_db, 48)) == [("G", "NO_RECORDS", 1, 48)]
    assert s.stats.records_read == 0


def test_trim_gap(db):
    write(db, range(1, 21), [0])
    db.trim(LOG, 8)
    s = ServerReadStream(start(), me=0)
    assert summary(run(s, db, 20)) == [("G", "TRIM", 1, 8), ("R", list(range(9, 21)))]
    s = ServerReadStream(start(start_lsn=10), me=0)
    assert summary(run(s, db, 20)) == [("R", list(range(10, 21)))]
    s = ServerReadStream(start(until_lsn=5), me=0)
    assert summary(run(s, db, 20)) == [("G", "TRIM", 1, 5)]
    assert s.state(20) is StreamState.DONE


def test_trim_while_reading(db):
    write(db, range(1, 21), [0])
    s = ServerReadStream(start(window_high=5), me=0)
    assert shipped(run(s, db, 20)) == [1, 2, 3, 4, 5]
    db.trim(LOG, 12)
    assert s.on_window(30, 1)
    assert summary(run(s, db, 20)) == [("G", "TRIM", 6, 12), ("R", list(range(13, 21)))]


def test_window_gap_stop_and_resume(db):
    write(db, [1, 2, 3, 8, 9, 10, 30], [0])
    s = ServerReadStream(start(window_high=5), me=0)
    # The gap at the window's end reaches up to the next stored record (8).
    assert summary(run(s, db, 30)) == [("R", [1, 2, 3]), ("G", "NO_RECORDS", 4, 7)]
    assert s.state(30) is StreamState.WINDOW
    assert s.step(db, 30, 0) == []
    assert not s.on_window(20, filter_version=2)  # another version: ignored
    assert not s.on_window(4, filter_version=1)  # never shrinks
    assert s.on_window(9, filter_version=1)
    assert summary(run(s, db, 30)) == [("R", [8, 9])]
    assert s.on_window(25, filter_version=1)
    assert summary(run(s, db, 30)) == [("R", [10]), ("G", "NO_RECORDS", 11, 29)]
    assert s.on_window(100, filter_version=1)
    assert summary(run(s, db, 30)) == [("R", [30])]
    assert s.state(30) is StreamState.RELEASE


def test_until_lsn(db):
    write(db, range(1, 31), [0])
    s = ServerReadStream(start(until_lsn=15), me=0)
    assert summary(run(s, db, 30)) == [("R", list(range(1, 16)))]
    assert s.state(30) is StreamState.DONE and s.step(db, 30, 0) == []
    s = ServerReadStream(start(start_lsn=25, until_lsn=40), me=0)
    assert summary(run(s, db, 30)) == [("R", list(range(25, 31)))]
    assert s.state(30) is StreamState.RELEASE
    assert summary(run(s, db, 50)) == [("G", "NO_RECORDS", 31, 40)]
    assert s.state(50) is StreamState.DONE


def test_batch_end_gaps_let_the_client_move_on(db):
    # N0 ships every 24th LSN; the rest is N1's.  With small CSI chunks and a tiny budget
    # every step ends with "nothing more up to where I looked".
    lsns = np.arange(1, 101)
    mine = lsns % 24 == 1
    write(db, lsns[mine], [0, 1])
    write(db, lsns[~mine], [1, 0])
    s = ServerReadStream(start(flags=SCD), me=0, csi_chunk=20)
    steps = []
    while s.state(100) is StreamState.READY:
        steps.append(summary(s.step(db, 100, 0, budget_bytes=1)))
    assert steps == [
        [("R", [1]), ("G", "NO_RECORDS", 2, 20)],
        [("R", [25]), ("G", "NO_RECORDS", 26, 40)],
        [("R", [49]), ("G", "NO_RECORDS", 50, 60)],
        [("R", [73]), ("G", "NO_RECORDS", 74, 80)],
        [("R", [97]), ("G", "NO_RECORDS", 98, 100)],
    ]
    assert s.stats.records_read == 5


def test_large_reads_split_into_frames_in_order(db):
    rng = np.random.default_rng(1)
    n = 3000
    sizes = rng.integers(0, 2000, n)
    write(db, range(1, n + 1), [0, 1], sizes=sizes)
    s = ServerReadStream(start(), me=0, max_frame_bytes=64 << 10, max_frame_records=500)
    msgs = run(s, db, n, budget=256 << 10)
    frames = [m for m in wire(msgs) if isinstance(m, Records)]
    assert all(len(m.lsns) <= 500 for m in frames)
    assert all(memoryview(m.payloads).nbytes <= (64 << 10) + 2000 for m in frames)
    assert shipped(msgs) == list(range(1, n + 1))
    assert payloads_sent(msgs) == {i: payload_of(i, int(sizes[i - 1])) for i in range(1, n + 1)}
    # SCD with the same limits.
    s = ServerReadStream(start(flags=SCD), me=0, max_frame_bytes=64 << 10,
                         max_frame_records=500)
    assert shipped(run(s, db, n, budget=256 << 10)) == list(range(1, n + 1))


def test_budget_bounds_one_step(db):
    write(db, range(1, 201), [0], sizes=[1000] * 200)

    def sent(msgs):
        return sum(memoryview(m.payloads).nbytes for m in msgs if isinstance(m, Records))

    for flags in (0, SCD):
        s = ServerReadStream(start(flags=flags), me=0)
        # SCD sizes its first point read on a guess of the record size, then on what it saw.
        assert 10_000 <= sent(s.step(db, 200, 0, budget_bytes=20_000)) <= 40_000
        assert 10_000 <= sent(s.step(db, 200, 0, budget_bytes=20_000)) <= 25_000
        assert s.state(200) is StreamState.READY


# ------------------------------------------------------------------------------ checksums


@pytest.mark.parametrize("flags", [0, SCD])
def test_checksum_failure_becomes_gap(db, flags):
    payloads = write(db, range(1, 11), [0, 1])
    corrupt(db, 4)
    corrupt(db, 10)
    s = ServerReadStream(start(flags=flags), me=0)
    msgs = run(s, db, 12)
    assert summary(msgs) == [
        ("R", [1, 2, 3]), ("G", "CHECKSUM_FAIL", 4, 4), ("R", [5, 6, 7, 8, 9]),
        ("G", "CHECKSUM_FAIL", 10, 10), ("G", "NO_RECORDS", 11, 12),
    ]
    sent = payloads_sent(msgs)
    assert sent == {i: payloads[i - 1] for i in range(1, 10) if i != 4}
    assert s.stats.checksum_failures == 2
    for m in wire(msgs):  # good records carry their crc32c for the client to check
        if isinstance(m, Records):
            assert len(m.checksums) == len(m.lsns)
            assert np.all(m.flags & RecordFlag.CHECKSUM)


@pytest.mark.parametrize("scd", [False, True], ids=["all_send_all", "scd"])
def test_no_payload(db, scd):
    write(db, range(1, 6), [0], sizes=[100] * 5)
    corrupt(db, 3)  # payloads are neither sent nor checked
    s = ServerReadStream(start(flags=StartFlag.NO_PAYLOAD | (SCD if scd else 0)), me=0)
    msgs = wire(run(s, db, 5))
    assert len(msgs) == 1 and isinstance(msgs[0], Records)
    m = msgs[0]
    assert m.lsns.tolist() == [1, 2, 3, 4, 5]
    assert memoryview(m.payloads).nbytes == 0 and m.payload_offsets.tolist() == [0] * 6
    assert len(m.checksums) == 0 and not np.any(m.flags & RecordFlag.CHECKSUM)
    assert s.stats.payload_bytes_sent == 0
    assert s.stats.payload_bytes_read == 0  # header-only reads


def test_digest_reads_unreleased_with_waves_and_copysets(db):
    write(db, range(1, 6), [[1, 0], [0, 1], [2, 0], [0, 2], [1, 0]])
    s = ServerReadStream(start(until_lsn=8, flags=StartFlag.DIGEST | SCD), me=0)
    msgs = wire(run(s, db, 2))  # released only up to 2: a digest reads past it
    assert summary(msgs) == [("R", [1, 2, 3, 4, 5]), ("G", "NO_RECORDS", 6, 8)]
    assert msgs[0].copysets[:, :2].tolist() == [[1, 0], [0, 1], [2, 0], [0, 2], [1, 0]]
    assert msgs[0].waves.tolist() == [1] * 5
    assert s.state(2) is StreamState.DONE


# ------------------------------------------------------------------------------ rewind, tailing


def test_rewind_with_new_filter_version(example_db):
    s1 = ServerReadStream(start(flags=SCD), me=0)
    msgs = wire(run(s1, example_db, 48))
    assert {m.filter_version for m in msgs} == {1}
    # The client puts N1 on the known-down list and rewinds to 42.
    s2 = ServerReadStream(start(start_lsn=42, flags=SCD, known_down=[1], filter_version=2),
                          me=0)
    msgs = wire(run(s2, example_db, 48))
    assert {m.filter_version for m in msgs} == {2}
    assert summary(msgs) == [("R", [42, 44, 46]), ("G", "NO_RECORDS", 47, 48)]


@pytest.mark.parametrize("me", [0, 1, 2])
def test_a_young_logs_stream_reads_from_the_record_cache(tmp_path, me):
    # Epoch 0 holds nothing and the cache knows the log from its first record: a stream
    # from LSN 1 sends what a store without a cache sends, read from memory.  Without
    # the cache, the few records are read whole (no copyset index read).
    e1 = 1 << 32
    lsns = [e1 + 1, e1 + 2, e1 + 3]
    got = {}
    for cache in (0, 1 << 20):
        with LogsDB(tmp_path / f"db{cache}", compression="none",
                    record_cache_bytes=cache) as db:
            write(db, lsns, [[0, 1], [1, 0], [0, 1]])
            s = ServerReadStream(start(flags=SCD), me=me)
            got[cache] = (summary(wire(run(s, db, e1 + 3))), s.stats)
    assert got[0][0] == got[1 << 20][0]
    stats = got[1 << 20][1]
    assert stats.cache_reads >= 1 and stats.csi_rows == 0 and stats.point_reads == 0
    assert stats.records_read == 0
    # Without the cache: three records are read whole in one read, not through the CSI.
    stats = got[0][1]
    assert stats.range_reads == 1 and stats.csi_rows == 0 and stats.point_reads == 0


def test_tailing_resumes_after_release(db):
    write(db, range(1, 11), [0])
    s = ServerReadStream(start(), me=0)
    assert shipped(run(s, db, 10)) == list(range(1, 11))
    assert s.state(10) is StreamState.RELEASE
    write(db, range(11, 16), [0])
    assert run(s, db, 10) == []  # stored but not released
    assert summary(run(s, db, 13)) == [("R", [11, 12, 13])]
    assert summary(run(s, db, 20)) == [("R", [14, 15]), ("G", "NO_RECORDS", 16, 20)]


# ------------------------------------------------------------------------------ the role


class Peer:
    """An in-process client end (the role's ``Peer`` interface): collects what is sent."""

    _ids = iter(range(1000, 10**6))

    def __init__(self, turns=None):
        self.id = next(self._ids)
        self.turns = turns  # a shared list: which peer each batch of messages went to
        self.peer_role = "client"
        self.peer_node = None
        self.peer_location = ""
        self.closed = False
        self.attrs = {}
        self.sent = []

    def send(self, msg):
        self.sent.append(msg)
        return True

    def send_many(self, msgs):
        if self.turns is not None:
            self.turns.append(self.id)
        self.sent += list(msgs)
        return True

    def close(self):
        self.closed = True

    def take(self):
        out, self.sent = self.sent, []
        return out


async def settle(role, timeout=20.0):
    """Wait until every stream is parked (bounded)."""
    await asyncio.sleep(0)
    await async_wait_until(lambda: role.idle, timeout, message="a stream never parked")


def test_role_handlers(tmp_path):
    cfg = make_local_config(3, 2, logs=range(1, 11), root=tmp_path, ports=[1, 2, 3],
                            locations=["r1.d.c.w.k0", "r2.d.c.w.k1", "r1.d.c.w.k1"])

    async def main():
        node = Node(cfg, 0)
        with LogsDB(tmp_path / "db", compression="none") as db:
            write(db, range(1, 21), [0, 1])
            db.set_last_released(LOG, 10)
            role = ReadStreamsRole(node, db, budget_bytes=4096)
            node.add_role(role)
            assert set(role.handlers()) == {Start, Window, Stop, GetReadStreams}
            await role.start()
            try:
                c = Peer()
                role.on_start(c, start(log_id=99))
                assert [(m.status, m.read_stream_id) for m in c.take()] == [(E.NOTFOUND, 1)]
                role.on_start(c, start(start_lsn=9, until_lsn=3))
                assert c.take()[0].status == E.INVALID_PARAM
                # Open, read up to the release pointer, park.
                role.on_start(c, start(window_high=15))
                await settle(role)
                got = c.take()
                assert isinstance(got[0], Started) and got[0].status == E.OK
                assert got[0].last_released == 10
                assert summary(got[1:]) == [("R", list(range(1, 11)))]
                # A release wakes it (the node tells the roles that listen for
                # releases); the window stops it; WINDOW resumes it.
                db.set_last_released(LOG, 20)
                node.notify_release(LOG, 20)
                await settle(role)
                assert summary(c.take()) == [("R", list(range(11, 16)))]
                assert role.steps_in_thread == 0  # a tailing reader's few records: inline
                role.on_window(c, Window(read_stream_id=1, filter_version=1, window_high=30))
                await settle(role)
                assert summary(c.take()) == [("R", list(range(16, 21)))]
                # Rewind with a higher filter version; a stale START is ignored.
                role.on_start(c, start(start_lsn=5, flags=SCD, known_down=[0],
                                       filter_version=3))
                role.on_start(c, start(start_lsn=1, filter_version=2))
                await settle(role)
                got = c.take()
                assert got[0].filter_version == 3 and got[0].status == E.OK
                assert {m.filter_version for m in got} == {3}
                assert shipped(got[1:]) == list(range(5, 21))
                # Local SCD: the client is in N1's region, so N1 ships what N0 would.
                c2 = Peer()
                role.on_start(c2, start(read_stream_id=5, flags=SCD | StartFlag.LOCAL_SCD_ENABLED,
                                        client_location="r2.d.c.w.k9"))
                await settle(role)
                got = c2.take()
                assert got[0].status == E.OK
                assert summary(got[1:]) == [("G", "NO_RECORDS", 1, 20)]
                # STOP and a closed connection drop their streams.
                assert role.stream_count() == 2
                role.on_stop(c2, Stop(read_stream_id=5))
                assert role.stream_count() == 1
                role.on_connection_closed(c)
                assert role.stream_count() == 0
                role.on_release(LOG, 25)
                await settle(role)
                assert c.take() == [] and c2.take() == []
            finally:
                await role.stop()
                role.close()

    asyncio.run(main())


def test_role_describes_its_streams(tmp_path):
    cfg = make_local_config(3, 2, logs=range(1, 11), root=tmp_path, ports=[1, 2, 3])
    assert ReadStreamRow._fields == table_columns(ReadStreamList)

    async def main():
        node = Node(cfg, 0)
        with LogsDB(tmp_path / "db", compression="none") as db:
            write(db, range(1, 21), [0, 1])
            db.set_last_released(LOG, 10)
            role = ReadStreamsRole(node, db)
            node.add_role(role)
            await role.start()
            try:
                client, seq = Peer(), Peer()
                client.peername = "127.0.0.1:4242"
                seq.peer_role, seq.peer_node = "node", 2
                role.on_start(client, start(start_lsn=3, window_high=15, flags=SCD,
                                            known_down=[1]))
                role.on_start(seq, start(read_stream_id=9, until_lsn=20,
                                         flags=StartFlag.DIGEST))
                await settle(role)
                rows = {r.peer: r for r in role.describe()}
                tail, digest = rows["client"], rows["N2"]
                assert (tail.read_stream_id, tail.log_id, tail.conn_id, tail.address) == (
                    1, LOG, client.id, "127.0.0.1:4242")
                assert (tail.start_lsn, tail.until_lsn, tail.next_lsn, tail.delivered_to,
                        tail.window_high, tail.last_released) == (3, LSN_MAX, 11, 10, 15, 10)
                assert (tail.mode, tail.state, tail.known_down) == ("scd", "release", (1,))
                assert tail.records_sent == 8 and tail.bytes_sent == 8 * 8
                assert tail.started_ms > 1_600_000_000_000 and tail.age_ms >= 0
                # A digest reads past the release pointer, to its end.
                assert (digest.mode, digest.state, digest.next_lsn) == ("digest", "done", 21)
                assert digest.records_sent == 20 and digest.address == ""
                # A release moves the tailing stream up to its window.
                db.set_last_released(LOG, 20)
                role.on_release(LOG, 20)
                await settle(role)
                admin = Peer()
                role.on_get_read_streams(admin, GetReadStreams(request_id=4))
                (reply,) = wire(admin.take())
                assert isinstance(reply, ReadStreamList) and reply.request_id == 4
                assert reply.status == E.OK and reply.node_index == 0
                at = reply.peer.index("client")
                assert reply.state[at] == "window" and reply.records_sent[at] == 13
                assert reply.known_down[at] == [1] and reply.next_lsn[at] == 16
                role.on_connection_closed(client)
                assert [r.peer for r in role.describe()] == ["N2"]
            finally:
                await role.stop()
                role.close()

    asyncio.run(main())


def test_role_reads_a_young_log_inline(tmp_path):
    # A new stream of a young log spans billions of LSNs (epoch 0 up to its first records
    # in epoch 1) but holds three records: the step runs on the loop, not in the thread.
    cfg = make_local_config(2, 2, logs=range(1, 11), root=tmp_path, ports=[1, 2])
    e1 = 1 << 32

    async def main():
        node = Node(cfg, 0)
        with LogsDB(tmp_path / "db", compression="none") as db:
            write(db, [e1 + 1, e1 + 2, e1 + 3], [0, 1])
            db.set_last_released(LOG, e1 + 3)
            role = ReadStreamsRole(node, db)
            node.add_role(role)
            await role.start()
            try:
                p = Peer()
                role.on_start(p, start(flags=SCD))
                await settle(role)
                got = p.take()
                assert summary(got[1:]) == [("R", [e1 + 1, e1 + 2, e1 + 3])]
                assert role.steps_in_thread == 0 and role.steps_inline >= 1
            finally:
                await role.stop()
                role.close()

    asyncio.run(main())


def test_role_takes_first_steps_at_start_only_within_a_slice(tmp_path, monkeypatch):
    # A START's short first step runs at once (its records leave with STARTED), but a
    # loop turn's burst of STARTs only takes them for START_SLICE: the rest wait for the
    # pump, which yields to the loop between slices.  With a slice that is over as it
    # opens, none of the burst is stepped at once.
    import logdevice.node.roles.read_streams_role as rsr

    cfg = make_local_config(2, 2, logs=range(1, 41), root=tmp_path, ports=[1, 2])
    e1 = 1 << 32

    async def main():
        node = Node(cfg, 0)
        with LogsDB(tmp_path / "db", compression="none") as db:
            for log in range(1, 41):
                write(db, [e1 + 1, e1 + 2], [0, 1], log_id=log)
                db.set_last_released(log, e1 + 2)
            role = ReadStreamsRole(node, db)
            node.add_role(role)
            await role.start()
            try:
                p = Peer()
                role.on_start(p, start(log_id=1, read_stream_id=1))
                assert role.steps_inline == 1  # at once: STARTED, then the records
                assert [type(m) for m in p.take()][:2] == [Started, Records]
                await settle(role)
                monkeypatch.setattr(rsr, "START_SLICE", -1.0)
                await asyncio.sleep(0)  # a new turn: a new slice
                for log in range(2, 41):
                    role.on_start(p, start(log_id=log, read_stream_id=log))
                assert role.steps_inline == 1  # none of the burst at once
                await settle(role)
                got = p.take()
                assert sum(isinstance(m, Records) for m in got) == 39  # all served
            finally:
                await role.stop()
                role.close()

    asyncio.run(main())


def test_role_big_reads_in_thread_and_round_robin(tmp_path):
    cfg = make_local_config(2, 2, logs=range(1, 11), root=tmp_path, ports=[1, 2])

    async def main():
        node = Node(cfg, 0)
        with LogsDB(tmp_path / "db", compression="none") as db:
            n = 5000
            write(db, range(1, n + 1), [0, 1], sizes=[200] * n)
            db.set_last_released(LOG, n)
            role = ReadStreamsRole(node, db, budget_bytes=32 << 10)
            node.add_role(role)
            await role.start()
            try:
                turns = []
                peers = [Peer(turns) for _ in range(3)]
                for p in peers:
                    role.on_start(p, start())
                await settle(role)
                # Round-robin: the streams took turns, one budget each.
                ids = [p.id for p in peers]
                assert len(turns) > 30 and turns[:30] == ids * 10
                assert role.steps_in_thread > 30  # backfill reads ran off the loop
                for p in peers:
                    got = p.take()
                    assert shipped(got[1:]) == list(range(1, n + 1))
            finally:
                await role.stop()
                role.close()

    asyncio.run(main())


@pytest.mark.parametrize("known_down", [(), (0,), (0, 3)])
def test_tailing_scd_decides_on_the_records_as_on_the_csi(db, known_down):
    """A tailing stream sees a few LSNs per release: it reads them whole and decides on
    their own copysets.  Every node ships exactly what it ships when the same records
    are read in one backfill (decided on the copyset index), so each record still goes
    out from exactly one node."""
    rng = np.random.default_rng(7)
    n, nodes = 300, 5
    lsns = np.arange(1, n + 1, dtype=np.uint64)
    copysets = np.array([rng.choice(nodes, 3, replace=False) for _ in range(n)], np.int16)
    write(db, lsns, copysets)
    everyone = []
    for me in (x for x in range(nodes) if x not in known_down):  # the readers' nodes
        backfill = ServerReadStream(start(flags=SCD, known_down=list(known_down)), me=me)
        at_once = shipped(run(backfill, db, n))
        assert backfill.stats.range_reads == 0  # decided on the CSI
        tail = ServerReadStream(start(flags=SCD, known_down=list(known_down)), me=me)
        tailing, released = [], 0
        while released < n:
            released = min(n, released + int(rng.integers(1, 6)))
            tailing += shipped(run(tail, db, released))
        assert tail.stats.range_reads > 0  # decided on the records read
        assert tailing == at_once
        assert tail.stats.records_read == len(tailing)  # only shipped records are counted
        everyone += at_once
    assert sorted(everyone) == lsns.tolist()  # each record from exactly one node
