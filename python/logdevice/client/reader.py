"""``Reader`` and ``AsyncReader``: reading logs.

    r = client.create_reader(max_logs=1)
    r.start_reading(log_id, from_lsn=ld.LSN_OLDEST, until_lsn=ld.LSN_MAX)
    items = r.read(100, timeout=1.0)         # DataRecord / GapRecord, in LSN order
    for item in r: ...                        # until every log reached its until_lsn
    batch = r.read_batch(100_000)             # columns (ReaderBatch), .to_arrow()

A reader reads each log from every storage node of its nodeset through one
``ReadStream`` (``logdevice.readstream``) on the client's loop (``reader_core``); what the
streams deliver waits in a bounded queue (``reader_queue``) for the application.  When
the application does not read, the queue fills, the streams stop sliding their windows
and the nodes stop sending.

``read`` semantics follow LogDevice's ``Reader::read``: ``timeout=None`` waits until
``count`` items are there (or every log is done); ``timeout=0`` takes what is there
now; otherwise waits at most ``timeout`` seconds.  After ``wait_only_when_no_data()`` a
read returns as soon as at least one item is there.  Nothing is waited for once no log
is being read.

``AsyncReader`` offers the same calls as coroutines (``await r.read(...)``,
``async for item in r``) for asyncio services; both share the loop side.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Unpack

from logdevice.client.context import ClientContext
from logdevice.client.reader_batch import ReaderBatch, concat_batches, empty_batch
from logdevice.client.reader_core import (
    ReaderCore,
    ReaderOptionKwargs,
    ReaderOptions,
    ReaderStats,
)
from logdevice.client.reader_queue import Item, ReaderQueue
from logdevice.errors import E, InvalidParamError, LogDeviceError, NotFoundError, error_for
from logdevice.records import LSN_MAX, LSN_OLDEST

if TYPE_CHECKING:
    from logdevice.client.client import Client

__all__ = ["Reader", "AsyncReader", "reader_options"]

_ITER_CHUNK = 4096
_OPTION_NAMES = frozenset(ReaderOptionKwargs.__annotations__)


def reader_options(client: ClientContext | Client, options: Mapping[str, Any]
                   ) -> ReaderOptions:
    """Reader tunables: the config's read settings (of ``client``, a client or its
    context), then ``options`` by name (unknown names and bad values:
    ``InvalidParamError``, naming the known ones)."""
    s = client.config.settings
    base: dict[str, Any] = {
        "buffer_size": s.read_window_size,
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


class _ReaderBase:
    """What the sync and async readers share: configuration and the loop side."""

    def __init__(self, client: Client | ClientContext, max_logs: int = 1,
                 **options: Unpack[ReaderOptionKwargs]) -> None:
        if isinstance(max_logs, bool) or not isinstance(max_logs, int) or max_logs < 1:
            raise InvalidParamError(message=f"max_logs must be an int >= 1, got {max_logs!r}")
        ctx = client if isinstance(client, ClientContext) else client.context
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
                                self._lt.loop, placements.statuses)
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

    def _prepare_start(self, log_id: int, from_lsn: int, until_lsn: int) -> tuple[int, int]:
        self._check_open()
        self._ctx.log_group(log_id)
        for name, v in (("from_lsn", from_lsn), ("until_lsn", until_lsn)):
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= LSN_MAX:
                raise InvalidParamError(message=f"{name} must be an LSN, got {v!r}")
        from_lsn = max(from_lsn, LSN_OLDEST)
        if from_lsn > until_lsn:
            raise InvalidParamError(message=f"from_lsn {from_lsn} is past until_lsn {until_lsn}")
        with self._lock:
            if log_id not in self._logs and len(self._logs) >= self.max_logs:
                raise error_for(E.TOOMANY, f"the reader already reads {len(self._logs)} "
                                           f"log(s), its max_logs")
        return from_lsn, until_lsn

    def _scd_for(self, log_id: int) -> bool:
        return not self._no_scd and self._ctx.config.log_group(log_id).scd

    def _forget_done(self) -> None:
        with self._lock:
            self._logs &= self._queue.active

    @staticmethod
    def _check_count(count: int, what: str) -> None:
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise InvalidParamError(message=f"{what} must be an int >= 0, got {count!r}")

    @staticmethod
    def _check_timeout(timeout: float | None) -> None:
        if timeout is not None and (isinstance(timeout, bool)
                                    or not isinstance(timeout, int | float) or timeout < 0):
            raise InvalidParamError(message=f"timeout must be None or seconds >= 0, "
                                            f"got {timeout!r}")

    def _reading(self) -> bool:
        """Some log is still being read or has data queued."""
        q = self._queue
        return bool(q.active) or q.rows + q.gaps > 0


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
        from_lsn, until_lsn = self._prepare_start(log_id, from_lsn, until_lsn)
        placement = self._placements.placement(log_id, from_lsn, until_lsn)
        scd = self._scd_for(log_id)
        with self._lock:
            if log_id in self._logs:
                self._queue.discard_log(log_id)
                self._lt.run(_call, self._core.stop, log_id, timeout=self._ctx.timeout)
            self._logs.add(log_id)
            self._queue.add_log(log_id)
        try:
            self._lt.run(_call, self._core.start, log_id, from_lsn, until_lsn, placement, scd,
                         timeout=self._ctx.timeout)
        except BaseException:
            with self._lock:
                self._logs.discard(log_id)
            self._queue.discard_log(log_id)
            raise

    def stop_reading(self, log_id: int) -> None:
        """Stop reading ``log_id``; records and gaps queued for it are dropped.

        Raises ``NotFoundError`` if the log is not being read."""
        self._check_open()
        with self._lock:
            if log_id not in self._logs:
                raise NotFoundError(message=f"log {log_id} is not being read")
            self._logs.discard(log_id)
            self._queue.discard_log(log_id)
        self._lt.run(_call, self._core.stop, log_id, timeout=self._ctx.timeout)

    def is_reading(self, log_id: int) -> bool:
        """Whether ``log_id`` is being read: started, not stopped, and ``read`` has not yet
        returned everything up to its until_lsn."""
        return self._queue.has_more(log_id)

    def is_connection_healthy(self, log_id: int) -> bool:
        """Whether the reader has working streams on enough nodes of ``log_id``'s nodeset
        to make progress (an f-majority).  Useful when ``read`` times out: no data, or a
        service problem?  ``NotFoundError`` if the log is not being read."""
        self._check_open()
        ok = self._lt.run(_call, self._core.healthy, log_id, timeout=self._ctx.timeout)
        if ok is None:
            raise NotFoundError(message=f"log {log_id} is not being read")
        return bool(ok)

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
        self._check_count(count, "count")
        self._check_timeout(timeout)
        self._check_open()
        if count == 0:
            return []
        parts = self._queue.gather(count, self._wait_any, timeout,
                                   self._queue.take_items_part)
        self._forget_done()
        return [item for part in parts for item in part]

    def read_batch(self, max_records: int, timeout: float | None = None) -> ReaderBatch:
        """Up to ``max_records`` records as one ``ReaderBatch`` (columns; gaps listed in
        ``.gaps``).  Waiting as for ``read``."""
        self._check_count(max_records, "max_records")
        self._check_timeout(timeout)
        self._check_open()
        if max_records == 0:
            return empty_batch()
        parts = self._queue.gather(max_records, self._wait_any, timeout,
                                   self._queue.take_batch_part)
        self._forget_done()
        return concat_batches(parts)

    def __iter__(self) -> Iterator[Item]:
        """Every record and gap until all logs reached their ``until_lsn``."""
        while True:
            self._check_open()
            self._queue.wait(1, True, None)
            items = self._queue.take_items(_ITER_CHUNK)
            if not items:
                if not self._reading():
                    self._forget_done()
                    return
                continue
            yield from items

    def close(self) -> None:
        """Stop every stream.  Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._logs.clear()
        self._queue.close()
        self._finalizer.detach()
        if not self._ctx.closed and not self._lt.in_loop_thread():
            with contextlib.suppress(LogDeviceError):
                self._lt.run(_call, self._core.close, timeout=self._ctx.timeout)

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncReader(_ReaderBase):
    """``Reader`` for asyncio code: the same calls, as coroutines (create it with
    ``client.create_async_reader``).  Use it from one event loop."""

    async def _run(self, fn: Any, *args: Any) -> Any:
        return await asyncio.wait_for(asyncio.wrap_future(self._lt.submit(_call, fn, *args)),
                                      self._ctx.timeout)

    async def start_reading(self, log_id: int, from_lsn: int = LSN_OLDEST,
                            until_lsn: int = LSN_MAX) -> None:
        """See ``Reader.start_reading``."""
        from_lsn, until_lsn = self._prepare_start(log_id, from_lsn, until_lsn)
        placement = await asyncio.to_thread(self._placements.placement, log_id, from_lsn,
                                            until_lsn)
        scd = self._scd_for(log_id)
        if log_id in self._logs:
            self._queue.discard_log(log_id)
            await self._run(self._core.stop, log_id)
        with self._lock:
            self._logs.add(log_id)
        self._queue.add_log(log_id)
        try:
            await self._run(self._core.start, log_id, from_lsn, until_lsn, placement, scd)
        except BaseException:
            with self._lock:
                self._logs.discard(log_id)
            self._queue.discard_log(log_id)
            raise

    async def stop_reading(self, log_id: int) -> None:
        """See ``Reader.stop_reading``."""
        self._check_open()
        with self._lock:
            if log_id not in self._logs:
                raise NotFoundError(message=f"log {log_id} is not being read")
            self._logs.discard(log_id)
            self._queue.discard_log(log_id)
        await self._run(self._core.stop, log_id)

    def is_reading(self, log_id: int) -> bool:
        """See ``Reader.is_reading``."""
        return self._queue.has_more(log_id)

    async def is_connection_healthy(self, log_id: int) -> bool:
        """See ``Reader.is_connection_healthy``."""
        self._check_open()
        ok = await self._run(self._core.healthy, log_id)
        if ok is None:
            raise NotFoundError(message=f"log {log_id} is not being read")
        return bool(ok)

    async def read(self, count: int, timeout: float | None = None) -> list[Item]:
        """See ``Reader.read``."""
        self._check_count(count, "count")
        self._check_timeout(timeout)
        self._check_open()
        if count == 0:
            return []
        parts = await self._queue.gather_async(count, self._wait_any, timeout,
                                               self._queue.take_items_part)
        self._forget_done()
        return [item for part in parts for item in part]

    async def read_batch(self, max_records: int, timeout: float | None = None) -> ReaderBatch:
        """See ``Reader.read_batch``."""
        self._check_count(max_records, "max_records")
        self._check_timeout(timeout)
        self._check_open()
        if max_records == 0:
            return empty_batch()
        parts = await self._queue.gather_async(max_records, self._wait_any, timeout,
                                               self._queue.take_batch_part)
        self._forget_done()
        return concat_batches(parts)

    async def __aiter__(self) -> AsyncIterator[Item]:
        while True:
            self._check_open()
            await self._queue.wait_async(1, True, None)
            items = self._queue.take_items(_ITER_CHUNK)
            if not items:
                if not self._reading():
                    self._forget_done()
                    return
                continue
            for item in items:
                yield item

    def _mark_closed(self) -> bool:
        """Close the user side; True when the streams on the client's loop need stopping."""
        if self._closed:
            return False
        self._closed = True
        self._logs.clear()
        self._queue.close()
        self._finalizer.detach()
        return not self._ctx.closed

    async def aclose(self) -> None:
        """Stop every stream.  Idempotent."""
        if self._mark_closed():
            with contextlib.suppress(LogDeviceError):
                await self._run(self._core.close)

    def close(self) -> None:
        """Stop every stream without awaiting (from synchronous code)."""
        if self._mark_closed():
            self._lt.call_soon(self._core.close)

    async def __aenter__(self) -> AsyncReader:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _close_core(lt: Any, core: ReaderCore) -> None:
    """A reader dropped without close(): stop its streams on the loop."""
    with contextlib.suppress(RuntimeError):
        lt.call_soon(core.close)
