"""One client connection to one node: connect, HELLO, pipelined requests, replies by id.

A ``Connection`` lives on the client's event loop.  Requests are written as soon as they
are made and matched to replies by ``request_id``, so any number may be in flight at once
(appends pipeline; nothing waits for the previous reply).  Reading is done by an
``asyncio.Protocol`` (``data_received`` feeds a ``FrameDecoder`` and resolves futures
directly), which costs no task switch per read.

Failure rules:

- connect (TCP + HELLO round trip) is bounded by ``connect_timeout``; refused, reset or
  silent peers give ``ConnectionFailedError(E.CONNFAILED)``; a HELLO refused by the node
  (wrong cluster, protocol version) raises the node's status (``E.ACCESS``, ...).
- when the connection drops, every pending request fails with ``E.PEER_CLOSED``
  (``ConnectionFailedError``); the next request reconnects (on demand, no background
  reconnect loop).
- a request not answered by its deadline fails with ``TimedOutError`` (the connection
  stays up: a slow node is not a dead one).
- keepalive (``keepalive_timeout``, see ``keepalive``): while requests are outstanding,
  a node silent for ``probe_after`` is sent a GET_CLUSTER_VIEW (its answer goes to
  ``on_probe_reply``); one silent for ``keepalive_timeout`` is given up: the connection
  is reset, what is pending fails with ``TimedOutError`` at once (not answered; the
  node may still carry what it already received) and ``on_silent(node)`` is called.  A
  paused or cut-off node is noticed within the cluster's dead timeout instead of at each
  request's own deadline.  Reset, not closed: a closed socket's kernel goes on
  retransmitting what the node had not acknowledged, so a request given up during a
  partition would otherwise reach the node when the partition heals, after the client
  reported it and perhaps retried it elsewhere.
- an ``Error`` reply is raised as ``error_for(status, message)``.
- ``close()`` fails what is pending with ``E.SHUTDOWN`` and refuses new requests.

Read streams: messages that carry no ``request_id`` (STARTED, RECORDS, GAP) go to the
connection's ``listener`` (``on_stream_message(node, msg)``), which also hears
``on_connection_lost(node)`` when the connection drops or is closed.  ``post`` writes a
message that has no reply (START, WINDOW, STOP).  ``bytes_received`` counts every byte
read from the node.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import socket
import struct
from collections.abc import Callable
from typing import Any

import numpy as np

from logdevice.client.net.keepalive import Keepalive, Verdict
from logdevice.errors import E, LogDeviceError, TimedOutError, error_for
from logdevice.protocol import (
    AppendedLogs,
    Error,
    FrameDecoder,
    GetClusterView,
    Hello,
    HelloReply,
    ProtocolError,
    coalesce,
    encode,
)
from logdevice.protocol.flags import NODE_FEATURES, PeerFeature
from logdevice.security import PLAIN, ConnectSecurity
from logdevice.timers import DeadlineTimers

__all__ = ["Connection"]

# Let the transport buffer this much before writers wait (blobs are up to 32 MiB).
_WRITE_HIGH_WATER = 8 * 1024 * 1024
# Seconds a closing TLS connection waits for the node's close_notify before it is cut.
_TLS_CLOSE_TIMEOUT = 1.0
# SO_LINGER on, 0 s: close() resets the connection and drops unsent data.
_LINGER_RESET = struct.pack("ii", 1, 0)


def _discard_unsent(transport: Any) -> None:
    """Make closing ``transport`` reset the connection: the kernel drops what the node has
    not acknowledged yet instead of sending it on after the close.  A request given up
    for silence (a partition) must not reach the node later, when the network heals: it
    was reported "may be stored", and a retry may already have gone elsewhere."""
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)


class _Protocol(asyncio.Protocol):
    """Bytes in -> messages -> the owning Connection; frames out, several per write;
    write back-pressure.

    Frames queued in one loop turn leave together at its end, in one write: appends and
    requests issued in a burst reach the node as one read (which it then answers in one
    turn, with one STORE per storage node), and a lone request is not delayed (the write
    happens before the loop waits for I/O again)."""

    def __init__(self, owner: Connection, on_message: Callable[[_Protocol, Any], None],
                 on_lost: Callable[[_Protocol, E, str], None]) -> None:
        self.owner = owner  # its byte count and keepalive
        self.on_message = on_message
        self.on_lost = on_lost
        self.decoder = FrameDecoder()
        self.transport: asyncio.Transport | None = None
        self.out: list[Any] = []  # frames of this turn, not written yet
        self.paused = False
        self.drain_waiters: list[asyncio.Future[None]] = []
        self.lost = False
        self.gone = asyncio.Event()  # set once connection_lost ran

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but behave as one.
        self.transport = transport  # type: ignore[assignment]
        self.transport.set_write_buffer_limits(high=_WRITE_HIGH_WATER)  # type: ignore[union-attr]
        self.loop = asyncio.get_running_loop()

    def queue(self, buffers: list[Any]) -> None:
        """Write ``buffers`` at the end of this loop turn, with the turn's other frames."""
        if not self.out:
            self.loop.call_soon(self.flush)
        self.out += buffers

    def flush(self) -> None:
        out, self.out = self.out, []
        if out and not self.lost and self.transport is not None:
            self.transport.writelines(coalesce(out))

    def data_received(self, data: bytes) -> None:
        owner = self.owner
        owner.bytes_received += len(data)
        if owner.keepalive is not None:
            owner.keepalive.heard(self.loop.time())
        try:
            msgs = self.decoder.feed(data)
        except ProtocolError as exc:
            self.on_lost(self, exc.status, f"bad frame from the node: {exc}")
            return
        dispatch = self.on_message
        for msg in msgs:
            dispatch(self, msg)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.gone.set()
        self.on_lost(self, E.PEER_CLOSED, f"connection closed ({exc or 'by the peer'})")
        self._wake_writers()

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        self._wake_writers()

    def _wake_writers(self) -> None:
        waiters, self.drain_waiters = self.drain_waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)


