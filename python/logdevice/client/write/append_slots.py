"""How many records one client has in flight to one log, against the log's limit.

Both kinds of append count here: a BufferedWriter blob waits for one slot
(``acquire``), a batch of single-record appends takes what is free (``take``) and is
told when slots come back (``listen``).  Waiting blobs are served first, in order, so a
busy stream of small appends cannot starve them.  Loop side only.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

from logdevice.errors import TimedOutError

__all__ = ["AppendSlots"]


class AppendSlots:
    """``limit`` slots of one log (see the module docstring)."""

    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self.used = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._listeners: list[Callable[[], None]] = []

    @property
    def idle(self) -> bool:
        """Nothing holds a slot or waits for one."""
        return self.used == 0 and not self._waiters

    @property
    def free(self) -> int:
        """Slots free for a batch now (none while blobs are waiting for one)."""
        return 0 if self._waiters else max(0, self.limit - self.used)

    def take(self, n: int) -> None:
        """Take ``n`` slots (at most ``free``)."""
        self.used += n

    async def acquire(self, timeout: float) -> bool:
        """Take one slot, waiting at most ``timeout`` seconds (``TimedOutError``).
        Whether it had to wait."""
        if not self._waiters and self.used < self.limit:
            self.used += 1
            return False
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await asyncio.wait_for(asyncio.shield(waiter), timeout)
        except BaseException as exc:  # timed out or cancelled: give back what was granted
            if waiter.done() and not waiter.cancelled():
                self.release(1)
            else:
                waiter.cancel()
                self._waiters.remove(waiter)
            if isinstance(exc, TimeoutError):
                raise TimedOutError(message="no room among the appends in flight") from None
            raise
        return True

    def release(self, n: int) -> None:
        """``n`` slots come back: to the waiting blobs first, then to the listeners."""
        self.used -= n
        while self._waiters and self.used < self.limit:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self.used += 1
                waiter.set_result(None)
        if self.used < self.limit:
            for listener in self._listeners:
                listener()

    def listen(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` whenever slots come back."""
        self._listeners.append(callback)
