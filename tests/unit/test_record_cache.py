"""The record cache against a real LogsDB: it fills from the writes that extend a log's
tail, and every change of the store (trims, retention, rewrites and hole plugs by
recovery, purges, rebuilding's copies and amendments, eviction, reopening) leaves it
answering exactly what LogsDB would, or not at all."""

from __future__ import annotations

import itertools
import tracemalloc

import numpy as np
import pytest

from logdevice.errors import E, LogDeviceError
from logdevice.protocol import StartFlag
from logdevice.protocol.messages import Gap, Records, Start
from logdevice.storage.flags import FLAG_WRITTEN_BY_RECOVERY
from logdevice.storage.logsdb import LogsDB
from logdevice.storage.record_cache import RecordCache

LOG = 5
T0 = 1_700_000_000_000
HOLE = 1 << 6  # FLAG_HOLE


def epoch_lsn(epoch: int, esn: int) -> int:
    return (epoch << 32) | esn


@pytest.fixture
def db(tmp_path):
    with LogsDB(tmp_path / "db", record_cache_bytes=1 << 20, max_payload=1 << 16) as d:
        yield d


def write(db: LogsDB, lsns, *, flags: int = 0, wave: int = 1, log: int = LOG,
          copyset=(0, 1), ts: int | None = None, tag: bytes = b"") -> None:
    lsns = np.asarray(lsns, np.uint64)
    n = len(lsns)
    payloads = [b"p%d" % int(x) + tag if not flags & HOLE else b"" for x in lsns]
    offsets = np.zeros(n + 1, np.uint64)
    np.cumsum([len(p) for p in payloads], out=offsets[1:])
    db.write_records(log, lsns, np.full(n, T0 if ts is None else ts, np.int64),
                     np.full(n, flags, np.uint32), np.tile(np.array(copyset, np.int16), (n, 1)),
                     b"".join(payloads), offsets, np.full(n, wave, np.uint32))


def rows(rb) -> list[tuple]:
    """Every column LogsDB returns per record (copysets without padding)."""
    out = []
    for i in range(len(rb)):
        cs = tuple(int(x) for x in rb.copysets[i] if x >= 0)
        out.append((int(rb.lsns[i]), int(rb.timestamps[i]), int(rb.flags[i]),
                    int(rb.waves[i]), cs, int(rb.checksums[i]), bytes(rb.payload(i))))
    return out


def assert_exact(db: LogsDB, lo: int, hi: int, **kw) -> bool:
    """The cache's answer for [lo, hi] (if it has one) is LogsDB's; whether it had one."""
    got = db.cache.read(LOG, lo, hi, **kw)
    want = db.read_records(LOG, lo, hi, **kw)
    if got is None:
        return False
    assert rows(got) == rows(want)
    return True


def test_tail_writes_are_served_from_memory(db):
    write(db, [1, 2])
    write(db, [3])
    write(db, [5, 8])
    assert db.cache.start(LOG) == 1
    for lo, hi in [(1, 8), (3, 3), (4, 4), (2, 6), (6, 100), (9, 2**64 - 1)]:
        assert assert_exact(db, lo, hi)
    assert assert_exact(db, 1, 8, max_records=2)
    assert assert_exact(db, 1, 8, max_bytes=3)
    assert assert_exact(db, 1, 8, payloads=False)
    assert db.cache.next_lsn(LOG, 6, 100) == 8
    assert db.cache.next_lsn(LOG, 9, 100) == 101
    assert db.cache.read(LOG, 0, 8) is None  # below what it knows: LogsDB's business


def test_a_log_starts_only_at_its_tail(db):
    write(db, [10])
    db.cache.clear()
    write(db, [4])  # below the tail: the cache cannot know what lies above
    assert not db.cache.holds(LOG)
    write(db, [11])  # the tail again
    assert db.cache.start(LOG) == 11
    assert not db.cache.holds(LOG + 1)


def test_trim_and_retention(tmp_path):
    with LogsDB(tmp_path / "db", record_cache_bytes=1 << 20, partition_duration_ms=1000
                ) as db:
        write(db, [1, 2, 3], ts=T0)
        write(db, [4, 5], ts=T0 + 5000)  # a newer partition
        db.trim(LOG, 2)
        assert db.cache.start(LOG) == 3
        assert db.cache.read(LOG, 2, 10) is None
        assert assert_exact(db, 3, 10)
        # Retention drops the first partition: the log's records there are past its
        # backlog, so its trim point moves past them, and so does the cache.
        assert db.apply_retention(T0 + 10_000, {LOG: 1000})
        assert db.trim_point(LOG) == 3
        assert db.cache.start(LOG) == 4
        assert assert_exact(db, 4, 10)


