"""CPU of one append's trip through the sequencer role, without sockets.

A real ``Node`` (not started: no sockets) with its failure detector and sequencer roles,
a real epoch store (SQLite) and sequencer activation; what the node would put on the
wire is taken from ``Node.send_to_node`` instead (so neither frame encoding nor the
local storage write is measured).  Each round drives ``ROUNDS`` unbatched appends the
way a node sees them at 1,000 appends/s: an APPEND_BATCH of one 100-byte record (with
its crc32c, as clients send it), a loop turn (the STOREs leave), a STORED from each
copyset member, a loop turn (APPENDED_BATCH and the RELEASEs leave).

The reference is the same driver with the role's work left out: building the messages,
the loop turns and the stand-in storage nodes' answers.  What the sequencer costs per
append is the difference of the two medians divided by ``ROUNDS``.

Run one tree against another (A/B) by putting the other tree's ``python`` and ``src``
on PYTHONPATH.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ldcore.checksum import crc32c
from logdevice.config import Config, make_local_config
from logdevice.errors import E
from logdevice.node.roles.failure_detector_role import FailureDetectorRole
from logdevice.node.roles.sequencer_role import SequencerRole
from logdevice.node.transport.server import Node
from logdevice.protocol import AppendBatch, AppendedBatch, AppendFlag, Store, Stored

ROUNDS = 2000
NODES, REPLICATION, ME, LOG = 3, 2, 1, 1
PAYLOAD = b"y" * 100


class Peer:
    """A connection's send side: keeps what the role answers."""

    def __init__(self, peer_node: int | None) -> None:
        self.peer_node = peer_node
        self.principal = None
        self.sent: list[Any] = []

    def send(self, msg: Any) -> bool:
        self.sent.append(msg)
        return True


class Driver:
    """The node, the client's connection and one connection per storage node."""

    def __init__(self, root: Path, loop: asyncio.AbstractEventLoop) -> None:
        config = make_local_config(NODES, REPLICATION, logs=[LOG], root=root,
                                   ports=[1, 2, 3])
        config = Config.load(config.dump(root / "cluster.json"))
        self.loop = loop
        self.node = Node(config, ME, loop)
        self.node.add_role(FailureDetectorRole(self.node))
        self.role = self.node.add_role(SequencerRole(self.node))
        self.to_nodes: list[tuple[int, Any]] = []
        self.node.send_to_node = self._capture  # type: ignore[method-assign]
        self.client = Peer(None)
        self.peers = {n: Peer(n) for n in range(NODES)}
        self.append = AppendBatch(
            request_id=1, log_id=LOG,
            flags=int(AppendFlag.CHECKSUM | AppendFlag.NO_REDIRECT), timeout_ms=10_000,
            payload_offsets=np.array([0, len(PAYLOAD)], np.uint64), payloads=PAYLOAD,
            checksums=np.array([crc32c(PAYLOAD)], np.uint32))
        self.ok = np.zeros(1, np.uint16)
        self.ok.flags.writeable = False

    def _capture(self, node: int, msg: Any) -> bool:
        self.to_nodes.append((node, msg))
        return True

    async def start(self) -> None:
        """Links up, the sequencer activated by a first append."""
        for n in range(NODES):
            if n != ME:
                self.role.on_link_change(n, True)
        self.node.dispatch(self.client, self.append)
        for _ in range(1000):
            await asyncio.sleep(0.01)
            if self._answer_stores():
                break
        await asyncio.sleep(0)
        assert self.client.sent and type(self.client.sent[-1]) is AppendedBatch
        assert self.client.sent[-1].statuses.tolist() == [E.OK]

    def _answer_stores(self) -> int:
        stores, self.to_nodes = self.to_nodes, []
        answered = 0
        for node, msg in stores:
            if type(msg) is Store:
                self.node.dispatch(self.peers[node], Stored(
                    request_id=msg.request_id, log_id=msg.log_id, node_index=node,
                    status=E.OK, lsns=msg.lsns, statuses=self.ok))
                answered += 1
        return answered

    async def appends(self, rounds: int) -> None:
        dispatch, peers, client = self.node.dispatch, self.peers, self.client
        sleep, ok = asyncio.sleep, self.ok
        for _ in range(rounds):
            dispatch(client, self.append)
            await sleep(0)
            stores, self.to_nodes = self.to_nodes, []
            for node, msg in stores:
                if type(msg) is Store:
                    dispatch(peers[node], Stored(
                        request_id=msg.request_id, log_id=msg.log_id, node_index=node,
                        status=E.OK, lsns=msg.lsns, statuses=ok))
            await sleep(0)
        self.to_nodes.clear()
        assert len(client.sent) >= rounds and client.sent[-1].statuses.tolist() == [E.OK]
        client.sent.clear()

    async def driver_alone(self, rounds: int) -> None:
        """The reference: the same messages and loop turns, no role."""
        peers, client, sleep, ok = self.peers, self.client, asyncio.sleep, self.ok
        lsns = np.array([1], np.uint64)
        for i in range(rounds):
            client.send(self.append)
            await sleep(0)
            for node in (0, 2):
                peers[node].send(Stored(request_id=i, log_id=LOG, node_index=node,
                                        status=E.OK, lsns=lsns, statuses=ok))
            await sleep(0)
        client.sent.clear()
        for p in peers.values():
            p.sent.clear()


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    loop = asyncio.new_event_loop()
    d = Driver(tmp_path_factory.mktemp("seqpath"), loop)
    loop.run_until_complete(d.start())
    yield d
    loop.run_until_complete(d.role.stop())
    d.role.close()
    loop.close()


def _info(benchmark, reference=False):
    benchmark.extra_info.update(items=ROUNDS, unit="appends", reference=reference)


@pytest.mark.benchmark(group=f"sequencer role, {ROUNDS} unbatched appends")
def test_sequencer_role_appends(benchmark, driver):
    _info(benchmark)
    benchmark.pedantic(driver.loop.run_until_complete,
                       setup=lambda: ((driver.appends(ROUNDS),), {}), rounds=15)
    assert driver.role.sequencers[LOG].in_flight == 0


@pytest.mark.benchmark(group=f"sequencer role, {ROUNDS} unbatched appends")
def test_driver_alone(benchmark, driver):
    _info(benchmark, reference=True)
    benchmark.pedantic(driver.loop.run_until_complete,
                       setup=lambda: ((driver.driver_alone(ROUNDS),), {}), rounds=15)
