"""``Reader`` and ``AsyncReader``: reading logs.

    r = client.create_reader(max_logs=1)
    r.start_reading(log_id, from_lsn=ld.LSN_OLDEST, until_lsn=ld.LSN_MAX)
    items = r.read(100, timeout=1.0)         # DataRecord / GapRecord, in LSN order
    for item in r: ...                        # until every log reached its until_lsn
    batch = r.read_batch(100_000)             # columns (ReaderBatch), .to_arrow()

A reader reads each log from every storage node of its nodeset through one
``ReadStream`` (``logdevice.readstream``) on the client's loop (``read.core``); what the
streams deliver waits in a bounded queue (``read.queue``) for the application.  When
the application does not read, the queue fills, the streams stop sliding their windows
and the nodes stop sending.

``read`` semantics follow LogDevice's ``Reader::read``: ``timeout=None`` waits until
``count`` items are there (or every log is done); ``timeout=0`` takes what is there
now; otherwise waits at most ``timeout`` seconds.  After ``wait_only_when_no_data()`` a
read returns as soon as at least one item is there.  Nothing is waited for once no log
is being read.

``AsyncReader`` offers the same calls as coroutines (``await r.read(...)``,
``async for item in r``) for asyncio services.  Every call is written once, in
``_ReaderBase``; the two flavours differ only in how they wait:

- reads: the queue's ``gather``/``gather_async`` (one gathering logic, ``read.queue``)
  between the shared checks (``_begin_read``) and bookkeeping (``_forget_done``);
- the other calls are generators of steps (``_start_steps``, ``_stop_steps``...): each
  step (``_ON_LOOP``: a function to run on the client's loop, ``_AWAIT``: a coroutine
  to run there, ``_QUEUE``: a wait on the queue) is done by the flavour's ``_drive``
  (blocking the caller's thread) or ``_drive`` coroutine (awaiting the loop's future: no
  thread waits), which sends each result back.
"""

from __future__ import annotations

import contextlib
import gc
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Generator, Iterable, Iterator, Mapping
from typing import Any, TypeVar, Unpack

from logdevice import validate
from logdevice.client.context import ClientContext, HasContext, context_of
from logdevice.client.net.loop import LOOP_SLACK
from logdevice.client.read.batch import ReaderBatch
from logdevice.client.read.core import (
    ReaderCore,
    ReaderOptionKwargs,
    ReaderOptions,
    ReaderStats,
)
from logdevice.client.read.queue import Item, ReaderQueue
from logdevice.errors import E, InvalidParamError, LogDeviceError, NotFoundError, error_for
from logdevice.records import LSN_MAX, LSN_OLDEST

__all__ = ["Reader", "AsyncReader", "reader_options"]

_ITER_CHUNK = 4096
_OPTION_NAMES = frozenset(ReaderOptionKwargs.__annotations__)


def reader_options(client: ClientContext | HasContext, options: Mapping[str, Any]
                   ) -> ReaderOptions:
    """Reader tunables: the config's read settings (of ``client``, a client or its
    context), then ``options`` by name (unknown names and bad values:
    ``InvalidParamError``, naming the known ones)."""
    s = context_of(client).config.settings
    base: dict[str, Any] = {
        "buffer_size": s.read_window_size,
        # A window asked for is kept: it grows only by the settings' default, or when
        # window_bytes is asked for too.
        "window_bytes": 0 if "buffer_size" in options else s.read_window_bytes,
        "flow_control_threshold": s.read_flow_control_threshold,
        "grace_period": s.gap_grace_period_ms / 1000.0,
        "scd_timeout": s.scd_timeout_ms / 1000.0,
        "scd_all_send_all_timeout": s.scd_all_send_all_timeout_ms / 1000.0,
    }
    for name, value in options.items():
        if name not in _OPTION_NAMES:
            raise InvalidParamError(message=f"unknown reader option {name!r} (known: "
                                            f"{', '.join(sorted(_OPTION_NAMES))})")
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise InvalidParamError(message=f"reader option {name} must be a non-negative "
                                            f"number, got {value!r}")
        base[name] = value
    opts = ReaderOptions(**base)
    if opts.buffer_size < 1 or opts.max_buffered_records < 1:
        raise InvalidParamError(message="buffer_size and max_buffered_records must be >= 1")
    return opts