def test_recovery_rewrites_and_hole_plugs_forget_the_log(db):
    e1 = [epoch_lsn(1, i) for i in (1, 2, 3)]
    write(db, e1)
    # Recovery rewrites a copy with a new wave and plugs a hole at an LSN it lacked.
    write(db, [e1[1]], wave=7, flags=FLAG_WRITTEN_BY_RECOVERY, tag=b"!")
    assert not db.cache.holds(LOG)
    assert db.read_records(LOG, e1[1], e1[1]).waves[0] == 7
    write(db, [epoch_lsn(2, 1)])  # the next epoch starts the cache again
    assert db.cache.start(LOG) == epoch_lsn(2, 1)
    write(db, [epoch_lsn(1, 4)], flags=HOLE | FLAG_WRITTEN_BY_RECOVERY)
    assert db.cache.start(LOG) == epoch_lsn(2, 1)  # a plug below what it speaks for
    write(db, [epoch_lsn(2, 5)])
    write(db, [epoch_lsn(2, 3)], flags=HOLE | FLAG_WRITTEN_BY_RECOVERY)
    assert not db.cache.holds(LOG)  # a plug inside it: forgotten
    write(db, [epoch_lsn(2, 7)])
    write(db, [epoch_lsn(2, 8)], flags=HOLE)  # a plug at the tail: just a record
    assert assert_exact(db, epoch_lsn(2, 7), epoch_lsn(3, 0))
    assert db.cache.read(LOG, epoch_lsn(2, 7), epoch_lsn(3, 0)).flags.tolist() == [0, HOLE]


def test_purge_and_amend_forget_the_log(db):
    write(db, [1, 2, 3])
    db.delete_records(LOG, [2])
    assert not db.cache.holds(LOG)
    write(db, [4, 5])
    db.amend_records(LOG, [5], [0], [1], [[2, 0]])
    assert not db.cache.holds(LOG)
    write(db, [6])
    db.delete_records(LOG, [1])  # below what the cache speaks for: kept
    assert db.cache.start(LOG) == 6


def test_rebuilt_copies(db):
    write(db, [10, 11])
    write(db, [3, 4])  # rebuilding writes old LSNs below the cache: nothing changes
    assert db.cache.start(LOG) == 10
    assert assert_exact(db, 10, 20)
    write(db, [9, 12])  # reaching into it: the log is forgotten
    assert not db.cache.holds(LOG)
    assert db.read_records(LOG, 10, 20).lsns.tolist() == [10, 11, 12]


def test_failed_writes_tell_nothing(db):
    write(db, [1])
    with pytest.raises(LogDeviceError) as info:
        db.write_records(LOG, [2], [T0], [0], [[0, 1]], b"x" * (1 << 17), [0, 1 << 17])
    assert info.value.status == E.TOOBIG
    assert assert_exact(db, 1, 5)
    assert db.cache.read(LOG, 1, 5).lsns.tolist() == [1]


def test_eviction_moves_the_start(tmp_path):
    with LogsDB(tmp_path / "db", record_cache_bytes=5000) as db:
        for x in range(1, 40):
            write(db, [x])
        for x in range(1, 40):
            write(db, [x], log=LOG + 1)
        assert db.cache.nbytes <= 5000
        assert not db.cache.holds(LOG)  # the least recently written log went first
        start = db.cache.start(LOG + 1)
        assert 1 < start < 39
        assert db.cache.read(LOG + 1, start - 1, 50) is None


def test_reopened_store_starts_empty(tmp_path):
    with LogsDB(tmp_path / "db", record_cache_bytes=1 << 20) as db:
        write(db, [1, 2])
        assert db.cache.holds(LOG)
    assert not db.cache.holds(LOG)  # closed: emptied
    with LogsDB(tmp_path / "db", record_cache_bytes=1 << 20) as db:
        assert not db.cache.holds(LOG)
        assert db.cache.read(LOG, 1, 2) is None
    with LogsDB(tmp_path / "db") as db:
        assert db.cache is None


