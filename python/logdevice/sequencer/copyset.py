"""Copyset selection: which R storage nodes of a log's nodeset get a record.

Owns the replication property as the write path sees it (``Replication``), the pure check
``satisfies(copyset, replication, locations)`` (the checker and the tests use it), the
weighted random ``CopysetSelector`` and the ``StickyCopysetSelector`` that keeps one
copyset for a block of consecutive records.

Failure domains.  A node's location is ``(region, dc, cluster, row, rack)``, biggest scope
first (a tuple, a ``"region.dc.cluster.row.rack"`` string, or an object with ``.labels``
such as ``logdevice.config.location.Location``).  The domain of a node at a scope is the
path of labels down to that scope, so ``rack1`` in two rows is two racks.  A node whose
label at a scope is missing or empty has an *unknown* domain there; unknown domains never
count towards that scope's requirement (we cannot prove two copies are apart).

Selection.  Copies are drawn one at a time, weighted by storage weight, without
replacement.  Let ``k`` be the slots left and ``need[s]`` the distinct domains of scope
``s`` still missing.  Because domains nest (a node in a new region is also in a new rack),
a partial copyset can still be completed iff, for every scope, ``need[s]`` is at most both
``k`` and the number of uncovered domains that still hold a candidate node.  Picking a node
in a new domain keeps that true; picking one in an already covered domain keeps it true
unless ``need[s] == k``.  So the draw only has to avoid covered domains of "tight" scopes;
after one feasibility check up front, every draw succeeds and the result honours the
property.  Draws use rejection sampling on a cached cumulative-weight table, so a pick
costs ``O(R log n)`` in the common case.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Collection, Iterable, Mapping
from itertools import accumulate
from random import Random
from typing import Any

from ldcore.appenders import draw_distinct

#: Scope names of a location tuple, biggest first; "node" is the node index itself.
LOCATION_SCOPE_NAMES = ("region", "dc", "cluster", "row", "rack")
_DEPTH = {name: i + 1 for i, name in enumerate(LOCATION_SCOPE_NAMES)}
_DEPTH["node"] = 6
_ALIASES = {"data_center": "dc", "datacenter": "dc"}

Locations = Mapping[int, Any]
Copyset = tuple[int, ...]


def _scope_name(key: Any) -> str:
    name = getattr(key, "config_name", key)  # config's NodeLocationScope
    if not isinstance(name, str):
        raise ValueError(f"replication scope {key!r} is not a scope name")
    name = name.lower()
    name = _ALIASES.get(name, name)
    if name not in _DEPTH:
        raise ValueError(f"unknown replication scope {key!r} (scopes: node, rack, row, "
                         "cluster, dc, region)")
    return name


class Replication:
    """A replication property: at least ``copies`` distinct domains at each scope.

    Parameters
    ----------
    spec : int, mapping, or Replication
        ``3`` (three nodes), ``{"rack": 2, "node": 3}``, or
        ``logdevice.config.replication.ReplicationProperty`` (anything with ``to_dict()``).

    Attributes
    ----------
    r : int
        Copies per record (the largest requirement); every copyset has exactly ``r`` nodes.
    scopes : tuple of (str, int)
        Requirements above the node scope, biggest scope first, as (name, copies).
    """

    __slots__ = ("r", "scopes")
    r: int
    scopes: tuple[tuple[str, int], ...]

    def __init__(self, spec: Any) -> None:
        if isinstance(spec, Replication):
            self.r, self.scopes = spec.r, spec.scopes
            return
        if hasattr(spec, "to_dict"):
            spec = spec.to_dict()
        if isinstance(spec, int) and not isinstance(spec, bool):
            spec = {"node": spec}
        if not isinstance(spec, Mapping) or not spec:
            raise ValueError(f"replication must be an int or a non-empty mapping, got {spec!r}")
        counts: dict[str, int] = {}
        for key, copies in spec.items():
            name = _scope_name(key)
            if not isinstance(copies, int) or isinstance(copies, bool) or copies < 1:
                raise ValueError(f"replication {name}: copies must be an int >= 1, "
                                 f"got {copies!r}")
            counts[name] = copies
        self.r = max(counts.values())
        self.scopes = tuple(
            sorted(((n, c) for n, c in counts.items() if n != "node" and c > 1),
                   key=lambda nc: _DEPTH[nc[0]])
        )

    def to_dict(self) -> dict[str, int]:
        """Scope name -> copies, biggest scope first, ending with ``node``."""
        return {**dict(self.scopes), "node": self.r}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Replication) and (self.r, self.scopes) == (other.r, other.scopes)

    def __hash__(self) -> int:
        return hash((self.r, self.scopes))

    def __repr__(self) -> str:
        return f"Replication({self.to_dict()})"


def location_labels(loc: Any) -> tuple[str | None, ...]:
    """Normalise one node's location to 5 labels (None where unknown), biggest first."""
    if loc is None:
        return (None,) * 5
    labels = getattr(loc, "labels", loc)
    if isinstance(labels, str):
        labels = labels.split(".") if labels else ()
    out = [(str(x) if x not in (None, "") else None) for x in tuple(labels)[:5]]
    out += [None] * (5 - len(out))
    return tuple(out)


