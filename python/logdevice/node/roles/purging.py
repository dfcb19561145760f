"""Purging: a storage node catches up with epoch recoveries it missed before it serves
the recovered epochs.

Every RELEASE names the releasing sequencer's epoch S; a sequencer releases only once
every epoch before S is clean.  A node whose own last clean epoch for the log is below
S - 1 missed (part of) a recovery: it may hold copies the recovery overruled, such as a
record the dead sequencer stored only on this node where recovery wrote a hole plug or a
bridge.  Serving them would give readers two histories.  So the release waits while the
node reads recovery's outcomes from the epoch store, deletes its contradicting copies of
each unclean epoch (``EpochOutcome.contradicted``) and records its new last clean epoch;
then the release goes ahead.  From then on the node also refuses sequencer STOREs of the
clean epochs (an old sequencer that was paused through the failover may still send some).

``Purger`` keeps the per-log state; the storage role asks ``must_wait`` on every release
and gets the held release back through its callback once the purge is done.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from typing import Any

import numpy as np

from ldcore import lsn as ldlsn
from ldcore.logtable import LogTable
from logdevice.epochstore import EpochStore, LogEpochState
from logdevice.errors import LogDeviceError
from logdevice.storage.logsdb import LogsDB

log = logging.getLogger("logdevice.node.roles.purging")

#: Seconds before asking the epoch store again when it does not know the epochs clean yet.
RETRY_DELAY = 0.5
_SCAN_BATCH = 65536


def purge_epochs(db: LogsDB, state: LogEpochState, first: int, last: int) -> int:
    """Delete ``db``'s copies of epochs ``first..last`` of the log that contradict what
    recovery made of them; how many were deleted.  Blocking (RocksDB)."""
    log_id = state.log_id
    doomed: list[np.ndarray] = []
    for epoch in range(first, last + 1):
        outcome = state.outcome(epoch)
        if outcome is None:
            continue  # never recovered (nothing was written in it) or forgotten
        lo = ldlsn.compose(epoch, outcome.lng + 1) if outcome.lng < ldlsn.ESN_MAX else 0
        hi = ldlsn.compose(epoch, ldlsn.ESN_MAX)
        while lo and lo <= hi:
            rb = db.read_records(log_id, lo, hi, max_records=_SCAN_BATCH, payloads=False)
            if len(rb):
                bad = outcome.contradicted(rb.lsns & np.uint64(ldlsn.ESN_MAX), rb.flags)
                if bad.any():
                    doomed.append(rb.lsns[bad])
            if rb.next_lsn <= lo or rb.next_lsn > hi:
                break
            lo = rb.next_lsn
    lsns = np.concatenate(doomed) if doomed else np.empty(0, np.uint64)
    if len(lsns):
        db.delete_records(log_id, lsns, sync=True)
    return len(lsns)


class Purger:
    """Per-log purging state of one storage node.

    Parameters
    ----------
    loop : asyncio loop
    db : LogsDB
    executor : Executor
        Runs the blocking work (epoch store reads, RocksDB scans and deletes).
    epoch_store : callable -> EpochStore
        Opens (or returns) the node's epoch store handle; called in ``executor``.
    flush_stores : callable -> awaitable
        Waits until every STORE accepted so far is on disk.
    on_clean : callable(log_id)
        Called on the loop when a purge finished: held releases may go ahead.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, db: LogsDB, executor: Executor,
                 epoch_store: Callable[[], EpochStore],
                 flush_stores: Callable[[], Awaitable[Any]],
                 on_clean: Callable[[int], None]) -> None:
        self._loop = loop
        self._db = db
        self._executor = executor
        self._epoch_store = epoch_store
        self._flush_stores = flush_stores
        self._on_clean = on_clean
        # log -> the epoch a purge under way makes clean, ahead of the disk (the store's
        # own per-log metadata answers for every other log: nothing is kept per idle log)
        self._clean = LogTable()
        self._wanted: dict[int, int] = {}  # log -> epoch it must be clean up to
        self._running: set[int] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.purged_records = 0

    def clean_epoch(self, log_id: int) -> int:
        """The node's last clean epoch of ``log_id``: it holds no overruled copy up to
        there, and takes no sequencer STORE of those epochs."""
        epoch = self._clean.get(log_id)
        return self._db.last_clean_epoch(log_id) if epoch is None else epoch

    def must_wait(self, log_id: int, sequencer_epoch: int) -> bool:
        """Whether a release from the sequencer of ``sequencer_epoch`` must wait for a
        purge (which this starts if it is not running)."""
        need = sequencer_epoch - 1
        if log_id not in self._running and self.clean_epoch(log_id) >= need:
            return False
        if need > self._wanted.get(log_id, 0):
            self._wanted[log_id] = need
        if log_id not in self._running:
            self._running.add(log_id)
            task = self._loop.create_task(self._purge(log_id))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return True

    async def drain(self, timeout: float) -> None:
        """Wait (bounded) for the purges under way, so their held releases go ahead."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout)

    async def _purge(self, log_id: int) -> None:
        try:
            while self.clean_epoch(log_id) < self._wanted.get(log_id, 0):
                if not await self._purge_once(log_id):
                    await asyncio.sleep(RETRY_DELAY)
        except LogDeviceError as exc:  # the node is stopping, or the store is away
            log.warning("log %d: purging failed: %s", log_id, exc)
            return
        finally:
            self._running.discard(log_id)
        self._wanted.pop(log_id, None)
        self._on_clean(log_id)

    async def _purge_once(self, log_id: int) -> bool:
        """One step towards the wanted epoch; False when the epoch store is behind."""
        loop = self._loop
        state = await loop.run_in_executor(
            self._executor, lambda: self._epoch_store().get(log_id))
        first = self.clean_epoch(log_id) + 1
        target = min(self._wanted[log_id], state.last_clean_epoch if state else 0)
        if target < first:
            log.info("log %d: waiting for the epoch store to show epoch %d clean",
                     log_id, self._wanted[log_id])
            return False
        assert state is not None
        db = self._db

        def work() -> int:
            n = purge_epochs(db, state, first, target)
            db.set_last_clean_epoch(log_id, target)
            return n

        # Refuse the old epochs' STOREs from here on, and let those accepted already
        # reach the disk, so the scan sees every copy there will ever be.
        self._clean.set(log_id, 0, target)
        try:
            await self._flush_stores()
            n = await loop.run_in_executor(self._executor, work)
        finally:  # written: the store answers; failed: not clean after all
            self._clean.discard(log_id)
        self.purged_records += n
        log.log(logging.WARNING if n else logging.INFO,
                "log %d: purged epochs %d..%d: %d overruled copies deleted",
                log_id, first, target, n)
        return True
