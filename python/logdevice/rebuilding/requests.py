"""Starting a rebuilding: the SHARD_NEEDS_REBUILD event every path appends.

Four things put a node in the rebuilding set: the node itself, starting with an empty
store after logs placed records on it, or finding its store damaged; the cluster, when
the node has been dead for the grace period (``node.roles.rebuilding_supervisor_role``); an operator
marking it unrecoverable (its data is gone for good); an operator draining it (its
records move away, then it can leave the config).  All append the same event, naming
every storage node of the config as a donor: the rebuilding is done when each of them
(the lost nodes left out) has reported.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from logdevice.config import Config
from logdevice.epochstore import (
    SHARD_ABORT_REBUILD,
    SHARD_ACK_REBUILT,
    SHARD_NEEDS_REBUILD,
    AuthoritativeStatus,
    EpochStore,
)
from logdevice.errors import InvalidParamError

__all__ = ["needs_rebuild_event", "request_rebuild", "cancel_rebuild"]


def needs_rebuild_event(config: Config, node: int, *, unrecoverable: bool = False,
                        drain: bool = False, reason: str | None = None,
                        statuses: Mapping[int, AuthoritativeStatus] | None = None
                        ) -> dict[str, Any]:
    """The event that puts ``node`` in the rebuilding set.  Its donors are the storage
    nodes, but for those ``statuses`` (the event log's) says were rebuilt already: they
    hold nothing to donate and take no copies until they come back, and one that never
    comes back would hold the rebuilding up for ever."""
    if unrecoverable and drain:
        raise InvalidParamError(message="a node is drained (it keeps its data) or "
                                        "unrecoverable (its data is gone), not both")
    if not any(n.index == node for n in config.storage_nodes()):
        raise InvalidParamError(message=f"node {node} is not a storage node of cluster "
                                        f"{config.cluster!r}")
    empty = {n for n, st in (statuses or {}).items()
             if st == AuthoritativeStatus.AUTHORITATIVE_EMPTY}
    event: dict[str, Any] = {"type": SHARD_NEEDS_REBUILD, "node": node,
                             "donors": [n.index for n in config.storage_nodes()
                                        if n.index not in empty]}
    if unrecoverable:
        event["unrecoverable"] = True
    if drain:
        event["drain"] = True
    if reason is not None:
        event["reason"] = reason
    return event


def request_rebuild(store: EpochStore, config: Config, node: int, *,
                    unrecoverable: bool = False, drain: bool = False,
                    reason: str | None = None) -> int:
    """Append the event; its version."""
    return store.append_event(needs_rebuild_event(config, node, unrecoverable=unrecoverable,
                                                  drain=drain, reason=reason,
                                                  statuses=store.shard_statuses()))


def cancel_rebuild(store: EpochStore, node: int, *, undrain: bool) -> int:
    """An operator's undo; the event's version.

    ``undrain``: a node being drained keeps its place (SHARD_ABORT_REBUILD), or one whose
    drain finished takes new records again (SHARD_ACK_REBUILT; the copies it moved away
    stay flagged drained).  Otherwise: abort the rebuilding of a node that is down
    (UNAVAILABLE); readers count on its copies again, and the cluster does not rebuild
    it by itself again until it has come back and died again.  A node whose data is
    gone (UNDERREPLICATION) cannot be aborted: readers would count on copies it lacks.
    """
    view = store.shard_view(node)
    rset = view.rebuilding
    if undrain:
        if node in rset.draining:
            kind = SHARD_ABORT_REBUILD
        elif view.drained and view.status == AuthoritativeStatus.AUTHORITATIVE_EMPTY:
            kind = SHARD_ACK_REBUILT
        else:
            raise InvalidParamError(message=f"N{node} is not drained")
    else:
        if node in rset.draining:
            raise InvalidParamError(message=f"N{node} is being drained, not rebuilt: "
                                            f"undrain it instead")
        if node not in rset.lost:
            raise InvalidParamError(message=f"N{node} is not being rebuilt")
        if view.status != AuthoritativeStatus.UNAVAILABLE:
            raise InvalidParamError(message=(
                f"N{node}'s data is gone ({view.status.name}): aborting its rebuilding "
                f"would make readers count on copies it does not have"))
        kind = SHARD_ABORT_REBUILD
    what = "undrained" if undrain else "rebuilding aborted"
    return store.append_event({"type": kind, "node": node, "operator": True,
                               "reason": f"{what} by an operator"})