async def _call(fn: Any, *args: Any) -> Any:
    return fn(*args)


# What a reader call needs done, as yielded by its step generator: (kind, fn, args).
_ON_LOOP = "on_loop"  # fn(*args) on the client's loop (bounded by the client's timeout)
_AWAIT = "await"  # the coroutine fn(*args) on the client's loop (it bounds itself)
_QUEUE = "queue"  # a wait on the queue: wait(*args), fn unused
T = TypeVar("T")
Step = tuple[str, Callable[..., Any] | None, tuple[Any, ...]]
Steps = Generator[Step, Any, T]  # a call: its steps, then its result


#: Streams started in one call past which the cyclic collector waits for the call.
_BULK = 100


@contextlib.contextmanager
def collector_paused(pause: bool) -> Iterator[None]:
    """Hold the cyclic garbage collector off for the block (when ``pause``, and it was
    on): building many long-lived objects at once, it only finds live ones.  A block
    that waits for nodes holds it off for at most the client's timeout.

    The objects built are then filed with the oldest ones, unscanned: left young, the
    next collection would scan them all at once (a tenth of a second for 10,000 streams),
    and the one after that again.  (``freeze`` then ``unfreeze`` moves every tracked
    object to the oldest generation; skipped when the application froze objects itself,
    which ``unfreeze`` would let go.)
    """
    if not pause or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        if gc.get_freeze_count() == 0:
            gc.freeze()
            gc.unfreeze()
        gc.enable()


def _items(parts: list[list[Item]]) -> list[Item]:
    """The items of ``read``'s parts, in order."""
    if len(parts) == 1:
        return parts[0]
    return [item for part in parts for item in part]


