"""Starting a rebuilding: the SHARD_NEEDS_REBUILD event every path appends.

Three things put a node in the rebuilding set: the node itself, starting with an empty
store after logs placed records on it; an operator marking it unrecoverable (its data is
gone for good); an operator draining it (its records move away, then it can leave the
config).  All three append the same event, naming every storage node of the config as a
donor: the rebuilding is done when each of them (the lost nodes left out) has reported.
"""

from __future__ import annotations

from typing import Any

from logdevice.config import Config
from logdevice.epochstore import SHARD_NEEDS_REBUILD, EpochStore
from logdevice.errors import InvalidParamError

__all__ = ["needs_rebuild_event", "request_rebuild"]


def needs_rebuild_event(config: Config, node: int, *, unrecoverable: bool = False,
                        drain: bool = False) -> dict[str, Any]:
    """The event that puts ``node`` in the rebuilding set."""
    if unrecoverable and drain:
        raise InvalidParamError(message="a node is drained (it keeps its data) or "
                                        "unrecoverable (its data is gone), not both")
    if not any(n.index == node for n in config.storage_nodes()):
        raise InvalidParamError(message=f"node {node} is not a storage node of cluster "
                                        f"{config.cluster!r}")
    event: dict[str, Any] = {"type": SHARD_NEEDS_REBUILD, "node": node,
                             "donors": [n.index for n in config.storage_nodes()]}
    if unrecoverable:
        event["unrecoverable"] = True
    if drain:
        event["drain"] = True
    return event


def request_rebuild(store: EpochStore, config: Config, node: int, *,
                    unrecoverable: bool = False, drain: bool = False) -> int:
    """Append the event; its version."""
    return store.append_event(needs_rebuild_event(config, node, unrecoverable=unrecoverable,
                                                  drain=drain))
