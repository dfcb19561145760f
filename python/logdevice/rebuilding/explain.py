"""Why each storage node that is down or being rebuilt is where it is (``ldshell rebuilding``).

Pure: from the event log, the rebuilding set and one node's cluster view (how long each
dead node has been dead), one sentence per node that is not simply up and fully
authoritative.  The supervisor's own waits (no majority, too many nodes down) come from
its SHARD_REBUILD_DEFERRED events; the rest is read off the state.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from logdevice.epochstore.events import (
    SHARD_ABORT_REBUILD,
    SHARD_ACK_REBUILT,
    SHARD_NEEDS_REBUILD,
    SHARD_REBUILD_DEFERRED,
    RebuildingSet,
)
from logdevice.shards import AuthoritativeStatus as S

__all__ = ["explain_waits"]


def _last_events(events: Iterable[Mapping[str, Any]]) -> dict[int, Mapping[str, Any]]:
    """node -> its last event that says why it is where it is."""
    out: dict[int, Mapping[str, Any]] = {}
    for ev in events:
        if ev["type"] in (SHARD_NEEDS_REBUILD, SHARD_REBUILD_DEFERRED, SHARD_ABORT_REBUILD,
                          SHARD_ACK_REBUILT):
            out[int(ev["node"])] = ev
    return out


def explain_waits(storage_nodes: Iterable[int], rset: RebuildingSet,
                  statuses: Mapping[int, S], dead_for_ms: Mapping[int, int],
                  events: Iterable[Mapping[str, Any]], grace_period_ms: int
                  ) -> dict[int, str]:
    """One sentence for each storage node that is dead or not fully authoritative."""
    last = _last_events(events)
    out: dict[int, str] = {}
    for node in sorted(storage_nodes):
        status = statuses.get(node, S.FULLY_AUTHORITATIVE)
        dead = dead_for_ms.get(node)
        ev = last.get(node, {})
        kind, reason = ev.get("type", ""), str(ev.get("reason", ""))
        why = f" ({reason})" if reason else ""
        if node in rset.nodes:
            pending = sorted((rset.donors or frozenset()) - rset.done)
            dead_donors = [d for d in pending if d in dead_for_ms]
            doing = "being drained" if node in rset.draining else f"being rebuilt, {status.name}"
            text = f"{doing}{why}; waiting for donors {_nodes(pending) or '(first report)'}"
            if dead_donors:
                text += f"; donors down: {_nodes(dead_donors)} (the rebuilding waits for them)"
            out[node] = text
        elif status == S.AUTHORITATIVE_EMPTY and dead is not None:
            out[node] = "rebuilt; down: it acknowledges when it comes back"
        elif status == S.AUTHORITATIVE_EMPTY and ev.get("drain"):
            out[node] = (f"drained: it holds no records; 'ldshell undrain {node}' to take "
                         f"records again, or remove it from the config")
        elif status == S.AUTHORITATIVE_EMPTY:
            out[node] = "rebuilt; acknowledging at its next read of the event log"
        elif dead is not None:
            seconds = dead / 1000
            if grace_period_ms <= 0:
                out[node] = (f"down for {seconds:.0f} s; self-initiated rebuilding is off "
                             f"(self_rebuild_grace_period_ms 0): 'ldshell mark-unrecoverable "
                             f"{node}' rebuilds it")
            elif dead < grace_period_ms:
                out[node] = (f"down for {seconds:.0f} s; rebuilt by itself if still down "
                             f"in {(grace_period_ms - dead) / 1000:.0f} s (grace period "
                             f"{grace_period_ms / 1000:.0f} s)")
            elif kind == SHARD_REBUILD_DEFERRED:
                out[node] = f"down for {seconds:.0f} s; not rebuilt yet: {reason}"
            elif kind == SHARD_ABORT_REBUILD and "operator" in reason:
                out[node] = (f"down for {seconds:.0f} s; {reason}: rebuilt by itself again "
                             f"only after it comes back and dies again")
            else:
                out[node] = (f"down for {seconds:.0f} s, past the grace period: its "
                             f"rebuilding starts at the supervisor's next check")
        elif status != S.FULLY_AUTHORITATIVE:
            out[node] = f"{status.name}{why}"
    return out


def _nodes(nodes: Iterable[int]) -> str:
    return ", ".join(f"N{n}" for n in nodes)
