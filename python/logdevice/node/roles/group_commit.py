"""Group commit: STOREs that arrive while a RocksDB write is in flight go into the next one.

The storage role hands every accepted STORE to ``GroupCommitter.submit``.  If no write is
in flight the STORE is written at once; otherwise it waits in ``pending`` and, when the
write in flight finishes, *all* pending STOREs become the next write: one LogsDB
``PendingWrite`` (one RocksDB write batch: data and copyset index of every record
together, so a crash keeps all of it or none).  Under load the batches grow by themselves
and the per-write cost (syscalls, WAL append, Python overhead) is paid once per batch.

Writes run in one dedicated thread, so they are ordered and the event loop keeps serving
while RocksDB works (the cffi calls release the GIL).  A small batch (a few STOREs, a few
KiB: the common case at low load) is written on the event loop instead: a LogsDB write of
a few records costs ~150 us, less than the two thread wake-ups of the hop, which on a
busy machine cost far more (measured: 1 ms+ per hop with 3 nodes on 2 cores).  Batches
never overlap: the next one starts when the previous one is done, wherever it ran.

Each STORE gets its own outcome: per record (a checksum mismatch rejects only that
record) and per STORE (bad input), and a failed commit (NOSPC when the disk is full, or
another storage error) fails every STORE of the batch.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from ldcore.checksum import crc32c, crc32c_many
from logdevice.errors import E, LogDeviceError
from logdevice.protocol import RecordFlag, Store
from logdevice.storage.logsdb import LogsDB
from logdevice.storage.writes import PendingWrite

log = logging.getLogger("logdevice.node.roles.group_commit")

_CHECKSUM = np.uint32(int(RecordFlag.CHECKSUM))
_CHECKSUM_BIT = int(RecordFlag.CHECKSUM)
_MISMATCH = np.array([E.CHECKSUM_MISMATCH], np.uint16)
#: Batches up to this many payload bytes and STOREs are written on the event loop.
INLINE_BYTES = 32 << 10
INLINE_STORES = 16
#: A batch of STOREs of at least this many logs is added in one kernel call; below it,
#: one add per log costs no more than joining their columns (measured per batch: 2 and
#: 4 logs lose, 8 break even, 300 of one record each take half the time).
MANY_LOGS = 16


@dataclass(eq=False, slots=True)
class StoreJob:
    """One STORE on its way to disk, and its outcome once written."""

    conn: Any  # where the STORED goes
    msg: Store
    sticky: bool = False
    nbytes: int = 0
    status: E = E.OK  # of the whole STORE
    statuses: np.ndarray | None = None  # per record (uint16 E), when they differ


def _select(msg: Store, keep: np.ndarray) -> tuple[Any, ...]:
    """The STORE's columns restricted to records ``keep`` (an index array, increasing)."""
    offs = msg.payload_offsets.astype(np.int64)
    buf = np.frombuffer(msg.payloads, dtype=np.uint8) if len(offs) else np.empty(0, np.uint8)
    parts = [buf[offs[i]:offs[i + 1]] for i in keep.tolist()]
    lengths = np.fromiter((len(p) for p in parts), dtype=np.uint64, count=len(parts))
    new_offs = np.zeros(len(parts) + 1, np.uint64)
    np.cumsum(lengths, out=new_offs[1:])
    payloads = np.concatenate(parts) if parts else np.empty(0, np.uint8)
    return (msg.lsns[keep], msg.timestamps[keep], msg.flags[keep], msg.copysets[keep],
            payloads, new_offs, msg.waves[keep])


def prepare(job: StoreJob) -> tuple[Any, ...] | None:
    """Check a STORE's records; returns the columns to write (None: nothing to write).

    Records flagged CHECKSUM whose payload does not match get CHECKSUM_MISMATCH and are
    left out.  Records out of LSN order are sorted; for an LSN sent twice the last copy
    (the later wave) wins.
    """
    msg = job.msg
    n = len(msg.lsns)
    if n == 0:
        return None
    if n == 1:  # most STOREs of a spread load: scalars (numpy costs ~1 us a call here)
        return _prepare_one(job)
    lsns = msg.lsns
    statuses = None
    keep: np.ndarray | None = None
    if len(msg.checksums):
        flagged = (msg.flags & _CHECKSUM) != 0
        if flagged.any():
            bad = flagged & (crc32c_many(msg.payloads, msg.payload_offsets) != msg.checksums)
            if bad.any():
                statuses = np.zeros(n, np.uint16)
                statuses[bad] = E.CHECKSUM_MISMATCH
                keep = np.flatnonzero(~bad)
    if n > 1 and bool(np.any(lsns[1:] <= lsns[:-1])):
        idx = keep if keep is not None else np.arange(n)
        # The last occurrence of each LSN; np.unique returns them in LSN order.
        rev = idx[::-1]
        _, first_in_rev = np.unique(lsns[rev], return_index=True)
        keep = rev[first_in_rev]
    job.statuses = statuses
    if keep is None:
        return (msg.lsns, msg.timestamps, msg.flags, msg.copysets, msg.payloads,
                msg.payload_offsets, msg.waves)
    if len(keep) == 0:
        return None
    return _select(msg, keep)


