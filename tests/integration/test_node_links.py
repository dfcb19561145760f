"""Node-to-node links (``logdevice.node.transport.links``) between two real in-process nodes over
loopback TCP: what a role sends the moment a link comes up must arrive.

The sequencer re-sends its release pointers from ``on_link_change(up)``; a restarted
storage node that misses that message keeps serving its stale, persisted pointer, and a
reader waiting for records above it stalls for good (nothing else re-sends an idle log's
release)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import Any

from logdevice.config import make_local_config
from logdevice.local_cluster import free_ports
from logdevice.node.roles.role import Role
from logdevice.node.roles.store_sender import StoreSender
from logdevice.node.transport import connection
from logdevice.node.transport.server import Node
from logdevice.protocol import Release

WAIT = 10.0


class LateResumeLoop(asyncio.SelectorEventLoop):
    """A loop whose ``create_connection`` hands the connection back only after the
    handshake finished: the order a busy machine produces when the peer's HELLO_REPLY is
    read before the connecting coroutine resumes."""

    async def create_connection(self, protocol_factory, *args, **kwargs):  # type: ignore[override]
        transport, protocol = await super().create_connection(protocol_factory, *args, **kwargs)
        deadline = self.time() + WAIT
        while not (protocol.ready or protocol.closed) and self.time() < deadline:
            await asyncio.sleep(0.001)
        return transport, protocol


class Announcer(Role):
    """Sends a RELEASE to each peer whose link comes up, as the sequencer role does."""

    name = "announcer"

    def __init__(self, node: Node) -> None:
        super().__init__(node)
        self.sent: list[tuple[int, bool]] = []

    def on_link_change(self, node: int, connected: bool) -> None:
        if connected:
            ok = self.node.send_to_node(node, Release(log_id=1, lsn=42, epoch=1))
            self.sent.append((node, ok))


class Listener(Role):
    """Records the RELEASEs it receives."""

    name = "listener"

    def __init__(self, node: Node) -> None:
        super().__init__(node)
        self.received: list[Release] = []
        self.arrived = asyncio.Event()

    def handlers(self) -> Mapping[type, Any]:
        return {Release: self._on_release}

    def _on_release(self, conn: Any, msg: Release) -> None:
        self.received.append(msg)
        self.arrived.set()


@contextlib.asynccontextmanager
async def two_nodes(tmp_path: Any) -> AsyncIterator[tuple[Node, Announcer, Listener]]:
    """N0 (sender, with an Announcer) and N1 (receiver, with a Listener), started; both
    stopped on the way out."""
    cfg = make_local_config(2, 2, logs=[1], root=tmp_path, ports=free_ports(2))
    receiver = Node(cfg, 1)
    listener = receiver.add_role(Listener(receiver))
    sender = Node(cfg, 0)
    announcer = sender.add_role(Announcer(sender))
    await receiver.start()
    await sender.start()
    try:
        yield sender, announcer, listener
    finally:
        await sender.stop()
        await receiver.stop()


def test_message_sent_as_the_link_comes_up_arrives(tmp_path):
    async def main() -> None:
        async with two_nodes(tmp_path) as (_, announcer, listener):
            with contextlib.suppress(TimeoutError):  # the asserts below say what is missing
                await asyncio.wait_for(listener.arrived.wait(), WAIT)
        assert announcer.sent == [(1, True)]
        assert [(m.log_id, m.lsn, m.epoch) for m in listener.received] == [(1, 42, 1)]

    loop = LateResumeLoop()
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()


def test_release_a_backlogged_link_dropped_is_sent_again(tmp_path, monkeypatch):
    """A link whose write buffer is full drops frames; a dropped RELEASE of an idle log
    would never be made up for by a later one, so the sender tries it again."""
    async def main() -> None:
        async with two_nodes(tmp_path) as (sender, announcer, listener):
            releases = StoreSender(sender, lambda rid: None, lambda log_id, epoch: None)
            await asyncio.wait_for(listener.arrived.wait(), WAIT)  # the link is up
            listener.arrived.clear()
            with monkeypatch.context() as m:
                m.setattr(connection, "LINK_DROP_BYTES", -1)  # every frame is dropped
                releases.release(1, 77, [1], epoch=1)
                releases.flush()
                assert not sender.links[1].send(Release(log_id=1, lsn=1, epoch=1))
            await asyncio.wait_for(listener.arrived.wait(), WAIT)
        assert announcer.sent == [(1, True)]
        assert [m.lsn for m in listener.received] == [42, 77]

    asyncio.run(main())