@pytest.mark.parametrize("records_per_write", [1, 10])
def test_the_memory_held_stays_within_the_capacity(records_per_write):
    """The bound is on memory, not on payload bytes: with many logs of a write or two each
    (a node with many quiet logs) what the cache holds per write and per log counts
    too.  Measured with tracemalloc, every allocation the cache keeps."""
    capacity = 1 << 20
    n = records_per_write
    payload = np.frombuffer(b"x" * 100 * n, np.uint8)
    offsets = np.arange(0, 100 * n + 1, 100, dtype=np.uint64)
    cache = RecordCache(capacity)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for log, w in itertools.product(range(1, 5001), range(2)):
            lsns = np.arange(1 + w * n, 1 + (w + 1) * n, dtype=np.uint64)
            cache.written(log, lsns, np.full(n, T0, np.int64), np.zeros(n, np.uint32),
                          np.ones(n, np.uint32), np.zeros((n, 2), np.int16), payload,
                          offsets, fresh=True, trim_point=0, tail=int(lsns[-1]))
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert 0 < len(cache) < 5000  # full: it evicted
    assert cache.nbytes <= capacity
    assert held <= capacity * 1.05, f"{held:,} bytes held for a capacity of {capacity:,}"


def test_capacity_zero_holds_nothing():
    cache = RecordCache(0)
    cache.written(LOG, np.array([1], np.uint64), np.array([T0]), np.zeros(1, np.uint32),
                  None, np.zeros((1, 1), np.int16), b"x", np.array([0, 1], np.uint64),
                  fresh=True, trim_point=0, tail=1)
    assert not cache.holds(LOG)


def test_read_stream_tail_step_from_memory(db):
    """A tailing SCD stream gets the record it would get from LogsDB, without a read."""
    from logdevice.readstream.server import ServerReadStream

    start = Start(read_stream_id=1, log_id=LOG, start_lsn=1, until_lsn=2**64 - 1,
                  window_high=1000, flags=StartFlag.SINGLE_COPY_DELIVERY, replication=2,
                  filter_version=1)
    s = ServerReadStream(start, 0)
    for x in range(1, 6):
        write(db, [x], copyset=(0, 1) if x % 2 else (1, 0))
        msgs = s.step(db, x, 0)
        if x % 2:
            assert isinstance(msgs[0], Records) and msgs[0].lsns.tolist() == [x]
            assert bytes(msgs[0].payloads) == b"p%d" % x
        else:
            assert len(msgs) == 1 and isinstance(msgs[0], Gap)
    assert s.stats.range_reads == 0 and s.stats.records_read == 0
    assert s.stats.cache_reads == 5


def test_several_logs_told_at_once_as_one_by_one():
    """``written_logs`` (a group commit of many logs) leaves the cache as one ``written``
    per log does: a log held below its start (ignored), one rewritten (forgotten), one
    not held whose write is not its tail or is at its trim point (not started), new logs
    (started), and eviction past the capacity."""
    def columns(runs):
        lsns = np.array([x for _, r in runs for x in r], np.uint64)
        n = len(lsns)
        payloads = b"".join(b"p%d" % x for x in lsns.tolist())
        offsets = np.zeros(n + 1, np.uint64)
        np.cumsum([len(b"p%d" % x) for x in lsns.tolist()], out=offsets[1:])
        cs = np.tile(np.int16([0, 1, -1]), (n, 1))
        return (lsns, lsns.astype(np.int64) + T0, np.zeros(n, np.uint32),
                (lsns % 7 + 1).astype(np.uint32), cs, payloads, offsets)

    before = [(1, [5, 6]), (2, [3]), (8, [9])]  # what each cache holds first
    runs = [(1, [7]), (2, [2, 3]), (3, [1]), (4, [4]), (5, [2]), (6, [1, 2, 3]),
            (8, [1])]
    trims = {5: 2}
    tails = {1: None, 2: None, 3: 1, 4: 9, 5: 2, 6: 3, 8: None}  # 4: not its tail
    caches = []
    for capacity in (1 << 20, 1500):
        one, many = RecordCache(capacity), RecordCache(capacity)
        for cache in (one, many):
            for log, lsns in before:
                cache.written(log, *columns([(log, lsns)]), fresh=True, trim_point=0,
                              tail=lsns[-1])
        many.written_logs(
            [log for log, _ in runs], np.cumsum([len(r) for _, r in runs]), *columns(runs),
            trim_points=[trims.get(log, 0) for log, _ in runs],
            tails=[tails[log] for log, _ in runs])
        for log, lsns in runs:
            one.written(log, *columns([(log, lsns)]), fresh=True,
                        trim_point=trims.get(log, 0), tail=tails[log])
        caches.append((one, many))
    for one, many in caches:
        assert many.nbytes == one.nbytes and len(many) == len(one)
        for log in range(1, 9):
            assert many.start(log) == one.start(log)
            a, b = many.read(log, 1, 100), one.read(log, 1, 100)
            assert (a is None) == (b is None)
            if a is not None:
                assert rows(a) == rows(b)
    full, small = caches
    assert [full[1].start(log) for log in range(1, 9)] == \
        [5, None, 1, None, None, 1, None, 9]
    assert small[1].nbytes <= 1500
