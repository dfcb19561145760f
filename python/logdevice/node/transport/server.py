"""The node process's core: the event loop, the TCP server, links, roles and dispatch.

``Node`` owns one asyncio loop (uvloop when installed, see ``main``), a TCP server on the
node's port, one ``PeerLink`` per other node plus a ``Loopback`` to itself, and a list of
roles (``role.Role``).  Every frame received on any connection after the HELLO handshake
goes through ``dispatch``: a table from message class to the handler of the role that
registered it.  Roles added later (read streams, recovery...) only register their message
types; nothing here changes.

With a ``security`` section in the config, ``access`` (a ``NodeAccess``) serves the port
with TLS, authenticates each HELLO and checks every frame in ``dispatch`` before its
handler sees it; without one, ``access`` is None and nothing is checked.

Node-wide events fan out to every role: releases (``notify_release``), failure detector
changes (``notify_cluster_change``), link changes (``on_link_change``), closed
connections (``on_connection_lost``) and a new effective config (``set_config``: the
runtime log groups or the config file's nodes changed; links follow the node list).
``node.config`` is replaced, never changed in place: roles read it when they use it.

Shutdown (``stop``): close the listening socket, stop the roles in reverse order (the
storage role flushes its group commit and closes LogsDB), close the links and every
remaining connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Collection
from typing import Any

from logdevice.config import Config
from logdevice.errors import E, LogDeviceError
from logdevice.node.roles.role import Handler, Peer, Role
from logdevice.node.transport.access import NodeAccess
from logdevice.node.transport.connection import Connection
from logdevice.node.transport.limits import ConnectionLimits
from logdevice.node.transport.links import Loopback, PeerLink
from logdevice.protocol import Error

log = logging.getLogger("logdevice.node")

#: The accept backlog of the listening socket.
BACKLOG = 1024
#: Seconds a peer may take to complete the TLS handshake.
HANDSHAKE_TIMEOUT = 10.0


class Node:
    """One LogDevice node: config, roles, connections.

    Parameters
    ----------
    config : Config
    index : int
        This node's index in ``config``.
    loop : asyncio.AbstractEventLoop, optional
        Defaults to the running loop (build the node inside it).
    """

    def __init__(self, config: Config, index: int,
                 loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.config = config
        self.index = index
        self.me = config.node(index)
        self.loop = loop if loop is not None else asyncio.get_running_loop()
        #: TLS, authentication and ACLs; None when the config has no security section.
        self.access = NodeAccess(config) if config.security is not None else None
        # Grows on every restart: peers tell a restarted node from a stale heartbeat.
        self.generation = time.time_ns() // 1000
        self.roles: list[Role] = []
        # The roles that act on a release (most do not): a node hears one per log per
        # release, thousands a second with many logs.
        self._release_listeners: list[Callable[[int, int], None]] = []
        self._handlers: dict[type, Handler] = {}
        self._owners: dict[type, str] = {}
        self.connections: set[Connection] = set()
        #: Connections held in all, per principal, and idle clients (``limits``).
        self.limits = ConnectionLimits(config.settings)
        self._sweeper: asyncio.Task[None] | None = None
        self.links: dict[int, PeerLink] = {
            n.index: PeerLink(self, n.index, n.host, n.port)
            for n in config.nodes if n.index != index}
        self.loopback = Loopback(self)
        self.server: asyncio.AbstractServer | None = None
        self.stopping = False
        #: The identity of the epoch store this node uses ("" until known); sent in HELLO.
        self.store_id = ""
        self._by_name: dict[str, Role] = {}
        self._unflushed: list[Connection] = []
        self._before_flush: list[Callable[[], None]] = []
        self._flush_scheduled = False

    def __repr__(self) -> str:
        return f"<Node N{self.index} of {self.config.cluster!r} on {self.me.host}:{self.me.port}>"

    # -- roles ------------------------------------------------------------------------------
    def add_role(self, role: Role) -> Role:
        """Register ``role`` and its handlers (a message type has exactly one owner)."""
        for cls, handler in role.handlers().items():
            if cls in self._handlers:
                raise ValueError(f"{cls.__name__} is already handled by role "
                                 f"{self._owners[cls]!r}")
            self._handlers[cls] = handler
            self._owners[cls] = role.name
        self.roles.append(role)
        self._by_name[role.name] = role
        if type(role).on_release is not Role.on_release:
            self._release_listeners.append(role.on_release)
        return role

    def role(self, name: str) -> Any:
        """The role registered under ``name`` (KeyError if none)."""
        return self._by_name[name]

    def has_role(self, name: str) -> bool:
        return name in self._by_name

    # -- dispatch ---------------------------------------------------------------------------
    def dispatch(self, conn: Peer, msg: Any, refreshed: bool = False) -> None:
        """Hand ``msg`` (received on ``conn``) to its handler; errors become ERROR frames.
        With security on, a request the peer may not make is answered ACCESS instead; one
        naming a log this node does not know waits for the runtime log groups to be read
        again (``refreshed``: they were), so a group created a moment ago is judged by
        its own ACL."""
        access = self.access
        if access is not None:
            if not refreshed and access.names_unknown_log(conn.principal, msg) and \
                    self.after_fresh_logs_config(lambda: self.dispatch(conn, msg, True)):
                return
            refusal = access.refusal(conn.principal, msg)
            if refusal is not None:
                conn.send(refusal)
                return
        handler = self._handlers.get(type(msg))
        if handler is None:
            conn.send(Error(request_id=getattr(msg, "request_id", 0), status=E.NOTSUPPORTED,
                            message=f"N{self.index} does not handle {type(msg).__name__}",
                            in_reply_to=int(msg.TYPE)))
            return
        try:
            handler(conn, msg)
        except LogDeviceError as exc:
            conn.send(Error(request_id=getattr(msg, "request_id", 0), status=exc.status,
                            message=exc.message or str(exc), in_reply_to=int(msg.TYPE)))
        except Exception as exc:  # a bug in a handler must not take the node down
            log.exception("N%d: handler of %s failed", self.index, type(msg).__name__)
            conn.send(Error(request_id=getattr(msg, "request_id", 0), status=E.FAILED,
                            message=f"internal error: {type(exc).__name__}: {exc}",
                            in_reply_to=int(msg.TYPE)))

    # -- sending to nodes -------------------------------------------------------------------
    def link(self, node: int) -> PeerLink | Loopback | None:
        if node == self.index:
            return self.loopback
        return self.links.get(node)

    def send_to_node(self, node: int, msg: Any) -> bool:
        """Send ``msg`` to node ``node`` on our link; False if it is down (dropped)."""
        link = self.loopback if node == self.index else self.links.get(node)
        return link is not None and link.send(msg)

    def want_flush(self, conn: Connection) -> None:
        """``conn`` has output queued: write it at the end of this loop turn (or sooner,
        at ``flush_pending``)."""
        self._unflushed.append(conn)
        self._flush_soon()

    def before_flush(self, hook: Callable[[], None]) -> None:
        """Run ``hook`` once at the next flush (the end of this loop turn, or sooner at
        ``flush_pending``), before the connections are written: a role that gathers a
        turn's replies into one frame sends it there, without waiting a turn more."""
        self._before_flush.append(hook)
        self._flush_soon()

    def _flush_soon(self) -> None:
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self.loop.call_soon(self.flush_pending)

    def flush_pending(self) -> None:
        """Write what every connection has queued, now.  Called where a batch of frames is
        complete (a turn's STOREs, a group commit's STOREDs): on the write path each loop
        turn waited for costs tens of microseconds per hop."""
        while self._before_flush:
            hooks, self._before_flush = self._before_flush, []
            for hook in hooks:
                hook()
        self._flush_scheduled = False
        conns, self._unflushed = self._unflushed, []
        for conn in conns:
            conn.flush()

    def flush_nodes(self, nodes: Collection[int]) -> None:
        """Write what our links to ``nodes`` have queued, now (see ``flush_pending``)."""
        links = self.links
        for n in nodes:
            link = links.get(n)
            if link is not None and link.conn is not None:
                link.conn.flush()

    # -- events -----------------------------------------------------------------------------
    def notify_release(self, log_id: int, lsn: int) -> None:
        for on_release in self._release_listeners:
            on_release(log_id, lsn)

    def notify_cluster_change(self, down: Collection[int], up: Collection[int]) -> None:
        for role in self.roles:
            role.on_cluster_change(down, up)

    def set_config(self, config: Config) -> None:
        """Adopt a new effective config (runtime log groups changed): requests handled
        from now on see it, and every role hears ``on_config_change``."""
        old, self.config = self.config, config
        self.limits.update(config.settings)
        if self.access is not None:
            self.access.set_config(config)
        if old.nodes != config.nodes:
            self._follow_membership(config)
        for role in self.roles:
            try:
                role.on_config_change(old, config)
            except Exception:
                log.exception("N%d: role %s failed to follow the new config", self.index,
                              role.name)

    def _follow_membership(self, config: Config) -> None:
        """Links to nodes added to the config; none to nodes removed (or moved)."""
        wanted = {n.index: n for n in config.nodes if n.index != self.index}
        for i, link in list(self.links.items()):
            n = wanted.get(i)
            if n is None or (n.host, n.port) != (link.host, link.port):
                del self.links[i]
                self.loop.create_task(link.stop())
        for i, n in wanted.items():
            if i not in self.links:
                link = self.links[i] = PeerLink(self, i, n.host, n.port)
                if self.server is not None and not self.stopping:
                    link.start()
        log.info("N%d: members now %s", self.index,
                 ", ".join(f"N{n.index}" for n in config.nodes))
        if not config.has_node(self.index):
            log.warning("N%d is no longer in the config: peers refuse it; stop it",
                        self.index)

    def after_fresh_logs_config(self, callback: Callable[[], None]) -> bool:
        """Run ``callback`` once the runtime log groups were read again (a read that starts
        now or later); False, and nothing runs, on a node without that role."""
        if not self.has_role("logs_config"):
            return False
        self.role("logs_config").after_fresh_read(callback)
        return True

    def on_link_change(self, node: int, connected: bool) -> None:
        for role in self.roles:
            role.on_link_change(node, connected)

    def on_connection_lost(self, conn: Peer) -> None:
        for role in self.roles:
            role.on_connection_closed(conn)

    async def _close_idle_clients(self) -> None:
        """Close client connections silent for ``client_idle_timeout_ms`` that hold
        nothing open (a client reconnects when it needs the node again)."""
        while True:
            await asyncio.sleep(max(1.0, min(30.0, self.limits.idle_timeout / 4 or 30.0)))
            now = self.loop.time()
            for conn in list(self.connections):
                if conn.peer_role == "node" or not conn.ready:
                    continue
                if self.limits.idle(conn.last_heard, now,
                                    any(role.holds(conn) for role in self.roles)):
                    log.info("N%d: %r idle for %.0f s, closing", self.index, conn,
                             now - conn.last_heard)
                    conn.close()

    # -- life cycle -------------------------------------------------------------------------
    async def start(self) -> None:
        """Start the roles, the links and the server."""
        for role in self.roles:
            await role.start()
        for link in self.links.values():
            link.start()
        server_ssl = self.access.server_ssl if self.access is not None else None
        self.server = await self.loop.create_server(
            lambda: Connection(self), self.me.host, self.me.port, backlog=BACKLOG,
            reuse_address=True, ssl=server_ssl,
            ssl_handshake_timeout=HANDSHAKE_TIMEOUT if server_ssl is not None else None)
        self._sweeper = self.loop.create_task(self._close_idle_clients(), name="idle-sweep")
        log.info("N%d listening on %s:%d%s (roles: %s)", self.index, self.me.host,
                 self.me.port, " with TLS" if server_ssl is not None else "",
                 ", ".join(r.name for r in self.roles))

    async def stop(self) -> None:
        """Stop accepting, stop the roles (flushing their work), close everything."""
        if self.stopping:
            return
        self.stopping = True
        if self._sweeper is not None:
            self._sweeper.cancel()
        if self.server is not None:
            self.server.close()
        for role in reversed(self.roles):
            try:
                await role.stop()
            except Exception:
                log.exception("N%d: stopping role %s failed", self.index, role.name)
        for link in self.links.values():
            await link.stop()
        for conn in list(self.connections):
            conn.close()
        if self.server is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.server.wait_closed(), 2.0)
        self.close_roles()
        log.info("N%d stopped", self.index)

    def close_roles(self) -> None:
        for role in reversed(self.roles):
            try:
                role.close()
            except Exception:
                log.exception("N%d: closing role %s failed", self.index, role.name)
