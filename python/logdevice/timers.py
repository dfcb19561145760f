"""Deadlines of many objects on one event-loop timer.

A node's sequencers and a reader's streams each want a wake-up at their next deadline,
and move it after nearly every event.  A loop timer per object (``call_at``, then
``cancel`` when the deadline comes sooner) costs a timer handle, and on uvloop a libuv
timer, each time; with thousands of logs that was a sixth of a reader's CPU.
``DeadlineTimers`` keeps the deadlines in a heap and one loop timer at the earliest.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["DeadlineTimers"]

K = TypeVar("K", bound=Hashable)


class DeadlineTimers(Generic[K]):
    """Calls ``fire(key)`` once the loop's time reaches the deadline armed for ``key``.

    A key has at most one deadline: ``arm`` keeps the earlier of the one armed and the
    new one (a key woken early re-arms itself), ``cancel`` forgets it.  Each key fires
    once per deadline; ``fire`` may arm or cancel any key.  Loop thread only.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, fire: Callable[[K], object]) -> None:
        self.loop = loop
        self._fire = fire
        self._at: dict[K, float] = {}  # key -> its armed deadline
        # (deadline, tie-break, key); entries whose deadline is no longer the key's are
        # skipped when they come up (cancelled, or moved sooner).
        self._heap: list[tuple[float, int, K]] = []
        self._order = itertools.count()
        self._handle: asyncio.TimerHandle | None = None
        self._handle_at = 0.0

    def __len__(self) -> int:
        return len(self._at)

    def deadline(self, key: K) -> float | None:
        """The deadline armed for ``key`` (loop time), or None."""
        return self._at.get(key)

    def arm(self, key: K, when: float) -> None:
        """Wake ``key`` at ``when`` (loop time) unless it is armed for sooner."""
        armed = self._at.get(key)
        if armed is not None and armed <= when:
            return
        self._at[key] = when
        heapq.heappush(self._heap, (when, next(self._order), key))
        if len(self._heap) > 2 * len(self._at) + 64:
            self._compact()
        if self._handle is None or when < self._handle_at:
            self._schedule(when)

    def cancel(self, key: K) -> None:
        self._at.pop(key, None)

    def close(self) -> None:
        """Forget every deadline."""
        self._at.clear()
        self._heap.clear()
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _schedule(self, when: float) -> None:
        if self._handle is not None:
            self._handle.cancel()
        self._handle_at = when
        self._handle = self.loop.call_at(when, self._on_timer)

    def _on_timer(self) -> None:
        # Due: everything up to now, and up to the deadline this timer was set for (a
        # loop may run a timer a little early: uvloop counts whole milliseconds).
        limit = max(self.loop.time(), self._handle_at)
        self._handle = None
        heap, at = self._heap, self._at
        due = []
        while heap and heap[0][0] <= limit:
            when, _, key = heapq.heappop(heap)
            if at.get(key) == when:
                del at[key]
                due.append(key)
        for key in due:
            self._fire(key)  # (it may arm keys: schedule and even compact)
        heap = self._heap
        while heap and at.get(heap[0][2]) != heap[0][0]:
            heapq.heappop(heap)  # stale: cancelled or moved
        if heap and (self._handle is None or heap[0][0] < self._handle_at):
            self._schedule(heap[0][0])

    def _compact(self) -> None:
        self._heap = [(when, next(self._order), key) for key, when in self._at.items()]
        heapq.heapify(self._heap)
