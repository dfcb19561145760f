"""Natural batching of single-record appends (``Client.append`` / ``append_async``).

User threads hand appends to ``AppendBatcher.submit``; the client loop gathers them per
log and sends what has queued as one APPEND_BATCH frame, which the sequencer takes in
one step (consecutive LSNs) and answers with one APPENDED_BATCH.  Nothing waits for a
batch to fill: an append that finds its log idle leaves at once, alone.  A log has at
most ``FRAMES_IN_FLIGHT`` frames out; appends that arrive meanwhile queue and leave
together, so under load the batches grow by themselves (Kafka's producer and LogDevice's
append batching work the same way).  ``append_linger`` (seconds) makes appends wait
that long for company instead (at most half the oldest one's timeout), for users who
prefer bigger batches to the lowest latency.  The batches of one loop turn leave together:
those of different logs whose sequencers share a node travel as the parts of one
APPEND_LOGS frame (``ClientCore.append_batches``), each still answered on its own.

Limits per log: at most ``min(max_appends_in_flight, the log group's
max_writes_in_flight)`` records in flight, BufferedWriter blobs included
(``AppendSlots``; the rest wait here, in order), and at most ``append_batch_bytes`` of
payload per frame.  A batch's deadline is its earliest record's.  Retries (routing,
refusals before an LSN was taken) are ``ClientCore``'s.

Threads: ``submit`` and ``close`` may be called from any thread; everything else runs
on the client loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import threading
from collections import deque
from typing import Any

from logdevice.client.core import ClientCore
from logdevice.client.net.loop import LoopThread
from logdevice.client.write.append_slots import AppendSlots
from logdevice.errors import E, LogDeviceError, TimedOutError

__all__ = ["AppendBatcher"]

log = logging.getLogger(__name__)

#: APPEND_BATCH frames one log may have in flight.  Appends that arrive meanwhile queue
#: and leave together when one comes back: under load the batches grow by themselves.
#: Two, not one, so the sequencer has the next batch while the client takes in the last
#: answer (measured: one log, 64 appends in flight, 15 k/s with one, 19 k/s with two; and
#: 17-18 k/s without a limit, where frames of 1-3 records cost their fixed price each).
FRAMES_IN_FLIGHT = 2


class _Entry:
    __slots__ = ("data", "checksum", "deadline", "leaves_at", "future")

    def __init__(self, data: Any, checksum: int, deadline: float, leaves_at: float,
                 future: concurrent.futures.Future[int]) -> None:
        self.data = data
        self.checksum = checksum
        self.deadline = deadline  # loop time
        self.leaves_at = leaves_at  # loop time its linger ends (a full frame leaves sooner)
        self.future = future


class _Frame:
    """One APPEND_BATCH frame of a log: its records' slots, and whether it was answered."""

    __slots__ = ("slots", "records", "answered")

    def __init__(self, slots: AppendSlots, records: int) -> None:
        self.slots = slots
        self.records = records
        self.answered = False


class _LogQueue:
    """One log's appends not yet sent, and its frames whose slots are still held."""

    __slots__ = ("log_id", "entries", "bytes", "slots", "linger", "frames", "held")

    def __init__(self, log_id: int) -> None:
        self.log_id = log_id
        self.entries: deque[_Entry] = deque()
        self.bytes = 0
        self.slots: AppendSlots | None = None  # the log's in-flight limit, once known
        self.linger: asyncio.TimerHandle | None = None
        self.frames = 0  # APPEND_BATCH frames in flight
        self.held: deque[_Frame] = deque()  # frames holding slots, in send order


