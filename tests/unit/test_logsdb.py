"""LogsDB against real RocksDB in tmp dirs: round trips, partitions, CSI, trim, retention,
metadata, errors and a kill -9 crash test."""

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from logdevice.errors import E, InvalidParamError, LogDeviceError
from logdevice.storage import keys as K
from logdevice.storage.flags import FLAG_HOLE, FLAG_WRITTEN_BY_RECOVERY
from logdevice.storage.logsdb import LSN_MAX, LogsDB
from tests.unit import crash_writer

MIN = 60_000


class Model:
    """What the store should hold: log -> lsn -> (ts, flags, wave, copyset, payload)."""

    def __init__(self):
        self.logs = {}

    def add(self, log_id, lsns, ts, flags, waves, copysets, payloads):
        d = self.logs.setdefault(log_id, {})
        for i, lsn in enumerate(lsns):
            cs = tuple(int(x) for x in copysets[i] if x >= 0)
            d[int(lsn)] = (int(ts[i]), int(flags[i]), int(waves[i]), cs, payloads[i])

    def rows(self, log_id, lo, hi, trim=0):
        d = self.logs.get(log_id, {})
        return [(lsn, *d[lsn]) for lsn in sorted(d) if max(lo, trim + 1) <= lsn <= hi]


def rows_of(rb):
    out = []
    for i in range(len(rb)):
        cs = tuple(int(x) for x in rb.copysets[i] if x >= 0)
        out.append((int(rb.lsns[i]), int(rb.timestamps[i]), int(rb.flags[i]), int(rb.waves[i]),
                    cs, bytes(rb.payload(i))))
    return out


def make_batch(rng, lsns, t0, k=3, max_payload=600, ragged=True):
    n = len(lsns)
    payloads = [bytes(rng.integers(0, 256, rng.integers(0, max_payload), dtype=np.uint8))
                for _ in range(n)]
    offsets = np.zeros(n + 1, np.uint64)
    np.cumsum([len(p) for p in payloads], out=offsets[1:])
    ts = t0 + np.sort(rng.integers(0, 5 * MIN, n)).astype(np.int64)
    flags = rng.choice([0, FLAG_HOLE, FLAG_WRITTEN_BY_RECOVERY], n).astype(np.uint32)
    waves = rng.integers(1, 4, n).astype(np.uint32)
    cs = np.array([rng.choice(50, k, replace=False) for _ in range(n)], np.int16)
    if ragged:
        cs[rng.random((n, k)) < 0.2] = -1
    return dict(lsns=np.asarray(lsns, np.uint64), timestamps=ts, flags=flags, waves=waves,
                copysets=cs, payloads=b"".join(payloads), offsets=offsets), payloads


def write(db, model, log_id, batch, payloads, **kw):
    db.write_records(log_id, **batch, **kw)
    model.add(log_id, batch["lsns"], batch["timestamps"], batch["flags"], batch["waves"],
              batch["copysets"], payloads)


def read_all(db, log_id, lo=1, hi=LSN_MAX, **limits):
    out, nxt, calls = [], lo, 0
    while nxt <= hi and calls < 10_000:
        rb = db.read_records(log_id, nxt, hi, **limits)
        assert rb.next_lsn > nxt or len(rb) == 0
        out += rows_of(rb)
        assert bool(np.all(rb.checksum_ok()))
        if rb.next_lsn >= min(hi + 1, LSN_MAX):
            break
        nxt = rb.next_lsn
        calls += 1
    return out


def csi_all(db, log_id, lo=1, hi=LSN_MAX, max_entries=4096):
    out, nxt = [], lo
    for _ in range(10_000):
        c = db.read_csi(log_id, nxt, hi, max_entries=max_entries)
        out += [(int(c.lsns[i]), int(c.flags[i]), tuple(int(x) for x in c.copysets[i] if x >= 0))
                for i in range(len(c))]
        if c.next_lsn >= min(hi + 1, LSN_MAX):
            break
        assert c.next_lsn > nxt
        nxt = c.next_lsn
    return out


def csi_of_model(model, log_id, lo=1, hi=LSN_MAX, trim=0):
    return [(r[0], r[2], r[4]) for r in model.rows(log_id, lo, hi, trim)]


@pytest.fixture(params=[True, False], ids=["csi_ranges", "csi_per_record"])
def store(tmp_path, request):
    with LogsDB(tmp_path / "db", partition_duration_ms=10 * MIN,
                csi_ranges=request.param) as db:
        yield db


