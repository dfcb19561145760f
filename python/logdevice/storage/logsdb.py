"""LogsDB: a storage node's local log store, on RocksDB.

Time partitions are column families ``p<id>`` holding data records and copyset index
entries; a ``meta`` column family holds the partition directory and per-log metadata
(trim point, last released, seal epoch, last clean epoch).  Formats: :mod:`.keys`.
Writes: :mod:`.writes`; reads: :mod:`.reads`; deletes: :mod:`.deletes`; amendments of
copies held (new flags and copyset, same payload): :mod:`.amends`; what those share
(the partitions and their directory): :mod:`.partitioned`.

A record goes to the partition its timestamp falls in.  A new partition starts when a
record is ``partition_duration_ms`` past the newest partition's start, or once that
partition holds ``partition_size_limit`` bytes.  Retention drops whole partitions whose
records are all trimmed or older than every one of their logs' backlog.

Thread use: one writer at a time commits (a lock); reads may run in other threads.
``close()`` waits for operations in flight.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Mapping
from dataclasses import replace
from os import fspath

import numpy as np

from ldcore.logtable import LogTable
from ldcore.lsn import LSN_MAX
from logdevice.errors import E, error_for
from logdevice.storage import amends, deletes, producers, reads
from logdevice.storage import keys as K
from logdevice.storage.batch import CsiBatch, RecordBatch
from logdevice.storage.partitioned import META_CF, PartitionedDB
from logdevice.storage.partitions import Partition
from logdevice.storage.record_cache import RecordCache
from logdevice.storage.rocksdb import DB, Options
from logdevice.storage.writes import PendingWrite, Written

__all__ = ["LogsDB", "PendingWrite", "RecordBatch", "CsiBatch", "Partition"]

_SLOTS = {K.META_TRIM: 0, K.META_RELEASED: 1, K.META_SEAL: 2, K.META_CLEAN: 3}


class _Gate:
    """Counts operations in flight so ``close()`` can wait for them."""

    def __init__(self) -> None:
        # The condition's own lock, taken directly where nothing waits (cheaper).
        self._lock = threading.Lock()
        self._cv = threading.Condition(self._lock)
        self._busy = 0
        self.closed = False

    def __enter__(self) -> None:
        with self._lock:
            if self.closed:
                raise error_for(E.SHUTDOWN, "logsdb is closed")
            self._busy += 1

    def __exit__(self, *exc) -> None:
        with self._lock:
            self._busy -= 1
            if self.closed and not self._busy:  # only close() waits
                self._cv.notify_all()

    def close(self, timeout: float) -> bool:
        """Refuse new operations; wait for those in flight.  False: still busy."""
        with self._cv:
            self.closed = True
            return self._cv.wait_for(lambda: self._busy == 0, timeout)


class LogsDB:
    """The log store of one storage node (one shard), in directory ``path``.

    Parameters
    ----------
    path : str or PathLike
        Database directory (created when missing).
    partition_duration_ms : int
        Time span of a partition (default 15 minutes).
    partition_size_limit : int
        Bytes after which the newest partition is closed to new timestamps.
    sync_writes : bool
        Make every commit wait for the write-ahead log to reach the disk.
    block_cache_bytes : int
        RocksDB block cache shared by all partitions.
    compression : str
        RocksDB compression of SST files ("none", "lz4", "zstd", ...).
    max_payload : int or None
        Reject payloads above this size with ``E.TOOBIG``.
    csi_ranges : bool
        One copyset index entry per log and partition of each write (a block or a run)
        instead of one per record (LogDevice's layout): about half the write cost.
    record_cache_bytes : int
        Keep the records just written in memory, up to about this many bytes, for
        tailing readers (``cache``, a :class:`.record_cache.RecordCache` kept exact by
        every change of the store); 0: no cache (``cache`` is None).
    """

    def __init__(
        self,
        path,
        *,
        partition_duration_ms: int = 900_000,
        partition_size_limit: int = 512 << 20,
        sync_writes: bool = False,
        block_cache_bytes: int = 64 << 20,
        compression: str = "lz4",
        write_buffer_size: int = 32 << 20,
        max_background_jobs: int = 2,
        statistics: bool = False,
        max_payload: int | None = None,
        csi_ranges: bool = True,
        wal_recovery: str | None = None,
        record_cache_bytes: int = 0,
    ) -> None:
        if partition_duration_ms <= 0 or partition_size_limit <= 0:
            raise error_for(E.INVALID_PARAM, "partition duration and size limit must be > 0")
        self.path = fspath(path)
        self.partition_duration_ms = int(partition_duration_ms)
        self.partition_size_limit = int(partition_size_limit)
        self.sync_writes = sync_writes
        self.max_payload = max_payload
        self.csi_ranges = csi_ranges
        options = Options(
            compression=compression, block_cache_bytes=block_cache_bytes,
            write_buffer_size=write_buffer_size, max_background_jobs=max_background_jobs,
            statistics=statistics, wal_recovery=wal_recovery,
        )
        # RocksDB creates the directory itself but not its parents; if this fails, RocksDB
        # reports the problem with the path.
        with contextlib.suppress(OSError):
            os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        self._db = DB.open(self.path, [META_CF], options)
        #: The partitions and their directory: the interface of the read, write and
        #: delete paths (``storage.partitioned``).
        self.parts = PartitionedDB(self._db, duration_ms=self.partition_duration_ms,
                                   size_limit=self.partition_size_limit)
        # Per-log metadata, one row of _SLOTS per log: kept for every log the node holds.
        self._meta = LogTable(len(_SLOTS))
        self._gate = _Gate()
        #: Records just written, for tailing readers (None: off).  Told of every change
        #: under ``parts.lock``, after it is written.
        self.cache: RecordCache | None = (RecordCache(record_cache_bytes)
                                          if record_cache_bytes > 0 else None)
        try:
            self.parts.load(self._load_meta)
        except BaseException:
            self._db.close()
            raise

    # ------------------------------------------------------------------ open / close

    def _load_meta(self, kind: bytes, log_ids: np.ndarray, values: np.ndarray) -> None:
        slot = _SLOTS.get(kind)
        if slot is not None:
            self._meta.set_many(log_ids, slot, values)

    def close(self, timeout: float = 10.0) -> None:
        """Wait (up to ``timeout`` s) for operations in flight, then close.  Idempotent.

        New operations are refused from the start.  If some are still running after
        ``timeout`` RocksDB is left open (freeing it under a running read would crash
        the process) and TIMEDOUT is raised; call ``close`` again later."""
        if not self._gate.close(timeout):
            raise error_for(E.TIMEDOUT, f"logsdb: operations still running after "
                                        f"{timeout:g}s; not closed")
        if self.cache is not None:
            self.cache.clear()
        self._db.close()

    @property
    def closed(self) -> bool:
        return self._gate.closed

    def __enter__(self) -> LogsDB:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def check_open(self) -> None:
        """SHUTDOWN once ``close()`` began."""
        if self._gate.closed:
            raise error_for(E.SHUTDOWN, "logsdb is closed")

    def operation(self) -> contextlib.AbstractContextManager[None]:
        """Context of one operation: ``close()`` waits until it is over (SHUTDOWN when
        closing already began)."""
        return self._gate

    # ------------------------------------------------------------------ partitions

    def partitions(self) -> list[Partition]:
        """The partitions, oldest first (copies)."""
        self.check_open()
        parts = self.parts.directory.parts
        return [replace(parts[pid]) for pid in sorted(parts)]

    def apply_retention(
        self,
        now_ms: int,
        backlog_ms: dict[int, int | None] | None = None,
        default_backlog_ms: int | None = None,
    ) -> list[int]:
        """Drop whole partitions nobody needs; returns the dropped partition ids.

        A partition (never the newest) goes once, for every log with records in it, either
        all those records are at or below the log's trim point, or the newest of them is
        older than ``now_ms`` minus the log's backlog (``backlog_ms[log]``, else
        ``default_backlog_ms``; None: kept forever).  Logs that lose records to their
        backlog get their trim point moved past them, so readers see a trim gap.
        """
        backlog_ms = backlog_ms or {}
        directory = self.parts.directory
        with self._gate, self.parts.lock:
            latest = directory.latest()
            by_pid: dict[int, list[int]] = {}
            for log_id in directory.log_ids():
                for pid in directory.partitions_of(log_id):
                    by_pid.setdefault(pid, []).append(log_id)
            drop: list[int] = []
            expired: list[tuple[int, int]] = []
            for pid in sorted(directory.parts):
                if latest is None or pid == latest.id:
                    continue
                ok, aged = True, []
                for log_id in by_pid.get(pid, []):
                    u = directory.usage_in(log_id, pid)
                    assert u is not None  # by_pid lists the logs with usage in pid
                    if u.max_lsn <= self.trim_point(log_id):
                        continue
                    keep = backlog_ms.get(log_id, default_backlog_ms)
                    if keep is not None and u.max_ts < now_ms - keep:
                        aged.append(log_id)
                        continue
                    ok = False
                    break
                if ok:
                    drop.append(pid)
                    expired.extend((log_id, pid) for log_id in aged)
            if not drop:
                return []
            trims: dict[int, int] = {}
            for log_id, pid in expired:
                in_log = directory.usage(log_id)
                rest = [u.min_lsn for p, u in in_log.items() if p not in drop]
                upto = in_log[pid].max_lsn
                if rest and min(rest) <= upto:
                    upto = min(rest) - 1
                trims[log_id] = max(trims.get(log_id, 0), upto)
            for log_id, upto in trims.items():
                self._set_meta(log_id, K.META_TRIM, upto, sync=True)
            self.parts.drop(drop)
            return drop

    # ------------------------------------------------------------------ writes

    def pending(self) -> PendingWrite:
        """A :class:`PendingWrite`: add records of any logs, then commit them at once."""
        self.check_open()
        return PendingWrite(self)

    def write_records(
        self, log_id: int, lsns, timestamps, flags, copysets, payloads, offsets, waves=None,
        *, sync: bool = False, sticky_block: bool = False,
    ) -> None:
        """Store n records of one log in one atomic write (see :meth:`PendingWrite.add`)."""
        pw = self.pending()
        pw.add(log_id, lsns, timestamps, flags, copysets, payloads, offsets, waves,
               sticky_block=sticky_block)
        pw.commit(sync=sync)

    def amend_records(self, log_id: int, lsns, flags, waves, copysets, *,
                      sync: bool = False) -> np.ndarray:
        """Give copies held here new ``flags`` and ``copysets`` without writing their
        payloads again (:mod:`.amends`); reads return them amended from then on.

        ``lsns`` strictly increasing; record i is amended only where the copy held has
        wave ``waves[i]`` and the same ``FLAG_WRITTEN_BY_RECOVERY`` bit as ``flags[i]``
        (the copy the caller read).  Bool per LSN: amended?  False: not held (or at or
        below the trim point), or held in another version."""
        log_id = K.check_log_id(log_id)
        want = reads.checked_lsns(lsns)
        n = len(want)
        fl = np.ascontiguousarray(flags, np.uint32)
        wv = np.ascontiguousarray(waves, np.uint32)
        if fl.shape != (n,) or wv.shape != (n,):
            raise error_for(E.INVALID_PARAM, f"logsdb: flags and waves need {n} entries")
        cs, _ = K.normalize_copysets(copysets, n)
        out = np.zeros(n, bool)
        with self._gate, self.parts.lock:
            live = want > np.uint64(self.trim_point(log_id))
            if live.any():
                out[live] = amends.amend_records(self.parts, log_id, want[live], fl[live],
                                                 wv[live], cs[live],
                                                 sync=sync or self.sync_writes)
                if self.cache is not None:
                    self.cache.changed(log_id, int(want[0]), int(want[-1]))
        return out

    def cache_written(self, written: list[tuple | Written]) -> None:
        """Tell the cache what a commit wrote (``PendingWrite`` calls it under
        ``parts.lock``, right after the commit): per ``add``, the log, its columns and
        whether the log had nothing in their LSN range before; per ``add_logs``, the
        columns of its logs (each of them fresh)."""
        cache = self.cache
        if cache is None:
            return
        directory = self.parts.directory
        trim_slot = _SLOTS[K.META_TRIM]
        meta = self._meta
        for item in written:
            if isinstance(item, Written):
                held = [cache.holds(log_id) for log_id in item.log_ids]
                cache.written_logs(
                    item.log_ids, item.ends, item.lsns, item.ts, item.fl, item.wv,
                    item.cs16, item.payloads, item.offsets,
                    trim_points=[meta.get(log_id, trim_slot, 0) for log_id in item.log_ids],
                    tails=[None if h else directory.tail(log_id)
                           for log_id, h in zip(item.log_ids, held, strict=True)])
                continue
            log_id, lsns, ts, fl, wv, cs, payloads, offs, fresh = item
            tail = None if cache.holds(log_id) or not fresh else directory.tail(log_id)
            cache.written(log_id, lsns, ts, fl, wv, cs, payloads, offs, fresh=fresh,
                          trim_point=meta.get(log_id, trim_slot, 0), tail=tail)

    # ------------------------------------------------------------------ reads

    def read_records(
        self, log_id: int, lo: int, hi: int = LSN_MAX, *, max_records: int = 4096,
        max_bytes: int = 8 << 20, payloads: bool = True,
    ) -> RecordBatch:
        """Records of ``log_id`` in ``[lo, hi]`` above the trim point, in LSN order.

        Stops after ``max_records`` records or once ``max_bytes`` payload bytes are taken
        (at least one record; 0: no byte limit).  ``.next_lsn`` of the result is where to
        continue (``hi + 1`` when the range is done, capped at ``LSN_MAX``).

        ``payloads=False`` reads headers only: every payload comes back empty (offsets all
        0, so ``max_bytes`` never stops the read) and is not copied out of RocksDB;
        ``checksums`` still hold the stored crc32c (``checksum_ok()`` means nothing then).
        """
        log_id = K.check_log_id(log_id)
        if max_records <= 0:
            return RecordBatch.empty(log_id, lo)
        with self._gate:
            rb = reads.read_records(self, log_id, int(lo), int(hi), max_records, max_bytes,
                                    bool(payloads))
        rb.next_lsn = min(rb.next_lsn, LSN_MAX)
        return rb

    def delete_records(self, log_id: int, lsns, *, sync: bool = True) -> int:
        """Delete these records of ``log_id`` (data and copyset index), atomically; how
        many of them the store held (above the trim point).  For purging copies that
        epoch recovery overruled, and for tests that make a node lose data silently."""
        log_id = K.check_log_id(log_id)
        arr = np.unique(np.asarray(lsns, dtype=np.uint64))
        if not len(arr):
            return 0
        with self._gate, self.parts.lock:
            held = len(reads.read_records_at(self, log_id, arr, False))
            deletes.delete_records(self.parts, log_id, arr, sync=sync)
            if self.cache is not None:
                self.cache.changed(log_id, int(arr[0]), int(arr[-1]))
        return held

    def read_csi(self, log_id: int, lo: int, hi: int = LSN_MAX, *,
                 max_entries: int = 4096) -> CsiBatch:
        """Copyset index of ``[lo, hi]``: one row per stored LSN (lsns, flags, copysets),
        without reading payloads.  ``.next_lsn`` is where to continue."""
        log_id = K.check_log_id(log_id)
        if max_entries <= 0:
            return reads.read_csi(self, log_id, 1, 0, 1)
        with self._gate:
            csi = reads.read_csi(self, log_id, int(lo), int(hi), max_entries)
        csi.next_lsn = min(csi.next_lsn, LSN_MAX)
        return csi

    def read_records_at(self, log_id: int, lsns, *, payloads: bool = True) -> RecordBatch:
        """The records at the given strictly increasing ``lsns`` that exist (above the trim
        point), in LSN order: e.g. those a single-copy-delivery decision chose.
        ``payloads=False`` reads headers only, as for :meth:`read_records`."""
        log_id = K.check_log_id(log_id)
        with self._gate:
            rb = reads.read_records_at(self, log_id, lsns, bool(payloads))
        rb.next_lsn = min(rb.next_lsn, LSN_MAX)
        return rb

    def writer_blobs(self, log_id: int, since_ms: int) -> producers.WriterEntries:
        """The BufferedWriter blobs held here that name their writer, with timestamps of
        at least ``since_ms`` (:mod:`.producers`)."""
        log_id = K.check_log_id(log_id)
        with self._gate:
            return producers.scan(self, log_id, int(since_ms))

    def find_time(self, log_id: int, ms: int) -> int:
        """First LSN above the trim point whose timestamp is >= ``ms`` (exact when
        timestamps do not decrease along LSNs); ``max(tail, trim point) + 1`` if none."""
        log_id = K.check_log_id(log_id)
        with self._gate:
            return reads.find_time(self, log_id, int(ms))

    def tail(self, log_id: int) -> int:
        """Highest LSN stored for ``log_id`` (0 if none)."""
        self.check_open()
        return self.parts.directory.tail(K.check_log_id(log_id))

    def logs(self) -> list[int]:
        """Log ids with records or metadata here."""
        self.check_open()
        return sorted(set(self.parts.directory.log_ids()) | set(self._meta.logs()))

    def records_within(self, log_id: int, lo: int, hi: int) -> int:
        """At most this many records of ``log_id`` are stored in ``[lo, hi]``: every
        partition whose LSN range for the log meets it counts whole (trimmed records
        included).  From the partition directory: no I/O."""
        self.check_open()
        return self.parts.directory.records_within(K.check_log_id(log_id), lo, hi)

    def average_record_size(self, log_id: int) -> float:
        """Mean stored bytes per record of ``log_id`` (payload plus its head of 24 + 2 *
        copyset size bytes) over the partitions holding it, trimmed records included until
        retention drops them; 0.0 when it has none.  From the partition directory: no I/O.
        Readers use it to size a read to a byte budget before reading."""
        self.check_open()
        usage = self.parts.directory.usages(K.check_log_id(log_id))
        records = sum(u.records for u in usage)
        return sum(u.nbytes for u in usage) / records if records else 0.0

    def time_span(self, log_id: int) -> tuple[int, int]:
        """The timestamps of ``log_id``'s oldest and newest records above the trim point as
        the partition directory knows them (a partition partly trimmed counts whole);
        ``(0, 0)`` when it holds none.  No I/O."""
        self.check_open()
        log_id = K.check_log_id(log_id)
        trim = self.trim_point(log_id)
        live = [u for u in self.parts.directory.usages(log_id)
                if u.max_lsn > trim and u.records]
        if not live:
            return 0, 0
        return min(u.min_ts for u in live), max(u.max_ts for u in live)

    def data_size(self, log_id: int, start_ms: int, end_ms: int) -> int:
        """Estimated bytes stored for ``log_id``'s records with timestamps in ``[start_ms,
        end_ms]``: payloads and record heads (24 + 2 * copyset size bytes each), from the
        partition directory (partitions partly in range count in proportion to their time
        overlap)."""
        self.check_open()
        log_id = K.check_log_id(log_id)
        trim = self.trim_point(log_id)
        total = 0.0
        for u in self.parts.directory.usages(log_id):
            if u.max_lsn <= trim or u.max_ts < start_ms or u.min_ts > end_ms:
                continue
            span = u.max_ts - u.min_ts
            inside = min(u.max_ts, end_ms) - max(u.min_ts, start_ms)
            total += u.nbytes * (1.0 if span <= 0 else max(inside, 0) / span)
        return int(total)

    # ------------------------------------------------------------------ per-log metadata

    def _set_meta(self, log_id: int, kind: bytes, value: int, sync: bool) -> int:
        slot = _SLOTS[kind]
        with self._gate, self.parts.lock:
            held = self._meta.get(log_id, slot, 0)
            if value <= held:
                return held
            self._db.put(K.meta_key(kind, log_id), K.u64(value), self.parts.meta_cf, sync=sync)
            self._meta.set(log_id, slot, value)
            if kind == K.META_TRIM and self.cache is not None:
                self.cache.trimmed(log_id, value)
            return value

    def _get_meta(self, log_id: int, kind: bytes) -> int:
        self.check_open()
        return self._meta.get(K.check_log_id(log_id), _SLOTS[kind], 0)

    def trim(self, log_id: int, lsn: int, *, sync: bool = True) -> int:
        """Move the trim point of ``log_id`` up to ``lsn`` (never down); returns it.
        Reads then skip everything at or below it; retention frees the space later."""
        return self._set_meta(K.check_log_id(log_id), K.META_TRIM, int(lsn), sync)

    def trim_point(self, log_id: int) -> int:
        return self._get_meta(log_id, K.META_TRIM)

    def set_last_released(self, log_id: int, lsn: int, *, sync: bool = False) -> int:
        return self._set_meta(K.check_log_id(log_id), K.META_RELEASED, int(lsn), sync)

    def set_last_released_many(self, pointers: Mapping[int, int]) -> None:
        """``set_last_released`` for many logs in one write (a node that releases records
        of many logs persists their pointers together; keys and values are built as
        arrays, not one by one)."""
        n = len(pointers)
        if not n:
            return
        try:
            ids = np.fromiter(pointers.keys(), np.uint64, n)
            lsns = np.fromiter(pointers.values(), np.uint64, n)
        except (OverflowError, ValueError, TypeError) as e:
            raise error_for(E.INVALID_PARAM, f"logsdb: bad last-released pointers: {e}") \
                from None
        if not ids.all():
            raise error_for(E.INVALID_PARAM, "logsdb: invalid log id 0")
        slot = _SLOTS[K.META_RELEASED]
        with self._gate, self.parts.lock:
            rising = lsns > self._meta.get_many(ids, slot)
            if not rising.all():
                ids, lsns = ids[rising], lsns[rising]
            if not len(ids):
                return
            batch = self.parts.take_batch()
            batch.put_many(K.meta_keys(K.META_RELEASED, ids),
                           K.fixed_offsets(len(ids), K.META_KEY_LEN),
                           lsns.astype("<u8").view(np.uint8), K.fixed_offsets(len(ids), 8),
                           self.parts.meta_cf, checked=True)
            self._db.write(batch)
            self.parts.return_batch(batch)
            self._meta.set_many(ids, slot, lsns)

    def last_released(self, log_id: int) -> int:
        return self._get_meta(log_id, K.META_RELEASED)

    def seal(self, log_id: int, epoch: int, *, sync: bool = True) -> int:
        """Seal ``log_id`` up to ``epoch`` (never lowers it); returns the seal in force,
        which is above ``epoch`` when someone sealed higher first."""
        return self._set_meta(K.check_log_id(log_id), K.META_SEAL, int(epoch), sync)

    def sealed_epoch(self, log_id: int) -> int:
        return self._get_meta(log_id, K.META_SEAL)

    def set_last_clean_epoch(self, log_id: int, epoch: int, *, sync: bool = True) -> int:
        return self._set_meta(K.check_log_id(log_id), K.META_CLEAN, int(epoch), sync)

    def last_clean_epoch(self, log_id: int) -> int:
        return self._get_meta(log_id, K.META_CLEAN)

    # ------------------------------------------------------------------ maintenance

    def flush(self) -> None:
        """Flush memtables to SST files (every partition)."""
        with self._gate:
            self._db.flush()

    def compact(self) -> None:
        """Flush, then compact every partition fully (blocking): what RocksDB would do in
        the background after a burst of writes, done now."""
        with self._gate:
            self._db.flush()
            for cf in self.parts.families():
                self._db.compact_range(cf)

    def property(self, name: str, partition: int | None = None) -> str | None:
        """A RocksDB property of the database or of one partition."""
        with self._gate:
            return self._db.property(name, None if partition is None
                                     else self.parts.cf(partition))

    def statistics(self) -> str | None:
        with self._gate:
            return self._db.statistics()
