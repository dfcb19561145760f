"""The ``Role`` interface: how a piece of node logic plugs into the node process.

A node runs a few roles (failure detector, sequencer, storage, and later the storage side
of read streams, recovery, rebuilding...).  Each role owns some message types: the node
reads frames off every connection and calls the handler its owner registered
(``handlers()``).  Roles also get the node's events through hooks with no-op defaults, so
a role overrides only what it needs:

- ``on_release(log_id, lsn)``: the storage role took a RELEASE (read streams wake up the
  readers tailing the log here);
- ``on_connection_closed(conn)``: drop per-connection state (read streams of a client);
- ``on_cluster_change(down, up)``: the failure detector's view changed;
- ``on_link_change(node, connected)``: the node's own connection to a peer came up / went
  down (faster than the failure detector, used by copyset selection);
- ``on_config_change(old, new)``: the node adopted a new effective config (runtime log
  groups changed).

Handlers are plain functions ``handler(conn, msg) -> None`` called on the event loop; a
handler that has slow work to do schedules it (a task, an executor) and answers later
with ``conn.send(...)``.  A handler that raises ``LogDeviceError`` makes the node answer
``Error(status)`` to the peer; any other exception is logged and answered with FAILED.
Neither closes the connection.

A role sees the node it runs on as a ``NodeServices``: the few node attributes and
methods roles use (``server.Node`` is one), so no role depends on the node module.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from logdevice.config import Config, NodeConfig
    from logdevice.node.transport.access import NodeAccess
    from logdevice.protocol.flags import PeerFeature
    from logdevice.security import Principal


class Peer(Protocol):
    """What a handler can do with the connection a message came on (a TCP
    ``Connection`` or the node's in-process loopback)."""

    id: int  # unique in the node process
    peer_role: str | None  # "client" or "node" once the HELLO was accepted
    peer_node: int | None  # the peer's node index when peer_role == "node"
    closed: bool
    attrs: dict[str, Any]  # per-connection state of the roles, keyed by role

    @property
    def principal(self) -> Principal | None:
        """Who the peer authenticated as (security on), None with security off."""

    def send(self, msg: Any) -> bool: ...

    def send_many(self, msgs: Collection[Any]) -> bool: ...

    def close(self) -> None: ...

    def pause_reading(self, reason: str) -> None:
        """Stop reading from this peer until ``resume_reading(reason)`` (back-pressure)."""

    def resume_reading(self, reason: str) -> None: ...


Handler = Callable[[Peer, Any], None]


class NodeLink(Protocol):
    """What roles use of the node's link to another node (or to itself)."""

    @property
    def connected(self) -> bool: ...

    @property
    def features(self) -> PeerFeature:
        """What the peer understands (none while the link is down)."""

    def send(self, msg: Any) -> bool: ...


class NodeServices(Protocol):
    """What roles use of the node they run on (``server.Node`` is one)."""

    @property
    def config(self) -> Config:
        """The effective config now (replaced, never changed in place)."""

    @property
    def index(self) -> int: ...

    @property
    def me(self) -> NodeConfig: ...

    @property
    def loop(self) -> asyncio.AbstractEventLoop: ...

    @property
    def access(self) -> NodeAccess | None:
        """TLS, authentication and ACLs; None when the config has no security section."""

    @property
    def generation(self) -> int:
        """Grows on every restart of the node."""

    @property
    def links(self) -> Mapping[int, NodeLink]:
        """The links to the other nodes, by node index."""

    def role(self, name: str) -> Any: ...

    def has_role(self, name: str) -> bool: ...

    def link(self, node: int) -> NodeLink | None: ...

    def send_to_node(self, node: int, msg: Any) -> bool: ...

    def flush_pending(self) -> None: ...

    def before_flush(self, hook: Callable[[], None]) -> None: ...

    def flush_nodes(self, nodes: Collection[int]) -> None: ...

    def notify_release(self, log_id: int, lsn: int) -> None: ...

    def notify_cluster_change(self, down: Collection[int], up: Collection[int]) -> None: ...

    def set_config(self, config: Config) -> None: ...

    def after_fresh_logs_config(self, callback: Callable[[], None]) -> bool: ...


class Role:
    """Base class of node roles: every hook is a no-op, override what you use."""

    name = "role"

    def __init__(self, node: NodeServices) -> None:
        self.node = node

    def handlers(self) -> Mapping[type, Handler]:
        """Message class -> handler, for the message types this role answers."""
        return {}

    def holds(self, conn: Peer) -> bool:
        """Whether this role keeps something open for ``conn`` (a read stream): such a
        client connection is not idle however long the client stays silent."""
        return False

    async def start(self) -> None:
        """Called once the node's loop runs, before the port opens."""

    async def stop(self) -> None:
        """Stop taking work and flush (the server no longer accepts connections)."""

    def close(self) -> None:
        """Release resources after ``stop`` (also called when startup failed)."""

    def on_release(self, log_id: int, lsn: int) -> None:
        """Records of ``log_id`` up to ``lsn`` are released on this storage node."""

    def on_connection_closed(self, conn: Peer) -> None:
        """``conn`` went away; drop what the role kept for it."""

    def on_cluster_change(self, down: Collection[int], up: Collection[int]) -> None:
        """The failure detector now believes ``down`` dead and ``up`` alive (changes only)."""

    def on_link_change(self, node: int, connected: bool) -> None:
        """This node's own connection to ``node`` connected or broke."""

    def on_config_change(self, old: Config, new: Config) -> None:
        """``node.config`` is now ``new`` (runtime log groups created, changed, removed):
        drop what was derived from ``old``."""


async def cancel_and_wait(task: asyncio.Task[None] | None) -> None:
    """Cancel a role's background task (if any) and wait until it has ended."""
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