def fill(db, rng, logs=(1, 2, 3), batches=6, per=120):
    model = Model()
    for log_id in logs:
        for b in range(batches):
            lsns = np.arange(b * per + 1, (b + 1) * per + 1)
            batch, payloads = make_batch(rng, lsns, t0=b * 4 * MIN)
            write(db, model, log_id, batch, payloads)
    return model


def test_round_trip_random_batches(store):
    rng = np.random.default_rng(7)
    model = fill(store, rng)
    assert len(store.partitions()) >= 3  # 24 min of timestamps, 10 min partitions
    for log_id in (1, 2, 3):
        assert read_all(store, log_id) == model.rows(log_id, 1, LSN_MAX)
        assert read_all(store, log_id, max_records=37) == model.rows(log_id, 1, LSN_MAX)
        assert read_all(store, log_id, 100, 400, max_bytes=5000) == model.rows(log_id, 100, 400)
        assert store.tail(log_id) == 720
    assert store.read_records(9, 1).lsns.size == 0
    assert store.logs() == [1, 2, 3]


def test_compact_leaves_no_level0_files_and_every_record(store):
    rng = np.random.default_rng(11)
    model = fill(store, rng)
    store.flush()
    level0 = [int(store.property("rocksdb.num-files-at-level0", p.id))
              for p in store.partitions()]
    assert sum(level0) > 0
    store.compact()
    assert [int(store.property("rocksdb.num-files-at-level0", p.id))
            for p in store.partitions()] == [0] * len(level0)
    for log_id in (1, 2, 3):
        assert read_all(store, log_id) == model.rows(log_id, 1, LSN_MAX)


def test_csi_matches_data_and_chosen_reads(store):
    rng = np.random.default_rng(8)
    model = fill(store, rng, logs=(5,))
    assert csi_all(store, 5) == csi_of_model(model, 5)
    assert csi_all(store, 5, 50, 500, max_entries=33) == csi_of_model(model, 5, 50, 500)
    c = store.read_csi(5, 1, max_entries=100)
    assert len(c) == 100 and c.next_lsn == 101
    # Pick a subset from the CSI (as single copy delivery does) and read only those.
    chosen = np.sort(rng.choice(720, 200, replace=False) + 1).astype(np.uint64)
    rb = store.read_records_at(5, np.append(chosen, [900, 1000]))
    want = {int(x) for x in chosen}
    assert rows_of(rb) == [r for r in model.rows(5, 1, LSN_MAX) if r[0] in want]


def test_reopen_finds_partitions_and_metadata(tmp_path):
    rng = np.random.default_rng(9)
    path = tmp_path / "db"
    with LogsDB(path, partition_duration_ms=10 * MIN) as db:
        model = fill(db, rng, logs=(1, 4))
        parts = db.partitions()
        db.trim(4, 10)
        db.seal(1, 3)
        db.set_last_released(1, 700)
        db.set_last_clean_epoch(1, 2)
    with LogsDB(path, partition_duration_ms=10 * MIN) as db:
        assert db.partitions() == parts
        assert (db.trim_point(4), db.sealed_epoch(1), db.last_released(1),
                db.last_clean_epoch(1)) == (10, 3, 700, 2)
        assert read_all(db, 1) == model.rows(1, 1, LSN_MAX)
        assert read_all(db, 4) == model.rows(4, 1, LSN_MAX, trim=10)
        # writes after reopen continue in the right partitions
        batch, payloads = make_batch(rng, np.arange(721, 800), t0=30 * MIN)
        write(db, model, 1, batch, payloads)
        assert read_all(db, 1, 700) == model.rows(1, 700, LSN_MAX)


def test_last_released_pointers_of_many_logs_in_one_write(tmp_path):
    """Pointers rise only (a lower one is ignored) and survive a reopen."""
    path = tmp_path / "db"
    with LogsDB(path) as db:
        db.set_last_released(3, 50)
        db.set_last_released_many({1: 10, 2: 20, 3: 40})
        assert [db.last_released(log_id) for log_id in (1, 2, 3)] == [10, 20, 50]
        db.set_last_released_many({1: 11, 3: 60})
        db.set_last_released_many({})
        for bad in ({0: 5}, {-1: 5}, {4: -5}):
            with pytest.raises(InvalidParamError):
                db.set_last_released_many(bad)
    with LogsDB(path) as db:
        assert [db.last_released(log_id) for log_id in (1, 2, 3)] == [11, 20, 60]


