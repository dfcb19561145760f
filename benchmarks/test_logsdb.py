"""LogsDB against raw RocksDB through the same binding, for the same bytes.

Write: ``LogsDB.write_records`` of batches of 1,000 100-byte records (data entries, a
copyset index entry per batch, the partition directory, crc32c and heads computed) vs
``WriteBatch.put_many`` + ``DB.write`` of exactly the same data keys and values (head +
payload, copied out of a LogsDB) in batches of 1,000, into a fresh database each round
with LogsDB's RocksDB options.

Scan: ``LogsDB.read_records`` over a log (chunks of 4,096 records, heads decoded into
columns) vs ``Iterator.read_many`` of the same entries (chunks of 4,096, raw keys and
values), both from SST files after a flush.  Header-only reads and copyset index reads
are measured against the same raw scan.
"""

from __future__ import annotations

import itertools
import shutil

import numpy as np
import pytest

from logdevice.storage import keys as K
from logdevice.storage.logsdb import LSN_MAX, LogsDB
from logdevice.storage.rocksdb import DB, Options, WriteBatch

PAYLOAD = 100
BATCH = 1000
N_WRITE = 100_000  # records per timed write round
N_SCAN = 200_000  # records per timed scan
CHUNK = 4096
LOG = 1
T0 = 1_700_000_000_000
# LogsDB's RocksDB options, so the raw store does the same work per byte.
RAW_OPTIONS = Options(compression="lz4", block_cache_bytes=64 << 20,
                      write_buffer_size=32 << 20, max_background_jobs=2)


def _info(benchmark, items, reference=False, unit="records"):
    benchmark.extra_info.update(items=items, unit=unit, reference=reference)


def make_records(n: int, seed: int = 5):
    """Columns of n records: consecutive LSNs, 100-byte payloads, R=2 copysets over 3
    nodes (varying per record, as a storage node sees them without sticky copysets)."""
    rng = np.random.default_rng(seed)
    payloads = rng.integers(32, 127, n * PAYLOAD, dtype=np.uint8)
    offsets = np.arange(n + 1, dtype=np.uint64) * np.uint64(PAYLOAD)
    lsns = np.arange(1, n + 1, dtype=np.uint64)
    ts = T0 + np.arange(n, dtype=np.int64) // 100
    pairs = np.array([(0, 1), (1, 2), (2, 0), (1, 0), (2, 1), (0, 2)], np.int16)
    cs = pairs[rng.integers(0, len(pairs), n)]
    return lsns, ts, np.zeros(n, np.uint32), cs, payloads, offsets


def write_logsdb(db: LogsDB, recs) -> None:
    lsns, ts, flags, cs, payloads, offsets = recs
    for a in range(0, len(lsns), BATCH):
        b = min(a + BATCH, len(lsns))
        db.write_records(LOG, lsns[a:b], ts[a:b], flags[a:b], cs[a:b], payloads,
                         offsets[a:b + 1])


def raw_entries(recs, tmp):
    """The data entries LogsDB stores for ``recs``: (keys, key offsets, values, value
    offsets), copied out of a LogsDB written with them."""
    with LogsDB(tmp / "source") as db:
        write_logsdb(db, recs)
        (pid,) = [p.id for p in db.partitions()]
        lower = K.data_key(LOG, 1)
        with db.parts.db.iterator(db.parts.cf(pid), lower, K.data_key(LOG + 1, 0)) as it:
            it.seek(lower)
            ch = it.read_many(len(recs[0]) + 1)
    assert len(ch) == len(recs[0])
    return ch.keys, ch.key_offsets, ch.bodies, ch.body_offsets


def write_raw(db: DB, cf, entries) -> None:
    keys, koffs, values, voffs = entries
    n = len(koffs) - 1
    for a in range(0, n, BATCH):
        b = min(a + BATCH, n)
        batch = WriteBatch()
        batch.put_many(keys, koffs[a:b + 1], values, voffs[a:b + 1], cf)
        db.write(batch)
        batch.close()


class Fresh:
    """A new store per benchmark round (setup, untimed); the previous one is removed."""

    def __init__(self, root, open_store):
        self.root = root
        self.open_store = open_store
        self.current = None
        self.counter = itertools.count()

    def setup(self):
        self.close()
        path = self.root / f"r{next(self.counter)}"
        self.current = (self.open_store(path), path)
        return (self.current[0],), {}

    def close(self):
        if self.current is not None:
            store, path = self.current
            store.close()
            shutil.rmtree(path, ignore_errors=True)
            self.current = None


@pytest.fixture(scope="module")
def write_recs():
    return make_records(N_WRITE)


