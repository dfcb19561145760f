"""F-majority over a nodeset with failure domains and authoritative status.

A read stream may declare "no copy of this LSN exists" once the nodes that said "nothing
here" intersect every possible copyset.  With replication R over N nodes that takes
``N - R + 1`` nodes.  With failure domains (a replication property such as
``{"rack": 2, "node": 3}``) the test is made per scope: the domains whose every node has
answered ("complete" domains) must number at least ``non-empty domains - R_scope + 1``, so
that no copyset fits inside the incomplete ones.  One satisfied scope suffices.

Authoritative status (from the event log) changes who counts:

* ``AUTHORITATIVE_EMPTY`` nodes leave the effective nodeset (their data was re-replicated
  elsewhere), so they are neither counted nor waited for.
* ``UNDERREPLICATION`` nodes lost data: what they say proves nothing, so they never count
  towards an f-majority; but they are not waited for either.
* ``FULLY_AUTHORITATIVE`` and ``UNAVAILABLE`` nodes count; an f-majority is "complete"
  only once all of them have answered.

The result is one of ``FMajorityResult``: an f-majority that is complete or incomplete,
a non-authoritative answer (every node that could answer did, yet too many lost data), or
nothing yet.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from enum import IntEnum
from typing import Any

from logdevice.shards import AuthoritativeStatus as AuthoritativeStatus  # re-exported


class FMajorityResult(IntEnum):
    NONE = 0
    AUTHORITATIVE_COMPLETE = 1  # an f-majority, and every node that counts has answered
    AUTHORITATIVE_INCOMPLETE = 2  # an f-majority, some counting nodes still silent
    NON_AUTHORITATIVE = 3  # all counting nodes answered, no f-majority (data was lost)


# How many labels of a location (region.dc.cluster.row.rack) name the domain at a scope.
_SCOPE_DEPTH = {"region": 1, "dc": 2, "data_center": 2, "cluster": 3, "row": 4, "rack": 5}
# LogDevice's NodeLocationScope numbering, for replication properties given by number.
_SCOPE_BY_NUMBER = {0: "node", 1: "rack", 2: "row", 3: "cluster", 4: "dc", 5: "region"}


def _scope_name(scope: Any) -> str:
    name = getattr(scope, "config_name", None)  # logdevice.config NodeLocationScope
    if isinstance(name, str):
        return name
    if isinstance(scope, int) and not isinstance(scope, bool):
        if scope not in _SCOPE_BY_NUMBER:
            raise ValueError(f"unknown failure-domain scope number {scope}")
        return _SCOPE_BY_NUMBER[scope]
    if not isinstance(scope, str) or (scope != "node" and scope not in _SCOPE_DEPTH):
        raise ValueError(f"unknown failure-domain scope {scope!r}; expected one of node, "
                         f"rack, row, cluster, dc, region")
    return scope


def parse_replication(replication: Any) -> dict[str, int]:
    """Scope name -> copies, always with a ``"node"`` entry (the replication factor).

    Accepts an int R, a dict such as ``{"rack": 2, "node": 3}`` (scope names or
    LogDevice scope numbers as keys) or an object with ``requirements`` pairs (the
    config's ``ReplicationProperty``).
    """
    if isinstance(replication, int) and not isinstance(replication, bool):
        items: Iterable[tuple[Any, Any]] = [("node", replication)]
    elif hasattr(replication, "requirements"):
        items = list(replication.requirements)
    elif isinstance(replication, Mapping):
        items = list(replication.items())
    else:
        raise ValueError(f"replication must be an int or a dict scope -> copies, "
                         f"got {replication!r}")
    out: dict[str, int] = {}
    for scope, copies in items:
        if not isinstance(copies, int) or isinstance(copies, bool) or copies < 1:
            raise ValueError(f"replication for scope {scope!r} must be a positive int, "
                             f"got {copies!r}")
        out[_scope_name(scope)] = int(copies)
    if not out:
        raise ValueError("replication must name at least one scope")
    # A property without a node entry still needs that many distinct nodes.
    out["node"] = max(out.get("node", 0), max(out.values()))
    return out


def _labels(location: Any) -> tuple[str, ...] | None:
    if location is None:
        return None
    labels = getattr(location, "labels", None)  # logdevice.config Location
    if labels is not None:
        return tuple(labels)
    if isinstance(location, str):
        return tuple(location.split(".")) if location else None
    return tuple(str(x) for x in location)


# What node sets with a node-scope replication only and every node fully authoritative
# look like, by (nodes, copies): a reader builds one per log, most of them alike.  Each
# entry is read only: (replication, scopes, effective, counting).
_NODE_ONLY: dict[tuple[tuple[int, ...], int], tuple[Any, ...]] = {}
_NODE_ONLY_MAX = 1024


def _node_only_key(nodes: list[int], replication: Any) -> tuple[tuple[int, ...], int] | None:
    if type(replication) is int:
        return tuple(nodes), replication
    if type(replication) is dict and len(replication) == 1 \
            and type(copies := replication.get("node")) is int:
        return tuple(nodes), copies
    return None


class FailureDomainNodeSet:
    """Answers "is this set of nodes an f-majority of the nodeset?".

    Parameters
    ----------
    nodes : iterable of int
        The nodeset (the read set).
    replication : int, dict or ReplicationProperty
        See ``parse_replication``.
    locations : dict node -> location, optional
        A location is a tuple of labels ``(region, dc, cluster, row, rack)``, a
        ``"region.dc.cluster.row.rack"`` string or a config ``Location``.  Nodes without
        one form their own domain at every scope (finer domains never overstate an
        f-majority).
    """

    _scopes: list[tuple[int, dict[int, Any]]]  # per scope: (copies, node -> domain key)

    def __init__(self, nodes: Iterable[int], replication: Any,
                 locations: Mapping[int, Any] | None = None) -> None:
        self.nodes = list(dict.fromkeys(int(n) for n in nodes))
        self.status = dict.fromkeys(self.nodes, AuthoritativeStatus.FULLY_AUTHORITATIVE)
        key = _node_only_key(self.nodes, replication)
        shape = _NODE_ONLY.get(key) if key is not None else None
        if shape is not None:
            self.replication, self._scopes, self.effective, self.counting = shape
            return
        self.replication = parse_replication(replication)
        locs: dict[int, tuple[str, ...] | None] | None = None  # for the first wider scope
        self._scopes = []
        for scope, copies in self.replication.items():
            if scope == "node":
                self._scopes.append((copies, {n: n for n in self.nodes}))
                continue
            if locs is None:
                locs = {int(k): _labels(v) for k, v in (locations or {}).items()}
            depth = _SCOPE_DEPTH[scope]
            domain: dict[int, Any] = {}
            for n in self.nodes:
                lab = locs.get(n)
                domain[n] = lab[:depth] if lab is not None and len(lab) >= depth else ("?", n)
            self._scopes.append((copies, domain))
        self._refresh()
        if key is not None:
            if len(_NODE_ONLY) >= _NODE_ONLY_MAX:
                _NODE_ONLY.clear()
            _NODE_ONLY[key] = (self.replication, self._scopes, self.effective, self.counting)

    @property
    def replication_factor(self) -> int:
        return self.replication["node"]

    def set_status(self, node: int, status: int) -> None:
        self.status[node] = AuthoritativeStatus(status)
        self._refresh()

    def _refresh(self) -> None:
        st = self.status
        self.effective = tuple(n for n in self.nodes
                               if st[n] != AuthoritativeStatus.AUTHORITATIVE_EMPTY)
        self.counting = frozenset(n for n in self.effective
                                  if st[n] in (AuthoritativeStatus.FULLY_AUTHORITATIVE,
                                               AuthoritativeStatus.UNAVAILABLE))

    def all_not_fully_authoritative(self) -> bool:
        """True when no node is fully authoritative (everything lost or rebuilt away)."""
        return not any(s == AuthoritativeStatus.FULLY_AUTHORITATIVE
                       for s in self.status.values())

    def is_fmajority(self, answered: Collection[int]) -> bool:
        """Whether the counting nodes among ``answered`` form an f-majority."""
        for copies, domain in self._scopes:
            domains = set()
            incomplete = set()
            for n in self.effective:
                d = domain[n]
                domains.add(d)
                if n not in answered or n not in self.counting:
                    incomplete.add(d)
            if len(domains) - len(incomplete) >= max(1, len(domains) - copies + 1):
                return True
        return False

    def check(self, answered: Collection[int]) -> FMajorityResult:
        """Classify the set of nodes that answered "nothing at this LSN"."""
        if self.is_fmajority(answered):
            if all(n in answered for n in self.counting):
                return FMajorityResult.AUTHORITATIVE_COMPLETE
            return FMajorityResult.AUTHORITATIVE_INCOMPLETE
        if all(n in answered for n in self.counting):
            return FMajorityResult.NON_AUTHORITATIVE
        return FMajorityResult.NONE
