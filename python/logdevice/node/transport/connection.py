"""One TCP connection of a node: framing, the HELLO handshake, dispatch, back-pressure.

The same class serves both directions:

- *inbound* (a client or another node connected to us): the first frame must be HELLO;
  ``check_hello`` decides, the node answers HELLO_REPLY and, unless the status is OK,
  closes the connection.  After that every frame goes to ``Node.dispatch``.
- *outbound* (our link to another node, see ``links``): we send HELLO(role="node") and
  wait for an OK HELLO_REPLY before the link counts as connected.  Its ``features``
  (``PeerFeature``: what the peer understands beyond its protocol version's messages)
  become ``peer_features``; ours go in every HELLO_REPLY we send.

With security on (``Node.access``) the HELLO also decides who the peer is: its TLS client
certificate and HELLO token give its ``principal`` (a peer claiming to be a node must
prove it, else ACCESS); ``Node.dispatch`` checks every later frame against it.  Nothing
after the HELLO is decoded before the HELLO was judged (the decoder holds it), and from
then on a client's frames pass ``request_gate.admit_from_client`` on their 12-byte prefix
before their header is decoded.  The peer
of an outbound link is the node we dialed: TLS verified its certificate against the CA
and the host name, and with node certificates its CN must be a node's.

Bad input closes this connection only: a frame the decoder refuses is answered with an
ERROR frame naming the problem (status BADMSG or PROTONOSUPPORT), then the connection is
closed; the node keeps serving the others.  What a peer can make a node hold is bounded:
before its HELLO is accepted a peer may send one frame of at most ``HELLO_MAX_FRAME``
bytes; afterwards a frame's buffer grows only with the bytes that arrived (never the size
a header claims), up to the frame limit; and a frame that stops arriving half-way is
closed after ``settings.frame_timeout_ms`` without progress (time spent paused by our own
back-pressure does not count).

Writes are queued and flushed once per event-loop turn, so many small replies (one
APPENDED per append) leave in one ``writelines`` call; code that has just produced a whole
batch (the STORE frames of a turn, the STORED replies of a group commit) calls
``Node.flush_pending`` to write them at once instead of one loop turn later.  ``encode``
does not copy raw sections: arrays handed to ``send`` must not be modified afterwards.
Back-pressure: when the transport's write buffer passes its high-water mark, an inbound
connection stops being read until it drains (a client that does not read its replies
stops being served); an outbound link instead drops frames once its buffer is above
``LINK_DROP_BYTES`` (STOREs time out and go elsewhere, heartbeats are periodic anyway).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Collection
from typing import TYPE_CHECKING, Any, Protocol

from logdevice.errors import E
from logdevice.node.transport.request_gate import admit_from_client
from logdevice.protocol import (
    Error,
    FrameDecoder,
    Hello,
    HelloReply,
    MessageType,
    PeerFeature,
    ProtocolError,
    check_hello,
    coalesce,
    encode,
)
from logdevice.protocol.flags import NODE_FEATURES
from logdevice.security import NODE_PRINCIPAL, Principal

if TYPE_CHECKING:
    from logdevice.config import Config, NodeConfig
    from logdevice.node.roles.role import Peer
    from logdevice.node.transport.access import NodeAccess
    from logdevice.node.transport.limits import ConnectionLimits

log = logging.getLogger("logdevice.node.transport.connection")

#: Transport write-buffer marks (bytes) for pause/resume of an inbound connection.
WRITE_HIGH_WATER = 8 << 20
WRITE_LOW_WATER = 2 << 20
#: An outbound link drops frames while this much is already waiting to be written.
LINK_DROP_BYTES = 128 << 20
#: Seconds an inbound connection may take to send its HELLO.
HELLO_TIMEOUT = 10.0
#: The largest first frame (the HELLO) an inbound connection may send.
HELLO_MAX_FRAME = 64 * 1024

_ids = itertools.count(1)


def _hello_first(type_id: int, header_length: int) -> ProtocolError | None:
    if type_id == MessageType.HELLO:
        return None
    return ProtocolError(E.BADMSG, f"message type {type_id} before HELLO: HELLO first")


class ConnectionHost(Protocol):
    """What a connection uses of the node it serves (``server.Node`` is one)."""

    @property
    def config(self) -> Config: ...

    @property
    def index(self) -> int: ...

    @property
    def me(self) -> NodeConfig: ...

    @property
    def loop(self) -> asyncio.AbstractEventLoop: ...

    @property
    def access(self) -> NodeAccess | None: ...

    @property
    def store_id(self) -> str:
        """The identity of the node's epoch store, sent in HELLO ("" until known)."""

    @property
    def limits(self) -> ConnectionLimits: ...

    @property
    def connections(self) -> set[Connection]:
        """The node's inbound connections: each adds itself, and leaves when closed."""

    def dispatch(self, conn: Peer, msg: Any) -> None: ...

    def want_flush(self, conn: Connection) -> None: ...

    def on_connection_lost(self, conn: Peer) -> None: ...