class Connection:
    """A connection from this client to node ``node_index`` at ``host:port``.

    Parameters
    ----------
    node_index : int
        The node's index in the config (used in messages and errors).
    host, port : str, int
        Where the node listens.
    cluster : str
        The cluster name sent in HELLO.
    connect_timeout : float
        Seconds for TCP connect plus the HELLO round trip.
    location : str
        This client's location, sent in HELLO.
    security : ConnectSecurity, optional
        TLS and the HELLO token (``ConnectSecurity.for_client``); default plain TCP and
        no token.  A TLS handshake the node refuses (a certificate it does not trust)
        fails like any other connect, with CONNFAILED; a token it does not know, with
        ACCESS.
    keepalive_timeout : float, optional
        Seconds of silence, with requests outstanding, after which the node is given up
        (see the module docstring); None or 0: never.

    Notes
    -----
    Not thread safe: use it only on the loop it was first used on.
    """

    def __init__(self, node_index: int, host: str, port: int, cluster: str, *,
                 connect_timeout: float = 2.0, location: str = "",
                 security: ConnectSecurity | None = None,
                 keepalive_timeout: float | None = None) -> None:
        self.node_index = node_index
        self.security = security if security is not None else PLAIN
        self.host = host
        self.port = port
        self.cluster = cluster
        self.connect_timeout = connect_timeout
        self.location = location
        self._proto: _Protocol | None = None  # set once HELLO succeeded
        self._connecting: asyncio.Task[_Protocol] | None = None
        self._pending: dict[int, asyncio.Future[Any]] = {}  # request id -> its reply
        # Every pending request's deadline on one loop timer (made on the loop, on first use).
        self._expiry: DeadlineTimers[int] | None = None
        self._ids = itertools.count(1)
        self._hello_waiter: asyncio.Future[HelloReply] | None = None
        self._closed = False
        self.connects = 0  # successful connects so far (tests, stats)
        # What the node said it understands (``PeerFeature``), as of the last HELLO_REPLY.
        self.features = PeerFeature.NONE
        self.bytes_received = 0
        self.listener: Any = None  # read streams: see the module docstring
        self.keepalive = Keepalive(keepalive_timeout) if keepalive_timeout else None
        self._keepalive_timer: asyncio.TimerHandle | None = None
        self.on_silent: Callable[[int], None] | None = None  # the node was given up
        self.on_probe_reply: Callable[[Any], None] | None = None  # a probe's answer
        self.silences = 0  # times the node was given up for silence (tests, stats)

    def __repr__(self) -> str:
        state = "closed" if self._closed else "up" if self.connected else "down"
        return f"<Connection N{self.node_index} {self.host}:{self.port} {state}>"

    @property
    def connected(self) -> bool:
        return self._proto is not None and not self._proto.lost

    @property
    def writable(self) -> bool:
        """Connected, and ``send`` would not have to wait for ``drain``."""
        proto = self._proto
        return proto is not None and not proto.lost and not proto.paused

    @property
    def in_flight(self) -> int:
        """Requests sent and not yet answered."""
        return len(self._pending)

    # ------------------------------------------------------------------ connecting

    async def connect(self, deadline: float | None = None) -> None:
        """Connect and complete HELLO unless already connected.

        Concurrent callers share one attempt.  ``deadline`` (loop time) bounds this
        caller's wait only; the attempt itself is bounded by ``connect_timeout``.
        """
        if self.connected:
            return
        if self._closed:
            raise LogDeviceError(E.SHUTDOWN, f"connection to N{self.node_index} is closed")
        if self._connecting is None or self._connecting.done():
            self._connecting = asyncio.ensure_future(self._open())
        task = self._connecting
        if deadline is None:
            await asyncio.shield(task)
            return
        remaining = deadline - asyncio.get_running_loop().time()
        if remaining <= 0:
            raise TimedOutError(message=f"deadline passed before connecting to N{self.node_index}")
        done, _ = await asyncio.wait({task}, timeout=remaining)
        if not done:
            raise TimedOutError(message=f"connecting to N{self.node_index} took too long")
        task.result()

    async def _open(self) -> _Protocol:
        loop = asyncio.get_running_loop()
        where = f"N{self.node_index} at {self.host}:{self.port}"
        proto: _Protocol | None = None
        try:
            async with asyncio.timeout(self.connect_timeout):
                tls = self.security.ssl
                _, proto = await loop.create_connection(
                    lambda: _Protocol(self, self._dispatch, self._lost), self.host,
                    self.port, ssl=tls,
                    server_hostname=self.host if tls is not None else None)
                self._hello_waiter = loop.create_future()
                assert proto.transport is not None
                proto.transport.writelines(encode(
                    Hello(cluster=self.cluster, role="client", location=self.location,
                          token=self.security.token)))
                reply = await self._hello_waiter
            if reply.status != E.OK:
                raise error_for(reply.status, f"{where} refused HELLO: {reply.message}")
            self.features = PeerFeature(reply.features & NODE_FEATURES)
            if self._closed:  # close() ran while we were connecting
                raise LogDeviceError(E.SHUTDOWN, f"connection to N{self.node_index} is closed")
        except BaseException as exc:
            if proto is not None and proto.transport is not None:
                proto.transport.abort()
            if isinstance(exc, TimeoutError):
                raise error_for(E.CONNFAILED, f"{where}: no HELLO reply within "
                                              f"{self.connect_timeout:g} s") from None
            if isinstance(exc, OSError):
                raise error_for(E.CONNFAILED, f"{where}: {exc}") from None
            raise
        finally:
            self._hello_waiter = None
        self._proto = proto
        self.connects += 1
        return proto

    # ------------------------------------------------------------------ requests

    def send(self, msg: Any, deadline: float | None = None) -> asyncio.Future[Any]:
        """Send ``msg`` (must be connected; it leaves at the end of this loop turn) and
        return the future of its reply.

        Sets ``msg.request_id``.  The future fails with ``TimedOutError`` at ``deadline``
        (loop time), ``ConnectionFailedError`` if the connection drops first, or the
        error an ``Error`` reply carries.

        Raises
        ------
        ConnectionFailedError
            Not connected.
        TooBigError, InvalidParamError
            The message cannot be encoded.
        """
        proto = self._writable_proto()
        rid = next(self._ids)
        msg.request_id = rid
        buffers = encode(msg)
        fut = self._expect(rid, deadline)
        proto.queue(buffers)
        return fut

    def send_parts(self, msg: Any, deadlines: list[float]) -> list[asyncio.Future[Any]]:
        """Send ``msg``, a request of parts each answered on its own, by its own request
        id (``msg.request_ids``: APPEND_LOGS), and return the parts' reply futures (as
        ``send``'s, part k's failing at ``deadlines[k]``).  ``msg.request_id`` is the
        frame's own: an ERROR to it refuses the whole frame, and becomes every part's
        answer."""
        proto = self._writable_proto()
        rid = next(self._ids)
        parts = len(deadlines)
        rids = [next(self._ids) for _ in range(parts)]
        msg.request_id = rid
        msg.request_ids = np.array(rids, np.uint64)
        buffers = encode(msg)
        frame = self._expect(rid, None)  # (the parts carry the deadline)
        frame.add_done_callback(functools.partial(self._frame_refused, rids))
        answers = [self._expect(r, d) for r, d in zip(rids, deadlines, strict=True)]
        left = parts

        def settled(_answer: asyncio.Future[Any]) -> None:
            nonlocal left
            left -= 1  # (once none is left, nothing will answer the frame's own id)
            if left == 0 and self._pending.pop(rid, None) is not None:
                frame.cancel()

        for answer in answers:
            answer.add_done_callback(settled)
        proto.queue(buffers)
        return answers

    def _frame_refused(self, rids: list[int], frame: asyncio.Future[Any]) -> None:
        if frame.cancelled():
            return
        exc = frame.exception()
        for r in rids:
            fut = self._pending.pop(r, None)
            if fut is not None:
                if self._expiry is not None:
                    self._expiry.cancel(r)
                if not fut.done():
                    fut.set_exception(exc)  # type: ignore[arg-type]

    def _writable_proto(self) -> _Protocol:
        proto = self._proto
        if proto is None or proto.lost or proto.transport is None:
            raise error_for(E.CONNFAILED, f"not connected to N{self.node_index}")
        return proto

    def _expect(self, rid: int, deadline: float | None) -> asyncio.Future[Any]:
        """The future of the reply to request ``rid``, failing at ``deadline``."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        if deadline is not None:
            expiry = self._expiry
            if expiry is None or expiry.loop is not loop:
                expiry = self._expiry = DeadlineTimers(loop, self._expire)
            expiry.arm(rid, deadline)
        ka = self.keepalive
        if ka is not None:
            if not self._pending:
                ka.start(loop.time())
            if self._keepalive_timer is None:
                self._keepalive_timer = loop.call_later(ka.tick, self._keepalive_check)
        self._pending[rid] = fut
        return fut

    async def request(self, msg: Any, deadline: float | None = None) -> Any:
        """Connect if needed, send ``msg``, wait for its reply (see ``send``)."""
        if not self.connected:
            await self.connect(deadline)
        fut = self.send(msg, deadline)
        await self.drain()
        return await fut

    def post(self, msg: Any) -> None:
        """Write ``msg``, a message without a reply (must be connected)."""
        self.post_encoded(encode(msg))

    def post_encoded(self, buffers: list[Any]) -> None:
        """``post`` of a message already encoded (``framing.encode``): one encoding may
        go to several nodes (the buffers are only read)."""
        proto = self._proto
        if proto is None or proto.lost or proto.transport is None:
            raise error_for(E.CONNFAILED, f"not connected to N{self.node_index}")
        proto.queue(buffers)

    async def drain(self) -> None:
        """Wait while the transport's write buffer is above its high-water mark."""
        proto = self._proto
        if proto is not None and proto.paused and not proto.lost:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            proto.drain_waiters.append(waiter)
            await waiter

    # ------------------------------------------------------------------ keepalive

    def _keepalive_check(self) -> None:
        self._keepalive_timer = None
        ka, proto = self.keepalive, self._proto
        if ka is None or proto is None or proto.lost:
            return
        loop = asyncio.get_running_loop()
        verdict = ka.check(loop.time(), bool(self._pending))
        if verdict is Verdict.GONE:
            self.silences += 1
            self._lost(proto, E.TIMEDOUT,
                       f"no word for {ka.dead_after:g} s while {len(self._pending)} "
                       f"request(s) waited (hung or cut off): gave the node up (what was "
                       f"sent may still be carried out)")
            if self.on_silent is not None:
                self.on_silent(self.node_index)
            return
        if verdict is Verdict.PROBE:
            self._probe(loop.time() + ka.dead_after)
        if self._pending:
            self._keepalive_timer = loop.call_later(ka.tick, self._keepalive_check)

    def _probe(self, deadline: float) -> None:
        """Ask the node something it answers at once (a live node breaks its silence)."""
        try:
            fut = self.send(GetClusterView(request_id=0), deadline)
        except LogDeviceError:
            return
        fut.add_done_callback(self._probe_answered)

    def _probe_answered(self, fut: asyncio.Future[Any]) -> None:
        if fut.cancelled() or fut.exception() is not None:
            return
        if self.on_probe_reply is not None:
            self.on_probe_reply(fut.result())

    def _expire(self, rid: int) -> None:
        fut = self._pending.pop(rid, None)
        if fut is not None and not fut.done():
            fut.set_exception(TimedOutError(
                message=f"no reply from N{self.node_index} before the deadline"))

    def _dispatch(self, proto: _Protocol, msg: Any) -> None:
        if isinstance(msg, HelloReply):
            waiter = self._hello_waiter
            if waiter is not None and not waiter.done():
                waiter.set_result(msg)
            return
        if type(msg) is AppendedLogs:  # several requests' replies in one frame
            for part in msg.parts():
                self._dispatch(proto, part)
            return
        rid = getattr(msg, "request_id", None)
        if rid is None:
            if self.listener is not None:
                self.listener.on_stream_message(self.node_index, msg)
            return
        fut = self._pending.pop(rid, None)
        if fut is None:
            return  # a late reply to a request that timed out; or unsolicited
        if self._expiry is not None:
            self._expiry.cancel(rid)
        if fut.done():
            return
        if isinstance(msg, Error):
            fut.set_exception(error_for(msg.status, f"N{self.node_index}: {msg.message}"))
        else:
            fut.set_result(msg)

    def _lost(self, proto: _Protocol, status: E, why: str) -> None:
        if proto.transport is not None:
            if not proto.lost:  # we give it up (silent node, bad frame): reset it
                _discard_unsent(proto.transport)
            proto.transport.abort()
        waiter = self._hello_waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(error_for(E.CONNFAILED, f"N{self.node_index}: {why}"))
        if self._proto is proto:
            self._proto = None
            self._stop_keepalive()
            self._fail_pending(status, f"N{self.node_index}: {why}")
            if self.listener is not None:
                self.listener.on_connection_lost(self.node_index)

    def _stop_keepalive(self) -> None:
        if self._keepalive_timer is not None:
            self._keepalive_timer.cancel()
            self._keepalive_timer = None

    def _fail_pending(self, status: E, why: str) -> None:
        pending, self._pending = self._pending, {}
        if self._expiry is not None:
            self._expiry.close()
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(error_for(status, why))

    # ------------------------------------------------------------------ closing

    def close(self) -> None:
        """Close for good: pending requests fail with ``E.SHUTDOWN``."""
        if self._closed:
            return
        self._closed = True
        if self._connecting is not None and not self._connecting.done():
            self._connecting.cancel()
        proto, self._proto = self._proto, None
        self._stop_keepalive()
        self._fail_pending(E.SHUTDOWN, f"connection to N{self.node_index} closed by the client")
        if proto is not None and proto.transport is not None:
            proto.flush()  # what was posted this turn (a STOP) still goes out
            proto.transport.close()
        if proto is not None and self.listener is not None:
            self.listener.on_connection_lost(self.node_index)

    async def aclose(self) -> None:
        """``close()`` and let the transport finish closing."""
        task, proto = self._connecting, self._proto
        self.close()
        if task is not None:
            with contextlib.suppress(BaseException):
                await task
        if proto is not None and self.security.ssl is not None and proto.transport is not None:
            # TLS says goodbye (close_notify) over a few loop turns; a loop closed before
            # that leaves the transport half-closed.  A peer that does not answer is cut.
            try:
                await asyncio.wait_for(proto.gone.wait(), _TLS_CLOSE_TIMEOUT)
            except TimeoutError:
                proto.transport.abort()
        await asyncio.sleep(0)
