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

Reads run in a thread of their own; concurrent reads of one log are shared.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

__all__ = ["EpochBound"]


class EpochBound:
    """The epochs of each log the epoch store has issued, as last read.

    Parameters
    ----------
    loop : asyncio event loop
    read_epoch : callable
        ``read_epoch(log_id) -> int``: the log's current epoch in the store (0 if the
        store does not know the log); blocking, called in the bound's thread.  It may
        raise ``LogDeviceError`` (store unreachable), which ``refresh`` passes on.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop,
                 read_epoch: Callable[[int], int]) -> None:
        self._loop = loop
        self._read_epoch = read_epoch
        self._known: dict[int, int] = {}
        self._reads: dict[int, asyncio.Future[int]] = {}
        self._exec = ThreadPoolExecutor(1, thread_name_prefix="epoch-bound")

    def admits(self, log_id: int, epoch: int) -> bool:
        """Whether the store had issued ``epoch`` of ``log_id`` when last read (no I/O)."""
        return epoch <= self._known.get(log_id, 0)

    async def refresh(self, log_id: int, *, not_joining: asyncio.Future[int] | None = None
                      ) -> int:
        """Read the log's epoch from the store again (joining a read of it in flight,
        unless that is ``not_joining`` or already over); the epoch now known."""
        fut = self._reads.get(log_id)
        if fut is None or fut is not_joining or fut.done():
            fut = self._start(log_id)
        epoch = await asyncio.shield(fut)
        # Learned here, not in a done callback: those may run after the awaiters resume.
        self._known[log_id] = max(self._known.get(log_id, 0), epoch)
        return self._known[log_id]

    def _start(self, log_id: int) -> asyncio.Future[int]:
        fut = self._reads[log_id] = self._loop.run_in_executor(self._exec, self._read_epoch,
                                                                log_id)

        def forget(done: asyncio.Future[int]) -> None:
            if self._reads.get(log_id) is done:
                del self._reads[log_id]

        fut.add_done_callback(forget)
        return fut

    async def fresh(self, log_id: int) -> int:
        """The log's epoch from a read of the store that started after this call (one
        already in flight may have read the store before a new epoch was issued)."""
        earlier = self._reads.get(log_id)
        if earlier is not None and not earlier.done():
            with contextlib.suppress(Exception):
                await asyncio.shield(earlier)
        return await self.refresh(log_id, not_joining=earlier)

    async def admits_fresh(self, log_id: int, epoch: int) -> bool:
        """``admits``, after reading the store again (``fresh``) if the copy held says
        no."""
        return self.admits(log_id, epoch) or epoch <= await self.fresh(log_id)

    def close(self) -> None:
        self._exec.shutdown(wait=True)
