"""The storage node's group commit at each append-store durability level, checked through
RocksDB's own statistics: ``sync_write`` fsyncs the write-ahead log once per batch,
``async_write`` writes it without syncing, ``memory`` does not write it at all; and the
end-to-end checksums of STOREs of one record and of several, checked alike."""

from __future__ import annotations

import asyncio
import re

import numpy as np
import pytest

from ldcore import lsn as ldlsn
from ldcore.checksum import crc32c
from logdevice.errors import E
from logdevice.node.roles.group_commit import MANY_LOGS, GroupCommitter, StoreJob
from logdevice.protocol import RecordFlag, Store, pack_payloads
from logdevice.storage.logsdb import LogsDB


def _store(rid: int, epoch: int, esns) -> Store:
    n = len(esns)
    offsets, buf = pack_payloads([b"payload %d" % e for e in esns])
    return Store(request_id=rid, log_id=1, epoch=epoch,
                 lsns=np.array([ldlsn.compose(epoch, e) for e in esns], np.uint64),
                 timestamps=np.full(n, 1_700_000_000_000, np.int64),
                 flags=np.zeros(n, np.uint32), waves=np.ones(n, np.uint32),
                 copysets=np.tile(np.int16([0, 1]), (n, 1)), payload_offsets=offsets,
                 payloads=buf, checksums=np.zeros(0, np.uint32))


def ticker(stats: str, name: str) -> int:
    m = re.search(rf"^{re.escape(name)} COUNT : (\d+)$", stats, re.M)
    assert m, f"{name} not in the statistics"
    return int(m.group(1))


def write_batches(db: LogsDB, durability: str, batches: int) -> list[StoreJob]:
    """``batches`` rounds of 5 STOREs submitted together; every job once written."""
    loop = asyncio.new_event_loop()
    done: list[StoreJob] = []
    try:
        committer = GroupCommitter(loop, db, done.extend, durability=durability)

        async def run() -> None:
            for b in range(batches):
                for k in range(5):
                    esn = b * 5 + k + 1
                    committer.submit(StoreJob(None, _store(esn, 3, [esn]), nbytes=10))
                await committer.flush()

        loop.run_until_complete(run())
        committer.close()
    finally:
        loop.close()
    return done


@pytest.mark.parametrize("durability", ["memory", "async_write", "sync_write"])
def test_durability_levels(tmp_path, durability):
    with LogsDB(tmp_path / "db", statistics=True) as db:
        write_batches(db, durability, batches=1)  # creates the first partition (logged)
        before = db.statistics()
        synced0 = ticker(before, "rocksdb.wal.synced")
        wal0 = ticker(before, "rocksdb.wal.bytes")
        jobs = write_batches(db, durability, batches=4)
        assert [j.status for j in jobs] == [E.OK] * 20
        stats = db.statistics()
        synced = ticker(stats, "rocksdb.wal.synced") - synced0
        wal_bytes = ticker(stats, "rocksdb.wal.bytes") - wal0
        rb = db.read_records(1, 1)
        assert len(rb) == 20  # readable at every level while the process lives
    if durability == "sync_write":
        assert synced == 4  # one fsync per group commit, not one per STORE
        assert wal_bytes > 0
    elif durability == "async_write":
        assert synced == 0 and wal_bytes > 0
    else:
        assert synced == 0 and wal_bytes == 0


def test_unknown_durability_is_refused(tmp_path):
    loop = asyncio.new_event_loop()
    try:
        with LogsDB(tmp_path / "db") as db, pytest.raises(ValueError, match="durability"):
            GroupCommitter(loop, db, lambda jobs: None, durability="fsync")
    finally:
        loop.close()


def _checked(store: Store, good: list[bool]) -> Store:
    """``store`` with each record flagged CHECKSUM: its crc32c, or a wrong one."""
    offs = store.payload_offsets.astype(np.int64)
    crcs = [crc32c(store.payloads[offs[i]:offs[i + 1]]) ^ (0 if ok else 1)
            for i, ok in enumerate(good)]
    store.flags = np.full(len(good), int(RecordFlag.CHECKSUM), np.uint32)
    store.checksums = np.array(crcs, np.uint32)
    return store


def test_checksums_of_one_record_and_of_several(tmp_path):
    """A STORE of one record (its own path, with scalars) is checked as one of several
    is: a copy whose payload does not match its crc32c is refused, alone, and never
    written."""
    jobs = [StoreJob(None, _checked(_store(1, 3, [1]), [True])),
            StoreJob(None, _checked(_store(2, 3, [2]), [False])),
            StoreJob(None, _checked(_store(3, 3, [3, 4]), [False, True])),
            StoreJob(None, _store(4, 3, [5]))]  # not flagged: not checked
    loop = asyncio.new_event_loop()
    try:
        with LogsDB(tmp_path / "db") as db:
            committer = GroupCommitter(loop, db, lambda jobs: None)

            async def run() -> None:
                for job in jobs:  # (one loop turn: one batch)
                    committer.submit(job)
                await committer.flush()

            loop.run_until_complete(run())
            committer.close()
            assert committer.writes == 1 and committer.records == 3
            stored = db.read_records(1, 1).lsns.tolist()
    finally:
        loop.close()
    assert stored == [ldlsn.compose(3, e) for e in (1, 4, 5)]
    assert [j.status for j in jobs] == [E.OK] * 4
    assert jobs[0].statuses is None and jobs[3].statuses is None
    assert jobs[1].statuses.tolist() == [E.CHECKSUM_MISMATCH]
    assert jobs[2].statuses.tolist() == [E.CHECKSUM_MISMATCH, E.OK]


def _store_of(rid: int, log_id: int, esn: int) -> Store:
    store = _store(rid, 3, [esn])
    store.log_id = log_id
    return store


def test_a_batch_of_many_logs_in_one_call_and_its_bad_store_alone(tmp_path):
    """A batch of STOREs of many logs goes in together (one kernel call), but each STORE
    keeps its own outcome: one that rewrites an LSN its log has is written on its own,
    and in a batch with a STORE that LogsDB refuses (an LSN of 0) that one fails alone."""
    loop = asyncio.new_event_loop()
    logs = range(1, MANY_LOGS + 5)
    try:
        with LogsDB(tmp_path / "db") as db:
            committer = GroupCommitter(loop, db, lambda jobs: None)

            async def run(jobs: list[StoreJob]) -> None:
                for job in jobs:  # (one loop turn: one batch)
                    committer.submit(job)
                await committer.flush()

            loop.run_until_complete(run([StoreJob(None, _store_of(1, 2, 1))]))
            rewrite = [StoreJob(None, _store_of(log, log, 1 if log == 2 else 5))
                       for log in logs]
            loop.run_until_complete(run(rewrite))
            bad = [StoreJob(None, _store_of(log, log, 6)) for log in logs]
            bad[3].msg.lsns = np.zeros(1, np.uint64)  # log 4's: refused
            loop.run_until_complete(run(bad))
            committer.close()
            assert committer.writes == 3
            stored = {log: db.read_records(log, 1).lsns.tolist() for log in logs}
    finally:
        loop.close()
    assert [j.status for j in rewrite] == [E.OK] * len(logs)
    assert [j.status for j in bad] == [E.INVALID_PARAM if j.msg.log_id == 4 else E.OK
                                       for j in bad]
    assert stored == {log: [ldlsn.compose(3, 1 if log == 2 else 5)]
                      + ([] if log == 4 else [ldlsn.compose(3, 6)]) for log in logs}
