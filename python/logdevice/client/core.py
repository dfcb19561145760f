"""The client's network side: coroutines on the client loop for every call it makes.

``ClientCore`` owns one ``Connection`` per node (opened on first use, reconnected on
demand) and the ``Routing`` state.  Two kinds of request:

- sequencer requests (APPEND_BATCH, APPEND, GET_TAIL) go to the log's sequencer node.
  The route comes from the cluster view (fetched from any reachable node) and
  ``placement.sequencer_for``.  A NOSEQUENCER answer with ``redirect_to`` is followed at
  once; without one (or after ``max_redirects`` in a row) the client refreshes its view
  and retries after a backoff.  A node it cannot connect to is suspected and routed
  around.  All of this repeats until the call's deadline, then ``TimedOutError``.  A
  connection that drops *after* the request was written fails the call with PEER_CLOSED
  instead of retrying (the records may have been stored: retrying could append them
  twice; LogDevice does the same).  GET_TAIL, which changes nothing, is retried.
- a hung or cut-off sequencer: connections give up a node that stays silent for the
  keepalive timeout (``keepalive``: the cluster's dead timeout) while requests wait.
  The client then suspects the node, fetches a fresh view from another node at once and
  re-routes; if the cluster still holds the node alive (a partition between this client
  and that node only), the log's requests go to the next node of the hash flagged
  ``NO_REDIRECT``, which takes the log over (``routing``).  The appends that were
  waiting fail at once with TIMEDOUT (they may have been stored), as at their deadline:
  BufferedWriter retries its blobs (the new sequencer recognises one already stored),
  single appends report it; GET_TAIL is sent again.
- the view is kept fresh: fetched again in the background every ``view_max_age`` while
  sequencer requests are out, after every timeout and every silent node; a fetch asks
  one node and, if it has not answered within a third of the keepalive timeout, the
  next one as well (a hung node must not hold the view back).
- storage requests (GET_HEAD, TRIM, FIND_TIME, DATA_SIZE) go to every storage node at
  once; the answers are combined by ``combine``.  Once an f-majority has answered OK, the
  call waits at most ``straggler_grace`` more for the rest (a paused node must not hold
  every call to the full timeout).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, NamedTuple, TypeVar

import msgspec
import numpy as np

from logdevice.backoff import ExponentialBackoff
from logdevice.client.combine import f_majority
from logdevice.client.net.connection import Connection
from logdevice.client.net.retry import JITTER, REFUSAL_RETRYABLE
from logdevice.client.net.routing import Routing
from logdevice.client.settings import ClientSettings
from logdevice.client.write.append_slots import AppendSlots
from logdevice.client.write.send_order import SendOrder
from logdevice.config import Config
from logdevice.errors import E, LogDeviceError, TimedOutError, error_for
from logdevice.protocol import (
    Append,
    AppendBatch,
    Appended,
    AppendedBatch,
    AppendFlag,
    AppendLogs,
    ClusterView,
    GetClusterView,
    GetTail,
    GetTails,
    Tail,
    pack_payloads,
)
from logdevice.protocol.flags import PeerFeature
from logdevice.protocol.sections import EMPTY_U32
from logdevice.security import ConnectSecurity

__all__ = ["ClientCore"]

T = TypeVar("T")

# Storage calls: once an f-majority answered, wait at most this much for the others.
STRAGGLER_GRACE = 0.5
# GET_TAILS rounds (each follows the redirects of the one before) before the logs left
# go one by one through get_tail.
TAILS_ROUNDS = 3
_NO_REDIRECT = int(AppendFlag.NO_REDIRECT)
_CHECKSUM = int(AppendFlag.CHECKSUM)


class WrittenAttempt(NamedTuple):
    """A sequencer request written before ``_route_request`` took over: where it went,
    its reply future, and the call's deadline and timeout (as given)."""

    node: int
    conn: Connection
    reply: asyncio.Future[Any]
    deadline: float  # loop time
    timeout: float


class _Batch(NamedTuple):
    """An ``append_batch`` call: its records and when it ends (loop time)."""

    log_id: int
    payloads: Sequence[Any]
    checksums: Sequence[int] | None
    timeout: float
    deadline: float


def _pack(payloads: Sequence[Any]) -> tuple[np.ndarray, Any]:
    """``pack_payloads`` without its fixed cost for the usual one record."""
    if len(payloads) == 1:
        data = payloads[0]
        return np.array((0, len(data)), np.uint64), data
    return pack_payloads(payloads)


def _flags(batch: _Batch, no_redirect: bool) -> int:
    """The APPEND_BATCH flags of ``batch``."""
    flags = _CHECKSUM if batch.checksums is not None else 0
    return flags | _NO_REDIRECT if no_redirect else flags


def _timeout_ms(batch: _Batch, now: float) -> int:
    """What is left of ``batch``'s time at ``now`` (loop time), for the sequencer."""
    return max(1, int((batch.deadline - now) * 1000))