def test_reopen_loads_every_logs_metadata_and_usage_in_chunks(tmp_path, monkeypatch):
    """Open reads the meta column family in bulk chunks: with chunks of 7 entries, every
    log's four metadata values, its partition usage and the partitions come back."""
    from logdevice.storage import partitioned

    rng = np.random.default_rng(11)
    path = tmp_path / "db"
    logs = range(1, 41)
    with LogsDB(path, partition_duration_ms=10 * MIN) as db:
        model = fill(db, rng, logs=tuple(logs[::8]))
        for log_id in logs:
            db.set_last_released(log_id, 1000 + log_id)
            db.seal(log_id, log_id % 5 + 1)
            db.set_last_clean_epoch(log_id, log_id % 3)
        db.trim(logs[8], 5)
        before = {log_id: (db.trim_point(log_id), db.last_released(log_id),
                           db.sealed_epoch(log_id), db.last_clean_epoch(log_id))
                  for log_id in logs}
        parts, sizes = db.partitions(), {log_id: db.tail(log_id) for log_id in logs}
    monkeypatch.setattr(partitioned, "LOAD_CHUNK", 7)
    with LogsDB(path, partition_duration_ms=10 * MIN) as db:
        assert db.partitions() == parts
        assert {log_id: (db.trim_point(log_id), db.last_released(log_id),
                         db.sealed_epoch(log_id), db.last_clean_epoch(log_id))
                for log_id in logs} == before
        assert {log_id: db.tail(log_id) for log_id in logs} == sizes
        for log_id in logs[::8]:
            assert read_all(db, log_id) == model.rows(log_id, 1, LSN_MAX,
                                                      trim=before[log_id][0])


def test_rewrite_into_older_partition_keeps_one_copy(store):
    rng = np.random.default_rng(10)
    model = Model()
    for b in range(3):  # three partitions, 10 min apart
        batch, payloads = make_batch(rng, np.arange(b * 100 + 1, b * 100 + 101), t0=b * 10 * MIN)
        write(store, model, 1, batch, payloads)
    assert len(store.partitions()) == 3
    # Recovery rewrites LSNs 150..250 (partitions 2 and 3) with an old timestamp: all go to
    # partition 1, the other copies go away.
    batch, payloads = make_batch(rng, np.arange(150, 251), t0=0)
    batch["timestamps"][:] = 5
    batch["flags"][:] = FLAG_WRITTEN_BY_RECOVERY
    write(store, model, 1, batch, payloads)
    assert read_all(store, 1) == model.rows(1, 1, LSN_MAX)
    assert read_all(store, 1, max_records=13) == model.rows(1, 1, LSN_MAX)
    assert csi_all(store, 1) == csi_of_model(model, 1)
    assert csi_all(store, 1, max_entries=7) == csi_of_model(model, 1)
    rb = store.read_records_at(1, np.arange(140, 260))
    assert rows_of(rb) == model.rows(1, 140, 259)
    assert store.tail(1) == 300


def raw_csi(db, log_id):
    """(lsn, type) of the CSI entries in every partition: (single entries, range entries)."""
    out = ([], [])
    for p in db.partitions():
        cf = db.parts.cf(p.id)
        for i, prefix in enumerate((K.CSI, K.CSI_RANGE)):
            lo, hi = K.log_prefix(prefix, log_id), K.log_prefix(prefix, log_id + 1)
            out[i].extend((K.read_be(k, 9), k[17]) for k, _ in db.parts.db.iterate(cf, lo, hi))
    return out


