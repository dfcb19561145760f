"""Blobs of one log go on the wire in the order they were made.

A BufferedWriter sends each blob from its own task, and a task can be held up before it
writes its APPEND (connecting, waiting for the cluster view, backing off after a refused
attempt or a dropped connection), so without a rule a later blob could overtake an
earlier one and get a lower LSN although nothing failed.  The sequencer gives LSNs in
the order APPENDs arrive on a connection, so it is enough to write them in order.

Each blob takes a ticket (``take``) when its send starts; before an attempt is written
the blob waits (``turn``) until no earlier ticket of the log is waiting to be written;
``written`` / ``unwritten`` say where its attempt stands, ``done`` ends the ticket.  A
blob whose attempt was written and then came back for another try (refused before it
took an LSN, redirected, connection lost) is unwritten again, so the blobs behind it
wait for its new attempt: order is given up only where an attempt that was already on
the wire behind it was accepted first, i.e. only around a blob that failed and was
retried.  Loop side only.
"""

from __future__ import annotations

import asyncio
import heapq

__all__ = ["SendOrder"]


class SendOrder:
    """Tickets of one log's blobs (see the module docstring)."""

    def __init__(self) -> None:
        self._next = 0
        self._unwritten: set[int] = set()
        self._heap: list[int] = []  # the unwritten tickets; stale entries skipped lazily
        self._waiters: dict[int, asyncio.Future[None]] = {}
        self.active = 0  # tickets taken and not done

    def take(self) -> int:
        """A ticket for a new blob, behind every earlier one."""
        ticket = self._next
        self._next += 1
        self.active += 1
        self.unwritten(ticket)
        return ticket

    def _first_unwritten(self) -> int | None:
        heap = self._heap
        while heap and heap[0] not in self._unwritten:
            heapq.heappop(heap)
        return heap[0] if heap else None

    async def turn(self, ticket: int) -> None:
        """Wait until no earlier ticket is waiting to be written (cancel to stop)."""
        if self._first_unwritten() == ticket:
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters[ticket] = waiter
        try:
            await waiter
        finally:
            self._waiters.pop(ticket, None)

    def written(self, ticket: int) -> None:
        """``ticket``'s attempt is on the wire: the next ticket may go."""
        self._unwritten.discard(ticket)
        self._wake()

    def unwritten(self, ticket: int) -> None:
        """``ticket`` will be written again: tickets after it wait for that."""
        if ticket not in self._unwritten:
            self._unwritten.add(ticket)
            heapq.heappush(self._heap, ticket)

    def done(self, ticket: int) -> None:
        """``ticket`` ended (answered, failed or given up)."""
        self.active -= 1
        self._unwritten.discard(ticket)
        self._wake()

    def _wake(self) -> None:
        first = self._first_unwritten()
        if first is not None:
            waiter = self._waiters.get(first)
            if waiter is not None and not waiter.done():
                waiter.set_result(None)