class _ReaderBase:
    """What the sync and async readers share: configuration, the loop side, and every
    call as checks and bookkeeping around what the flavour waits for."""

    def __init__(self, client: HasContext | ClientContext, max_logs: int = 1,
                 **options: Unpack[ReaderOptionKwargs]) -> None:
        validate.count(max_logs, "max_logs", minimum=1)
        ctx = context_of(client)
        ctx.check_open()
        self._ctx = ctx
        self.max_logs = max_logs
        self.options = reader_options(ctx, options)
        self._lt = ctx.loop
        placements = ctx.placements()
        self._placements = placements
        self._queue = ReaderQueue(self.options.max_buffered_records,
                                  self.options.max_buffered_bytes)
        self._core = ReaderCore(ctx.read_router(), self._queue, self.options,
                                self._lt.loop, placements.statuses, placements.placement)
        # Not a method of the reader: nothing the loop holds may keep the reader alive,
        # so a reader dropped without close() is collected and its finalizer runs.
        self._queue.on_room = self._core.schedule_refill
        self._logs: set[int] = set()
        self._wait_any = False
        self._no_scd = False
        self._closed = False
        self._lock = threading.Lock()
        self._finalizer = weakref.finalize(self, _close_core, self._lt, self._core)
        ctx.on_close(self._on_client_close)

    def _on_client_close(self, exc: LogDeviceError) -> None:
        """The client is closing (its loop stops next): the streams go with it."""
        self._closed = True
        self._queue.close()
        self._finalizer.detach()

    # ------------------------------------------------------------------ options

    def wait_only_when_no_data(self) -> None:
        """From now on ``read``/``read_batch`` return as soon as anything is available
        (instead of waiting for ``count`` items)."""
        self._wait_any = True

    def force_no_single_copy_delivery(self) -> None:
        """Read every log in all-send-all mode (each node sends every copy it has),
        now and for logs started later."""
        self._no_scd = True
        if self._logs and not self._closed:
            self._lt.call_soon(self._core.force_no_scd)

    def without_payload(self) -> None:
        """Streams started from now on carry no payloads (records come with empty
        payloads; a BufferedWriter blob is one record)."""
        self._core.no_payload = True

    @property
    def stats(self) -> ReaderStats:
        """Counters of what this reader received (read them as a snapshot)."""
        return self._core.stats

    @property
    def core(self) -> ReaderCore:
        """The reader's loop side: its streams and its queue (touch its streams on the
        client's loop only)."""
        return self._core

    # ------------------------------------------------------------------ helpers

    def describe(self) -> str:
        """The state of this reader's streams (text, for debugging and error reports)."""
        if self._closed:
            return "closed"
        return str(self._lt.run(_call, self._core.describe, timeout=self._ctx.timeout))

    def _check_open(self) -> None:
        if self._closed:
            raise LogDeviceError(E.SHUTDOWN, "the reader is closed")
        self._ctx.check_open()

    @staticmethod
    def _checked_range(from_lsn: int, until_lsn: int) -> tuple[int, int]:
        for name, v in (("from_lsn", from_lsn), ("until_lsn", until_lsn)):
            validate.lsn(v, name)
        from_lsn = max(from_lsn, LSN_OLDEST)
        if from_lsn > until_lsn:
            raise InvalidParamError(message=f"from_lsn {from_lsn} is past until_lsn {until_lsn}")
        return from_lsn, until_lsn

    def _check_room_locked(self, more: int = 1) -> None:
        """E.TOOMANY if ``more`` logs would not fit in ``max_logs`` (called holding the
        lock)."""
        if more and len(self._logs) + more > self.max_logs:
            raise error_for(E.TOOMANY, f"the reader already reads {len(self._logs)} "
                                       f"log(s); {more} more would exceed its max_logs "
                                       f"({self.max_logs})")

    def _scd_for(self, log_id: int) -> bool:
        return not self._no_scd and self._ctx.config.log_group(log_id).scd

    def _forget_done(self) -> None:
        with self._lock:
            active = self._queue.active
            # Logs join the queue's active set after this one and leave it first, so a
            # log is done exactly when the sizes differ: no pass over every log per read.
            if len(self._logs) > len(active):
                self._logs &= active

    def _reading(self) -> bool:
        """Some log is still being read or has data queued."""
        q = self._queue
        return bool(q.active) or q.rows + q.gaps > 0

    def _begin_read(self, count: int, what: str, timeout: float | None) -> bool:
        """Checks of ``read``/``read_batch``; False when there is nothing to wait for
        (``count`` 0)."""
        validate.count(count, what)
        validate.optional_timeout(timeout)
        self._check_open()
        return count > 0

    def _mark_closed(self) -> bool:
        """Close the user side; True when the streams on the client's loop need stopping."""
        with self._lock:
            if self._closed:
                return False
            self._closed = True
            self._logs.clear()
        self._queue.close()
        self._finalizer.detach()
        return not self._ctx.closed

    def _close_soon(self) -> None:
        """Close without waiting: the streams stop on the loop soon."""
        if self._mark_closed():
            self._lt.call_soon(self._core.close)

    # ------------------------------------------------------------------ the calls, as steps

    def _start_steps(self, log_id: int, from_lsn: int, until_lsn: int) -> Steps[None]:
        return self._start_many_steps([log_id], from_lsn, until_lsn)

    def _start_many_steps(self, log_ids: Iterable[int], from_lsn: int,
                          until_lsn: int) -> Steps[None]:
        """Start (or restart) each log's stream over the same range: one metadata lookup
        for all (``PlacementSource.placements``), one hop to the client's loop."""
        ids = list(dict.fromkeys(log_ids))
        if not ids:
            self._check_open()
            return
        self._check_open()
        lo, hi = self._checked_range(from_lsn, until_lsn)
        for log_id in ids:
            self._ctx.log_group(log_id)  # a bad or unknown log fails the call before anything
        with self._lock:
            self._check_room_locked(sum(log_id not in self._logs for log_id in ids))
        # Thousands of logs' metadata and streams are built from here on, long-lived
        # objects: the cyclic collector would scan the growing heap again and again (a
        # third of the time at 10,000 logs), so it waits until they are all built.
        with collector_paused(len(ids) > _BULK):
            yield from self._start_placed_steps(ids, lo, hi)

    def _start_placed_steps(self, ids: list[int], lo: int, hi: int) -> Steps[None]:
        placements = yield _AWAIT, self._placements.placements, (
            [(log_id, lo, hi) for log_id in ids],)
        starts = [(log_id, lo, hi, placement, self._scd_for(log_id))
                  for log_id, placement in zip(ids, placements, strict=True)]
        with self._lock:
            restarts = [log_id for log_id in ids if log_id in self._logs]
            # another call may have taken the room meanwhile
            self._check_room_locked(len(ids) - len(restarts))
            self._logs.update(ids)
        if restarts:  # what was queued for them is dropped; their streams stop first
            for log_id in restarts:
                self._queue.discard_log(log_id)
            yield _ON_LOOP, self._stop_on_loop, (restarts,)
        for log_id in ids:
            self._queue.add_log(log_id)
        try:
            yield _ON_LOOP, self._start_on_loop, (starts,)
        except BaseException:
            with self._lock:
                self._logs.difference_update(ids)
            for log_id in ids:
                self._queue.discard_log(log_id)
            raise

    def _stop_on_loop(self, log_ids: list[int]) -> None:
        for log_id in log_ids:
            self._core.stop(log_id)

    def _start_on_loop(self, starts: list[tuple[Any, ...]]) -> None:
        for args in starts:
            self._core.start(*args)

    def _stop_steps(self, log_id: int) -> Steps[None]:
        self._check_open()
        with self._lock:
            if log_id not in self._logs:
                raise NotFoundError(message=f"log {log_id} is not being read")
            self._logs.discard(log_id)
            self._queue.discard_log(log_id)
        yield _ON_LOOP, self._core.stop, (log_id,)

    def _healthy_steps(self, log_id: int) -> Steps[bool]:
        self._check_open()
        ok = yield _ON_LOOP, self._core.healthy, (log_id,)
        if ok is None:
            raise NotFoundError(message=f"log {log_id} is not being read")
        return bool(ok)

    def _chunk_steps(self) -> Steps[list[Item] | None]:
        """The next items of an iteration (at least one), or None once every log is
        done."""
        while True:
            self._check_open()
            yield _QUEUE, None, (1, True, None)
            items = self._queue.take_items(_ITER_CHUNK)
            if items:
                return items
            if not self._reading():
                self._forget_done()
                return None

    def _close_steps(self) -> Steps[None]:
        if self._mark_closed():
            with contextlib.suppress(LogDeviceError):
                yield _ON_LOOP, self._core.close, ()

    def is_reading(self, log_id: int) -> bool:
        """Whether ``log_id`` is being read: started, not stopped, and ``read`` has not yet
        returned everything up to its until_lsn."""
        return self._queue.has_more(log_id)