def open_logsdb(path) -> LogsDB:
    """A LogsDB whose partition exists already (creating its column family is a one-off
    cost that the raw store pays when it opens)."""
    db = LogsDB(path)
    db.write_records(LOG + 1, [1], [T0], [0], [[0, 1]], b"x" * PAYLOAD, [0, PAYLOAD])
    return db


@pytest.mark.benchmark(group="LogsDB write 100k x 100 B, batches of 1000")
def test_logsdb_write_records(benchmark, write_recs, tmp_path):
    _info(benchmark, N_WRITE)
    fresh = Fresh(tmp_path, open_logsdb)
    try:
        benchmark.pedantic(lambda db: write_logsdb(db, write_recs), setup=fresh.setup,
                           rounds=15, warmup_rounds=1)
        assert fresh.current[0].tail(LOG) == N_WRITE
    finally:
        fresh.close()


@pytest.mark.benchmark(group="LogsDB write 100k x 100 B, batches of 1000")
def test_raw_rocksdb_put_many(benchmark, write_recs, tmp_path):
    _info(benchmark, N_WRITE, reference=True)
    entries = raw_entries(write_recs, tmp_path)
    fresh = Fresh(tmp_path, lambda p: DB.open(p, ["p1"], RAW_OPTIONS))
    try:
        benchmark.pedantic(lambda db: write_raw(db, db["p1"], entries), setup=fresh.setup,
                           rounds=15, warmup_rounds=1)
    finally:
        fresh.close()


# ------------------------------------------------------------------------------ scans


@pytest.fixture(scope="module")
def scan_stores(tmp_path_factory):
    """A LogsDB and a raw DB holding the same N_SCAN data entries, flushed to SST files."""
    root = tmp_path_factory.mktemp("scan")
    recs = make_records(N_SCAN, seed=6)
    entries = raw_entries(recs, root)
    logsdb = LogsDB(root / "logsdb")
    write_logsdb(logsdb, recs)
    logsdb.flush()
    raw = DB.open(root / "raw", ["p1"], RAW_OPTIONS)
    write_raw(raw, raw["p1"], entries)
    raw.flush()
    yield logsdb, raw
    logsdb.close()
    raw.close()


def scan_logsdb(db: LogsDB, payloads: bool = True) -> int:
    n, lo = 0, 1
    while True:
        rb = db.read_records(LOG, lo, max_records=CHUNK, payloads=payloads)
        n += len(rb)
        if not len(rb) or rb.next_lsn >= LSN_MAX:
            return n
        lo = rb.next_lsn


def scan_csi(db: LogsDB) -> int:
    n, lo = 0, 1
    while True:
        c = db.read_csi(LOG, lo, max_entries=CHUNK)
        n += len(c)
        if not len(c) or c.next_lsn >= LSN_MAX:
            return n
        lo = c.next_lsn


def scan_raw(db: DB) -> int:
    n = 0
    lower = K.data_key(LOG, 1)
    with db.iterator(db["p1"], lower, K.data_key(LOG + 1, 0)) as it:
        it.seek(lower)
        while True:
            ch = it.read_many(CHUNK)
            n += len(ch)
            if ch.stop == "end":
                return n


GROUP_SCAN = "LogsDB range scan 200k x 100 B (SST), chunks of 4096"


@pytest.mark.benchmark(group=GROUP_SCAN)
def test_logsdb_read_records(benchmark, scan_stores):
    _info(benchmark, N_SCAN)
    assert benchmark.pedantic(scan_logsdb, args=(scan_stores[0],), rounds=25,
                              warmup_rounds=1) == N_SCAN


@pytest.mark.benchmark(group=GROUP_SCAN)
def test_logsdb_read_records_headers_only(benchmark, scan_stores):
    _info(benchmark, N_SCAN)
    assert benchmark.pedantic(scan_logsdb, args=(scan_stores[0], False), rounds=25,
                              warmup_rounds=1) == N_SCAN


@pytest.mark.benchmark(group=GROUP_SCAN)
def test_logsdb_read_csi(benchmark, scan_stores):
    _info(benchmark, N_SCAN)
    assert benchmark.pedantic(scan_csi, args=(scan_stores[0],), rounds=25,
                              warmup_rounds=1) == N_SCAN


@pytest.mark.benchmark(group=GROUP_SCAN)
def test_raw_rocksdb_read_many(benchmark, scan_stores):
    _info(benchmark, N_SCAN, reference=True)
    assert benchmark.pedantic(scan_raw, args=(scan_stores[1],), rounds=25,
                              warmup_rounds=1) == N_SCAN
