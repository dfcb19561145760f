"""The rebuilding supervisor role: dead storage nodes are rebuilt without an operator.

Every node runs it; only the lowest-numbered node its failure detector holds live acts
(the others return at once, so one node at a time writes these events; two that briefly
both think they are lowest write the same decision twice, which changes nothing).  Each
``rebuilding_poll_ms`` that node gathers the failure detector's view (how long each node
has been dead here, how many nodes' heartbeats agree), reads the event log's new events
in a thread of its own, and applies ``rebuilding.supervisor.decide``:

- ``rebuild``: appends SHARD_NEEDS_REBUILD for the node (``self_initiated``, with the
  reason); the rebuilding roles of the other storage nodes take it from there.
- ``wait``: appends SHARD_REBUILD_DEFERRED with the reason, once per reason, so the
  event log and ``ldshell rebuilding`` say why a dead node is not being rebuilt.

A node that comes back while its self-initiated rebuilding runs aborts it itself
(``node.roles.rebuilding_role``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import ThreadPoolExecutor

from logdevice.epochstore import EpochStore
from logdevice.epochstore.events import (
    SHARD_ABORT_REBUILD,
    SHARD_ACK_REBUILT,
    SHARD_NEEDS_REBUILD,
    SHARD_REBUILD_DEFERRED,
    ShardStatusFold,
)
from logdevice.errors import LogDeviceError
from logdevice.node.roles.failure_log import FailureLog
from logdevice.node.roles.role import NodeServices, Role, cancel_and_wait
from logdevice.rebuilding.requests import needs_rebuild_event
from logdevice.rebuilding.supervisor import ClusterHealth, decide
from logdevice.security.store import open_cluster_store

log = logging.getLogger("logdevice.node.roles.rebuilding_supervisor_role")

__all__ = ["RebuildingSupervisorRole"]


class RebuildingSupervisorRole(Role):
    """Starts rebuildings of dead nodes, or records why it waits; see the module doc."""

    name = "rebuilding_supervisor"

    def __init__(self, node: NodeServices) -> None:
        super().__init__(node)
        settings = node.config.settings
        self.grace_period = settings.self_rebuild_grace_period_ms / 1000
        self.max_fraction = settings.max_rebuilding_fraction
        self.interval = settings.rebuilding_poll_ms / 1000
        self._fold = ShardStatusFold()
        self._deferred: dict[int, str] = {}  # node -> the last reason in the event log
        self._aborted_ms: dict[int, int] = {}  # node -> when an operator aborted (ms)
        self._exec = ThreadPoolExecutor(1, thread_name_prefix="rebuild-supervisor")
        self._store: EpochStore | None = None
        self._task: asyncio.Task[None] | None = None
        self._failures = FailureLog(log, f"N{node.index}: rebuilding supervisor")

    async def start(self) -> None:
        if self.grace_period > 0:
            self._task = self.node.loop.create_task(self._run())

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)

    def close(self) -> None:
        self._exec.shutdown(wait=True)
        if self._store is not None:
            self._store.close()
            self._store = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self._tick()
            except LogDeviceError as exc:
                self._failures.failed(exc)
            except Exception:  # keep supervising whatever one tick met
                log.exception("N%d: rebuilding supervisor tick failed", self.node.index)
            else:
                self._failures.succeeded()

    async def _tick(self) -> None:
        fd = self.node.role("failure_detector")
        if min(fd.live) != self.node.index:
            return
        dead_for = fd.dead_for()
        storage = {n.index for n in self.node.config.storage_nodes()}
        if not any(n in storage and t >= self.grace_period for n, t in dead_for.items()):
            return  # nothing to decide: no epoch store read
        held = {n: fd.held_dead_by(n) for n in dead_for}
        await self.node.loop.run_in_executor(self._exec, self._decide_and_act, dead_for,
                                             held)

    # -- the role's thread ------------------------------------------------------------------
    def _catch_up(self, store: EpochStore) -> None:
        for ev in store.events(self._fold.version):
            self._fold.apply(ev)
            kind, node = ev["type"], ev["node"]
            if kind == SHARD_REBUILD_DEFERRED:
                self._deferred[node] = ev.get("reason", "")
            elif kind in (SHARD_NEEDS_REBUILD, SHARD_ABORT_REBUILD, SHARD_ACK_REBUILT):
                self._deferred.pop(node, None)
                if kind == SHARD_ABORT_REBUILD and ev.get("operator"):
                    self._aborted_ms[node] = int(ev.get("time_ms", 0))

    def _decide_and_act(self, dead_for: dict[int, float], held: dict[int, int]) -> None:
        if self._store is None:
            self._store = open_cluster_store(self.node.config)
        store, config = self._store, self.node.config
        self._catch_up(store)
        now_ms = time.time() * 1000
        held_back = frozenset(  # dead since before an operator's abort: not died again
            n for n, at in self._aborted_ms.items()
            if n in dead_for and dead_for[n] * 1000 >= now_ms - at)
        health = ClusterHealth(
            nodes=len(config.nodes),
            storage_nodes=frozenset(n.index for n in config.storage_nodes()),
            dead_for=dead_for, held_dead_by=held, statuses=self._fold.statuses(),
            rebuilding=self._fold.rebuilding_set().nodes, held_back=held_back)
        for d in decide(health, self.grace_period, self.max_fraction):
            if d.action == "rebuild":
                event = needs_rebuild_event(config, d.node, reason=d.reason,
                                            statuses=health.statuses)
                event["self_initiated"] = True
                store.append_event(event)
                log.warning("N%d: rebuilding N%d without it: %s", self.node.index, d.node,
                            d.reason)
            elif self._deferred.get(d.node) != d.reason:
                store.append_event({"type": SHARD_REBUILD_DEFERRED, "node": d.node,
                                    "reason": d.reason})
                log.warning("N%d: not rebuilding N%d yet: %s", self.node.index, d.node,
                            d.reason)
            self._catch_up(store)