@pytest.mark.parametrize("csi_ranges", [False, True])
def test_csi_blocks_runs_and_single_overrides(tmp_path, csi_ranges):
    rng = np.random.default_rng(11)
    model = Model()
    db = LogsDB(tmp_path / "db", partition_duration_ms=10 * MIN, csi_ranges=csi_ranges)
    # A sticky copyset block (consecutive LSNs, one copyset and flag word): a block entry.
    batch, payloads = make_batch(rng, np.arange(1, 101), t0=0, ragged=False)
    batch["copysets"][:] = [3, 1, 4]
    batch["flags"][:] = 0
    write(db, model, 1, batch, payloads, sticky_block=True)
    # Consecutive but not uniform (a hole plug in the middle): a run entry.
    batch, payloads = make_batch(rng, np.arange(101, 201), t0=0, ragged=False)
    batch["copysets"][:] = [3, 1, 4]
    batch["flags"][:] = 0
    batch["flags"][50] = FLAG_HOLE
    write(db, model, 1, batch, payloads, sticky_block=True)
    # Sparse LSNs with their own copysets (what a storage node gets): grouped or singles.
    sparse = np.sort(rng.choice(np.arange(201, 1000), 150, replace=False))
    batch, payloads = make_batch(rng, sparse, t0=0)
    write(db, model, 1, batch, payloads)
    singles, ranges = raw_csi(db, 1)
    assert ranges[:2] == [(1, K.CSI_BLOCK), (101, K.CSI_RUN)]
    if csi_ranges:
        assert ranges == [(1, K.CSI_BLOCK), (101, K.CSI_RUN), (int(sparse[0]), K.CSI_RUN)]
        assert singles == []
    else:
        assert len(singles) == 150
    assert csi_all(db, 1) == csi_of_model(model, 1)
    for lo, hi, budget in ((50, 150, 9), (120, 700, 17), (1, LSN_MAX, 1), (99, 101, 2)):
        assert csi_all(db, 1, lo, hi, max_entries=budget) == csi_of_model(model, 1, lo, hi)
    # Rewrites (recovery) get single entries, which win over the range entries.
    for lsns in ([50], [150, 151], [int(sparse[3]), int(sparse[4])]):
        batch, payloads = make_batch(rng, lsns, t0=0)
        write(db, model, 1, batch, payloads, sticky_block=True)
    assert csi_all(db, 1) == csi_of_model(model, 1)
    assert csi_all(db, 1, 45, 160, max_entries=4) == csi_of_model(model, 1, 45, 160)
    assert read_all(db, 1) == model.rows(1, 1, LSN_MAX)
    db.trim(1, 120)
    assert csi_all(db, 1) == csi_of_model(model, 1, trim=120)
    db.close()
    with LogsDB(tmp_path / "db", csi_ranges=csi_ranges) as db:
        assert csi_all(db, 1, max_entries=33) == csi_of_model(model, 1, trim=120)


def test_lsns_near_the_top_of_the_range(store):
    rng = np.random.default_rng(17)
    model = Model()
    top = 2**64 - 2
    for lsns in (np.arange(top - 300, top - 100, dtype=np.uint64),
                 np.arange(top - 99, top + 1, dtype=np.uint64),
                 np.array([2**63 - 1, 2**63, 2**63 + 1], np.uint64)):
        batch, payloads = make_batch(rng, lsns, t0=0)
        write(store, model, 1, batch, payloads)
    assert read_all(store, 1) == model.rows(1, 1, LSN_MAX)
    assert csi_all(store, 1, max_entries=64) == csi_of_model(model, 1)
    assert store.tail(1) == top
    assert store.read_records(1, top - 5).next_lsn == LSN_MAX
    rb = store.read_records_at(1, np.array([2**63, top], np.uint64))
    assert rb.lsns.tolist() == [2**63, top]


def test_trim_hides_records_and_persists(store):
    rng = np.random.default_rng(12)
    model = fill(store, rng, logs=(1,), batches=2)
    assert store.trim(1, 100) == 100
    assert store.trim(1, 50) == 100  # never goes down
    assert store.trim_point(1) == 100
    assert read_all(store, 1) == model.rows(1, 1, LSN_MAX, trim=100)
    rb = store.read_records(1, 1, 100)
    assert len(rb) == 0 and rb.next_lsn == 101
    assert len(store.read_records_at(1, [5, 99, 100])) == 0
    assert store.read_records_at(1, [5, 101]).lsns.tolist() == [101]
    assert csi_all(store, 1) == csi_of_model(model, 1, trim=100)


def test_retention_drops_whole_partitions(tmp_path):
    rng = np.random.default_rng(13)
    path = tmp_path / "db"
    with LogsDB(path, partition_duration_ms=10 * MIN) as db:
        model = Model()
        for b in range(4):  # partitions at 0, 10, 20, 30 min; logs 1 and 2 in each
            for log_id in (1, 2):
                lsns = np.arange(b * 50 + 1, b * 50 + 51)
                batch, payloads = make_batch(rng, lsns, t0=b * 10 * MIN)
                batch["timestamps"] = np.full(50, b * 10 * MIN + 1000, np.int64)
                write(db, model, log_id, batch, payloads)
        pids = [p.id for p in db.partitions()]
        assert len(pids) == 4
        # Nothing is old enough or trimmed: nothing goes.
        assert db.apply_retention(now_ms=35 * MIN, default_backlog_ms=60 * MIN) == []
        # Log 1 trimmed past partition 1; log 2 has no backlog limit: partition 1 stays.
        db.trim(1, 50)
        assert db.apply_retention(now_ms=35 * MIN) == []
        db.trim(2, 60)  # partition 1 is now all trimmed
        assert db.apply_retention(now_ms=35 * MIN) == [pids[0]]
        # Backlog of 20 min at 35 min: partition 2 (records at ~10 min) is too old for both.
        assert db.apply_retention(now_ms=35 * MIN, backlog_ms={1: 20 * MIN, 2: 20 * MIN}) == [
            pids[1]
        ]
        assert db.trim_point(1) == 100 and db.trim_point(2) == 100  # readers see trim gaps
        # The newest partition is never dropped, however old.
        assert db.apply_retention(now_ms=10**12, default_backlog_ms=0) == [pids[2]]
        assert [p.id for p in db.partitions()] == [pids[3]]
        assert read_all(db, 1) == model.rows(1, 1, LSN_MAX, trim=150)
    with LogsDB(path, partition_duration_ms=10 * MIN) as db:
        assert [p.id for p in db.partitions()] == [pids[3]]
        assert db.trim_point(1) == 150
        assert read_all(db, 2) == model.rows(2, 1, LSN_MAX, trim=150)
        assert csi_all(db, 2) == csi_of_model(model, 2, trim=150)


