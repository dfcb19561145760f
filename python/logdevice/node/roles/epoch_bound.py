"""What the epoch store has issued, as the ceiling of the epochs a storage node accepts.

Every epoch a legitimate sequencer writes in, or seals, was handed out by the epoch store
(``LogEpochState.epoch`` is the last one).  A STORE or SEAL above it came from a peer
that made its epoch up: a SEAL of epoch 2**64-1 would make the log unwritable for good
(every later STORE is "sealed"), a STORE of records in a future epoch would plant
records no recovery knows about.  ``EpochBound`` keeps, per log, the epoch the store
had issued when this node last read it; a request within it passes without I/O, one
above it makes the node read the store again (its copy may be stale: a sequencer has
just activated a new epoch) and is refused only if the store has not issued it.  That
read starts after the request arrived: a read already in flight may predate the epoch.

Reads run in a thread of their own; concurrent reads of one log are shared, and the reads
that queue while one is in the store go to it together as the next one (a node that
receives the first STOREs of thousands of logs reads their epochs in a few batches, not
one store round trip per log).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ldcore.logtable import LogTable

__all__ = ["EpochBound"]


class EpochBound:
    """The epochs of each log the epoch store has issued, as last read.

    Parameters
    ----------
    loop : asyncio event loop
    read_epochs : callable
        ``read_epochs(log_ids) -> {log_id: epoch}``: the logs' current epochs in the store
        (a log the store does not know may be left out: epoch 0); blocking, called in
        the bound's thread.  It may raise ``LogDeviceError`` (store unreachable), which
        ``refresh`` passes on to every log of that read.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop,
                 read_epochs: Callable[[list[int]], Mapping[int, int]]) -> None:
        self._loop = loop
        self._read_epochs = read_epochs
        self._known = LogTable()  # log -> the newest epoch known issued (compact per log)
        self._reads: dict[int, asyncio.Future[int]] = {}  # log -> its read, queued or out
        self._queued: dict[int, asyncio.Future[int]] = {}  # the next read's logs
        self._reading = False  # a read is in the store
        self._exec = ThreadPoolExecutor(1, thread_name_prefix="epoch-bound")

    def admits(self, log_id: int, epoch: int) -> bool:
        """Whether the store had issued ``epoch`` of ``log_id`` when last read (no I/O)."""
        return epoch <= self._known.get(log_id, 0, 0)

    async def refresh(self, log_id: int) -> int:
        """Read the log's epoch from the store again (joining a read of it queued or in
        flight); the epoch now known."""
        fut = self._reads.get(log_id)
        return await self._learn(log_id, fut if fut is not None else self._start(log_id))

    async def fresh(self, log_id: int) -> int:
        """The log's epoch from a read of the store that starts after this call (one
        already in flight may have read the store before a new epoch was issued: the new
        read queues behind it)."""
        return await self._learn(log_id, self._start(log_id))

    async def _learn(self, log_id: int, read: asyncio.Future[int]) -> int:
        epoch = await asyncio.shield(read)
        # Learned here, not in a done callback: those may run after the awaiters resume.
        known = max(self._known.get(log_id, 0, 0), epoch)
        self._known.set(log_id, 0, known)
        return known

    def _start(self, log_id: int) -> asyncio.Future[int]:
        """A read of the log that starts after this call: in the next batch."""
        fut = self._queued.get(log_id)
        if fut is None:
            fut = self._queued[log_id] = self._reads[log_id] = self._loop.create_future()
            if not self._reading:
                self._send()
        return fut

    def _send(self) -> None:
        batch, self._queued = self._queued, {}
        self._reading = True
        done = self._loop.run_in_executor(self._exec, self._read_epochs, list(batch))
        done.add_done_callback(lambda d: self._landed(batch, d))

    def _landed(self, batch: dict[int, asyncio.Future[int]], done: asyncio.Future[Any]
                ) -> None:
        self._reading = False
        error = done.exception() if not done.cancelled() else asyncio.CancelledError()
        epochs = done.result() if error is None else {}
        for log_id, fut in batch.items():
            if self._reads.get(log_id) is fut:
                del self._reads[log_id]
            if fut.done():
                continue
            if error is not None:
                fut.set_exception(error)
            else:
                fut.set_result(int(epochs.get(log_id, 0)))
        if self._queued:
            self._send()

    async def admits_fresh(self, log_id: int, epoch: int) -> bool:
        """``admits``, after reading the store again (``fresh``) if the copy held says
        no."""
        return self.admits(log_id, epoch) or epoch <= await self.fresh(log_id)

    def close(self) -> None:
        self._exec.shutdown(wait=True)
