"""The event log: shard rebuilding events and the authoritative status they imply.

Events are JSON objects ``{"type": ..., "node": N, ...}`` appended to the epoch store,
which numbers them (``version``) and stamps them (``time_ms``).  Folding them in order gives
each node's ``AuthoritativeStatus`` (REFERENCE.md §A10):

- ``SHARD_NEEDS_REBUILD`` (optional ``unrecoverable``: bool, ``donors``: [node...]):
  rebuilding starts; UNAVAILABLE, or UNDERREPLICATION when the data is known lost.
- ``SHARD_UNRECOVERABLE``: the node's data is gone (the operator says so); UNDERREPLICATION.
- ``SHARD_IS_REBUILT`` (optional ``donor``): a donor finished.  When every listed donor has
  (or, without a donor list, at the first one), AUTHORITATIVE_EMPTY.
- ``SHARD_ACK_REBUILT``: the rebuilt node is back and acknowledges; FULLY_AUTHORITATIVE.
- ``SHARD_ABORT_REBUILD``: the node came back with its data before rebuilding finished;
  FULLY_AUTHORITATIVE.

Events that do not apply in the current state (an ack before the rebuild finished, a donor
report for a node not being rebuilt) are kept in the log but change nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from logdevice.errors import InvalidParamError
from logdevice.shards import AuthoritativeStatus

SHARD_NEEDS_REBUILD = "SHARD_NEEDS_REBUILD"
SHARD_UNRECOVERABLE = "SHARD_UNRECOVERABLE"
SHARD_IS_REBUILT = "SHARD_IS_REBUILT"
SHARD_ACK_REBUILT = "SHARD_ACK_REBUILT"
SHARD_ABORT_REBUILD = "SHARD_ABORT_REBUILD"
EVENT_TYPES = frozenset({SHARD_NEEDS_REBUILD, SHARD_UNRECOVERABLE, SHARD_IS_REBUILT,
                         SHARD_ACK_REBUILT, SHARD_ABORT_REBUILD})
RESERVED_KEYS = ("version", "time_ms")


def _node(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidParamError(message=f"event {what} must be a node index >= 0, got {value!r}")
    return value


def validate_event(event: Mapping[str, Any]) -> dict[str, Any]:
    """Check an event before it is appended; returns a plain JSON-ready copy."""
    if not isinstance(event, Mapping):
        raise InvalidParamError(message=f"an event is a dict, got {type(event).__name__}")
    ev = dict(event)
    if ev.get("type") not in EVENT_TYPES:
        raise InvalidParamError(message=f"unknown event type {ev.get('type')!r} "
                                        f"(known: {', '.join(sorted(EVENT_TYPES))})")
    for key in RESERVED_KEYS:
        if key in ev:
            raise InvalidParamError(message=f"event key {key!r} is set by the epoch store")
    _node(ev.get("node"), "'node'")
    if "donor" in ev:
        _node(ev["donor"], "'donor'")
    if "donors" in ev:
        if not isinstance(ev["donors"], list | tuple):
            raise InvalidParamError(message="event 'donors' must be a list of node indices")
        ev["donors"] = sorted({_node(d, "'donors' entry") for d in ev["donors"]})
    if "unrecoverable" in ev and not isinstance(ev["unrecoverable"], bool):
        raise InvalidParamError(message="event 'unrecoverable' must be true or false")
    try:
        json.dumps(ev)
    except (TypeError, ValueError) as e:
        raise InvalidParamError(message=f"event is not JSON-serialisable: {e}") from None
    return ev


@dataclass
class _Rebuild:
    unrecoverable: bool = False
    donors: frozenset[int] | None = None
    done: set[int] = field(default_factory=set)
    rebuilt: bool = False

    @property
    def status(self) -> AuthoritativeStatus:
        if self.rebuilt:
            return AuthoritativeStatus.AUTHORITATIVE_EMPTY
        if self.unrecoverable:
            return AuthoritativeStatus.UNDERREPLICATION
        return AuthoritativeStatus.UNAVAILABLE


class ShardStatusFold:
    """Folds events (in version order) into each node's authoritative status."""

    def __init__(self) -> None:
        self.version = 0  # last event applied
        self._rebuilding: dict[int, _Rebuild] = {}

    def apply(self, event: Mapping[str, Any]) -> None:
        version = int(event.get("version", self.version + 1))
        if version <= self.version:
            return  # already folded
        self.version = version
        kind, node = event["type"], event["node"]
        cur = self._rebuilding.get(node)
        if kind == SHARD_NEEDS_REBUILD:
            donors = event.get("donors")
            self._rebuilding[node] = _Rebuild(
                unrecoverable=bool(event.get("unrecoverable"))
                or (cur is not None and cur.unrecoverable and not cur.rebuilt),
                donors=None if donors is None else frozenset(donors),
            )
        elif kind == SHARD_UNRECOVERABLE:
            if cur is None:
                self._rebuilding[node] = _Rebuild(unrecoverable=True)
            elif not cur.rebuilt:
                cur.unrecoverable = True
        elif kind == SHARD_IS_REBUILT:
            if cur is None or cur.rebuilt:
                return
            donor = event.get("donor")
            if donor is None or cur.donors is None:
                cur.rebuilt = True
            else:
                cur.done.add(donor)
                cur.rebuilt = cur.donors <= cur.done
        elif kind == SHARD_ACK_REBUILT:
            if cur is not None and cur.rebuilt:
                del self._rebuilding[node]
        elif kind == SHARD_ABORT_REBUILD and cur is not None and not cur.rebuilt:
            del self._rebuilding[node]

    def apply_all(self, events: Iterable[Mapping[str, Any]]) -> ShardStatusFold:
        for ev in events:
            self.apply(ev)
        return self

    def status(self, node: int) -> AuthoritativeStatus:
        cur = self._rebuilding.get(node)
        return AuthoritativeStatus.FULLY_AUTHORITATIVE if cur is None else cur.status

    def statuses(self) -> dict[int, AuthoritativeStatus]:
        """Status of every node the events left not fully authoritative."""
        return {node: r.status for node, r in sorted(self._rebuilding.items())}