def _prepare_one(job: StoreJob) -> tuple[Any, ...] | None:
    """``prepare`` for a STORE of one record."""
    msg = job.msg
    if len(msg.checksums) and int(msg.flags[0]) & _CHECKSUM_BIT:
        offs = msg.payload_offsets
        if crc32c(msg.payloads[int(offs[0]):int(offs[1])]) != int(msg.checksums[0]):
            job.statuses = _MISMATCH.copy()
            return None
    job.statuses = None
    return (msg.lsns, msg.timestamps, msg.flags, msg.copysets, msg.payloads,
            msg.payload_offsets, msg.waves)


def merge(parts: list[tuple[Any, ...]]) -> tuple[Any, ...]:
    """Concatenate the columns of several prepared STOREs of one log into one run in LSN
    order; for an LSN in several of them the later STORE wins."""
    lsns = np.concatenate([p[0] for p in parts])
    ts = np.concatenate([p[1] for p in parts])
    flags = np.concatenate([p[2] for p in parts])
    width = max(p[3].shape[1] for p in parts)
    copysets = np.concatenate([
        p[3] if p[3].shape[1] == width
        else np.pad(p[3], ((0, 0), (0, width - p[3].shape[1])), constant_values=-1)
        for p in parts])
    bufs = [np.frombuffer(p[4], dtype=np.uint8) for p in parts]
    starts = np.cumsum([0] + [len(b) for b in bufs[:-1]], dtype=np.uint64)
    offsets = np.concatenate(
        [np.zeros(1, np.uint64)]
        + [np.asarray(p[5], np.uint64)[1:] - np.uint64(p[5][0]) + start
           for p, start in zip(parts, starts, strict=True)])
    payloads = np.concatenate(bufs)
    waves = np.concatenate([p[6] for p in parts])
    if len(lsns) > 1 and bool(np.any(lsns[1:] <= lsns[:-1])):
        rev = np.arange(len(lsns))[::-1]
        _, first_in_rev = np.unique(lsns[rev], return_index=True)
        keep = rev[first_in_rev]
        starts_k, ends_k = offsets[keep], offsets[keep + 1]
        lengths = (ends_k - starts_k).astype(np.int64)
        new_offs = np.zeros(len(keep) + 1, np.uint64)
        np.cumsum(lengths, out=new_offs[1:])
        payloads = np.concatenate([payloads[int(a):int(b)]
                                   for a, b in zip(starts_k, ends_k, strict=True)]) \
            if len(keep) else np.empty(0, np.uint8)
        return (lsns[keep], ts[keep], flags[keep], copysets[keep], payloads, new_offs,
                waves[keep])
    return lsns, ts, flags, copysets, payloads, offsets, waves


