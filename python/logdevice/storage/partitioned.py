"""LogsDB's partitioned RocksDB: the database, its ``meta`` column family, one column
family per time partition and the in-memory partition directory (:mod:`.partitions`).

This is what LogsDB's read, write and delete paths (:mod:`.reads`, :mod:`.writes`,
:mod:`.deletes`) share, and all they touch of LogsDB's state; LogsDB adds per-log
metadata (trim points, seals, release pointers), argument checks and the gate that lets
``close()`` wait for operations in flight.

Partition ``p<id>`` is created when a record's timestamp is ``duration_ms`` past the
newest partition's start, or once that partition holds ``size_limit`` bytes.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Mapping

import numpy as np

from ldcore import storefmt
from logdevice.errors import E, error_for
from logdevice.storage import keys as K
from logdevice.storage.partitions import Directory, Partition, Usage
from logdevice.storage.rocksdb import DB, ColumnFamily, WriteBatch
from logdevice.storage.rocksdb_iter import Chunk

__all__ = ["PartitionedDB", "META_CF"]

META_CF = "meta"
#: Entries of the meta column family read per bulk call at open.
LOAD_CHUNK = 65536
_PARTITION_CF = re.compile(r"p(\d+)$")


class PartitionedDB:
    """The partitions of one LogsDB (see the module docstring).

    Parameters
    ----------
    db : DB
        An open RocksDB database with a ``meta`` column family.
    duration_ms, size_limit : int
        When a new partition starts (time span of the newest one, bytes it holds).

    Attributes
    ----------
    db : DB
    meta_cf : ColumnFamily
    directory : Directory
        Partitions and per-log usage, kept in step with ``meta_cf``.
    lock : RLock
        Held by whoever changes the partitions or the directory (one writer at a time).
    """

    #: Ids of the partitions that may hold amendment entries (found at open, added before
    #: an amendment is written): reads look amendments up only there, so the common
    #: store, never rebuilt, pays no second iterator per read.
    amended: set[int]

    def __init__(self, db: DB, *, duration_ms: int, size_limit: int) -> None:
        self.db = db
        self.meta_cf = db[META_CF]
        self.directory = Directory()
        self.duration_ms = duration_ms
        self.size_limit = size_limit
        self.lock = threading.RLock()
        self._cfs: dict[int, ColumnFamily] = {}
        # Write batches of committed writes, cleared for the next one (creating one costs
        # more than a small write's puts).  list.pop/append are atomic.
        self._spare_batches: list[WriteBatch] = []
        self._pid_arrays: dict[int, np.ndarray] = {}  # pid -> read-only [pid]
        self.amended = set()

    def load(self, on_log_meta: Callable[[bytes, np.ndarray, np.ndarray], None]) -> None:
        """Read the partitions and the directory from RocksDB.  The meta column family's
        other entries with a 9-byte key and an 8-byte value are per-log metadata (a kind
        byte and the log id as the key, a little-endian u64 as the value): they go to
        ``on_log_meta(kind, log_ids, values)``, a call per kind and chunk.

        Read in chunks of columns: a node holding 100,000 logs has a few hundred thousand
        entries here, and one Python step per entry took seconds of every start."""
        for name in self.db.column_families():
            m = _PARTITION_CF.match(name)
            if m:
                self._cfs[int(m.group(1))] = self.db[name]
        seen: dict[int, bytes] = {}
        stale = WriteBatch()
        with self.db.iterator(self.meta_cf) as it:
            it.seek_to_first()
            while True:
                chunk = it.read_many(LOAD_CHUNK)
                self._load_chunk(chunk, seen, stale, on_log_meta)
                if chunk.stop == "end":
                    break
        for pid in sorted(self._cfs):
            self.directory.load_partition(pid, seen.get(pid))
            if self._holds_amendments(pid):
                self.amended.add(pid)
        if stale.count():  # left behind by a drop that crashed half-way
            self.db.write(stale, sync=True)

    def _holds_amendments(self, pid: int) -> bool:
        with self.db.iterator(self._cfs[pid], K.AMEND, K.AMEND_END) as it:
            it.seek(K.AMEND)
            return len(it.read_many(1)) > 0

    def _load_chunk(self, chunk: Chunk, seen: dict[int, bytes], stale: WriteBatch,
                    on_log_meta: Callable[[bytes, np.ndarray, np.ndarray], None]) -> None:
        koff = chunk.key_offsets[:-1].astype(np.int64)
        klen = np.diff(chunk.key_offsets).astype(np.int64)
        voff = chunk.body_offsets.astype(np.int64)
        keys, values = chunk.keys, chunk.bodies
        kinds = keys[koff]
        partition = (kinds == K.META_PARTITION[0]) & (klen == 9)
        directory = (kinds == K.META_DIR[0]) & (klen == 17)
        known = np.zeros(len(koff), bool)
        known[partition | directory] = np.isin(
            _u64_at(keys, koff[partition | directory] + 1, ">u8"),
            np.fromiter(self._cfs, np.uint64, len(self._cfs)))
        for i in np.flatnonzero((partition | directory) & ~known).tolist():
            # left behind by a drop that crashed half-way
            stale.delete(keys[koff[i]:koff[i] + klen[i]].tobytes(), self.meta_cf)
        for i in np.flatnonzero(partition & known).tolist():  # one per partition
            seen[K.read_be(keys[koff[i]:koff[i] + 9].tobytes(), 1)] = \
                values[voff[i]:voff[i + 1]].tobytes()
        rows = np.flatnonzero(directory & known)
        load_usage = self.directory.load_usage
        for pid, log_id, lo, hi in zip(_u64_at(keys, koff[rows] + 1, ">u8").tolist(),
                                       _u64_at(keys, koff[rows] + 9, ">u8").tolist(),
                                       voff[rows].tolist(), voff[rows + 1].tolist(),
                                       strict=True):
            load_usage(pid, log_id, values[lo:hi].tobytes())
        per_log = ~(partition | directory) & (klen == 9) & (np.diff(voff) == 8)
        for kind in np.unique(kinds[per_log]).tolist():
            rows = np.flatnonzero(per_log & (kinds == kind))
            on_log_meta(bytes([kind]), _u64_at(keys, koff[rows] + 1, ">u8"),
                        _u64_at(values, voff[rows], "<u8"))

    def cf(self, pid: int) -> ColumnFamily:
        """The column family of partition ``pid`` (AGAIN if it was dropped)."""
        cf = self._cfs.get(pid)
        if cf is None:
            raise error_for(E.AGAIN, f"logsdb: partition {pid} was dropped")
        return cf

    def families(self) -> list[ColumnFamily]:
        """Every partition's column family, oldest first."""
        return [self._cfs[pid] for pid in sorted(self._cfs)]

    def _new_partition(self, start_ms: int) -> Partition:
        latest = self.directory.latest()
        pid = latest.id + 1 if latest else 1
        start = max(int(start_ms), latest.start_ms if latest else int(start_ms))
        part = Partition(pid, start)
        self._cfs[pid] = self.db.create_cf(part.name)
        self.db.put(K.partition_key(pid), part.encode(), self.meta_cf)
        self.directory.add_partition(part)
        return part

    def newest_holding(self, min_ts: int, max_ts: int) -> int | None:
        """The newest partition's id if records with timestamps in ``[min_ts, max_ts]``
        all go there without a new partition (the common write), else None (``assign``
        decides)."""
        with self.lock:
            latest = self.directory.latest()
            if (latest is None or min_ts < latest.start_ms
                    or max_ts >= latest.start_ms + self.duration_ms
                    or (latest.records and latest.nbytes >= self.size_limit)):
                return None
            return latest.id

    def assign(self, ts: np.ndarray) -> np.ndarray:
        """Partition id per timestamp, starting new partitions where needed."""
        with self.lock:
            directory = self.directory
            if not directory.parts:
                self._new_partition(int(ts.min()))
            if len(ts) == 1:  # the common small write: straight into the newest partition?
                latest = directory.latest()
                assert latest is not None
                t = int(ts[0])
                if (latest.start_ms <= t < latest.start_ms + self.duration_ms
                        and not (latest.records and latest.nbytes >= self.size_limit)):
                    pids = self._pid_arrays.get(latest.id)
                    if pids is None:
                        pids = self._pid_arrays[latest.id] = np.full(1, latest.id, np.int64)
                        pids.flags.writeable = False
                    return pids
            while True:
                latest = directory.latest()
                assert latest is not None
                pids = directory.place(ts)
                newest = ts[pids == latest.id]
                if not len(newest):
                    return pids
                if latest.records and latest.nbytes >= self.size_limit:
                    self._new_partition(int(newest.min()))
                    continue
                late = newest[newest >= latest.start_ms + self.duration_ms]
                if not len(late):
                    return pids
                self._new_partition(int(late.min()))

    def take_batch(self) -> WriteBatch:
        """An empty write batch (a spare one when there is one)."""
        try:
            return self._spare_batches.pop()
        except IndexError:
            return WriteBatch()

    def return_batch(self, batch: WriteBatch) -> None:
        """Keep ``batch`` (committed) for a later write; a couple are enough."""
        if len(self._spare_batches) < 2:
            batch.clear()
            self._spare_batches.append(batch)
        else:
            batch.close()

    def commit(self, batch: WriteBatch, usage: Mapping[tuple[int, int], Usage], *,
               sync: bool, wal: bool) -> None:
        """Write ``batch`` with the directory grown by ``usage`` ((partition, log) -> what
        the batch adds), atomically, then update the directory in memory."""
        with self.lock:
            directory = self.directory
            grown: dict[int, Partition] = {}  # pid -> the partition with this batch
            updates = []
            entries = []
            for (pid, log_id), delta in usage.items():
                part = grown.get(pid)
                if part is None:
                    held = directory.parts.get(pid)
                    if held is None:
                        raise error_for(E.AGAIN,
                                        f"logsdb: partition {pid} was dropped meanwhile")
                    part = grown[pid] = held.copy()
                part.add(delta)
                new = delta.merged(directory.usage_in(log_id, pid))
                entries.append((K.dir_key(pid, log_id), new.encode()))
                updates.append((pid, log_id, new))
            for pid, part in grown.items():
                entries.append((K.partition_key(pid), part.encode()))
            batch.put_plan(storefmt.plan_of(entries), b"", self.meta_cf)
            self.db.write(batch, sync=sync and wal, wal=wal)
            for pid, log_id, new in updates:
                directory.set_usage(log_id, pid, new)
            for part in grown.values():
                directory.parts[part.id] = part

    def drop(self, pids: Iterable[int]) -> None:
        """Drop whole partitions: their column families and directory entries."""
        with self.lock:
            for pid in pids:
                self.db.drop_cf(self._cfs.pop(pid))
                cleanup = WriteBatch()
                cleanup.delete(K.partition_key(pid), self.meta_cf)
                cleanup.delete_range(K.dir_prefix(pid), K.dir_prefix(pid + 1), self.meta_cf)
                self.db.write(cleanup)
                self.directory.remove_partition(pid)
                self.amended.discard(pid)


def _u64_at(buf: np.ndarray, at: np.ndarray, dtype: str) -> np.ndarray:
    """The 8-byte integers of ``dtype`` (``">u8"`` or ``"<u8"``) that start at each of
    ``at`` in the byte array ``buf``."""
    return buf[at[:, None] + np.arange(8)].view(dtype).ravel().astype(np.uint64)