def _copy_outcome(out: asyncio.Future[Any], task: asyncio.Task[Any]) -> None:
    if out.done():
        return
    if task.cancelled():
        out.cancel()
        return
    exc = task.exception()
    if exc is not None:
        out.set_exception(exc)
    else:
        out.set_result(task.result())


class ClientCore:
    """Connections, routing and the request coroutines of one client (loop side only)."""

    def __init__(self, config: Config, settings: ClientSettings) -> None:
        self.config = config
        self.settings = settings
        self.routing = Routing(config, suspect_time=settings.suspect_time,
                               view_refresh_interval=settings.view_refresh_interval)
        self.conns: dict[int, Connection] = {}
        # TLS and token of every connection, from the settings' credentials (checked and
        # loaded once, here: a certificate that cannot be loaded fails the constructor).
        self.security = ConnectSecurity.for_client(config, tls_cert=settings.tls_cert,
                                                   tls_key=settings.tls_key,
                                                   token=settings.token,
                                                   tls_ca=settings.tls_ca)
        self._append_slots: dict[int, AppendSlots] = {}  # log -> records in flight
        self._send_orders: dict[int, SendOrder] = {}  # log -> its blobs being sent
        # Back-pressure figures: appends that waited for room among those in flight, and
        # refusals (window full, overloaded, ...) retried; APPEND_BATCHes sent, alone or
        # as parts of APPEND_LOGS frames.
        self.stats = {"appends_waited": 0, "refusals_retried": 0, "append_batches": 0,
                      "append_logs_frames": 0, "storage_requests": 0,
                      "sequencer_requests": 0}
        # Since when no node could be reached (None: some node answered since).
        self._unreachable_since: float | None = None
        self._refused: set[int] = set()  # nodes whose connection failed since
        self._view_task: asyncio.Task[None] | None = None
        self._view_urgent = False  # the fetch in flight follows a failure: requests wait
        self._poller: asyncio.Task[None] | None = None  # background view refreshes
        self._sequencer_calls = 0  # sequencer requests in progress
        self._tasks: set[asyncio.Task[Any]] = set()  # append batches on the long way
        # log -> its batches on the long way: a later batch of the log must not be
        # written before them (appends keep their order per log)
        self._long_way: dict[int, int] = {}
        self._closed = False

    def _retry_backoff(self) -> ExponentialBackoff:
        """The pauses of one call's retries (the client's backoff settings, jittered)."""
        return ExponentialBackoff(self.settings.initial_backoff, self.settings.max_backoff,
                                  jitter=JITTER)

    def set_config(self, config: Config) -> None:
        """Use ``config`` from now on (runtime log groups or the node list changed); a log
        whose ``max_writes_in_flight`` changed gets its new limit on its next append."""
        old, self.config = self.config, config
        self.routing.config = config
        for log_id in list(self._append_slots):
            if not config.has_log(log_id) or not old.has_log(log_id) or \
                    config.log_group(log_id).max_writes_in_flight != \
                    old.log_group(log_id).max_writes_in_flight:
                del self._append_slots[log_id]

    def conn(self, node: int) -> Connection:
        c = self.conns.get(node)
        if c is None:
            if self._closed:
                raise LogDeviceError(E.SHUTDOWN, "the client is closed")
            nc = self.config.node(node)
            c = Connection(node, nc.host, nc.port, self.config.cluster,
                           connect_timeout=self.settings.connect_timeout,
                           security=self.security,
                           keepalive_timeout=self.settings.keepalive_timeout)
            c.on_silent = self._on_silent
            c.on_probe_reply = self._on_view
            self.conns[node] = c
        return c

    def _on_silent(self, node: int) -> None:
        """A connection gave ``node`` up for silence: route around it and learn at once
        from another node whether the cluster holds it dead."""
        self.routing.suspect(node)
        self.refresh_soon(urgent=True)

    def _on_view(self, view: Any) -> None:
        if isinstance(view, ClusterView) and view.status == E.OK:
            self.routing.update_view(view)

    # ------------------------------------------------------------------ reachability

    def _reached(self) -> None:
        self._unreachable_since = None
        self._refused.clear()

    def _unreachable(self, what: str, detail: str, node: int | None = None) -> None:
        """Connecting to ``node`` failed (None: no node was left to try).  Once every node
        of the cluster has refused or failed a connection since one last answered, and
        that has lasted ``unreachable_timeout``, fail the call with CONNFAILED.  (A node
        that accepts but does not answer, e.g. a paused one, is not unreachable.)"""
        now = asyncio.get_running_loop().time()
        if node is not None:
            self._refused.add(node)
            if self._unreachable_since is None:
                self._unreachable_since = now
        if (self._unreachable_since is not None
                and len(self._refused) >= len(self.config.nodes)
                and now - self._unreachable_since >= self.settings.unreachable_timeout):
            raise error_for(E.CONNFAILED, f"{what}: no node of cluster "
                                          f"{self.config.cluster!r} reachable for "
                                          f"{now - self._unreachable_since:.1f} s "
                                          f"(last: {detail})")

    # ------------------------------------------------------------------ cluster view

    async def refresh_view(self, deadline: float, *, force: bool = False) -> None:
        """Fetch the cluster view from the first node that answers (shared by concurrent
        callers; at most once per ``view_refresh_interval`` unless ``force``).  Failing
        to get one is not an error: routing keeps its last view."""
        task = self._view_task
        if task is None or task.done():
            if not force and not self.routing.view_due():
                return
            task = self._view_task = asyncio.ensure_future(self._fetch_view(deadline))
        remaining = deadline - asyncio.get_running_loop().time()
        if remaining > 0:
            await asyncio.wait({task}, timeout=remaining)

    def refresh_soon(self, *, urgent: bool = False) -> None:
        """Start fetching the view in the background unless a fetch is under way;
        ``urgent``: it follows a failure, sequencer requests wait for it (bounded)."""
        task = self._view_task
        if task is None or task.done():
            deadline = asyncio.get_running_loop().time() + self.settings.connect_timeout
            self._view_task = asyncio.ensure_future(self._fetch_view(deadline))
            self._view_urgent = urgent
        elif urgent:
            self._view_urgent = True

    async def _await_urgent_view(self, deadline: float) -> None:
        task = self._view_task
        if self._view_urgent and task is not None and not task.done():
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining > 0:
                await asyncio.wait({task}, timeout=remaining)

    async def _fetch_view(self, deadline: float) -> None:
        """Ask the view sources in turn, one more whenever an answer failed or none came
        for ``hedge`` seconds (those asked before keep their chance); the first OK view
        wins."""
        loop = asyncio.get_running_loop()
        keepalive = self.settings.keepalive_timeout
        hedge = keepalive / 3 if keepalive > 0 else self.settings.connect_timeout
        sources = iter(self.routing.view_sources())
        asking: dict[asyncio.Future[Any], int] = {}
        try:
            while True:
                now = loop.time()
                if now >= deadline:
                    return
                node = next(sources, None)
                if node is not None:
                    asking[asyncio.ensure_future(self.conn(node).request(
                        GetClusterView(request_id=0),
                        min(deadline, now + self.settings.connect_timeout)))] = node
                if not asking:
                    return
                done, _ = await asyncio.wait(set(asking), timeout=min(hedge, deadline - now),
                                             return_when=asyncio.FIRST_COMPLETED)
                for answered in done:
                    node = asking.pop(answered)
                    exc = answered.exception()
                    if exc is not None:
                        if isinstance(exc, LogDeviceError):
                            self.routing.suspect(node)
                            if exc.status == E.CONNFAILED:
                                self._refused.add(node)
                        continue
                    view = answered.result()
                    self._reached()
                    if view.status == E.OK:
                        self.routing.clear_suspect(node)
                        self.routing.update_view(view)
                        return
        finally:
            for unanswered in asking:
                unanswered.cancel()
            self._view_urgent = False

    def _sequencer_call_started(self) -> None:
        self._sequencer_calls += 1
        if self.settings.view_max_age > 0 and (self._poller is None or self._poller.done()):
            self._poller = asyncio.ensure_future(self._poll_view())

    async def _poll_view(self) -> None:
        """While sequencer requests are out, keep the view at most ``view_max_age`` old."""
        period = self.settings.view_max_age
        while not self._closed and self._sequencer_calls > 0:
            age = self.routing.view_age()
            if age >= period:
                self.refresh_soon()
                age = 0.0
            await asyncio.sleep(period - age)

    # ------------------------------------------------------------------ sequencer requests

    async def append(self, log_id: int, payload: Any, flags: int, checksum: int,
                     timeout: float) -> Appended:
        """APPEND one BufferedWriter blob (single records go in ``append_batch``) to
        ``log_id``'s sequencer, within the log's in-flight limit; the OK ``Appended``."""
        def make(remaining_ms: int, no_redirect: bool) -> Append:
            return Append(request_id=0, log_id=log_id, payload=payload,
                          flags=flags | _NO_REDIRECT if no_redirect else flags,
                          timeout_ms=remaining_ms, checksum=checksum)

        # The ticket is taken before anything is awaited: blobs are ordered as their
        # sends start (slots are granted in the same order).
        order = self._send_orders.get(log_id)
        if order is None:
            order = self._send_orders[log_id] = SendOrder()
        ticket = order.take()
        slots = self.append_slots(log_id)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            try:
                if await slots.acquire(timeout):
                    self.stats["appends_waited"] += 1
            except TimedOutError:
                raise TimedOutError(message=f"append to log {log_id}: no room among the "
                                            f"appends in flight within {timeout:g} s"
                                    ) from None
            try:
                reply: Appended = await self._sequencer_request(
                    log_id, make, max(0.0, deadline - loop.time()), "append",
                    order=(order, ticket))
            finally:
                slots.release(1)
        finally:
            order.done(ticket)
            if not order.active:
                del self._send_orders[log_id]
        return reply

    def append_slots(self, log_id: int) -> AppendSlots:
        """The in-flight limit of ``log_id``'s appends: ``max_appends_in_flight``, capped
        by the log group's ``max_writes_in_flight`` (a new one after either changed)."""
        slots = self._append_slots.get(log_id)
        if slots is None:
            slots = self._append_slots[log_id] = AppendSlots(min(
                self.settings.max_appends_in_flight,
                self.config.log_group(log_id).max_writes_in_flight))
        return slots

    def release_append_slots(self, log_id: int, slots: AppendSlots) -> bool:
        """Forget ``log_id``'s in-flight limit ``slots`` if it is idle (the next append
        makes a new one): an idle log costs the client no objects.  False if in use."""
        if not slots.idle:
            return False
        if self._append_slots.get(log_id) is slots:
            del self._append_slots[log_id]
        return True

    def append_batch(self, log_id: int, payloads: Sequence[Any],
                     checksums: Sequence[int] | None,
                     timeout: float) -> asyncio.Future[list[int | LogDeviceError]]:
        """APPEND_BATCH ``payloads`` (in order; ``checksums``: their crc32c, or None to
        send none) to ``log_id``'s sequencer; the future of, per record, its LSN or the
        error it failed with.  Records the sequencer refused before giving them an LSN
        (window full, no copyset now, ...) are sent again, together, after a backoff,
        until the deadline.  The future fails only when cancelled (the client closing)
        or on a bug: a failure of the whole request is every open record's.

        The common case costs no task: when the log's sequencer is known, its
        connection is up and no earlier batch of the log is still on the long way, the
        frame is written at once and an answer that is OK for every record completes
        the future from the reply's callback.  Anything else
        (no route yet, an urgent view fetch, a refusal, a redirect, a failure) goes
        through ``_append_batch`` (from the answer on, if the frame was written), so
        retries, redirects and failures are handled in one place."""
        now = asyncio.get_running_loop().time()
        batch = _Batch(log_id, payloads, checksums, timeout, now + timeout)
        return self._write_batch(batch, self._ready_route(batch, now))

    def _write_batch(self, batch: _Batch, route: tuple[int, Connection, bool] | None
                     ) -> asyncio.Future[list[int | LogDeviceError]]:
        """``batch`` as one APPEND_BATCH on ``route`` (``_ready_route``'s), or the long
        way when there is none or the frame cannot be written."""
        if route is not None:
            node, c, no_redirect = route
            try:
                reply = c.send(self._batch_message(batch, no_redirect), batch.deadline)
            except LogDeviceError:
                pass  # the long way raises it, with the whole story
            else:
                self.stats["append_batches"] += 1
                self.stats["sequencer_requests"] += 1
                return self._await_batch(batch, node, c, reply)
        return self._long_way_batch(batch)

    def append_batches(self, batches: Sequence[tuple[int, Sequence[Any], Sequence[int] | None,
                                                     float]]
                       ) -> list[asyncio.Future[list[int | LogDeviceError]]]:
        """``append_batch`` of each (log id, payloads, checksums, timeout), the futures in
        order.  Those that can leave at once (``append_batch``'s common case) for a node
        that takes APPEND_LOGS leave in one such frame per node: a client appending to
        many logs pays one frame, one reply and one request for all of a turn's logs
        with a sequencer on that node, not one each.  Each batch is answered, retried
        and redirected on its own, as ``append_batch``'s."""
        if len(batches) == 1:
            return [self.append_batch(*batches[0])]
        loop = asyncio.get_running_loop()
        now = loop.time()
        out: list[asyncio.Future[list[int | LogDeviceError]] | None] = [None] * len(batches)
        by_node: dict[int, tuple[Connection, list[tuple[int, _Batch, bool]]]] = {}
        for i, (log_id, payloads, checksums, timeout) in enumerate(batches):
            batch = _Batch(log_id, payloads, checksums, timeout, now + timeout)
            route = self._ready_route(batch, now)
            if route is None or not route[1].features & PeerFeature.APPEND_LOGS:
                out[i] = self._write_batch(batch, route)
                continue
            node, c, no_redirect = route
            by_node.setdefault(node, (c, []))[1].append((i, batch, no_redirect))
        for node, (c, parts) in by_node.items():
            if len(parts) == 1:
                i, batch, no_redirect = parts[0]
                out[i] = self._write_batch(batch, (node, c, no_redirect))
                continue
            try:
                answers = c.send_parts(AppendLogs.of([
                    (b.log_id, _flags(b, no_redirect), _timeout_ms(b, now), b.payloads,
                     b.checksums) for _, b, no_redirect in parts]),
                    [b.deadline for _, b, _ in parts])
            except LogDeviceError:
                for i, batch, _ in parts:
                    out[i] = self._long_way_batch(batch)
                continue
            self.stats["append_batches"] += len(parts)
            self.stats["append_logs_frames"] += 1
            self.stats["sequencer_requests"] += 1
            for (i, batch, _), answer in zip(parts, answers, strict=True):
                out[i] = self._await_batch(batch, node, c, answer, shared=True)
        return out  # type: ignore[return-value]  # (every entry was filled above)

    def _left_long_way(self, log_id: int, _task: asyncio.Task[Any]) -> None:
        left = self._long_way[log_id] - 1
        if left:
            self._long_way[log_id] = left
        else:
            del self._long_way[log_id]

    def _spawn(self, coro: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _ready_route(self, batch: _Batch, now: float) -> tuple[int, Connection, bool] | None:
        """(node, connection, no_redirect) to write ``batch`` to now, when nothing stands
        in its way: what ``_route_request``'s first round does when the route is known,
        the connection up and writable, no urgent view fetch under way and no earlier
        batch of the log on the long way (``now``: the loop's time).  None: take the long
        way."""
        routing = self.routing
        view_task = self._view_task
        if self._closed or routing.view_time is None or batch.log_id in self._long_way or (
                self._view_urgent and view_task is not None and not view_task.done()):
            return None
        if now >= batch.deadline:
            return None
        node, no_redirect = routing.route(batch.log_id)
        if node is None:
            return None
        c = self.conns.get(node)
        if c is None or not c.writable:
            return None
        return node, c, no_redirect

    @staticmethod
    def _batch_message(batch: _Batch, no_redirect: bool) -> AppendBatch:
        offsets, buffer = _pack(batch.payloads)
        return AppendBatch(
            request_id=0, log_id=batch.log_id, flags=_flags(batch, no_redirect),
            timeout_ms=_timeout_ms(batch, asyncio.get_running_loop().time()),
            payload_offsets=offsets, payloads=buffer,
            checksums=np.array(batch.checksums, np.uint32) if batch.checksums is not None
            else EMPTY_U32)

    def _await_batch(self, batch: _Batch, node: int, c: Connection,
                     reply: asyncio.Future[Any], shared: bool = False
                     ) -> asyncio.Future[list[int | LogDeviceError]]:
        """The outcome of ``batch``, written to ``node`` (``shared``: as a part of an
        APPEND_LOGS frame), from its ``reply``."""
        self._sequencer_call_started()
        out: asyncio.Future[list[int | LogDeviceError]] = \
            asyncio.get_running_loop().create_future()
        reply.add_done_callback(functools.partial(
            self._batch_answered, out, batch, node, c, shared))
        return out

    def _long_way_batch(self, batch: _Batch) -> asyncio.Future[list[int | LogDeviceError]]:
        log_id = batch.log_id
        self._long_way[log_id] = self._long_way.get(log_id, 0) + 1
        task = self._spawn(self._append_batch(
            log_id, batch.payloads, batch.checksums,
            max(0.0, batch.deadline - asyncio.get_running_loop().time())))
        task.add_done_callback(functools.partial(self._left_long_way, log_id))
        return task

    def _batch_answered(self, out: asyncio.Future[list[int | LogDeviceError]],
                        batch: _Batch, node: int, c: Connection, shared: bool,
                        reply: asyncio.Future[Any]) -> None:
        """The answer to a batch written at once (``append_batch``, ``append_batches``):
        every record OK completes ``out`` here; anything else continues in
        ``_append_batch``.  A part of an APPEND_LOGS frame refused whole (ACCESS: the
        frame names a log we may not append to) was not appended: it goes again alone,
        so that its own log decides."""
        self._sequencer_calls -= 1
        if out.done():
            return
        if not reply.cancelled():
            exc = reply.exception()
            if exc is None:
                answer = reply.result()
                if answer.status == E.OK and answer.redirect_to is None \
                        and not any(answer.statuses.tolist()):  # E.OK is 0
                    self._reached()
                    self.routing.clear_suspect(node)
                    out.set_result(answer.lsns.tolist())
                    return
            elif shared and isinstance(exc, LogDeviceError) and exc.status == E.ACCESS:
                self._long_way_batch(batch).add_done_callback(
                    functools.partial(_copy_outcome, out))
                return
        sent = WrittenAttempt(node, c, reply, batch.deadline, batch.timeout)
        task = self._spawn(self._append_batch(batch.log_id, batch.payloads, batch.checksums,
                                              sent.timeout, first=sent))
        task.add_done_callback(functools.partial(_copy_outcome, out))

    async def _append_batch(self, log_id: int, payloads: Sequence[Any],
                            checksums: Sequence[int] | None, timeout: float,
                            first: WrittenAttempt | None = None
                            ) -> list[int | LogDeviceError]:
        """``append_batch``'s long way (``first``: its first attempt was written already;
        the call's deadline is that attempt's)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout if first is None else first.deadline
        outcomes: list[Any] = [None] * len(payloads)  # every path fills in each
        todo = list(range(len(payloads)))
        flags = int(AppendFlag.CHECKSUM) if checksums is not None else 0
        backoff = self._retry_backoff()
        while True:
            offsets, buffer = _pack([payloads[i] for i in todo])
            batch = AppendBatch(
                request_id=0, log_id=log_id, flags=flags, payload_offsets=offsets,
                payloads=buffer, checksums=np.array([checksums[i] for i in todo], np.uint32)
                if checksums is not None else EMPTY_U32)

            def make(remaining_ms: int, no_redirect: bool,
                     batch: AppendBatch = batch) -> AppendBatch:
                return msgspec.structs.replace(
                    batch, timeout_ms=remaining_ms,
                    flags=batch.flags | _NO_REDIRECT if no_redirect else batch.flags)

            if first is None:
                self.stats["append_batches"] += 1
            try:
                reply: AppendedBatch = await self._sequencer_request(
                    log_id, make, timeout if first is not None
                    else max(0.0, deadline - loop.time()), "append", first=first)
            except LogDeviceError as exc:
                for i in todo:
                    outcomes[i] = exc
                return outcomes
            finally:
                first = None
            retry = []
            for i, status, lsn in zip(todo, reply.statuses.tolist(), reply.lsns.tolist(),
                                      strict=True):
                if status == E.OK:
                    outcomes[i] = lsn
                elif status in REFUSAL_RETRYABLE and not lsn:
                    retry.append(i)
                else:
                    outcomes[i] = error_for(E(status), f"append to log {log_id}: "
                                                       f"{reply.message or E(status).name}")
            if reply.redirect_to is not None:  # a newer sequencer
                self.routing.redirect(log_id, reply.redirect_to)
            if not retry:
                return outcomes
            self.stats["refusals_retried"] += len(retry)
            await self._back_off(backoff, deadline, refresh=False)
            todo = retry

    async def get_tail(self, log_id: int, timeout: float) -> Tail:
        reply: Tail = await self._sequencer_request(
            log_id, lambda _ms, no_redirect: GetTail(request_id=0, log_id=log_id,
                                                     no_redirect=no_redirect),
            timeout, "get_tail", repeatable=True)
        return reply

    async def get_tails(self, log_ids: Sequence[int], timeout: float
                        ) -> dict[int, Tail | LogDeviceError]:
        """The tails of many logs: one GET_TAILS to each sequencer node for the logs
        routed there, again for the logs a node redirected (a few rounds); the logs left
        (a node unreachable, AGAIN, ...) by ``get_tail`` each, with its retries.  Per
        log, the OK ``Tail`` or the error its ``get_tail`` raised."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        out: dict[int, Tail | LogDeviceError] = {}
        todo = list(dict.fromkeys(log_ids))
        one_by_one: list[int] = []
        self._sequencer_call_started()
        try:
            if self.routing.view_time is None:
                await self.refresh_view(deadline)
            for _ in range(TAILS_ROUNDS):
                if not todo or loop.time() >= deadline:
                    break
                todo, left = await self._tails_round(todo, out, deadline)
                one_by_one += left
        finally:
            self._sequencer_calls -= 1
        todo = one_by_one + todo

        async def one(log_id: int) -> None:
            try:
                out[log_id] = await self.get_tail(log_id, max(0.0, deadline - loop.time()))
            except LogDeviceError as exc:
                out[log_id] = exc

        await asyncio.gather(*(one(x) for x in todo))
        return out

    async def _tails_round(self, todo: list[int], out: dict[int, Tail | LogDeviceError],
                           deadline: float) -> tuple[list[int], list[int]]:
        """One GET_TAILS per node routed to; the logs to ask again (redirected) and
        those left to ``get_tail`` (no answer, or not OK)."""
        by_node: dict[int, list[int]] = {}
        left: list[int] = []
        for log_id in todo:
            node, no_redirect = self.routing.route(log_id)
            if node is None or no_redirect:  # takeovers: get_tail's path knows them
                left.append(log_id)
            else:
                by_node.setdefault(node, []).append(log_id)

        async def ask(node: int, logs: list[int]) -> tuple[int, list[int], Any]:
            self.stats["sequencer_requests"] += 1
            try:
                msg = GetTails(request_id=0, log_ids=np.array(logs, np.uint64))
                return node, logs, await self.conn(node).request(msg, deadline)
            except LogDeviceError as exc:
                if exc.status == E.CONNFAILED:
                    self.routing.suspect(node)
                return node, logs, exc

        again: list[int] = []
        for node, logs, reply in await asyncio.gather(*(ask(n, x) for n, x in
                                                          by_node.items())):
            if isinstance(reply, BaseException) or reply.status != E.OK:
                left += logs
                continue
            self._reached()
            for log_id, status, lsn, ts, target in zip(
                    logs, reply.statuses.tolist(), reply.lsns.tolist(),
                    reply.timestamps.tolist(), reply.redirect_to.tolist(), strict=True):
                if status == E.OK:
                    self.routing.clear_suspect(node)
                    out[log_id] = Tail(request_id=0, status=E.OK, log_id=log_id, lsn=lsn,
                                       timestamp=ts)
                elif status == E.NOSEQUENCER and target >= 0 and target != node \
                        and self.routing.redirect(log_id, target, node):
                    again.append(log_id)
                else:
                    left.append(log_id)
        return again, left

    async def _sequencer_request(self, log_id: int, make: Callable[[int, bool], Any],
                                 timeout: float, what: str, *,
                                 repeatable: bool = False,
                                 order: tuple[SendOrder, int] | None = None,
                                 first: WrittenAttempt | None = None) -> Any:
        """Send ``make(remaining_ms, no_redirect)`` to ``log_id``'s sequencer until it is
        answered (see the module docstring); ``repeatable``: the request changes nothing,
        so one whose connection dropped is sent again; ``order``: each attempt is written
        only in its ticket's turn (``send_order``); ``first``: the first attempt was
        written already (its node, connection and reply future)."""
        self._sequencer_call_started()
        try:
            return await self._route_request(log_id, make, timeout, what, repeatable,
                                             order, first)
        finally:
            self._sequencer_calls -= 1

    async def _route_request(self, log_id: int, make: Callable[[int, bool], Any],
                             timeout: float, what: str, repeatable: bool,
                             order: tuple[SendOrder, int] | None,
                             first: WrittenAttempt | None) -> Any:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout if first is None else first.deadline
        backoff = self._retry_backoff()
        redirects = 0
        redirected_by: set[int] = set()  # nodes that redirected this request
        last = "no attempt"
        routing = self.routing
        if routing.view_time is None and first is None:
            await self.refresh_view(deadline)
        while True:
            sent: asyncio.Future[Any] | None = None
            if first is not None:  # written already: its answer is this round's
                node, c, sent = first.node, first.conn, first.reply
                no_redirect = False
                first = None
            else:
                await self._await_urgent_view(deadline)
                now = loop.time()
                if now >= deadline:
                    raise TimedOutError(message=f"{what} to log {log_id}: not acknowledged "
                                                f"within {timeout:g} s (last: {last})")
                found, no_redirect = routing.route(log_id)
                if found is None:
                    last = "no sequencer node is alive"
                    self._unreachable(f"{what} to log {log_id}", last)
                    await self._back_off(backoff, deadline, refresh=True)
                    continue
                node = found
                c = self.conn(node)
                self.stats["sequencer_requests"] += 1
            try:
                if sent is not None:
                    reply = await sent
                else:
                    if not c.connected:
                        await c.connect(deadline)
                    if order is None:
                        reply = await c.request(make(max(1, int((deadline - loop.time())
                                                                * 1000)), no_redirect),
                                                deadline)
                    else:
                        reply = await self._ordered_request(c, make, no_redirect,
                                                            deadline, order)
            except TimedOutError as exc:
                last = f"N{node} did not answer"
                self.refresh_soon(urgent=True)  # who sequences the log now?
                if not repeatable:
                    # Given up for silence, or its deadline passed: it may have been
                    # carried out, so it is never sent again.  (Not left to the loop
                    # head's clock check: uvloop rounds timers to the millisecond, so
                    # the deadline's timer may fire just before the deadline.)
                    if c.connected or loop.time() >= deadline:
                        raise TimedOutError(
                            message=f"{what} to log {log_id}: not acknowledged within "
                                    f"{timeout:g} s (last: {last})") from None
                    raise error_for(E.TIMEDOUT, f"{what} to log {log_id}: {exc.message}"
                                    ) from None
                continue  # the loop head raises with the full story, or tries again
            except LogDeviceError as exc:
                if exc.status == E.PEER_CLOSED and repeatable:
                    last = f"N{node}: {exc.message}"
                    await self._back_off(backoff, deadline, refresh=True)
                    continue
                if exc.status != E.CONNFAILED:
                    raise
                last = f"N{node}: {exc.message}"
                routing.suspect(node)
                self._unreachable(f"{what} to log {log_id}", last, node)
                await self._back_off(backoff, deadline, refresh=True)
                continue
            self._reached()
            status = reply.status
            if status == E.OK:
                routing.clear_suspect(node)
                return reply
            if status == E.NOSEQUENCER:
                target = reply.redirect_to
                if target is not None and target != node and redirects < \
                        self.settings.max_redirects and self.config.has_node(target):
                    redirects += 1
                    redirected_by.add(node)
                    if target in redirected_by:
                        # Two nodes send us to each other (their views disagree for a
                        # moment): ask the one the other names to serve the log.
                        routing.take_over(log_id, target)
                        last = f"N{node} redirected back to N{target}"
                        continue
                    if routing.redirect(log_id, target, node):
                        last = f"N{node} redirected to N{target}"
                        continue
                    last = f"N{node} redirected to N{target}, which our view holds dead"
                else:
                    last = f"N{node}: no sequencer for log {log_id}"
                redirects = 0
                redirected_by.clear()
                routing.forget(log_id)
                await self._back_off(backoff, deadline, refresh=True)
                continue
            if status == E.PREEMPTED and reply.redirect_to is not None:
                routing.redirect(log_id, reply.redirect_to, node)  # for the next call
            if status in REFUSAL_RETRYABLE and not getattr(reply, "lsn", 0):
                # Refused before an LSN was taken: nothing was stored, try again.
                last = f"N{node}: {getattr(reply, 'message', '') or status.name}"
                self.stats["refusals_retried"] += 1
                await self._back_off(backoff, deadline, refresh=status == E.PREEMPTED)
                continue
            raise error_for(status, f"{what} to log {log_id} on N{node}: "
                                    f"{getattr(reply, 'message', '') or status.name}")

    @staticmethod
    async def _ordered_request(c: Connection, make: Callable[[int, bool], Any],
                               no_redirect: bool, deadline: float,
                               order: tuple[SendOrder, int]) -> Any:
        """``c.request`` of one ordered attempt: written in its ticket's turn."""
        sends, ticket = order
        sends.unwritten(ticket)  # again, if an earlier attempt came back
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(max(0.0, deadline - loop.time())):
                await sends.turn(ticket)
        except TimeoutError:
            raise TimedOutError(message="an earlier blob of the log was still being "
                                        "sent at the deadline") from None
        if not c.connected:
            await c.connect(deadline)
        reply = c.send(make(max(1, int((deadline - loop.time()) * 1000)), no_redirect),
                       deadline)
        sends.written(ticket)
        await c.drain()
        return await reply

    async def _back_off(self, backoff: ExponentialBackoff, deadline: float, *,
                        refresh: bool) -> None:
        loop = asyncio.get_running_loop()
        start = loop.time()
        if refresh:
            await self.refresh_view(min(deadline, start + self.settings.connect_timeout),
                                    force=True)
        delay = backoff.next_delay() - (loop.time() - start)
        delay = min(delay, deadline - loop.time())
        if delay > 0:
            await asyncio.sleep(delay)

    # ------------------------------------------------------------------ storage requests

    async def storage_call(self, log_id: int, make: Callable[[], Any], timeout: float,
                           replication: int) -> dict[int, Any]:
        """Send ``make()`` to every storage node; node -> reply or exception.

        Returns when all answered, at the deadline, or ``STRAGGLER_GRACE`` after an
        f-majority answered OK, whichever comes first (missing nodes map to
        ``TimedOutError``).
        """
        nodes = self.routing.storage_nodes(log_id)
        return await self.storage_call_nodes(nodes, make, timeout,
                                             f_majority(len(nodes), replication))

    async def storage_call_nodes(self, nodes: Sequence[int], make: Callable[[], Any],
                                 timeout: float, need: int) -> dict[int, Any]:
        """``storage_call`` to ``nodes``, waiting for stragglers once ``need`` answered
        OK (a request about many logs: ``need`` is the strictest f-majority of them)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        self.stats["storage_requests"] += len(nodes)

        async def one(node: int) -> Any:
            try:
                return await self.conn(node).request(make(), deadline)
            except LogDeviceError as exc:
                if exc.status == E.CONNFAILED:
                    self.routing.suspect(node)
                return exc

        tasks = {asyncio.ensure_future(one(n)): n for n in nodes}
        answers: dict[int, Any] = {}
        pending = set(tasks)
        ok = 0
        grace_end: float | None = None
        while pending:
            end = deadline if grace_end is None else min(deadline, grace_end)
            remaining = end - loop.time()
            if remaining <= 0:
                break
            done, pending = await asyncio.wait(pending, timeout=remaining,
                                               return_when=asyncio.FIRST_COMPLETED)
            for t in done:
                a = t.result()
                answers[tasks[t]] = a
                if not isinstance(a, BaseException) and a.status == E.OK:
                    ok += 1
            if grace_end is None and ok >= need:
                grace_end = loop.time() + STRAGGLER_GRACE
        for t in pending:
            t.cancel()
            answers[tasks[t]] = TimedOutError(message=f"N{tasks[t]} did not answer in time")
        return answers

    # ------------------------------------------------------------------ any-node requests

    async def any_node_call(self, make: Callable[[], Any], timeout: float, what: str,
                            spread: int = 0) -> Any:
        """Send ``make()`` to the first node that answers (cluster-wide requests such as
        checkpoints); its reply, whatever its status.  ``spread`` rotates the order in
        which healthy nodes are tried, so that requests sent together (``spread`` 0, 1,
        2, ...) are answered by different nodes at once."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        backoff = self._retry_backoff()
        last = "no attempt"
        while loop.time() < deadline:
            for node in self.routing.view_sources(spread):
                if loop.time() >= deadline:
                    break
                c = self.conn(node)
                try:
                    reply = await c.request(make(), deadline)
                except TimedOutError:
                    last = f"N{node} did not answer"
                    continue
                except LogDeviceError as exc:
                    if exc.status != E.CONNFAILED:
                        raise
                    last = f"N{node}: {exc.message}"
                    self.routing.suspect(node)
                    self._unreachable(what, last, node)
                    continue
                self._reached()
                return reply
            await self._back_off(backoff, deadline, refresh=False)
        raise TimedOutError(message=f"{what}: no node answered within {timeout:g} s "
                                    f"(last: {last})")

    # ------------------------------------------------------------------ closing

    async def close(self) -> None:
        self._closed = True
        for task in (self._view_task, self._poller):
            if task is not None and not task.done():
                task.cancel()
        for c in list(self.conns.values()):
            await c.aclose()