def domain_of(labels: tuple[str | None, ...], scope: str) -> tuple[str, ...] | None:
    """The failure domain of a node at ``scope`` (a label path), None when unknown."""
    depth = _DEPTH[scope]
    path = labels[:depth]
    if path[-1] is None:
        return None
    return tuple(path)  # type: ignore[arg-type]


def satisfies(copyset: Iterable[int], replication: Any, locations: Locations | None = None) -> bool:
    """True iff ``copyset`` honours ``replication`` given the nodes' ``locations``.

    The copyset must hold at least R distinct nodes and touch at least ``copies`` distinct
    known domains at each scope of the property.  Duplicate entries make it fail.
    """
    rep = Replication(replication)
    nodes = list(copyset)
    if len(set(nodes)) != len(nodes) or len(nodes) < rep.r:
        return False
    locations = locations or {}
    for scope, copies in rep.scopes:
        domains = {domain_of(location_labels(locations.get(n)), scope) for n in nodes}
        domains.discard(None)
        if len(domains) < copies:
            return False
    return True


class CopysetSelector:
    """Weighted random copysets from a nodeset that honour a replication property.

    Parameters
    ----------
    nodeset : iterable of int
        Node indices that may store records of the log.
    replication : int, mapping or Replication
        See ``Replication``.
    locations : mapping node -> location, optional
        Needed when the property names scopes above ``node``.
    weights : mapping node -> float, optional
        Relative storage weight (default 1.0).  Weight 0 nodes are never picked.

    Raises
    ------
    ValueError
        The nodeset cannot satisfy the property even with every node available.
    """

    def __init__(self, nodeset: Iterable[int], replication: Any,
                 locations: Locations | None = None,
                 weights: Mapping[int, float] | None = None) -> None:
        self.replication = Replication(replication)
        self.nodeset: tuple[int, ...] = tuple(dict.fromkeys(int(n) for n in nodeset))
        locations = locations or {}
        weights = weights or {}
        self.weights: dict[int, float] = {}
        for n in self.nodeset:
            w = float(weights.get(n, 1.0))
            if not w >= 0.0:
                raise ValueError(f"node {n}: storage weight must be >= 0, got {w!r}")
            self.weights[n] = w
        # Per scope above node: node -> small int domain id (-1 = unknown).
        self._domains: list[dict[int, int]] = []
        for scope, _ in self.replication.scopes:
            ids: dict[tuple[str, ...], int] = {}
            dom: dict[int, int] = {}
            for n in self.nodeset:
                d = domain_of(location_labels(locations.get(n)), scope)
                dom[n] = -1 if d is None else ids.setdefault(d, len(ids))
            self._domains.append(dom)
        self._copies = [c for _, c in self.replication.scopes]
        self._cache_key: frozenset[int] | None = None
        self._cache: tuple[list[int], list[float], bool] = ([], [], False)
        if not self.can_satisfy(()):
            raise ValueError(f"nodeset {list(self.nodeset)} (positive weights only) cannot "
                             f"satisfy replication {self.replication.to_dict()}")

    # -- candidates -----------------------------------------------------------------------
    def _candidates(self, excluded: Collection[int]) -> tuple[list[int], list[float], bool]:
        """(nodes, cumulative weights, feasible) for this exclusion set; cached."""
        key = excluded if isinstance(excluded, frozenset) else frozenset(excluded)
        if key == self._cache_key:
            return self._cache
        nodes = [n for n in self.nodeset if self.weights[n] > 0.0 and n not in key]
        feasible = len(nodes) >= self.replication.r
        for dom, copies in zip(self._domains, self._copies, strict=True):
            known = {dom[n] for n in nodes}
            known.discard(-1)
            feasible = feasible and len(known) >= copies
        cum = list(accumulate(self.weights[n] for n in nodes))
        self._cache_key, self._cache = key, (nodes, cum, feasible)
        return self._cache

    def can_satisfy(self, excluded: Collection[int] = ()) -> bool:
        """Whether a copyset exists that avoids every node in ``excluded``."""
        return self._candidates(excluded)[2]

    # -- selection ------------------------------------------------------------------------
    def select(self, rng: Random, excluded: Collection[int] = ()) -> Copyset | None:
        """A random copyset of R nodes avoiding ``excluded``, or None if none exists.

        The first node is drawn with probability proportional to its weight, each later one
        proportionally among the nodes still allowed.  The order matters downstream: with
        single copy delivery the first node of a copyset ships the record.
        """
        nodes, cum, feasible = self._candidates(excluded)
        if not feasible:
            return None
        r = self.replication.r
        total = cum[-1]
        rand = rng.random
        chosen: list[int] = []
        domains = self._domains
        if not domains:  # only distinct nodes matter: the common case, compiled
            chosen = draw_distinct(nodes, cum, r, rand, 16 * r)
            while len(chosen) < r:  # R close to the number of candidates
                allowed = [n for n in nodes if n not in chosen]
                chosen.append(rng.choices(allowed, [self.weights[n] for n in allowed])[0])
            return tuple(chosen)
        need = list(self._copies)
        covered: list[set[int]] = [set() for _ in domains]
        for k in range(r, 0, -1):
            tight = [i for i, nd in enumerate(need) if nd >= k]
            node = -1
            for _ in range(16):  # rejection sampling; nearly always one or two tries
                n = nodes[bisect_right(cum, rand() * total)]
                if n not in chosen and all(
                    domains[i][n] != -1 and domains[i][n] not in covered[i] for i in tight
                ):
                    node = n
                    break
            if node < 0:  # many rejections: draw among the allowed nodes explicitly
                allowed = [
                    n for n in nodes if n not in chosen and all(
                        domains[i][n] != -1 and domains[i][n] not in covered[i] for i in tight)
                ]
                if not allowed:  # cannot happen after the feasibility check
                    return None
                node = rng.choices(allowed, [self.weights[n] for n in allowed])[0]
            chosen.append(node)
            for i, dom in enumerate(domains):
                d = dom[node]
                if d != -1 and d not in covered[i]:
                    covered[i].add(d)
                    need[i] -= 1
        return tuple(chosen)