class AppendBatcher:
    """Gathers a client's single-record appends into APPEND_BATCH frames, per log.

    Parameters
    ----------
    loop : LoopThread
        The client's loop.
    core : ClientCore
        Sends the batches (routing, retries) and holds the config and settings.
    """

    def __init__(self, loop: LoopThread, core: ClientCore) -> None:
        self._loop = loop
        self._core = core
        self._lock = threading.Lock()
        self._inbox: list[tuple[int, Any, int, float, concurrent.futures.Future[int]]] = []
        self._wake_scheduled = False
        self._closed = False
        self._queues: dict[int, _LogQueue] = {}
        self._draining = False  # in ``_drain``: it flushes the batches it made itself
        # Batches of this loop turn not handed to the core yet (``_flush``): a frame's
        # queue, the frame, its entries, those still live, its append_batch arguments.
        self._outgoing: list[tuple[_LogQueue, _Frame, list[_Entry], list[_Entry],
                                   tuple[int, list[Any], list[int] | None, float]]] = []

    # ------------------------------------------------------------------ any thread

    def submit(self, log_id: int, data: Any, checksum: int,
               timeout: float) -> concurrent.futures.Future[int]:
        """Queue one checked append (``checksum``: its crc32c when the client sends
        checksums); the future of its LSN."""
        fut: concurrent.futures.Future[int] = concurrent.futures.Future()
        with self._lock:
            if self._closed:
                raise LogDeviceError(E.SHUTDOWN, "the client is closed")
            self._inbox.append((log_id, data, checksum, timeout, fut))
            wake = not self._wake_scheduled
            self._wake_scheduled = True
        if wake:
            self._loop.call_soon(self._drain)
        return fut

    def close(self, exc: LogDeviceError) -> None:
        """Refuse new appends; fail those not sent yet with ``exc``.  (Batches in flight
        end with the loop: cancelled, they fail with SHUTDOWN.)"""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            items, self._inbox = self._inbox, []
        for *_, fut in items:
            _fail(fut, exc)
        self._loop.call_soon(self._fail_queued, exc)

    # ------------------------------------------------------------------ loop side

    def _drain(self) -> None:
        with self._lock:
            items, self._inbox = self._inbox, []
            self._wake_scheduled = False
        self._draining = True
        try:
            self._take_in(items)
        finally:
            self._draining = False
        self._flush()  # the new appends' batches leave in this turn, not the next

    def _take_in(self, items: list[tuple[int, Any, int, float,
                                         concurrent.futures.Future[int]]]) -> None:
        now = self._loop.loop.time()
        linger = self._core.settings.append_linger
        touched: dict[int, tuple[_LogQueue, AppendSlots]] = {}
        stats = self._core.stats
        for log_id, data, checksum, timeout, fut in items:
            if not fut.set_running_or_notify_cancel():
                continue
            known = touched.get(log_id)
            if known is None:
                q = self._queues.get(log_id)
                if q is None:
                    q = self._queues[log_id] = _LogQueue(log_id)
                try:
                    known = touched[log_id] = (q, self._slots(q))
                except LogDeviceError as exc:  # the log was removed a moment ago
                    fut.set_exception(exc)
                    continue
            q, slots = known
            if len(q.entries) >= slots.free:  # no room for it in flight: it waits
                stats["appends_waited"] += 1
            # A linger takes at most half the append's time.
            leaves_at = now + min(linger, timeout / 2) if linger > 0 else now
            q.entries.append(_Entry(data, checksum, now + timeout, leaves_at, fut))
            q.bytes += len(data)
        for q, _ in touched.values():
            self._send_ready(q)

    def _slots(self, q: _LogQueue) -> AppendSlots:
        """The in-flight limit of ``q``'s log (a new one when the config changed it)."""
        slots = self._core.append_slots(q.log_id)
        if slots is not q.slots:
            q.slots = slots
            slots.listen(functools.partial(self._send_ready, q))
        return slots

    def _send_ready(self, q: _LogQueue, lingered: bool = False) -> None:
        """Send batches from ``q`` while it has records and there is room in flight: a
        full frame at once, a partial one when its oldest record's linger has ended
        (``lingered``: the linger timer says the head's has)."""
        if q.linger is not None:
            q.linger.cancel()
            q.linger = None
        if not q.entries:
            return
        loop = self._loop.loop
        now = loop.time()
        max_bytes = max(1, self._core.settings.append_batch_bytes)
        slots = self._slots(q)
        while q.entries and slots.free > 0 and q.frames < FRAMES_IN_FLIGHT:
            if q.bytes < max_bytes and q.entries[0].leaves_at > now and not lingered:
                q.linger = loop.call_at(q.entries[0].leaves_at, self._lingered, q)
                return
            lingered = False  # it covered the head only; the rest may still wait
            batch = self._take(q, slots.free, max_bytes)
            slots.take(len(batch))
            q.frames += 1
            frame = _Frame(slots, len(batch))
            q.held.append(frame)
            self._send(q, frame, batch)

    def _lingered(self, q: _LogQueue) -> None:
        q.linger = None
        self._send_ready(q, lingered=True)

    @staticmethod
    def _take(q: _LogQueue, count: int, max_bytes: int) -> list[_Entry]:
        """Up to ``count`` entries from the head of ``q`` holding at most ``max_bytes``
        (always at least one)."""
        batch = [q.entries.popleft()]
        size = len(batch[0].data)
        while q.entries and len(batch) < count:
            nxt = len(q.entries[0].data)
            if size + nxt > max_bytes:
                break
            batch.append(q.entries.popleft())
            size += nxt
        q.bytes -= size
        return batch

    def _send(self, q: _LogQueue, frame: _Frame, batch: list[_Entry]) -> None:
        """Hand ``batch`` (its records still within their deadlines) to the core; the
        frame's slots come back in ``_sent``."""
        loop = self._loop.loop
        now = loop.time()
        live = batch
        deadline = min(e.deadline for e in batch) if len(batch) > 1 else batch[0].deadline
        if deadline <= now:
            live = []
            for e in batch:
                if e.deadline > now:
                    live.append(e)
                else:
                    _fail(e.future, TimedOutError(
                        message=f"append to log {q.log_id}: still waiting in the client for "
                                f"room among the appends in flight at its deadline"))
            if not live:  # (not at once: _send_ready is sending from q right now)
                loop.call_soon(self._frame_done, q, frame)
                return
            deadline = min(e.deadline for e in live)
        checksum = self._core.settings.append_checksum
        if len(live) == 1:
            e = live[0]
            payloads = [e.data]
            checksums = [e.checksum] if checksum else None
        else:
            payloads = [e.data for e in live]
            checksums = [e.checksum for e in live] if checksum else None
        self._outgoing.append((q, frame, batch, live,
                               (q.log_id, payloads, checksums, deadline - now)))
        if len(self._outgoing) == 1 and not self._draining:
            loop.call_soon(self._flush)  # (``_drain`` flushes when it is done)

    def _flush(self) -> None:
        """Hand the loop turn's batches to the core together: those of different logs
        whose sequencers share a node leave in one frame (``append_batches``)."""
        outgoing, self._outgoing = self._outgoing, []
        if not outgoing:
            return
        try:
            answers = self._core.append_batches([call for *_, call in outgoing])
        except Exception as exc:  # nobody may wait for ever, even on a bug
            log.exception("append batches could not start")
            for q, frame, batch, _, _ in outgoing:
                for e in batch:
                    _fail(e.future, exc)
                self._frame_done(q, frame)
            return
        for (q, frame, batch, live, _), answer in zip(outgoing, answers, strict=True):
            answer.add_done_callback(functools.partial(self._sent, q, frame, batch, live))

    def _sent(self, q: _LogQueue, frame: _Frame, batch: list[_Entry],
              live: list[_Entry], answer: asyncio.Future[list[Any]]) -> None:
        """``live``'s outcomes are in ``answer``: settle each record's future."""
        try:
            if answer.cancelled():  # the client is closing
                shut = LogDeviceError(E.SHUTDOWN, "the client was closed")
                for e in live:
                    _fail(e.future, shut)
                return
            exc = answer.exception()
            if exc is not None:  # nobody may wait for ever, even on a bug
                for e in live:
                    _fail(e.future, exc)
                return
            for e, outcome in zip(live, answer.result(), strict=True):
                if isinstance(outcome, LogDeviceError):
                    _fail(e.future, outcome)
                else:
                    _succeed(e.future, outcome)
        finally:
            self._frame_done(q, frame)

    def _frame_done(self, q: _LogQueue, frame: _Frame) -> None:
        """``frame`` was answered.  Slots come back in send order: a frame answered
        before an earlier one keeps its slots until that one is answered too.  The
        sequencer acks records out of LSN order but frees its window in LSN order, so a
        frame's records may hold the window until every earlier record is acked; slots
        given back sooner would let the client overfill the window (refusals, then
        retries that land after later records)."""
        q.frames -= 1
        frame.answered = True
        held = q.held
        while held and held[0].answered:  # (one release per slots object: the frames
            slots = held[0].slots         # that may leave now see every slot back)
            records = 0
            while held and held[0].answered and held[0].slots is slots:
                records += held.popleft().records
            slots.release(records)  # its listener sends what queued meanwhile
        if q.frames < FRAMES_IN_FLIGHT and q.entries:
            self._send_ready(q)  # a frame may go with the slots still free
        self._forget_if_idle(q)

    def _forget_if_idle(self, q: _LogQueue) -> None:
        """Drop the queue of a log with nothing queued or in flight, and its slots with
        it (both are made again by its next append): a client that wrote to many logs
        keeps no objects for the idle ones, which every full collection would scan."""
        if q.entries or q.frames or q.held or q.linger is not None or q.slots is None:
            return
        if self._core.release_append_slots(q.log_id, q.slots) \
                and self._queues.get(q.log_id) is q:
            del self._queues[q.log_id]

    def _fail_queued(self, exc: LogDeviceError) -> None:
        for q in self._queues.values():
            if q.linger is not None:
                q.linger.cancel()
                q.linger = None
            while q.entries:
                _fail(q.entries.popleft().future, exc)
            q.bytes = 0


def _fail(fut: concurrent.futures.Future[int], exc: BaseException) -> None:
    if not fut.done():
        fut.set_exception(exc)


def _succeed(fut: concurrent.futures.Future[int], lsn: int) -> None:
    # Once per append: a try costs nothing, a done() check takes the future's lock.
    try:  # noqa: SIM105  (contextlib.suppress costs a context manager per append)
        fut.set_result(lsn)
    except concurrent.futures.InvalidStateError:  # already failed (the client closed)
        pass
