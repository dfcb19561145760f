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

Small writes, what a storage node does per STORE at 1,000 unbatched appends/s: a decoded
STORE of 1 or 6 records of 100 bytes (a) written through LogsDB's API as the group
committer calls it (``pending``, ``add``, ``commit``), and (b) handed to a real storage
role (``Node.dispatch``) until its STORED is encoded, against the floor: one raw
``WriteBatch`` of the entries LogsDB writes for it (data, copyset index, the two
directory entries) put one by one, and ``DB.write``.  Large writes: 256 records of
256 KiB (BufferedWriter blobs), 16 per write, against ``put_many`` of the same entries.
"""

from __future__ import annotations

import asyncio
import itertools
import shutil
import time

import numpy as np
import pytest

from logdevice.config.local import make_local_config
from logdevice.epochstore import EpochMetadata, FileEpochStore
from logdevice.node.roles.storage_role import StorageRole
from logdevice.node.transport.server import Node
from logdevice.protocol import Store, Stored
from logdevice.protocol.framing import decode_frame, encode_frame
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


# ------------------------------------------------------------------------------ small writes

try:  # the node's loop (logdeviced runs on uvloop when it is installed)
    from uvloop import new_event_loop
except ImportError:
    from asyncio import new_event_loop

STORES = 2000  # STOREs per timed round


def decoded_stores(n_records: int, count: int, epoch: int = 1) -> list[Store]:
    """``count`` STOREs of ``n_records`` 100-byte records each (consecutive LSNs of
    ``epoch``, copyset {0, 1}), decoded from their frames as a storage node gets them."""
    now = int(time.time() * 1000)
    out = []
    for i in range(count):
        esns = np.arange(1 + i * n_records, 1 + (i + 1) * n_records, dtype=np.uint64)
        msg = Store(request_id=i + 1, log_id=LOG, epoch=epoch,
                    lsns=esns | np.uint64(epoch << 32), timestamps=np.full(n_records, now),
                    flags=np.zeros(n_records, np.uint32), waves=np.ones(n_records, np.uint32),
                    copysets=np.tile(np.int16([0, 1]), (n_records, 1)),
                    payload_offsets=np.arange(n_records + 1, dtype=np.uint64) * PAYLOAD,
                    payloads=b"y" * (PAYLOAD * n_records))
        out.append(decode_frame(encode_frame(msg)))
    return out


def write_stores(db: LogsDB, stores: list[Store]) -> None:
    """Each STORE in its own write, as the group committer writes a lone STORE."""
    for m in stores:
        pw = db.pending()
        pw.add(m.log_id, m.lsns, m.timestamps, m.flags, m.copysets, m.payloads,
               m.payload_offsets, m.waves)
        pw.commit()


def small_raw_entries(stores: list[Store], tmp) -> list[list[tuple[str, bytes, bytes]]]:
    """Per STORE, the (column family, key, value) entries LogsDB writes for it (copied
    out of a LogsDB that wrote them: data, CSI, then the directory's two entries)."""
    with LogsDB(tmp / "small-source") as db:
        write_stores(db, stores)
        (pid,) = [p.id for p in db.partitions()]
        held = dict(db.parts.db.iterate(db.parts.cf(pid)))
        meta = dict(db.parts.db.iterate(db.parts.meta_cf))
    dir_entry = next((k, v) for k, v in meta.items() if k[:1] == K.META_DIR)
    part_entry = next((k, v) for k, v in meta.items() if k[:1] == K.META_PARTITION)
    out = []
    for m in stores:
        lsns = [int(x) for x in m.lsns]
        entries = [("p1", K.data_key(LOG, x), held[K.data_key(LOG, x)]) for x in lsns]
        csi = [k for k in (K.csi_range_key(LOG, lsns[0], K.CSI_RUN),
                           K.csi_range_key(LOG, lsns[0], K.CSI_BLOCK),
                           K.csi_key(LOG, lsns[0])) if k in held]
        entries += [("p1", csi[0], held[csi[0]])]
        entries += [("meta", *dir_entry), ("meta", *part_entry)]
        out.append(entries)
    return out


def write_raw_small(db: DB, entries) -> None:
    cfs = {"p1": db["p1"], "meta": db["meta"]}
    batch = WriteBatch()
    for store in entries:
        for cf, key, value in store:
            batch.put(key, value, cfs[cf])
        db.write(batch)
        batch.clear()
    batch.close()


class RoleRig:
    """A real storage role on a Node of a 3-node config (node 0, the store in a tmp
    dir, epoch 1 of the log issued, the node's event loop), fed STOREs through
    ``Node.dispatch`` from a peer node's connection that encodes every answer as the
    wire would."""

    class Peer:
        peer_role = "node"
        peer_node = 1
        closed = False

        def __init__(self) -> None:
            self.id = 1
            self.attrs: dict = {}
            self.stored = 0

        def send(self, msg) -> bool:
            encode_frame(msg)
            self.stored += isinstance(msg, Stored) and msg.status == 0
            return True

        def pause_reading(self, reason: str) -> None:
            pass

        def resume_reading(self, reason: str) -> None:
            pass

    def __init__(self, root) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.config = make_local_config(3, 2, logs=range(1, 11), root=root, ports=[1, 2, 3])
        with FileEpochStore(root / "epochs.sqlite") as store:
            store.activate(LOG, EpochMetadata(0, (0, 1, 2), {"node": 2}))
        self.root = root
        self.loop = new_event_loop()
        self.node = Node(self.config, 0, self.loop)
        self.role = StorageRole(self.node, LogsDB(root / "db"))
        self.node.add_role(self.role)
        self.loop.run_until_complete(self.role.start())
        # The role reads the log's epoch from the epoch store once, before timing.
        self.loop.run_until_complete(self.role.epochs.fresh(LOG))
        self.peer = self.Peer()

    def feed(self, stores: list[Store]) -> None:
        """Each STORE alone in its loop turn (how they come at 1,000/s)."""
        async def run() -> None:
            for m in stores:
                self.node.dispatch(self.peer, m)
                await asyncio.sleep(0)
            await self.role.committer.flush()

        self.loop.run_until_complete(run())

    def close(self) -> None:
        self.loop.run_until_complete(self.role.stop())
        self.role.close()
        self.loop.close()


@pytest.fixture(scope="module", params=[1, 6], ids=["1rec", "6rec"])
def small(request, tmp_path_factory):
    """(records per STORE, the STOREs of every round, their raw entries)."""
    n = request.param
    rounds = [decoded_stores(n, STORES, epoch=1)]
    entries = small_raw_entries(rounds[0], tmp_path_factory.mktemp("small"))
    return n, rounds[0], entries


def _small_group(n: int) -> str:
    return f"small write: a STORE of {n} x 100 B, alone"


@pytest.mark.benchmark(group="small write")
def test_small_write_logsdb(benchmark, small, tmp_path):
    n, stores, _ = small
    benchmark.group = _small_group(n)
    _info(benchmark, STORES, unit="STOREs")
    fresh = Fresh(tmp_path, open_logsdb)
    try:
        benchmark.pedantic(lambda db: write_stores(db, stores), setup=fresh.setup,
                           rounds=10, warmup_rounds=1)
        assert fresh.current[0].tail(LOG) == int(stores[-1].lsns[-1])
    finally:
        fresh.close()


@pytest.mark.benchmark(group="small write")
def test_small_store_through_the_storage_role(benchmark, small, tmp_path):
    n, stores, _ = small
    benchmark.group = _small_group(n)
    _info(benchmark, STORES, unit="STOREs")
    counter = itertools.count()
    rigs: list[RoleRig] = []

    def setup():
        while rigs:
            rigs.pop().close()
        rigs.append(RoleRig(tmp_path / f"r{next(counter)}"))
        return (rigs[0],), {}

    try:
        benchmark.pedantic(lambda rig: rig.feed(stores), setup=setup, rounds=10,
                           warmup_rounds=1)
        assert rigs[0].peer.stored == STORES
    finally:
        while rigs:
            rigs.pop().close()


@pytest.mark.benchmark(group="small write")
def test_small_write_raw_rocksdb(benchmark, small, tmp_path):
    n, _, entries = small
    benchmark.group = _small_group(n)
    _info(benchmark, STORES, reference=True, unit="STOREs")
    fresh = Fresh(tmp_path, lambda p: DB.open(p, ["p1", "meta"], RAW_OPTIONS))
    try:
        benchmark.pedantic(lambda db: write_raw_small(db, entries), setup=fresh.setup,
                           rounds=10, warmup_rounds=1)
    finally:
        fresh.close()


# ------------------------------------------------------------------------------ large records

BLOB = 256 << 10
BLOBS_PER_WRITE = 16
BLOB_WRITES = 16


@pytest.fixture(scope="module")
def blob_recs():
    n = BLOBS_PER_WRITE * BLOB_WRITES
    rng = np.random.default_rng(9)
    payloads = rng.integers(0, 256, n * BLOB, dtype=np.uint8)
    offsets = np.arange(n + 1, dtype=np.uint64) * np.uint64(BLOB)
    lsns = np.arange(1, n + 1, dtype=np.uint64)
    ts = np.full(n, T0, np.int64)
    cs = np.tile(np.int16([0, 1]), (n, 1))
    return lsns, ts, np.zeros(n, np.uint32), cs, payloads, offsets


def write_blobs(db: LogsDB, recs) -> None:
    lsns, ts, flags, cs, payloads, offsets = recs
    for a in range(0, len(lsns), BLOBS_PER_WRITE):
        b = a + BLOBS_PER_WRITE
        db.write_records(LOG, lsns[a:b], ts[a:b], flags[a:b], cs[a:b], payloads,
                         offsets[a:b + 1])


GROUP_BLOBS = "LogsDB write 256 x 256 KiB, 16 per write"


@pytest.mark.benchmark(group=GROUP_BLOBS)
def test_logsdb_write_large_records(benchmark, blob_recs, tmp_path):
    _info(benchmark, int(blob_recs[5][-1]), unit="bytes")
    fresh = Fresh(tmp_path, open_logsdb)
    try:
        benchmark.pedantic(lambda db: write_blobs(db, blob_recs), setup=fresh.setup,
                           rounds=10, warmup_rounds=1)
        assert fresh.current[0].tail(LOG) == len(blob_recs[0])
    finally:
        fresh.close()


@pytest.mark.benchmark(group=GROUP_BLOBS)
def test_raw_rocksdb_put_many_large_records(benchmark, blob_recs, tmp_path):
    _info(benchmark, int(blob_recs[5][-1]), reference=True, unit="bytes")
    entries = raw_entries(blob_recs, tmp_path)
    fresh = Fresh(tmp_path, lambda p: DB.open(p, ["p1"], RAW_OPTIONS))

    def write(db):
        keys, koffs, values, voffs = entries
        n = len(koffs) - 1
        for a in range(0, n, BLOBS_PER_WRITE):
            b = min(a + BLOBS_PER_WRITE, n)
            batch = WriteBatch()
            batch.put_many(keys, koffs[a:b + 1], values, voffs[a:b + 1], db["p1"])
            db.write(batch)
            batch.close()

    try:
        benchmark.pedantic(write, setup=fresh.setup, rounds=10, warmup_rounds=1)
    finally:
        fresh.close()
