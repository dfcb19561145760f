"""The bounded hand-off between a reader's loop side and the threads (or tasks) reading.

The loop side polls each log's ``ReadStream`` into this queue as columnar segments (one
``ReadBatch`` of one log: rows plus the gaps among them); readers take them out either as
``DataRecord``/``GapRecord`` objects (``take_items``) or as one ``ReaderBatch`` of columns
(``take_batch``).  Both keep LSN order within a log; logs interleave in arrival order.

Back-pressure: the queue holds at most ``max_records`` rows and about ``max_bytes`` of
payload.  When it is full the loop side stops polling its streams; a stream that is not
polled does not slide its window, so the storage nodes stop sending.  Once a reader has
taken the queue below half of both limits, ``on_room`` is called (from the reader's
thread) so the loop side polls again.

Waiting: the logic of ``wait`` and ``gather`` exists once, as generators that say when
and how long to wait (``_waits``, ``gathering``); the thread flavour (``wait``,
``gather``) and the asyncio flavour (``wait_async``, ``gather_async``) only do the
waiting.  A waiting thread blocks on a lock of its own, an asyncio task on a future of
its loop (resolved through ``call_soon_threadsafe``); ``_wake`` releases every registered
waiter.  Every wait is bounded by the caller.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import numpy as np

from logdevice.client.read.batch import ReaderBatch
from logdevice.readstream import ReadBatch
from logdevice.record_columns import RecordColumns
from logdevice.records import DataRecord, GapRecord

__all__ = ["ReaderQueue"]

Item = DataRecord | GapRecord


class _ThreadWaiter:
    """A thread's wait: a lock taken at birth, released by ``wake``."""

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()

    def wake(self) -> None:
        self._lock.release()

    def wait(self, timeout: float | None) -> None:
        self._lock.acquire(True, -1 if timeout is None else timeout)


class _TaskWaiter:
    """An asyncio task's wait: a future of its loop, resolved from any thread."""

    __slots__ = ("_loop", "_fut")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._fut: asyncio.Future[None] = loop.create_future()

    def wake(self) -> None:
        with contextlib.suppress(RuntimeError):  # that loop is closed
            self._loop.call_soon_threadsafe(_resolve, self._fut)

    async def wait(self, timeout: float | None) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._fut, timeout)


W = TypeVar("W", _ThreadWaiter, _TaskWaiter)


class _Segment:
    """Part of one log's stream: rows ``[row, n)`` and gaps ``[gpos, len(gaps))``."""

    __slots__ = ("log_id", "rows", "lsns", "offsets", "gaps", "row", "gpos")

    def __init__(self, log_id: int, batch: ReadBatch) -> None:
        self.log_id = log_id
        self.rows: RecordColumns = batch
        self.lsns = batch.lsns
        self.offsets = batch.offsets
        self.gaps: list[GapRecord] = batch.gaps
        self.row = 0
        self.gpos = 0

    def items_left(self) -> int:
        return len(self.lsns) - self.row + len(self.gaps) - self.gpos

    def bytes_between(self, a: int, b: int) -> int:
        return int(self.offsets[b]) - int(self.offsets[a]) if b > a else 0