class OutboundLink(Protocol):
    """What an outbound connection tells the link it serves (``links.PeerLink``)."""

    @property
    def index(self) -> int:
        """The node dialed."""

    def on_ready(self, conn: Connection) -> None: ...

    def on_closed(self, conn: Connection, was_ready: bool) -> None: ...


class Connection(asyncio.Protocol):
    """A framed connection.  ``link`` set: outbound to node ``link.index``."""

    def __init__(self, node: ConnectionHost, link: OutboundLink | None = None) -> None:
        self.node = node
        self.link = link
        self.id = next(_ids)
        self.outbound = link is not None
        self.peer_role: str | None = "node" if link is not None else None
        self.peer_node: int | None = link.index if link is not None else None
        self.peer_location = ""
        self.peer_features = PeerFeature.NONE  # outbound: what the peer's HELLO_REPLY said
        self.attrs: dict[str, Any] = {}
        self._principal: Principal | None = NODE_PRINCIPAL if link is not None else None
        self.ready = False
        self.closed = False
        self.transport: asyncio.Transport | None = None
        self._decoder = FrameDecoder(
            first_frame_max_size=None if link is not None else HELLO_MAX_FRAME)
        if link is None:
            self._decoder.admit = _hello_first
        self._stall_timer: asyncio.TimerHandle | None = None
        self._last_progress = 0.0
        self._out: list[Any] = []
        self._out_counted = 0  # write_buffer_size has summed _out[:_out_counted] ...
        self._out_bytes = 0  # ... to this many bytes
        self._flush_scheduled = False
        self._read_pauses: set[str] = set()
        self._hello_timer: asyncio.TimerHandle | None = None
        self.peername = ""
        self.last_heard = 0.0  # loop time of the last bytes received
        self._admitted = False  # counted by the node's ConnectionLimits
        self._limit_key: str | None = None  # ... under this principal (or peer host)
        self._buffered = 0  # bytes of half-received frames, as told to the limits

    def __repr__(self) -> str:
        who = f"N{self.peer_node}" if self.peer_node is not None else self.peer_role or "?"
        way = "to" if self.outbound else "from"
        return f"<Connection #{self.id} {way} {who} {self.peername}>"

    @property
    def principal(self) -> Principal | None:
        """Who the peer authenticated as (None: security is off, or no HELLO yet)."""
        return self._principal

    # -- asyncio.Protocol -------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but behave as one.
        self.transport = t = transport  # type: ignore[assignment]
        peer = t.get_extra_info("peername")
        self.peername = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        t.set_write_buffer_limits(high=WRITE_HIGH_WATER, low=WRITE_LOW_WATER)  # type: ignore[attr-defined]
        if self.outbound:
            me = self.node.me
            access = self.node.access
            if access is not None and not access.dialed_a_node(t.get_extra_info("peercert")):
                # A certificate the CA signed for something else (a client's) at a node's
                # address: not a peer to send STOREs to.
                log.error("%r: the peer's certificate is not a node's, closing", self)
                self.close()
                return
            self._write_now(Hello(cluster=self.node.config.cluster, role="node",
                                  node_index=me.index, location=str(me.location),
                                  store_id=self.node.store_id,
                                  token=access.link.token if access is not None else ""))
        else:
            if not self.node.limits.admit():
                log.warning("%r: %d connections open (max_connections), closing", self,
                            self.node.limits.open)
                self.closed = True
                self.abort()
                return
            self._admitted = True
            self.last_heard = self.node.loop.time()
            self.node.connections.add(self)
            self._hello_timer = self.node.loop.call_later(HELLO_TIMEOUT, self._hello_timeout)

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        self.last_heard = self.node.loop.time()
        self._receive(self._decoder.feed, data)

    def _receive(self, decode: Any, *args: Any) -> None:
        """Decode (``decode(*args)``: a feed, or the resume after HELLO) and dispatch."""
        try:
            msgs = decode(*args)
        except ProtocolError as exc:
            log.warning("%r: bad frame, closing: %s", self, exc)
            self._fail(exc.status, exc.message or str(exc))
            return
        except Exception as exc:  # a decoder bug must not escape: still a bad frame
            log.warning("%r: undecodable frame, closing: %r", self, exc)
            self._fail(E.BADMSG, f"undecodable frame: {type(exc).__name__}: {exc}")
            return
        pending = self._decoder.pending
        if self._admitted and pending != self._buffered:
            within = self.node.limits.buffered(pending - self._buffered)
            self._buffered = pending
            if not within and pending and self.peer_role != "node":
                log.warning("%r: %d bytes of half-received frames on the node, over "
                            "max_buffered_input_bytes: closing", self,
                            self.node.limits.input_bytes)
                self._fail(E.OVERLOADED, "the node holds too much half-received input")
                return
        if pending:
            self._last_progress = self.node.loop.time()
            if self._stall_timer is None:
                self._arm_stall_timer(self.node.config.settings.frame_timeout_ms / 1000)
        dispatch = self.node.dispatch
        for msg in msgs:
            if self.closed:
                return
            if self.ready:
                dispatch(self, msg)
            else:
                self._handshake(msg)
                if self.ready and not self.outbound:  # what came after the HELLO
                    self._receive(self._decoder.resume)

    def _arm_stall_timer(self, delay: float) -> None:
        self._stall_timer = self.node.loop.call_later(delay, self._check_stall)

    def _check_stall(self) -> None:
        """A frame is half-received: close if no byte of it came for the frame timeout."""
        self._stall_timer = None
        if self.closed or not self._decoder.pending:
            return
        limit = self.node.config.settings.frame_timeout_ms / 1000
        now = self.node.loop.time()
        if self._read_pauses:  # we stopped reading: the peer is not the one stalling
            self._last_progress = now
        idle = now - self._last_progress
        if idle < limit:
            self._arm_stall_timer(limit - idle)
            return
        log.warning("%r: a frame stalled (%d bytes of it received, nothing for %.1f s), "
                    "closing", self, self._decoder.pending, idle)
        self._fail(E.TIMEDOUT, f"frame incomplete after {idle:.1f} s without progress")

    def eof_received(self) -> bool | None:
        return None  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        was_ready = self.ready
        self.closed = True
        self.ready = False
        self._drop_queued()
        if self._hello_timer is not None:
            self._hello_timer.cancel()
        if self._stall_timer is not None:
            self._stall_timer.cancel()
            self._stall_timer = None
        self.node.connections.discard(self)
        if self._admitted:
            self._admitted = False
            self.node.limits.closed(self._limit_key)
            self.node.limits.buffered(-self._buffered)
            self._buffered = 0
        if self.link is not None:
            self.link.on_closed(self, was_ready)
        if was_ready:
            self.node.on_connection_lost(self)

    def pause_writing(self) -> None:
        if not self.outbound:
            self.pause_reading("write-buffer")

    def resume_writing(self) -> None:
        if not self.outbound:
            self.resume_reading("write-buffer")

    # -- handshake --------------------------------------------------------------------------
    def _handshake(self, msg: Any) -> None:
        if self.outbound:
            if type(msg) is not HelloReply:
                self._fail(E.BADMSG, f"expected HELLO_REPLY, got {type(msg).__name__}")
                return
            if msg.status != E.OK:
                log.error("%r refused our HELLO: %s %s", self, msg.status.name, msg.message)
                self.close()
                return
            if msg.node_index is not None and msg.node_index != self.peer_node:
                log.error("%r: expected node N%s, the peer says it is N%s", self,
                          self.peer_node, msg.node_index)
                self.close()
                return
            self.peer_features = PeerFeature(msg.features & NODE_FEATURES)
            self.ready = True
            assert self.link is not None
            self.link.on_ready(self)
            return
        if type(msg) is not Hello:
            self._fail(E.BADMSG, f"expected HELLO first, got {type(msg).__name__}")
            return
        if self._hello_timer is not None:
            self._hello_timer.cancel()
            self._hello_timer = None
        node = self.node
        status, why = check_hello(msg, node.config.cluster, store_id=node.store_id)
        principal = None
        if status == E.OK and node.access is not None:
            assert self.transport is not None
            status, principal, why = node.access.authenticate(
                msg.role, msg.token, self.transport.get_extra_info("peercert"),
                msg.node_index)
        if status == E.OK and msg.role == "node" and not node.config.has_node(
                msg.node_index or 0):
            status, why = E.NOTINSERVERCONFIG, f"node {msg.node_index} is not in the config"
        if status == E.OK and msg.role != "node":
            key = principal.name if principal is not None else self.peername.rpartition(":")[0]
            refused = node.limits.admit_principal(key)
            if refused is None:
                self._limit_key = key
            else:
                status, why = E.TOOMANY, refused
        reply = HelloReply(status=status, node_index=node.index, message=why,
                           features=int(NODE_FEATURES))
        if status != E.OK:
            log.warning("%r: refusing HELLO: %s", self, why)
            self._write_now(reply)
            self.close()
            return
        self._principal = principal
        self._decoder.admit = (admit_from_client if node.access is not None
                               and msg.role != "node" else None)
        self.peer_role = msg.role
        self.peer_node = msg.node_index if msg.role == "node" else None
        self.peer_location = msg.location
        self.ready = True
        self.send(reply)

    def _hello_timeout(self) -> None:
        self._hello_timer = None
        if not self.ready and not self.closed:
            self._fail(E.TIMEDOUT, f"no HELLO within {HELLO_TIMEOUT:g} s")

    def _fail(self, status: E, message: str) -> None:
        """Answer ERROR (status, message) and close: the peer sent something invalid."""
        self._drop_queued()
        self._write_now(Error(request_id=0, status=status, message=message))
        self.close()

    # -- sending ----------------------------------------------------------------------------
    def send(self, msg: Any) -> bool:
        """Queue ``msg``; it leaves at the end of this loop turn.  False if closed/dropped."""
        if self.closed:
            return False
        if self.outbound and self._backlogged():
            return False
        self._out.extend(encode(msg))
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self.node.want_flush(self)
        return True

    def send_many(self, msgs: Collection[Any]) -> bool:
        ok = True
        for msg in msgs:
            ok = self.send(msg) and ok
        return ok

    def _backlogged(self) -> bool:
        t = self.transport
        return t is not None and t.get_write_buffer_size() > LINK_DROP_BYTES

    def flush(self) -> None:
        """Write what is queued now (``Node.flush_pending`` calls it at the end of the
        loop turn, or sooner)."""
        self._flush_scheduled = False
        if self._out and not self.closed and self.transport is not None:
            out = self._out
            self._drop_queued()
            self.transport.writelines(coalesce(out))

    def _drop_queued(self) -> None:
        self._out = []
        self._out_counted = self._out_bytes = 0

    def _write_now(self, msg: Any) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.writelines(encode(msg))

    @property
    def write_buffer_size(self) -> int:
        """Bytes written and not yet sent, plus bytes queued this loop turn."""
        # Counted on demand, from where the last call stopped: read streams ask after
        # each frame they queue, and a turn may queue thousands.
        out = self._out
        for i in range(self._out_counted, len(out)):
            self._out_bytes += len(out[i])
        self._out_counted = len(out)
        t = self.transport
        return (t.get_write_buffer_size() if t is not None else 0) + self._out_bytes

    # -- control ----------------------------------------------------------------------------
    def pause_reading(self, reason: str) -> None:
        """Stop reading from the peer until ``resume_reading(reason)``."""
        if not self._read_pauses and self.transport is not None and not self.closed:
            self.transport.pause_reading()
        self._read_pauses.add(reason)

    def resume_reading(self, reason: str) -> None:
        if reason not in self._read_pauses:
            return
        self._read_pauses.discard(reason)
        if not self._read_pauses and self.transport is not None and not self.closed:
            self.transport.resume_reading()

    def close(self) -> None:
        """Flush what is queued and close (``connection_lost`` follows)."""
        if self.transport is None or self.transport.is_closing():
            return
        self.flush()
        self.transport.close()

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()