class Reader(_ReaderBase):
    """Reads records and gaps of up to ``max_logs`` logs at once (create it with
    ``client.create_reader``).  Thread-safe; a context manager.

    Parameters
    ----------
    client : Client or ClientContext
        The client to read through (``client.create_reader`` hands its context).
    max_logs : int
        How many logs may be read at once (``start_reading`` beyond that: E.TOOMANY).
    **options : ReaderOptionKwargs
        ``buffer_size`` (window in LSNs), ``flow_control_threshold``, ``grace_period``,
        ``scd_timeout``, ``scd_all_send_all_timeout`` (defaults from the config's
        settings), ``max_buffered_records`` and ``max_buffered_bytes`` (the hand-off
        queue's bounds).  Another name: ``InvalidParamError`` listing these.
    """

    def _drive(self, steps: Steps[T]) -> T:
        """Run a call's steps, blocking this thread for each."""
        try:
            kind, fn, args = next(steps)
            while True:
                try:
                    if kind is _ON_LOOP:
                        result = self._lt.run(_call, fn, *args, timeout=self._ctx.timeout)
                    elif kind is _AWAIT:
                        result = self._lt.run(fn, *args,  # type: ignore[arg-type]
                                              timeout=self._ctx.timeout + LOOP_SLACK)
                    else:
                        self._queue.wait(*args)
                        result = None
                except BaseException as exc:
                    kind, fn, args = steps.throw(exc)
                else:
                    kind, fn, args = steps.send(result)
        except StopIteration as done:
            return done.value

    def _gather(self, count: int, what: str, timeout: float | None,
                take: Callable[[int], tuple[Any, int, bool]]) -> list[Any]:
        if not self._begin_read(count, what, timeout):
            return []
        parts = self._queue.gather(count, self._wait_any, timeout, take)
        self._forget_done()
        return parts

    def start_reading(self, log_id: int, from_lsn: int = LSN_OLDEST,
                      until_lsn: int = LSN_MAX) -> None:
        """Read ``log_id`` from ``from_lsn`` to ``until_lsn`` (inclusive).

        A log already being read is restarted from ``from_lsn`` (what was queued for it
        is dropped).

        Raises
        ------
        NotFoundError
            The log is not in the config.
        InvalidParamError
            Bad LSNs (``from_lsn > until_lsn``).
        LogDeviceError
            E.TOOMANY when ``max_logs`` logs are already being read.
        """
        self._drive(self._start_steps(log_id, from_lsn, until_lsn))

    def start_reading_many(self, log_ids: Iterable[int], from_lsn: int = LSN_OLDEST,
                           until_lsn: int = LSN_MAX) -> None:
        """``start_reading`` of each of ``log_ids`` over the same range, with one metadata
        request for them all: the way to start thousands of logs (each ``start_reading``
        asks a node for its log's metadata and waits for the answer).  Raises as
        ``start_reading`` does, before any log starts; TOOMANY if they do not all fit
        in ``max_logs``."""
        self._drive(self._start_many_steps(log_ids, from_lsn, until_lsn))

    def stop_reading(self, log_id: int) -> None:
        """Stop reading ``log_id``; records and gaps queued for it are dropped.

        Raises ``NotFoundError`` if the log is not being read."""
        self._drive(self._stop_steps(log_id))

    def is_connection_healthy(self, log_id: int) -> bool:
        """Whether the reader has working streams on enough nodes of ``log_id``'s nodeset
        to make progress (an f-majority).  Useful when ``read`` times out: no data, or a
        service problem?  ``NotFoundError`` if the log is not being read."""
        return self._drive(self._healthy_steps(log_id))

    def read(self, count: int, timeout: float | None = None) -> list[Item]:
        """Up to ``count`` records and gaps (``DataRecord`` / ``GapRecord``), oldest
        first per log.

        Parameters
        ----------
        count : int
        timeout : float, optional
            None: wait for ``count`` items (any at all after ``wait_only_when_no_data``)
            or until no log is being read any more; 0: do not wait; else wait at most
            this many seconds.  May return fewer items, or none.

        Raises
        ------
        ConnectionFailedError
            A log none of whose nodes could be reached since ``start_reading``, for the
            client's ``unreachable_timeout``: that log is no longer read (raised once; the
            other logs read on).
        """
        return _items(self._gather(count, "count", timeout, self._queue.take_items_part))

    def read_batch(self, max_records: int, timeout: float | None = None) -> ReaderBatch:
        """Up to ``max_records`` records as one ``ReaderBatch`` (columns; gaps listed in
        ``.gaps``).  Waiting as for ``read``."""
        return ReaderBatch.concat(self._gather(max_records, "max_records", timeout,
                                               self._queue.take_batch_part))

    def batches(self, size: int = 65536, limit: int | None = None) -> Iterator[ReaderBatch]:
        """``read_batch(size)`` until the logs being read reach their ``until_lsn``: each
        batch that has records, at most ``limit`` records in all.  It switches the reader to
        ``wait_only_when_no_data`` (so an empty batch without gaps means every log is done):
        for reading closed ranges."""
        self.wait_only_when_no_data()
        left = limit
        while left is None or left > 0:
            b = self.read_batch(size if left is None else min(size, left))
            if not len(b) and not b.gaps:
                return
            if len(b):
                if left is not None:
                    left -= len(b)
                yield b

    def __iter__(self) -> Iterator[Item]:
        """Every record and gap until all logs reached their ``until_lsn``."""
        while (items := self._drive(self._chunk_steps())) is not None:
            yield from items

    def close(self) -> None:
        """Stop every stream.  Idempotent."""
        if self._lt.in_loop_thread():  # a blocking wait there would deadlock
            self._close_soon()
        else:
            self._drive(self._close_steps())

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncReader(_ReaderBase):
    """``Reader`` for asyncio code: the same calls, as coroutines (create it with
    ``client.create_async_reader``).  Use it from one event loop."""

    async def _drive(self, steps: Steps[T]) -> T:
        """Run a call's steps, awaiting each."""
        try:
            kind, fn, args = next(steps)
            while True:
                try:
                    if kind is _ON_LOOP:
                        result = await self._lt.wait(_call, fn, *args,
                                                     timeout=self._ctx.timeout)
                    elif kind is _AWAIT:
                        result = await self._lt.wait(fn, *args,  # type: ignore[arg-type]
                                                     timeout=self._ctx.timeout + LOOP_SLACK)
                    else:
                        await self._queue.wait_async(*args)
                        result = None
                except BaseException as exc:
                    kind, fn, args = steps.throw(exc)
                else:
                    kind, fn, args = steps.send(result)
        except StopIteration as done:
            return done.value

    async def _gather(self, count: int, what: str, timeout: float | None,
                      take: Callable[[int], tuple[Any, int, bool]]) -> list[Any]:
        if not self._begin_read(count, what, timeout):
            return []
        parts = await self._queue.gather_async(count, self._wait_any, timeout, take)
        self._forget_done()
        return parts

    async def start_reading(self, log_id: int, from_lsn: int = LSN_OLDEST,
                            until_lsn: int = LSN_MAX) -> None:
        """See ``Reader.start_reading``."""
        await self._drive(self._start_steps(log_id, from_lsn, until_lsn))

    async def start_reading_many(self, log_ids: Iterable[int], from_lsn: int = LSN_OLDEST,
                                 until_lsn: int = LSN_MAX) -> None:
        """See ``Reader.start_reading_many``."""
        await self._drive(self._start_many_steps(log_ids, from_lsn, until_lsn))

    async def stop_reading(self, log_id: int) -> None:
        """See ``Reader.stop_reading``."""
        await self._drive(self._stop_steps(log_id))

    async def is_connection_healthy(self, log_id: int) -> bool:
        """See ``Reader.is_connection_healthy``."""
        return await self._drive(self._healthy_steps(log_id))

    async def read(self, count: int, timeout: float | None = None) -> list[Item]:
        """See ``Reader.read``."""
        return _items(await self._gather(count, "count", timeout,
                                         self._queue.take_items_part))

    async def read_batch(self, max_records: int, timeout: float | None = None) -> ReaderBatch:
        """See ``Reader.read_batch``."""
        return ReaderBatch.concat(await self._gather(max_records, "max_records", timeout,
                                                     self._queue.take_batch_part))

    async def __aiter__(self) -> AsyncIterator[Item]:
        while (items := await self._drive(self._chunk_steps())) is not None:
            for item in items:
                yield item

    async def aclose(self) -> None:
        """Stop every stream.  Idempotent."""
        await self._drive(self._close_steps())

    def close(self) -> None:
        """Stop every stream without awaiting (from synchronous code)."""
        self._close_soon()

    async def __aenter__(self) -> AsyncReader:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _close_core(lt: Any, core: ReaderCore) -> None:
    """A reader dropped without close(): stop its streams on the loop."""
    with contextlib.suppress(RuntimeError):
        lt.call_soon(core.close)
