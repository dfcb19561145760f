"""LogsDB read options for readers: header-only reads (``payloads=False``), the copyset
index merge (its no-sort fast path against a brute-force merge) and the average record
size per log.  Real RocksDB in tmp dirs."""

import numpy as np
import pytest

from logdevice.storage import reads
from logdevice.storage.logsdb import LSN_MAX, LogsDB

MIN = 60_000
HEAD_COLUMNS = ("lsns", "timestamps", "flags", "waves", "copysets", "checksums")


def write(db, log_id, lsns, t0, rng, *, ts=None, size=None, k=2):
    lsns = np.asarray(lsns, np.uint64)
    n = len(lsns)
    sizes = rng.integers(0, 300, n) if size is None else np.full(n, size)
    offsets = np.zeros(n + 1, np.uint64)
    np.cumsum(sizes, out=offsets[1:])
    payloads = rng.integers(0, 256, int(offsets[-1]), dtype=np.uint8)
    if ts is None:
        ts = t0 + np.sort(rng.integers(0, 5 * MIN, n))
    cs = np.array([rng.choice(20, k, replace=False) for _ in range(n)], np.int16)
    db.write_records(log_id, lsns, np.asarray(ts, np.int64), rng.integers(0, 4, n), cs,
                     payloads, offsets)


@pytest.fixture(params=[True, False], ids=["csi_ranges", "csi_per_record"])
def db(tmp_path, request):
    with LogsDB(tmp_path / "db", partition_duration_ms=10 * MIN,
                csi_ranges=request.param) as db:
        yield db


def filled(db, rng):
    for b in range(4):  # several partitions
        write(db, 1, np.arange(b * 200 + 1, b * 200 + 201), b * 6 * MIN, rng)
    # a rewrite with old timestamps: partitions whose LSN ranges overlap (the merge path)
    write(db, 1, np.arange(390, 420), 0, rng, ts=np.full(30, 5))
    return db


def assert_same_heads(full, heads):
    for name in HEAD_COLUMNS:
        np.testing.assert_array_equal(getattr(heads, name), getattr(full, name), err_msg=name)
    assert heads.next_lsn == full.next_lsn
    assert heads.nbytes == 0 and len(heads.payloads) == 0
    assert heads.offsets.tolist() == [0] * (len(heads) + 1)


def test_header_only_range_reads(db):
    rng = np.random.default_rng(1)
    filled(db, rng)
    assert len(db.partitions()) >= 3
    for lo, hi, n in ((1, LSN_MAX, 10_000), (150, 450, 10_000), (1, LSN_MAX, 77), (395, 399, 3)):
        full = db.read_records(1, lo, hi, max_records=n, max_bytes=0)
        heads = db.read_records(1, lo, hi, max_records=n, payloads=False)
        assert len(full) == min(n, len(full)) and len(full)
        assert_same_heads(full, heads)
    # The byte limit counts payload bytes taken: none are, so only max_records stops.
    assert len(db.read_records(1, 1, max_bytes=100, payloads=False)) == 800
    assert len(db.read_records(1, 1, max_bytes=100)) < 10
    db.trim(1, 500)
    assert int(db.read_records(1, 1, payloads=False).lsns[0]) == 501


def test_header_only_point_reads(db):
    rng = np.random.default_rng(2)
    filled(db, rng)
    want = np.sort(rng.choice(900, 300, replace=False) + 1).astype(np.uint64)
    full = db.read_records_at(1, want)
    heads = db.read_records_at(1, want, payloads=False)
    assert len(full) == int(np.sum(want <= 800))
    assert_same_heads(full, heads)
    assert len(db.read_records_at(1, [5_000, 6_000], payloads=False)) == 0


def brute_merge(rows, horizon):
    best = {}
    for lsns, prio, flags, cs in rows:
        for i in range(len(lsns)):
            lsn = int(lsns[i])
            if lsn <= horizon and (lsn not in best or prio[i] < best[lsn][0]):
                best[lsn] = (int(prio[i]), int(flags[i]), [int(x) for x in cs[i] if x >= 0])
    return [(lsn, *best[lsn][1:]) for lsn in sorted(best)]


def row(lsns, prio, width, rng):
    lsns = np.asarray(lsns, np.uint64)
    cs = rng.integers(0, 9, (len(lsns), width)).astype(np.int16)
    return (lsns, np.full(len(lsns), prio, np.uint8),
            rng.integers(0, 5, len(lsns)).astype(np.uint32), cs)


@pytest.mark.parametrize("case", range(40))
def test_merge_rows_fast_and_slow_paths_agree_with_brute_force(case):
    rng = np.random.default_rng(case)
    rows = [row(np.sort(rng.choice(60, rng.integers(0, 6), replace=False)) + 1, 0, 3, rng)]
    start = 1
    for _ in range(int(rng.integers(0, 4))):  # range entries: never overlapping each other
        n = int(rng.integers(0, 12))
        rows.append(row(np.arange(start, start + n), 1, int(rng.integers(1, 4)), rng))
        start += n + int(rng.integers(0, 5))
    if case % 4 == 0:
        rows = [rows[0]]  # one source only
    elif case % 4 == 1:
        rows[0] = row([], 0, 3, rng)  # no single entries: range entries in a row
    horizon = int(rng.integers(0, 70))
    lsns, flags, cs = reads.merge_rows(rows, horizon)
    got = [(int(lsns[i]), int(flags[i]), [int(x) for x in cs[i] if x >= 0])
           for i in range(len(lsns))]
    assert got == brute_merge(rows, horizon)
    assert lsns.dtype == np.uint64 and flags.dtype == np.uint32 and cs.dtype == np.int16


def test_average_record_size(tmp_path):
    rng = np.random.default_rng(3)
    with LogsDB(tmp_path / "db", partition_duration_ms=10 * MIN) as db:
        assert db.average_record_size(1) == 0.0
        write(db, 1, np.arange(1, 101), 0, rng, size=100, k=2)
        write(db, 1, np.arange(101, 201), 20 * MIN, rng, size=300, k=2)  # a new partition
        write(db, 2, np.arange(1, 11), 0, rng, size=10, k=3)
        head2, head3 = 24 + 2 * 2, 24 + 2 * 3
        assert db.average_record_size(1) == pytest.approx(200 + head2)
        assert db.average_record_size(2) == pytest.approx(10 + head3)
    with LogsDB(tmp_path / "db") as db:  # from the persisted directory
        assert db.average_record_size(1) == pytest.approx(200 + head2)


def test_records_within_counts_the_partitions_meeting_the_range(tmp_path):
    rng = np.random.default_rng(4)
    e1 = 1 << 32
    with LogsDB(tmp_path / "db", partition_duration_ms=10 * MIN) as db:
        assert db.records_within(1, 1, LSN_MAX) == 0
        write(db, 1, np.arange(e1 + 1, e1 + 101), 0, rng)
        write(db, 1, np.arange(e1 + 101, e1 + 131), 20 * MIN, rng)  # a new partition
        write(db, 2, np.arange(1, 11), 0, rng)
        assert db.records_within(1, 1, e1) == 0  # a young log's epoch 0: nothing there
        assert db.records_within(1, 1, e1 + 1) == 100
        assert db.records_within(1, e1 + 120, e1 + 120) == 30
        assert db.records_within(1, 1, LSN_MAX) == 130
        assert db.records_within(1, e1 + 131, LSN_MAX) == 0
        assert db.records_within(2, 5, 5) == 10  # a partition meeting the range counts whole
    with LogsDB(tmp_path / "db") as db:  # from the persisted directory
        assert db.records_within(1, 1, LSN_MAX) == 130