def test_size_limit_starts_new_partitions(tmp_path):
    rng = np.random.default_rng(14)
    with LogsDB(tmp_path / "db", partition_size_limit=8_000) as db:
        model = Model()
        for b in range(10):
            batch, payloads = make_batch(rng, np.arange(b * 20 + 1, b * 20 + 21), t0=0,
                                         max_payload=400)
            batch["timestamps"] = np.full(20, 1000 + b, np.int64)  # same 15 min window
            write(db, model, 1, batch, payloads)
        assert len(db.partitions()) >= 3
        assert read_all(db, 1) == model.rows(1, 1, LSN_MAX)


def test_metadata_is_monotonic(store):
    assert store.seal(3, 5) == 5
    assert store.seal(3, 4) == 5  # a lower seal does not replace a higher one
    assert store.sealed_epoch(3) == 5
    assert store.set_last_released(3, 10) == 10
    assert store.last_released(3) == 10
    assert store.set_last_clean_epoch(3, 4) == 4
    assert store.last_clean_epoch(3) == 4
    assert store.trim_point(3) == 0 and store.tail(3) == 0
    assert store.logs() == [3]


def test_find_time_tail_and_data_size(store):
    rng = np.random.default_rng(15)
    model = Model()
    for b in range(3):
        batch, payloads = make_batch(rng, np.arange(b * 100 + 1, b * 100 + 101), t0=b * 10 * MIN)
        write(store, model, 1, batch, payloads)
    rows = model.rows(1, 1, LSN_MAX)
    for ms in (0, 3 * MIN, 10 * MIN + 1, 17 * MIN, 24 * MIN, rows[-1][1]):
        want = next((r[0] for r in rows if r[1] >= ms), 301)
        assert store.find_time(1, ms) == want
    assert store.find_time(1, 10**12) == 301
    assert store.find_time(2, 0) == 1  # empty log
    store.trim(1, 120)
    assert store.find_time(1, 0) == 121
    total = sum(len(r[5]) for r in rows if r[0] > 120)
    size = store.data_size(1, 0, 10**12)
    assert 0.9 * total <= size <= 1.3 * total
    assert store.data_size(1, 10**11, 10**12) == 0


def test_pending_write_spans_logs(store):
    rng = np.random.default_rng(16)
    model = Model()
    pw = store.pending()
    for log_id in (1, 2, 3):
        batch, payloads = make_batch(rng, np.arange(1, 51), t0=0)
        pw.add(log_id, **batch)
        model.add(log_id, batch["lsns"], batch["timestamps"], batch["flags"], batch["waves"],
                  batch["copysets"], payloads)
    assert len(pw) == 150
    assert store.read_records(1, 1).lsns.size == 0  # nothing visible before commit
    pw.commit(sync=True)
    for log_id in (1, 2, 3):
        assert read_all(store, log_id) == model.rows(log_id, 1, LSN_MAX)
    with pytest.raises(LogDeviceError):
        pw.commit()


def test_numpy_and_memoryview_payloads_and_empty_records(store):
    data = np.frombuffer(b"aaabbbbcc", np.uint8)
    store.write_records(1, [1, 2, 3, 4], [0, 1, 2, 3], [0, 0, 0, 0], [[1], [2], [3], [4]],
                        data, [0, 3, 7, 7, 9])
    store.write_records(1, [5], [4], [0], [[1, 2]], memoryview(b"zz"), [0, 2])
    rb = store.read_records(1, 1)
    assert [bytes(rb.payload(i)) for i in range(len(rb))] == [b"aaa", b"bbbb", b"", b"cc", b"zz"]
    assert rb.waves.tolist() == [1] * 5