class StickyCopysetSelector:
    """Keeps one copyset for a block of consecutive records while writes succeed.

    A block ends when its records pass ``block_bytes``, when it is older than
    ``block_ms``, when a wave on its copyset fails (``on_wave_failed``), or when one of its
    nodes is excluded.  The next ``select`` then draws a fresh copyset from ``base``.

    Parameters
    ----------
    base : CopysetSelector
    block_bytes : int
        Payload bytes per block (LogDevice: 32 MB).
    block_ms : float
        Longest life of a block in milliseconds (LogDevice: 10 min).
    """

    def __init__(self, base: CopysetSelector, block_bytes: int = 32 << 20,
                 block_ms: float = 600_000.0) -> None:
        if block_bytes <= 0 or block_ms <= 0:
            raise ValueError("block_bytes and block_ms must be positive")
        self.base = base
        self.replication = base.replication
        self.nodeset = base.nodeset
        self.block_bytes = block_bytes
        self.block_seconds = block_ms / 1000.0
        self.current: Copyset | None = None
        self._block_started = 0.0
        self._block_fill = 0
        self.blocks_started = 0

    def can_satisfy(self, excluded: Collection[int] = ()) -> bool:
        return self.base.can_satisfy(excluded)

    def select(self, rng: Random, excluded: Collection[int] = (), payload_len: int = 0,
               now: float = 0.0) -> Copyset | None:
        """The block's copyset, or the first copyset of a new block (None if none exists)."""
        cur = self.current
        if (cur is not None and self._block_fill < self.block_bytes
                and now - self._block_started < self.block_seconds
                and not any(n in excluded for n in cur)):
            self._block_fill += payload_len
            return cur
        cur = self.base.select(rng, excluded)
        self.current = cur
        if cur is not None:
            self._block_started = now
            self._block_fill = payload_len
            self.blocks_started += 1
        return cur

    def on_wave_failed(self, copyset: Copyset) -> None:
        """A wave on ``copyset`` failed: if it is the block's copyset, end the block."""
        if copyset == self.current:
            self.current = None
