"""When the cluster rebuilds a dead node by itself (sans-I/O).

A storage node that stays down leaves every record it held one copy short.  The
supervisor decides, from one node's failure detector and the event log, which dead nodes
to put in the rebuilding set without waiting for an operator:

- **Dead long enough.**  The node has been dead in this node's view for the grace period
  (``self_rebuild_grace_period_ms``; 0 turns self-initiated rebuilding off).  A restart,
  a deploy or a short network hiccup ends well within it and costs nothing.
- **Dead by the cluster's view.**  A majority of the config's nodes (this one included)
  leave it out of their latest heartbeats' live lists.  A node cut off in a minority sees
  everyone else dead, but cannot gather a majority, so it starts nothing.
- **Not too much at once.**  Nodes that are down (and not already rebuilt) or being
  rebuilt count against ``max_rebuilding_fraction`` of the storage nodes (at least one
  node).  While more than that are at risk, nothing starts: a network split or a
  rolling restart must not turn into a storm of rebuildings that would move most of the
  cluster's data for nothing.  The wait and its reason go to the event log.
- **Still authoritative.**  A node already being rebuilt, or rebuilt, or marked
  unrecoverable is left alone; a node being drained that dies is rebuilt without it.
  So is one whose rebuilding an operator aborted, until it comes back and dies again.

The decisions are computed afresh on every tick; the role
(``node.roles.rebuilding_supervisor_role``) acts on them only on one node at a time, the
lowest-numbered live node.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from logdevice.shards import AuthoritativeStatus

__all__ = ["ClusterHealth", "Decision", "rebuilding_limit", "decide"]


@dataclass(frozen=True)
class ClusterHealth:
    """What one node knows when it decides.

    ``dead_for``: seconds each node dead in this node's view has been dead.
    ``held_dead_by``: for each such node, how many nodes (this one included) leave it out
    of their latest live list.  ``statuses``: authoritative status of every node that is
    not fully authoritative (event log).  ``rebuilding``: nodes in the rebuilding set now
    (lost or draining, not yet rebuilt).
    """

    nodes: int  # every node of the config (the majority is of these)
    storage_nodes: frozenset[int]
    dead_for: Mapping[int, float]
    held_dead_by: Mapping[int, int]
    statuses: Mapping[int, AuthoritativeStatus] = field(default_factory=dict)
    rebuilding: frozenset[int] = frozenset()
    #: Nodes whose rebuilding an operator aborted while they were down (and that have
    #: not come back since): left alone until they come back and die again.
    held_back: frozenset[int] = frozenset()

    def status(self, node: int) -> AuthoritativeStatus:
        return self.statuses.get(node, AuthoritativeStatus.FULLY_AUTHORITATIVE)


@dataclass(frozen=True)
class Decision:
    """``rebuild`` the node now, or ``wait`` for ``reason``."""

    node: int
    action: Literal["rebuild", "wait"]
    reason: str


def rebuilding_limit(storage_nodes: int, max_fraction: float) -> int:
    """How many storage nodes may be down or rebuilding at once for a rebuilding to start
    by itself (at least one)."""
    return max(1, math.floor(storage_nodes * max_fraction + 1e-9))


def decide(health: ClusterHealth, grace_period: float, max_fraction: float
           ) -> list[Decision]:
    """One decision for every storage node dead past the grace period that is still
    fully authoritative (nodes dead for a shorter time are not mentioned: they wait for
    the grace period, which the cluster view shows).  Empty when ``grace_period`` is 0."""
    if grace_period <= 0:
        return []
    storage = health.storage_nodes
    at_risk = health.rebuilding | {
        n for n in health.dead_for if n in storage
        and health.status(n) != AuthoritativeStatus.AUTHORITATIVE_EMPTY}
    limit = rebuilding_limit(len(storage), max_fraction)
    majority = health.nodes // 2 + 1
    out = []
    for node, dead in sorted(health.dead_for.items(), key=lambda kv: (-kv[1], kv[0])):
        if node not in storage or dead < grace_period:
            continue
        if health.status(node) != AuthoritativeStatus.FULLY_AUTHORITATIVE:
            continue  # being rebuilt, rebuilt, or its data is known gone (a drained
            # node keeps FULLY_AUTHORITATIVE: one that dies is rebuilt without it)
        agreeing = health.held_dead_by.get(node, 0)
        if node in health.held_back:
            out.append(Decision(node, "wait", (
                "an operator aborted its rebuilding while it was down: it is rebuilt by "
                "itself again only after it comes back and dies again")))
        elif agreeing < majority:
            out.append(Decision(node, "wait", (
                f"dead for {dead:.0f} s here, but only {agreeing} of {health.nodes} nodes "
                f"hold it dead (a majority, {majority}, must)")))
        elif len(at_risk) > limit:
            out.append(Decision(node, "wait", (
                f"{len(at_risk)} of {len(storage)} storage nodes are down or being rebuilt "
                f"({', '.join(f'N{n}' for n in sorted(at_risk))}); a rebuilding starts by "
                f"itself only while at most {limit} are (max_rebuilding_fraction "
                f"{max_fraction:g})")))
        else:
            out.append(Decision(node, "rebuild", (
                f"dead for {dead:.0f} s (grace period {grace_period:.0f} s), held dead by "
                f"{agreeing} of {health.nodes} nodes")))
    return out
