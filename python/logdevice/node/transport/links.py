"""Node-to-node links: one persistent outbound connection per peer, and the loopback.

``PeerLink`` keeps a connection to one other node open: it connects (with TLS, and the
node certificate as its client certificate, when the config says so), sends HELLO
(role "node"), reconnects with a capped exponential backoff after a failure, and tells
the node when it comes up or goes down (``Node.on_link_change``).  Everything a node
sends to a peer travels on its own link (STORE, RELEASE, HEARTBEAT...); the peer answers
on the same connection (STORED comes back on the link that carried the STORE).

A message sent while the link is down is dropped (``send`` returns False): the write path
does not wait for a dead peer, it re-sends elsewhere on timeout, and periodic messages
(heartbeats, releases re-sent on reconnect) catch up by themselves.

``Loopback`` is the link from a node to itself: the same interface, but messages go
straight to the node's handlers on the next loop turn, with no encoding.  Its two ends
look like connections to the handlers (``peer_node`` is this node).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Collection
from typing import Any, Protocol

from logdevice.backoff import ExponentialBackoff
from logdevice.node.transport.connection import Connection, ConnectionHost
from logdevice.protocol.flags import NODE_FEATURES, PeerFeature
from logdevice.security import NODE_PRINCIPAL

log = logging.getLogger("logdevice.node.transport.links")

BACKOFF_INITIAL = 0.05
BACKOFF_MAX = 1.0


class LinkHost(ConnectionHost, Protocol):
    """What links use of their node (``server.Node`` is one)."""

    def on_link_change(self, node: int, connected: bool) -> None: ...


class PeerLink:
    """The outbound connection of this node to node ``index`` at ``host:port``."""

    def __init__(self, node: LinkHost, index: int, host: str, port: int) -> None:
        self.node = node
        self.index = index
        self.host = host
        self.port = port
        self.conn: Connection | None = None
        self.connected = False
        self._closed_event = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._had_session = False
        self.connects = 0  # successful handshakes so far

    def __repr__(self) -> str:
        return f"<PeerLink N{self.index} {self.host}:{self.port} " \
               f"{'up' if self.connected else 'down'}>"

    def start(self) -> None:
        self._task = self.node.loop.create_task(self._run(), name=f"link-N{self.index}")

    async def stop(self) -> None:
        self._stopping = True
        if self.conn is not None:
            self.conn.close()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        loop = self.node.loop
        timeout = self.node.config.settings.connect_timeout_ms / 1000
        backoff = ExponentialBackoff(BACKOFF_INITIAL, BACKOFF_MAX)
        access = self.node.access
        tls = access.link.ssl if access is not None else None
        while not self._stopping:
            self._closed_event.clear()
            try:
                _, conn = await asyncio.wait_for(
                    loop.create_connection(lambda: Connection(self.node, self),
                                           self.host, self.port, ssl=tls,
                                           server_hostname=self.host if tls else None),
                    timeout)
                if not conn.closed and self.conn is None:
                    self.conn = conn  # on_ready may have come first and set it already
                await self._closed_event.wait()
            except (TimeoutError, OSError) as exc:
                log.debug("link to N%d: connect failed: %s", self.index, exc)
            if self._stopping:
                return
            if self._had_session:  # it worked for a while: retry quickly
                backoff.reset()
            self._had_session = False
            await asyncio.sleep(backoff.next_delay())

    # -- called by the Connection -----------------------------------------------------------
    def on_ready(self, conn: Connection) -> None:
        # The peer's HELLO_REPLY can be read before ``_run`` resumes from the connect: the
        # link must be usable now, for what the roles send from ``on_link_change``.
        self.conn = conn
        self.connected = True
        self._had_session = True
        self.connects += 1
        log.info("link to N%d is up", self.index)
        self.node.on_link_change(self.index, True)

    def on_closed(self, conn: Connection, was_ready: bool) -> None:
        if conn is self.conn:
            self.conn = None
        self._closed_event.set()
        if self.connected:
            self.connected = False
            if not self._stopping:
                log.info("link to N%d is down", self.index)
                self.node.on_link_change(self.index, False)

    @property
    def features(self) -> PeerFeature:
        """What the peer understands (its HELLO_REPLY's ``features``; none while down)."""
        conn = self.conn
        return conn.peer_features if conn is not None and self.connected else PeerFeature.NONE

    # -- sending ----------------------------------------------------------------------------
    def send(self, msg: Any) -> bool:
        conn = self.conn
        if conn is None or not self.connected:
            return False
        return conn.send(msg)

    def send_many(self, msgs: Collection[Any]) -> bool:
        conn = self.conn
        if conn is None or not self.connected:
            return False
        return conn.send_many(msgs)


class _LoopbackEnd:
    """One end of the loopback: what a handler sees as ``conn``."""

    peer_role = "node"
    principal = NODE_PRINCIPAL
    closed = False

    def __init__(self, node: LinkHost, id_: int) -> None:
        self.node = node
        self.id = id_
        self.peer_node: int | None = node.index
        self.peer_location = str(node.me.location)
        self.attrs: dict[str, Any] = {}
        self.other: _LoopbackEnd | None = None
        self.outbound = id_ < 0

    def __repr__(self) -> str:
        return f"<Loopback {'out' if self.outbound else 'in'} N{self.node.index}>"

    def send(self, msg: Any) -> bool:
        other = self.other
        assert other is not None
        self.node.loop.call_soon(self.node.dispatch, other, msg)  # type: ignore[arg-type]
        return True

    def send_many(self, msgs: Collection[Any]) -> bool:
        for msg in msgs:
            self.send(msg)
        return True

    def close(self) -> None:
        pass

    def pause_reading(self, reason: str) -> None:
        pass

    def resume_reading(self, reason: str) -> None:
        pass


class Loopback:
    """The link from a node to itself (always connected)."""

    connected = True
    features = NODE_FEATURES  # the same code at both ends

    def __init__(self, node: LinkHost) -> None:
        self.index = node.index
        # Negative ids: never equal to a real connection's id.
        self.out = _LoopbackEnd(node, -1)
        self.inbound = _LoopbackEnd(node, -2)
        self.out.other, self.inbound.other = self.inbound, self.out

    def send(self, msg: Any) -> bool:
        return self.out.send(msg)

    def send_many(self, msgs: Collection[Any]) -> bool:
        return self.out.send_many(msgs)