class ReaderQueue:
    """Deliverables of one reader, bounded, thread-safe.

    Parameters
    ----------
    max_records, max_bytes : int
        Limits (rows, payload bytes) above which the loop side stops polling.
    on_room : callable, optional
        Called without arguments, from a reading thread, when a full queue has room again
        (may be set later, as the attribute ``on_room``).
    """

    def __init__(self, max_records: int, max_bytes: int,
                 on_room: Callable[[], None] | None = None) -> None:
        self.max_records = max(1, int(max_records))
        self.max_bytes = max(1, int(max_bytes))
        self.on_room = on_room
        self._lock = threading.Lock()
        self._segs: deque[_Segment] = deque()
        self._waiters: list[_ThreadWaiter | _TaskWaiter] = []  # woken by _wake
        self.rows = 0
        self.gaps = 0
        self.nbytes = 0
        self.active: set[int] = set()  # logs being read (not yet at until_lsn)
        self.starved = False  # the loop side left data behind for lack of room
        self.error: BaseException | None = None
        # Logs whose stream ended in an error (e.g. no node reachable): the next read raises
        # it, once; the other logs read on.
        self.log_errors: dict[int, BaseException] = {}
        self.closed = False

    # ------------------------------------------------------------------ producer (loop)

    def room(self) -> int:
        """Rows the loop side may add now (0: full)."""
        with self._lock:
            if self.nbytes >= self.max_bytes:
                return 0
            return max(0, self.max_records - self.rows)

    def put(self, log_id: int, batch: ReadBatch) -> None:
        """Add one log's ``ReadBatch`` (rows and gaps) if it holds anything."""
        n, g = len(batch.lsns), len(batch.gaps)
        if n == 0 and g == 0:
            return
        seg = _Segment(log_id, batch)
        with self._lock:
            if log_id not in self.active:
                return  # stopped meanwhile
            self._segs.append(seg)
            self.rows += n
            self.gaps += g
            self.nbytes += seg.bytes_between(0, n)
            self._wake()

    def hold(self) -> bool:
        """The loop side leaves data behind for lack of room.  Returns True if a reader
        made room meanwhile (poll again now); else ``on_room`` will be called later."""
        with self._lock:
            if self.rows <= self.max_records // 2 and self.nbytes <= self.max_bytes // 2:
                return True
            self.starved = True
            return False

    @property
    def waiters(self) -> list[Any]:
        """The threads and tasks waiting in ``wait``/``wait_async`` now (a copy)."""
        with self._lock:
            return list(self._waiters)

    def has_more(self, log_id: int) -> bool:
        """Whether ``read`` may still return something of ``log_id``: it is being read,
        or what it delivered waits here."""
        with self._lock:
            return log_id in self.active or any(seg.log_id == log_id for seg in self._segs)

    def log_done(self, log_id: int) -> None:
        """Nothing more will come for ``log_id`` (until_lsn reached)."""
        with self._lock:
            self.active.discard(log_id)
            self._wake()

    def log_failed(self, log_id: int, exc: BaseException) -> None:
        """``log_id``'s stream ended with ``exc``: it is no longer read, and the next
        ``take_*`` raises ``exc`` (once; what other logs delivered stays queued)."""
        with self._lock:
            if log_id not in self.active:
                return  # stopped meanwhile
            self.active.discard(log_id)
            self.log_errors[log_id] = exc
            self._wake()

    def fail(self, exc: BaseException) -> None:
        """The loop side broke: readers get ``exc``."""
        with self._lock:
            self.error = exc
            self._wake()

    def _wake(self) -> None:
        """Release every waiter (called holding the lock)."""
        waiters, self._waiters = self._waiters, []
        for w in waiters:
            w.wake()

    # ------------------------------------------------------------------ bookkeeping

    def add_log(self, log_id: int) -> None:
        with self._lock:
            self.active.add(log_id)

    def discard_log(self, log_id: int) -> None:
        """Forget ``log_id``: its queued rows and gaps are dropped."""
        with self._lock:
            self.active.discard(log_id)
            self.log_errors.pop(log_id, None)
            keep: deque[_Segment] = deque()
            for seg in self._segs:
                if seg.log_id == log_id:
                    n = len(seg.lsns)
                    self.rows -= n - seg.row
                    self.gaps -= len(seg.gaps) - seg.gpos
                    self.nbytes -= seg.bytes_between(seg.row, n)
                else:
                    keep.append(seg)
            self._segs = keep
            self._wake()
        self._maybe_room()

    def close(self) -> None:
        with self._lock:
            self.closed = True
            self.active.clear()
            self.log_errors.clear()
            self._segs.clear()
            self.rows = self.gaps = self.nbytes = 0
            self._wake()

    # ------------------------------------------------------------------ consumer

    def _ready(self, count: int, any_data: bool) -> bool:
        avail = self.rows + self.gaps
        if avail >= count or (any_data and avail > 0):
            return True
        return (not self.active or self.error is not None or bool(self.log_errors)
                or self.closed)

    def _waits(self, count: int, any_data: bool, timeout: float | None,
               new_waiter: Callable[[], W]) -> Iterator[tuple[W, float | None]]:
        """The wait both flavours share: until ``count`` items are queued (one, with
        ``any_data``), every log is done, or ``timeout`` passed, yields ``(waiter, left)``:
        the caller blocks on ``waiter`` (registered, so ``_wake`` releases it) for at most
        ``left`` seconds (None: no limit), then resumes this to look again."""
        deadline = None if timeout is None else time.monotonic() + timeout
        waiter: W | None = None
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            with self._lock:
                if waiter is not None and waiter in self._waiters:
                    self._waiters.remove(waiter)  # it timed out: _wake did not take it
                if self._ready(count, any_data) or (left is not None and left <= 0):
                    return
                waiter = new_waiter()
                self._waiters.append(waiter)
            yield waiter, left

    def wait(self, count: int, any_data: bool, timeout: float | None) -> None:
        """Block until ``count`` items are queued (one, with ``any_data``), every log is
        done, or ``timeout`` seconds passed (None: no limit; 0: do not wait)."""
        for waiter, left in self._waits(count, any_data, timeout, _ThreadWaiter):
            waiter.wait(left)

    async def wait_async(self, count: int, any_data: bool, timeout: float | None) -> None:
        """``wait`` for an asyncio task (on the caller's loop)."""
        loop = asyncio.get_running_loop()
        for waiter, left in self._waits(count, any_data, timeout, lambda: _TaskWaiter(loop)):
            await waiter.wait(left)

    def _finished(self) -> bool:
        with self._lock:
            done = not self.active or self.error is not None or self.closed
            return done and self.rows + self.gaps == 0

    def gathering(self, parts: list[Any], count: int, any_data: bool, timeout: float | None,
                  take: Callable[[int], tuple[Any, int, bool]]) -> Iterator[float | None]:
        """The gathering both flavours share: takes parts into ``parts`` until ``count``
        units arrived (``any_data``: once anything did), every log is done, or
        ``timeout`` passed.  ``take(n)`` takes at most ``n`` units and returns ``(part,
        units, anything)``.  Parts are taken as they come, so ``count`` may exceed what
        the queue can hold.  Whenever the queue is empty it yields ``left``: the caller
        waits for anything (``wait(1, True, left)``) and resumes it."""
        got = 0
        anything = False
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if self.rows + self.gaps == 0:  # else there is something to take now
                yield left
            part, k, some = take(count - got)
            parts.append(part)
            got += k
            anything = anything or some
            if got >= count or (any_data and anything) or left == 0.0 or self._finished():
                return

    def gather(self, count: int, any_data: bool, timeout: float | None,
               take: Callable[[int], tuple[Any, int, bool]]) -> list[Any]:
        """The parts ``gathering`` takes, waiting in this thread."""
        parts: list[Any] = []
        for left in self.gathering(parts, count, any_data, timeout, take):
            self.wait(1, True, left)
        return parts

    async def gather_async(self, count: int, any_data: bool, timeout: float | None,
                           take: Callable[[int], tuple[Any, int, bool]]) -> list[Any]:
        """``gather`` for an asyncio task."""
        parts: list[Any] = []
        for left in self.gathering(parts, count, any_data, timeout, take):
            await self.wait_async(1, True, left)
        return parts

    def take_items_part(self, count: int) -> tuple[list[Item], int, bool]:
        items = self.take_items(count)
        return items, len(items), bool(items)

    def take_batch_part(self, max_records: int) -> tuple[ReaderBatch, int, bool]:
        b = self.take_batch(max_records)
        return b, len(b), bool(len(b) or b.gaps)

    def _check(self) -> None:
        if self.error is not None:
            raise self.error
        if self.log_errors:
            log_id = next(iter(self.log_errors))
            raise self.log_errors.pop(log_id)

    def take_items(self, count: int) -> list[Item]:
        """Up to ``count`` records and gaps, oldest first."""
        out: list[Item] = []
        with self._lock:
            self._check()
            segs = self._segs
            while segs and len(out) < count:
                seg = segs[0]
                self._take_from(seg, count - len(out), out)
                if seg.items_left() == 0:
                    segs.popleft()
        self._maybe_room()
        return out

    def _take_from(self, seg: _Segment, want: int, out: list[Item]) -> None:
        lsns, gaps = seg.lsns, seg.gaps
        n = len(lsns)
        while want > 0 and seg.items_left():
            if seg.gpos < len(gaps) and (seg.row >= n
                                         or gaps[seg.gpos].lo <= int(lsns[seg.row])):
                out.append(gaps[seg.gpos])
                seg.gpos += 1
                self.gaps -= 1
                want -= 1
                continue
            end = n
            if seg.gpos < len(gaps):
                end = int(np.searchsorted(lsns, np.uint64(gaps[seg.gpos].lo)))
            a = seg.row
            b = a + min(end - a, want)
            out.extend(seg.rows.data_records(seg.log_id, a, b))
            seg.row = b
            self.rows -= b - a
            self.nbytes -= seg.bytes_between(a, b)
            want -= b - a

    def take_batch(self, max_records: int) -> ReaderBatch:
        """Up to ``max_records`` rows (and the gaps among them) as one ``ReaderBatch``."""
        pieces: list[tuple[_Segment, int, int]] = []
        gaps: list[GapRecord] = []
        rows = 0
        with self._lock:
            self._check()
            segs = self._segs
            while segs and rows < max_records:
                seg = segs[0]
                n = len(seg.lsns)
                a = seg.row
                b = a + min(n - a, max_records - rows)
                if b >= n:
                    g_end = len(seg.gaps)
                else:
                    nxt = int(seg.lsns[b])
                    g_end = seg.gpos
                    while g_end < len(seg.gaps) and seg.gaps[g_end].lo < nxt:
                        g_end += 1
                if b > a:
                    pieces.append((seg, a, b))
                    self.nbytes -= seg.bytes_between(a, b)
                gaps.extend(seg.gaps[seg.gpos:g_end])
                self.gaps -= g_end - seg.gpos
                self.rows -= b - a
                rows += b - a
                seg.row, seg.gpos = b, g_end
                if seg.items_left() == 0:
                    segs.popleft()
                else:
                    break
        self._maybe_room()
        return _concat(pieces, gaps)

    def _maybe_room(self) -> None:
        with self._lock:
            if not self.starved or self.closed:
                return
            if self.rows > self.max_records // 2 or self.nbytes > self.max_bytes // 2:
                return
            self.starved = False
        if self.on_room is not None:
            self.on_room()


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def _concat(pieces: list[tuple[_Segment, int, int]], gaps: list[GapRecord]) -> ReaderBatch:
    if len(pieces) == 1:  # a tailing reader's usual take: one segment, often all of it
        seg, a, b = pieces[0]
        rows = seg.rows if a == 0 and b == len(seg.lsns) else seg.rows.slice(a, b)
        return ReaderBatch.of(np.full(b - a, seg.log_id, np.uint64), rows, gaps)
    log_ids = np.repeat(np.array([seg.log_id for seg, _, _ in pieces], np.uint64),
                        [b - a for _, a, b in pieces])
    rows = RecordColumns.concat([seg.rows if a == 0 and b == len(seg.lsns)
                                 else seg.rows.slice(a, b) for seg, a, b in pieces])
    return ReaderBatch.of(log_ids, rows, gaps)