class GroupCommitter:
    """Batches STOREs into single LogsDB writes in one writer thread.

    Parameters
    ----------
    loop : asyncio event loop
    db : LogsDB
    done : callable(list[StoreJob])
        Called on the loop with each written batch (statuses filled in).
    inline_bytes : int
        Batches this small are written on the event loop (0: always the thread).
    durability : str
        ``memory`` (no write-ahead log), ``async_write`` (WAL, not fsynced) or
        ``sync_write`` (the WAL is fsynced once per batch before any STORED goes out;
        such batches are always written in the writer thread).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, db: LogsDB,
                 done: Callable[[list[StoreJob]], None], *,
                 inline_bytes: int = INLINE_BYTES, durability: str = "async_write") -> None:
        if durability not in ("memory", "async_write", "sync_write"):
            raise ValueError(f"unknown append store durability {durability!r}")
        self.loop = loop
        self.db = db
        self.done = done
        self._sync = durability == "sync_write"
        self._wal = durability != "memory"
        self.pending: list[StoreJob] = []
        self.pending_bytes = 0
        self.in_flight: list[StoreJob] | None = None
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="logsdb-writer")
        self._idle = asyncio.Event()
        self._idle.set()
        self.inline_bytes = inline_bytes
        self._kick_scheduled = False
        # Figures for tests and benchmarks.
        self.writes = 0
        self.inline_writes = 0
        self.records = 0

    def submit(self, job: StoreJob) -> None:
        self.pending.append(job)
        self.pending_bytes += job.nbytes
        if self.in_flight is None and not self._kick_scheduled:
            # Start at the end of this loop turn: every STORE read in this turn joins.
            self._kick_scheduled = True
            self._idle.clear()
            self.loop.call_soon(self._kick)

    def _kick(self) -> None:
        self._kick_scheduled = False
        if self.in_flight is None and self.pending:
            self._start()
        elif self.in_flight is None:
            self._idle.set()

    def _start(self) -> None:
        batch, nbytes = self.pending, self.pending_bytes
        self.pending, self.pending_bytes = [], 0
        self.in_flight = batch
        self._idle.clear()
        # An fsync (sync_write) never blocks the event loop.
        if nbytes <= self.inline_bytes and len(batch) <= INLINE_STORES and not self._sync:
            # Small: a thread hop (two wake-ups) costs more than the write itself.
            self.inline_writes += 1
            try:
                records = self._write(batch)
            except Exception as exc:
                self._finish(batch, 0, exc)
            else:
                self._finish(batch, records, None)
            return
        fut = self.loop.run_in_executor(self._executor, self._write, batch)
        fut.add_done_callback(self._written)

    def _write(self, batch: list[StoreJob]) -> int:
        """One PendingWrite for every STORE of the batch (in the writer thread, or inline).

        STOREs of the same log are merged into one run, and the runs of many logs are
        added together (``PendingWrite.add_logs``, one kernel call for all: LogsDB's
        per-call cost is most of a small write).  If that fails, each log is added
        alone, and if a log's merged run fails, each of its STOREs alone, so the error
        lands on the STORE that caused it.
        """
        db = self.db
        try:
            pw = db.pending()
        except LogDeviceError as exc:
            for job in batch:
                job.status = exc.status
            return 0
        by_log: dict[int, list[tuple[StoreJob, tuple[Any, ...]]]] = {}
        for job in batch:
            try:
                cols = prepare(job)
            except (LogDeviceError, ValueError, TypeError) as exc:
                self._reject(job, exc)
                continue
            if cols is not None:
                items = by_log.get(job.msg.log_id)
                if items is None:
                    by_log[job.msg.log_id] = [(job, cols)]
                else:
                    items.append((job, cols))
        added: list[StoreJob] = []
        one_by_one = self._add_logs(pw, by_log, added) if len(by_log) >= MANY_LOGS \
            else by_log.items()
        for log_id, items in one_by_one:
            sticky = items[0][0].sticky
            if len(items) > 1:
                try:
                    pw.add(log_id, *merge([c for _, c in items]), sticky_block=sticky)
                except (LogDeviceError, ValueError, TypeError):
                    pass  # find the culprit below
                else:
                    added.extend(job for job, _ in items)
                    continue
            for job, cols in items:
                try:
                    pw.add(log_id, *cols, sticky_block=sticky)
                except (LogDeviceError, ValueError, TypeError) as exc:
                    self._reject(job, exc)
                else:
                    added.append(job)
        if not added:
            return 0
        try:
            pw.commit(sync=self._sync, wal=self._wal)
        except LogDeviceError as exc:
            log.error("LogsDB write of %d records failed: %s", pw.records, exc)
            for job in added:
                job.status = exc.status
            return 0
        return pw.records

    @staticmethod
    def _add_logs(pw: PendingWrite, by_log: dict[int, list[tuple[StoreJob, tuple[Any, ...]]]],
                  added: list[StoreJob]) -> list[tuple[int, list[tuple[StoreJob, Any]]]]:
        """Add the STOREs of many logs together (``PendingWrite.add_logs``: one kernel
        call for all); the logs left to add one by one: those it left out, or all of
        them if it refused the lot (one by one, the error lands on the STORE at
        fault)."""
        logs = list(by_log.items())
        sticky = logs[0][1][0][0].sticky
        if any(items[0][0].sticky != sticky for _, items in logs):
            return logs  # (never in practice: sticky copysets are per log group)
        try:
            left = pw.add_logs([
                (log_id, items[0][1] if len(items) == 1 else merge([c for _, c in items]))
                for log_id, items in logs], sticky_block=sticky)
        except (LogDeviceError, ValueError, TypeError):
            return logs
        skip = set(left)
        for i, (_, items) in enumerate(logs):
            if i not in skip:
                added.extend(job for job, _ in items)
        return [logs[i] for i in left]

    @staticmethod
    def _reject(job: StoreJob, exc: Exception) -> None:
        if isinstance(exc, LogDeviceError):
            job.status = exc.status
        else:
            log.warning("bad STORE for log %d: %s", job.msg.log_id, exc)
            job.status = E.INVALID_PARAM

    def _written(self, fut: asyncio.Future[int]) -> None:
        exc = fut.exception()
        self._finish(self.in_flight or [], 0 if exc else fut.result(), exc)

    def _finish(self, batch: list[StoreJob], records: int, exc: BaseException | None) -> None:
        self.in_flight = None
        if exc is not None:  # a bug, not a storage error: fail the batch, keep serving
            log.error("group commit failed", exc_info=exc)
            for job in batch:
                job.status = E.FAILED
        else:
            self.writes += 1
            self.records += records
        try:
            self.done(batch)
        finally:
            if self.pending:
                if not self._kick_scheduled:
                    self._kick_scheduled = True
                    self.loop.call_soon(self._kick)
            else:
                self._idle.set()

    async def flush(self) -> None:
        """Wait until everything submitted so far is written."""
        while self.in_flight is not None or self.pending:
            await self._idle.wait()

    def close(self) -> None:
        self._executor.shutdown(wait=True)