@pytest.mark.parametrize(
    "change",
    [
        dict(lsns=[3, 2, 4]),
        dict(lsns=[0, 1, 2]),
        dict(lsns=[1, 2, LSN_MAX]),
        dict(offsets=[0, 2, 1, 3]),
        dict(offsets=[0, 1, 2, 99]),
        dict(offsets=[0, 1, 2]),
        dict(timestamps=[1, 2]),
        dict(copysets=[[1], [2]]),
        dict(copysets=[[1], [2], [70000]]),
        dict(copysets=[[1.0], [2.0], [3.0]]),
        dict(lsns=[-1, 2, 3]),
        dict(flags=[0, -5, 0]),
        dict(payloads="abc"),
        dict(timestamps=["a", "b", "c"]),
    ],
)
def test_bad_input_is_invalid_param(store, change):
    args = dict(lsns=[1, 2, 3], timestamps=[1, 2, 3], flags=[0, 0, 0],
                copysets=[[1], [2], [3]], payloads=b"abc", offsets=[0, 1, 2, 3])
    args.update(change)
    with pytest.raises(LogDeviceError) as ei:
        store.write_records(1, **args)
    assert ei.value.status == E.INVALID_PARAM
    with pytest.raises(LogDeviceError) as ei:
        store.read_records(0, 1)
    assert ei.value.status == E.INVALID_PARAM


def test_errors_open_file_and_use_after_close(tmp_path):
    afile = tmp_path / "afile"
    afile.write_bytes(b"x")
    with pytest.raises(LogDeviceError):
        LogsDB(afile)
    db = LogsDB(tmp_path / "db")
    db.write_records(1, [1], [0], [0], [[1]], b"x", [0, 1])
    db.close()
    db.close()
    for call in (
        lambda: db.read_records(1, 1), lambda: db.read_csi(1, 1), lambda: db.trim(1, 5),
        lambda: db.write_records(1, [2], [0], [0], [[1]], b"x", [0, 1]),
        lambda: db.tail(1), lambda: db.trim_point(1), lambda: db.apply_retention(0),
        lambda: db.partitions(), lambda: db.find_time(1, 0), lambda: db.pending(),
    ):
        with pytest.raises(LogDeviceError) as ei:
            call()
        assert ei.value.status == E.SHUTDOWN


def test_close_never_frees_rocksdb_under_a_running_operation(tmp_path):
    """``close(timeout)`` while a read is running: TIMEDOUT, RocksDB stays open for the
    read (freeing it under the read crashed the process), new calls get SHUTDOWN, and a
    later ``close`` finishes the job."""
    import threading

    from logdevice.storage import keys as K

    db = LogsDB(tmp_path / "db")
    db.write_records(1, [1, 2], [0, 0], [0, 0], [[1], [1]], b"xy", [0, 1, 2])
    inside, leave = threading.Event(), threading.Event()
    got: list[bytes | None] = []

    def running_read() -> None:
        with db.operation():  # held by every LogsDB call for as long as it uses RocksDB
            inside.set()
            assert leave.wait(10)
            # What a read does with the handle: here, a raw get of record 1's data key.
            cf = db.parts.families()[0]
            got.append(db.parts.db.get(K.data_key(1, 1), cf))

    t = threading.Thread(target=running_read)
    t.start()
    assert inside.wait(10)
    with pytest.raises(LogDeviceError) as ei:
        db.close(timeout=0.05)
    assert ei.value.status == E.TIMEDOUT
    with pytest.raises(LogDeviceError) as ei:
        db.read_records(1, 1)
    assert ei.value.status == E.SHUTDOWN
    leave.set()
    t.join(10)
    assert got[0] is not None and got[0].endswith(b"x")  # RocksDB was still there
    db.close(timeout=5)
    assert db.closed


