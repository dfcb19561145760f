"""Who is alive: heartbeats between nodes, and the cluster view clients fetch.

``FailureDetector`` is the sans-I/O state: heartbeat arrivals and clock ticks in, changes
of the live set out.  A node is *alive* while its last heartbeat is younger than
``dead_after``, dead after that, and alive again on its next heartbeat.  At start-up a
node has heard from nobody; rather than grabbing every log's sequencer in its first
moments, it presumes the nodes it has not heard from alive for one ``dead_after`` grace
period (so a restarted node agrees with the rest of the cluster at once, and a node that
really is down is noticed after the same delay as any failure).  If the detector itself
was stalled (the process was paused, the machine starved) for longer than ``dead_after``,
silence during the stall proves nothing: the next tick starts a new grace period instead
of declaring everyone dead.

A crashed process is noticed faster than a silent one: when our own connection to a node
breaks (its kernel reset the connection: the process is gone) and it has also sent no
heartbeat for ``fast_dead_after`` (three heartbeat intervals), it is dead without waiting
for the full ``dead_after``.  A paused or partitioned node keeps its connections and is
declared dead only after ``dead_after``.

``FailureDetectorRole`` drives it: sends a HEARTBEAT to every peer each
``heartbeat_interval_ms``, feeds received heartbeats in, reports changes to the node
(``Node.notify_cluster_change``, which the sequencer role uses for ownership) and answers
GET_CLUSTER_VIEW.  The view lists ``alive``: nodes actually heard from (and this one);
``sequencers``: the sequencer nodes placement currently counts as live, with weights —
what ``placement.sequencer_for`` takes, so clients route exactly as nodes decide.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import zlib
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from logdevice.errors import E
from logdevice.node.roles.role import NodeServices, Peer, Role
from logdevice.protocol import ClusterView, GetClusterView, Heartbeat, SequencerNode

if TYPE_CHECKING:
    from logdevice.config import Config

log = logging.getLogger("logdevice.node.roles.failure_detector_role")


#: How far in the future (us) a heartbeat's generation may be (clocks differ a little).
MAX_GENERATION_AHEAD_US = 3_600 * 1_000_000


class FailureDetector:
    """Live set of one node's view of the cluster (sans-I/O; times in seconds).

    Parameters
    ----------
    me : int
        This node (always alive).
    nodes : iterable of int
        Every node of the config.
    dead_after : float
        Silence after which a node is dead.
    now : float
        The clock at start (monotonic seconds).
    """

    def __init__(self, me: int, nodes: Iterable[int], dead_after: float, now: float,
                 fast_dead_after: float | None = None) -> None:
        self.me = me
        self.dead_after = float(dead_after)
        self.fast_dead_after = self.dead_after if fast_dead_after is None else min(
            float(fast_dead_after), self.dead_after)
        self._link_broken: set[int] = set()
        self._last: dict[int, float | None] = {n: None for n in nodes if n != me}
        self._generation: dict[int, int] = {}
        self._grace_until = now + self.dead_after
        self._last_tick = now
        self.live: set[int] = {me, *self._last}  # what placement uses
        self._dead_since: dict[int, float] = {}  # nodes not live: since when
        self._views: dict[int, frozenset[int]] = {}  # each peer's last heartbeat's live list
        self._started = now

    def set_nodes(self, nodes: Iterable[int]) -> set[int]:
        """The config's nodes changed.  Removed nodes are forgotten (those that were live
        are returned: the caller reports them down); added ones are not live until their
        first heartbeat (a node still starting must not be handed logs)."""
        wanted = {n for n in nodes if n != self.me}
        removed = set(self._last) - wanted
        for n in removed:
            del self._last[n]
            self._generation.pop(n, None)
            self._link_broken.discard(n)
        for n in wanted - set(self._last):
            self._last[n] = None
        gone = self.live & removed
        self.live -= removed
        for n in removed:
            self._dead_since.pop(n, None)
            self._views.pop(n, None)
        return gone

    def held_dead_by(self, node: int) -> int:
        """How many live nodes (this one included) leave ``node`` out of their live list:
        this one's view, and each live peer's last heartbeat."""
        count = int(node not in self.live)
        for peer, view in self._views.items():
            if peer != node and peer in self.live and node not in view:
                count += 1
        return count

    def dead_for(self, now: float) -> dict[int, float]:
        """Seconds each node that is not live has been dead: since it left the live set
        (a node never heard from leaves it when the start-up grace period ends), or since
        this detector started for one added later and never heard from."""
        return {n: now - self._dead_since.get(n, self._started)
                for n in self._last if n not in self.live}

    def heard(self, now: float) -> set[int]:
        """Nodes heard from recently enough to count as alive (and this node)."""
        out = {self.me}
        for n, t in self._last.items():
            if not self._silent(n, t, now):
                out.add(n)
        return out

    def on_heartbeat(self, node: int, generation: int, now: float,
                     alive: Iterable[int] | None = None) -> tuple[set[int], set[int]]:
        """A heartbeat from ``node`` (with the nodes it hears, ``alive``); returns (went
        down, came up): ``({}, {node})`` when it was dead.  Heartbeats from an older
        generation (before a restart) are ignored."""
        if node not in self._last:
            return set(), set()
        known = self._generation.get(node)
        if known is not None and generation < known:
            return set(), set()
        self._generation[node] = generation
        self._last[node] = now
        if alive is not None:
            self._views[node] = frozenset(alive)
        if node in self.live:
            return set(), set()
        self.live.add(node)
        self._dead_since.pop(node, None)
        return set(), {node}

    def on_link_change(self, node: int, connected: bool) -> None:
        """Our connection to ``node`` broke (after having worked) or came back."""
        if connected:
            self._link_broken.discard(node)
        elif node in self._last:
            self._link_broken.add(node)

    def _silent(self, node: int, t: float | None, now: float) -> bool:
        if t is None:
            return True
        if node in self._link_broken:
            return now - t >= self.fast_dead_after
        return now - t >= self.dead_after

    def tick(self, now: float) -> tuple[set[int], set[int]]:
        """Re-evaluate at ``now``; returns (went down, came up)."""
        if now - self._last_tick > self.dead_after:
            # We were not running: do not blame the others for our stall.
            self._grace_until = now + self.dead_after
        self._last_tick = now
        live = {self.me}
        for n, t in self._last.items():
            if not self._silent(n, t, now):
                live.add(n)
            elif now < self._grace_until and n in self.live and n not in self._link_broken:
                live.add(n)  # in a grace period: presumed alive until it runs out
        down, up = self.live - live, live - self.live
        self.live = live
        for n in down:
            self._dead_since[n] = now
        for n in up:
            self._dead_since.pop(n, None)
        return down, up


def config_version(config: Any) -> int:
    """A stable 32-bit fingerprint of the config (clients compare it with theirs)."""
    text = json.dumps(config.to_dict(), sort_keys=True, separators=(",", ":"))
    return zlib.crc32(text.encode())


class FailureDetectorRole(Role):
    """Heartbeats out and in; answers GET_CLUSTER_VIEW."""

    name = "failure_detector"

    def __init__(self, node: NodeServices) -> None:
        super().__init__(node)
        settings = node.config.settings
        self.interval = settings.heartbeat_interval_ms / 1000
        self.fd = FailureDetector(node.index, (n.index for n in node.config.nodes),
                                  settings.dead_timeout_ms / 1000, node.loop.time(),
                                  fast_dead_after=3 * self.interval)
        self.weights: dict[int, float] = {
            i: w for i, w in node.config.sequencer_weights().items() if w > 0}
        self.config_version = config_version(node.config)
        self._task: asyncio.Task[None] | None = None

    def handlers(self) -> Mapping[type, Any]:
        return {Heartbeat: self._on_heartbeat, GetClusterView: self._on_get_cluster_view}

    def on_config_change(self, old: Config, new: Config) -> None:
        if old.nodes == new.nodes:
            return
        gone = self.fd.set_nodes(n.index for n in new.nodes)
        self.weights = {i: w for i, w in new.sequencer_weights().items() if w > 0}
        self.config_version = config_version(new)
        self._report(gone, set())  # also when only weights changed: placement follows

    async def start(self) -> None:
        self._task = self.node.loop.create_task(self._beat(), name="heartbeats")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    # -- views ------------------------------------------------------------------------------
    @property
    def live(self) -> set[int]:
        """Nodes placement counts as alive now."""
        return self.fd.live

    def sequencer_weights(self) -> dict[int, float]:
        """Live sequencer nodes and their weights (input of ``placement.sequencer_for``)."""
        live = self.fd.live
        return {i: w for i, w in self.weights.items() if i in live}

    def dead_for(self) -> dict[int, float]:
        """Seconds each node this one holds dead has been dead."""
        return self.fd.dead_for(self.node.loop.time())

    def held_dead_by(self, node: int) -> int:
        """How many live nodes (this one included) hold ``node`` dead."""
        return self.fd.held_dead_by(node)

    def view(self, request_id: int = 0) -> ClusterView:
        now = self.node.loop.time()
        return ClusterView(
            request_id=request_id, status=E.OK, node_index=self.node.index,
            config_version=self.config_version, alive=sorted(self.fd.heard(now)),
            sequencers=[SequencerNode(i, w) for i, w in sorted(self.sequencer_weights().items())],
            time_ms=time.time_ns() // 1_000_000,
            dead_for_ms={n: int(s * 1000) for n, s in sorted(self.dead_for().items())})

    # -- events -----------------------------------------------------------------------------
    def _on_heartbeat(self, conn: Peer, msg: Heartbeat) -> None:
        if conn.peer_role != "node" or msg.node_index != conn.peer_node:
            return  # only nodes vouch for themselves
        if msg.generation > time.time_ns() // 1000 + MAX_GENERATION_AHEAD_US:
            # A generation is the start time of the sender (us): one far in the future
            # would make every later heartbeat of that node look stale.
            log.warning("ignoring a heartbeat of N%d with generation %d, in the future",
                        msg.node_index, msg.generation)
            return
        down, up = self.fd.on_heartbeat(msg.node_index, msg.generation, self.node.loop.time(),
                                        msg.alive)
        if down or up:
            self._report(down, up)

    def on_link_change(self, node: int, connected: bool) -> None:
        self.fd.on_link_change(node, connected)

    def _on_get_cluster_view(self, conn: Peer, msg: GetClusterView) -> None:
        conn.send(self.view(msg.request_id))

    async def _beat(self) -> None:
        node = self.node
        loop = node.loop
        while True:
            now = loop.time()
            down, up = self.fd.tick(now)
            if down or up:
                self._report(down, up)
            hb = Heartbeat(node_index=node.index, generation=node.generation,
                           time_ms=time.time_ns() // 1_000_000,
                           alive=sorted(self.fd.heard(now)), config_version=self.config_version)
            for link in node.links.values():
                link.send(hb)
            await asyncio.sleep(self.interval)

    def _report(self, down: set[int], up: set[int]) -> None:
        if down:
            log.warning("failure detector: %s now dead", ", ".join(f"N{n}" for n in sorted(down)))
        if up:
            log.info("failure detector: %s alive", ", ".join(f"N{n}" for n in sorted(up)))
        self.node.notify_cluster_change(down, up)
