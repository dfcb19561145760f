"""The event log: shard rebuilding events and the authoritative status they imply.

Events are JSON objects ``{"type": ..., "node": N, ...}`` appended to the epoch store,
which numbers them (``version``) and stamps them (``time_ms``).  Folding them in order gives
each node's ``AuthoritativeStatus`` and the *rebuilding set*: the nodes whose records the
cluster is re-replicating right now.

- ``SHARD_NEEDS_REBUILD`` (optional ``unrecoverable``: bool, ``drain``: bool,
  ``donors``: [node...]): the node joins the rebuilding set.  Its status becomes
  UNAVAILABLE (down, may come back), UNDERREPLICATION (``unrecoverable``: its data is
  gone), or stays FULLY_AUTHORITATIVE for a ``drain`` (the node keeps its data and serves
  it while its records move elsewhere).  ``donors`` lists the storage nodes that must
  take part (the fold leaves the set's lost nodes out of it).
- ``SHARD_UNRECOVERABLE``: the node's data is gone (the operator says so);
  UNDERREPLICATION, and a drain becomes a rebuild of lost data.
- ``SHARD_IS_REBUILT`` (``donor``, optional ``set_version``): a donor finished its share of
  the rebuilding set of that version.  Once every donor has (without a donor list: at the
  first report), every node of the set is AUTHORITATIVE_EMPTY.
- ``SHARD_ACK_REBUILT``: the rebuilt node is back and acknowledges; FULLY_AUTHORITATIVE.
- ``SHARD_ABORT_REBUILD``: the node came back with its data before rebuilding finished,
  or an operator aborted the rebuilding or the drain; FULLY_AUTHORITATIVE.
- ``SHARD_REBUILD_DEFERRED`` (``reason``): the cluster holds the node dead long enough to
  rebuild it by itself, but does not yet, for that reason (changes no status).

Any event may carry a ``reason`` (text for people); SHARD_NEEDS_REBUILD appended by the
cluster itself for a dead node says ``self_initiated: true``, and an operator's abort or
undrain says ``operator: true``.

Every change of the set (a node joins, leaves, or turns from drained to lost) gives it a
new ``version``: donors restart their pass for the new set, and reports for an older set
no longer count.  Events that do not apply in the current state (an ack before the
rebuild finished, a donor report for a node not being rebuilt) are kept in the log but
change nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from logdevice.errors import InvalidParamError
from logdevice.shards import AuthoritativeStatus

SHARD_NEEDS_REBUILD = "SHARD_NEEDS_REBUILD"
SHARD_UNRECOVERABLE = "SHARD_UNRECOVERABLE"
SHARD_IS_REBUILT = "SHARD_IS_REBUILT"
SHARD_ACK_REBUILT = "SHARD_ACK_REBUILT"
SHARD_ABORT_REBUILD = "SHARD_ABORT_REBUILD"
SHARD_REBUILD_DEFERRED = "SHARD_REBUILD_DEFERRED"
EVENT_TYPES = frozenset({SHARD_NEEDS_REBUILD, SHARD_UNRECOVERABLE, SHARD_IS_REBUILT,
                         SHARD_ACK_REBUILT, SHARD_ABORT_REBUILD, SHARD_REBUILD_DEFERRED})
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
    if "set_version" in ev:
        _node(ev["set_version"], "'set_version'")
    if "donors" in ev:
        if not isinstance(ev["donors"], list | tuple):
            raise InvalidParamError(message="event 'donors' must be a list of node indices")
        ev["donors"] = sorted({_node(d, "'donors' entry") for d in ev["donors"]})
    if not isinstance(ev.get("reason", ""), str):
        raise InvalidParamError(message="event 'reason' must be text")
    for flag in ("unrecoverable", "drain", "self_initiated", "operator"):
        if flag in ev and not isinstance(ev[flag], bool):
            raise InvalidParamError(message=f"event {flag!r} must be true or false")
    try:
        json.dumps(ev)
    except (TypeError, ValueError) as e:
        raise InvalidParamError(message=f"event is not JSON-serialisable: {e}") from None
    return ev


@dataclass(frozen=True)
class RebuildingSet:
    """The nodes being rebuilt now, as every donor must see them.

    ``lost``: nodes whose copies no longer count (down or data gone); the other members of
    a record's copyset re-replicate them.  ``draining``: nodes that keep their data and
    move it away themselves.  ``donors``: storage nodes that must report (None: the first
    report finishes the set); ``done``: those that reported for this ``version``.
    """

    version: int = 0
    lost: frozenset[int] = frozenset()
    draining: frozenset[int] = frozenset()
    donors: frozenset[int] | None = None
    done: frozenset[int] = frozenset()

    @property
    def nodes(self) -> frozenset[int]:
        return self.lost | self.draining

    def __bool__(self) -> bool:
        return bool(self.lost or self.draining)

    def to_dict(self) -> dict[str, Any]:
        """Plain values (for the wire)."""
        return {"version": self.version, "lost": sorted(self.lost),
                "draining": sorted(self.draining),
                "donors": None if self.donors is None else sorted(self.donors),
                "done": sorted(self.done)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RebuildingSet:
        donors = d.get("donors")
        return cls(version=int(d.get("version", 0)), lost=frozenset(d.get("lost", ())),
                   draining=frozenset(d.get("draining", ())),
                   donors=None if donors is None else frozenset(donors),
                   done=frozenset(d.get("done", ())))


@dataclass
class _Rebuild:
    unrecoverable: bool = False
    drain: bool = False
    rebuilt: bool = False

    @property
    def status(self) -> AuthoritativeStatus:
        if self.rebuilt:
            return AuthoritativeStatus.AUTHORITATIVE_EMPTY
        if self.unrecoverable:
            return AuthoritativeStatus.UNDERREPLICATION
        if self.drain:
            return AuthoritativeStatus.FULLY_AUTHORITATIVE
        return AuthoritativeStatus.UNAVAILABLE


@dataclass
class ShardStatusFold:
    """Folds events (in version order) into each node's authoritative status and the
    current rebuilding set."""

    version: int = 0  # last event applied
    set_version: int = 0  # last change of the rebuilding set
    _rebuilding: dict[int, _Rebuild] = field(default_factory=dict)
    _donors: frozenset[int] | None = None
    _done: set[int] = field(default_factory=set)

    def apply(self, event: Mapping[str, Any]) -> None:
        version = int(event.get("version", self.version + 1))
        if version <= self.version:
            return  # already folded
        self.version = version
        kind, node = event["type"], event["node"]
        cur = self._rebuilding.get(node)
        active = cur is not None and not cur.rebuilt
        if kind == SHARD_NEEDS_REBUILD:
            lost_before = active and cur is not None and cur.unrecoverable
            self._rebuilding[node] = _Rebuild(
                unrecoverable=bool(event.get("unrecoverable")) or lost_before,
                drain=bool(event.get("drain")) and not event.get("unrecoverable")
                and not lost_before)
            donors = event.get("donors")
            self._set_changed(None if donors is None else frozenset(donors))
        elif kind == SHARD_UNRECOVERABLE:
            if cur is None:
                self._rebuilding[node] = _Rebuild(unrecoverable=True)
                self._set_changed(self._donors)
            elif not cur.rebuilt and not cur.unrecoverable:
                cur.unrecoverable, cur.drain = True, False
                self._set_changed(self._donors)
        elif kind == SHARD_IS_REBUILT:
            if not active:
                return
            donor = event.get("donor")
            if event.get("set_version", self.set_version) != self.set_version:
                return  # a report for an older set
            if donor is not None:
                self._done.add(donor)
            needed = self.rebuilding_set().donors
            if donor is None or needed is None or needed <= self._done:
                for r in self._rebuilding.values():
                    r.rebuilt = True
        elif kind == SHARD_ACK_REBUILT:
            if cur is not None and cur.rebuilt:
                del self._rebuilding[node]
        elif kind == SHARD_ABORT_REBUILD and active:
            del self._rebuilding[node]
            self._set_changed(self._donors)

    def _set_changed(self, donors: frozenset[int] | None) -> None:
        self.set_version = self.version
        self._donors = donors
        self._done = set()

    def apply_all(self, events: Iterable[Mapping[str, Any]]) -> ShardStatusFold:
        for ev in events:
            self.apply(ev)
        return self

    def status(self, node: int) -> AuthoritativeStatus:
        cur = self._rebuilding.get(node)
        return AuthoritativeStatus.FULLY_AUTHORITATIVE if cur is None else cur.status

    def statuses(self) -> dict[int, AuthoritativeStatus]:
        """Status of every node the events left not fully authoritative."""
        return {node: r.status for node, r in sorted(self._rebuilding.items())
                if r.status != AuthoritativeStatus.FULLY_AUTHORITATIVE}

    def rebuilding_set(self) -> RebuildingSet:
        """The set being rebuilt now (empty when nothing is)."""
        active = {n: r for n, r in self._rebuilding.items() if not r.rebuilt}
        if not active:
            return RebuildingSet()
        lost = frozenset(n for n, r in active.items() if not r.drain)
        return RebuildingSet(
            version=self.set_version, lost=lost,
            draining=frozenset(n for n, r in active.items() if r.drain),
            donors=None if self._donors is None else self._donors - lost,
            done=frozenset(self._done))

    def view(self, node: int) -> ShardView:
        """What ``node`` needs to know of the event log: the rebuilding set, its own
        status, whether it is or was drained (and not acknowledged since), and which
        nodes take no new copies."""
        cur = self._rebuilding.get(node)
        return ShardView(self.rebuilding_set(), self.status(node),
                         cur is not None and cur.drain, frozenset(self._rebuilding))


class StatusHistory:
    """The nodes' authoritative statuses and since when each node is not fully
    authoritative, folded from the event log one batch of new events at a time."""

    def __init__(self) -> None:
        self._fold = ShardStatusFold()
        self._since: dict[int, int] = {}

    @property
    def version(self) -> int:
        """The version of the last event folded in (ask the store for events after it)."""
        return self._fold.version

    def apply_all(self, events: Iterable[Mapping[str, Any]]) -> StatusHistory:
        fold = self._fold
        for ev in events:
            before = fold.status(ev["node"])
            fold.apply(ev)
            if before == AuthoritativeStatus.FULLY_AUTHORITATIVE != fold.status(ev["node"]):
                self._since[int(ev["node"])] = int(ev.get("time_ms", 0))
        return self

    def statuses(self) -> tuple[dict[int, AuthoritativeStatus], dict[int, int]]:
        """Each node that is not fully authoritative with its status, and the time (ms)
        it last left FULLY_AUTHORITATIVE."""
        statuses = self._fold.statuses()
        return dict(statuses), {n: t for n, t in self._since.items() if n in statuses}


class ShardView(NamedTuple):
    rebuilding: RebuildingSet
    status: AuthoritativeStatus
    drained: bool
    #: Nodes that take no new copies: being rebuilt or drained, or rebuilt and not
    #: acknowledged yet.
    refusing: frozenset[int] = frozenset()