def test_crash_keeps_every_acknowledged_batch(tmp_path):
    path = tmp_path / "db"
    writer = os.path.join(os.path.dirname(__file__), "crash_writer.py")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen([sys.executable, writer, str(path), "50"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    acked = []
    deadline = time.monotonic() + 60
    try:
        while len(acked) < 15 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            acked.append(int(line))
        os.kill(proc.pid, signal.SIGKILL)
        rest, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    acked += [int(x) for x in rest.split()]
    assert len(acked) >= 15, err.decode()
    assert acked == list(range(len(acked)))
    with LogsDB(path, partition_duration_ms=10_000) as db:
        rb = db.read_records(crash_writer.LOG, 1, max_records=10**6)
        n_batches = len(rb) // 50
        assert len(rb) % 50 == 0  # batches are atomic
        assert n_batches >= len(acked)  # every acknowledged batch survived
        assert rb.lsns.tolist() == list(range(1, len(rb) + 1))
        for b in range(n_batches):
            lsns, ts, cs, data, offs = crash_writer.batch_arrays(b, 50)
            part = rb.take(slice(b * 50, (b + 1) * 50)).compact()
            assert part.payloads.tobytes() == data
            assert part.timestamps.tolist() == ts.tolist()
        assert len(db.read_csi(crash_writer.LOG, 1, max_entries=10**6)) == len(rb)
        assert db.tail(crash_writer.LOG) == len(rb)


def test_nested_path_and_reads_beside_a_writer(tmp_path):
    import threading

    db = LogsDB(tmp_path / "a" / "b" / "db")
    errors, done = [], threading.Event()

    def reader():
        try:
            while not done.is_set():
                rb = db.read_records(1, 1)
                assert rb.lsns.tolist() == list(range(1, len(rb) + 1))
                db.read_csi(1, 1)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    t = threading.Thread(target=reader)
    t.start()
    try:
        for b in range(40):
            lsns = np.arange(b * 25 + 1, b * 25 + 26)
            db.write_records(1, lsns, lsns, np.zeros(25), np.ones((25, 2), np.int16),
                             bytes(250), np.arange(26) * 10)
    finally:
        done.set()
        t.join(timeout=30)
    assert not errors and not t.is_alive()
    assert len(db.read_records(1, 1)) == 1000
    db.close()


def test_read_records_at_rejects_unsorted(store):
    with pytest.raises(LogDeviceError) as ei:
        store.read_records_at(1, [3, 2])
    assert ei.value.status == E.INVALID_PARAM
    assert len(store.read_records_at(1, [])) == 0


def test_entries_on_disk_byte_for_byte(store):
    """What a write puts in its partition is exactly the reference's entries: data, CSI
    (single, block or run) and nothing else, for a write of one record, a small run, a
    sticky block and a write cut by partitions; then the directory counts them."""
    from tests.reference.storefmt import encode_run
    rng = np.random.default_rng(5)
    expected: dict[int, dict[bytes, bytes]] = {}
    writes = [([7], 0, False), (range(10, 16), 0, False), (range(20, 28), 0, True),
              (range(40, 44), 0, False), ([50, 52], 11 * MIN, False)]
    for lsns, t0, sticky in writes:
        batch, _ = make_batch(rng, list(lsns), t0=t0, ragged=not sticky)
        if sticky:
            batch["copysets"][:] = [3, 1, 4]
            batch["flags"][:] = 0
        if lsns == range(40, 44):  # across two partitions: a run in each
            batch["timestamps"] = np.array([1, 2, 11 * MIN, 11 * MIN + 1], np.int64)
        store.write_records(1, **batch, sticky_block=sticky)
        pids = [store.parts.directory.place(batch["timestamps"][i : i + 1])[0]
                for i in range(len(batch["lsns"]))]
        for pid in sorted(set(pids)):
            pick = np.array([p == pid for p in pids])
            offs = batch["offsets"]
            sel = [i for i in range(len(pids)) if pick[i]]
            pay = b"".join(batch["payloads"][int(offs[i]):int(offs[i + 1])] for i in sel)
            sub_offs = np.zeros(len(sel) + 1, np.uint64)
            np.cumsum([int(offs[i + 1] - offs[i]) for i in sel], out=sub_offs[1:])
            entries = encode_run(1, batch["lsns"][pick], batch["timestamps"][pick],
                                 batch["flags"][pick], batch["waves"][pick],
                                 batch["copysets"][pick], pay, sub_offs,
                                 grouped=sticky or store.csi_ranges)
            expected.setdefault(int(pid), {}).update(entries)
    got = {p.id: dict(store.parts.db.iterate(store.parts.cf(p.id)))
           for p in store.partitions()}
    assert got == expected
    usage = store.parts.directory.usage(1)
    assert {pid: u.records for pid, u in usage.items()} == {
        pid: sum(k[:1] == K.DATA for k in e) for pid, e in expected.items()}
    assert {pid: u.nbytes for pid, u in usage.items()} == {
        pid: sum(len(v) for k, v in e.items() if k[:1] == K.DATA) for pid, e in expected.items()}


def test_reopen_when_the_partitions_are_the_last_metadata(tmp_path):
    """A store whose meta column family ends with a partition entry (here: the partition
    usage removed, nothing else per log) opens, with its partitions."""
    from logdevice.storage.rocksdb import DB, WriteBatch, list_column_families

    rng = np.random.default_rng(12)
    path = tmp_path / "db"
    with LogsDB(path, partition_duration_ms=10 * MIN) as db:
        fill(db, rng, logs=(1,), batches=1)
        parts = db.partitions()
    with DB.open(path, [c for c in list_column_families(path) if c != "default"]) as raw:
        meta = raw["meta"]
        usage = WriteBatch()
        for key, _ in raw.iterate(meta):
            assert key[:1] in (K.META_PARTITION, K.META_DIR)
            if key[:1] == K.META_DIR:
                usage.delete(key, meta)
        assert usage.count()
        raw.write(usage, sync=True)
    with LogsDB(path, partition_duration_ms=10 * MIN) as db:
        assert db.partitions() == parts


def _entries_of(db, but: bytes = b""):
    """Every partition's entries (those whose key starts with ``but`` left out)."""
    return {p.id: {k: v for k, v in db.parts.db.iterate(db.parts.cf(p.id))
                   if not (but and k.startswith(but))} for p in db.partitions()}


@pytest.mark.parametrize("csi_ranges", [True, False])
def test_add_logs_writes_what_adds_one_by_one_write(tmp_path, csi_ranges):
    """Many logs' records added together (one kernel call for those that are the common
    write) leave the very entries, directory usage and cached records that one ``add``
    per log leaves; an entry that meets its log's LSNs is left out for ``add``.  (A CSI
    run entry is the same rows, but as wide as the widest copyset of the write.)"""
    rng = np.random.default_rng(31)
    t0 = 1_700_000_000_000
    first, _ = make_batch(rng, [5, 6, 7], t0=t0)  # log 3 has these: a rewrite meets them
    logs = {}
    for log_id, lsns, k in ((1, [1], 3), (2, [10, 11, 12], 2), (3, [6, 9], 3),
                            (4, range(20, 28), 3), (9, [2**40], 1)):
        batch, _ = make_batch(rng, list(lsns), t0=t0 + MIN, k=k)
        logs[log_id] = (batch["lsns"], batch["timestamps"], batch["flags"],
                        batch["copysets"], batch["payloads"], batch["offsets"],
                        batch["waves"])
    logs[4][2][:] = 0  # one flag word and ...
    logs[4][3][:] = [3, 1, 4]  # ... one copyset: a CSI block when ranges are on
    stores = []
    for way in ("one by one", "together"):
        db = LogsDB(tmp_path / way.replace(" ", "_"), partition_duration_ms=10 * MIN,
                    csi_ranges=csi_ranges, record_cache_bytes=1 << 20)
        stores.append(db)
        db.write_records(3, **first)
        pw = db.pending()
        if way == "together":
            left = pw.add_logs(list(logs.items()))
            assert left == [2]  # log 3's entry, which rewrites LSN 6
            pw.add(3, *logs[3])
        else:
            for log_id, cols in logs.items():
                pw.add(log_id, *cols)
        assert len(pw) == 15
        pw.commit()
    try:
        one, together = stores
        assert _entries_of(together, but=K.CSI_RANGE) == _entries_of(one, but=K.CSI_RANGE)
        for log_id in (*logs, 3):
            assert csi_all(together, log_id) == csi_all(one, log_id)
            assert together.parts.directory.usage(log_id) == one.parts.directory.usage(log_id)
            assert rows_of(together.read_records(log_id, 1)) == \
                rows_of(one.read_records(log_id, 1))
            assert together.cache.start(log_id) == one.cache.start(log_id)
        assert together.cache.start(1) == 1  # a new log's first write is cached
    finally:
        for db in stores:
            db.close()


def test_add_logs_refuses_bad_input_having_added_nothing(tmp_path):
    with LogsDB(tmp_path / "db") as db:
        good = ([1], [5], [0], [[1, 2]], b"ab", [0, 2], None)
        for entries, error in (
                ([(1, good), (1, good)], "one entry per log"),
                ([(1, good), (0, good)], "log id 0"),
                ([(1, good), (2, ([3, 2], [5, 5], [0, 0], [[1], [2]], b"ab", [0, 1, 2],
                                  None))], "strictly increasing"),
                ([(1, good), (2, ([3], [5], [0], [[1]], b"ab", [0, 9], None))],
                 "past the buffer"),
                ([(1, ([1, 2], [5], [0, 0], [[1], [2]], b"ab", [0, 1, 2], None)),
                  (2, ([3], [5, 6], [0], [[1]], b"ab", [0, 1], None))], "an entry per")):
            pw = db.pending()
            with pytest.raises(LogDeviceError, match=error) as ei:
                pw.add_logs(entries)
            assert ei.value.status == E.INVALID_PARAM
            assert len(pw) == 0
            pw.add(5, *good)  # the pending write is still whole
            pw.commit()
        assert db.read_records(1, 1).lsns.size == 0
        assert db.read_records(5, 1).lsns.tolist() == [1]
