"""What a donor re-replicates and where the new copies go: pure functions over CSI arrays.

Rebuilding is many-to-many: every storage node scans its own copyset index and decides,
for each record it holds, whether it is the one donor for that record.  The rule depends
only on the record's copyset and the rebuilding set, so every holder of a record agrees
without talking to the others:

- a record whose copyset holds a *draining* node is moved by the first draining member
  of its copyset (it still has every record it was sent, and it stops taking new ones
  before it starts: nothing acknowledged can slip past its scan);
- otherwise, a record whose copyset holds a *lost* node is copied by the first member
  of its copyset that is not lost (single copy delivery with the lost nodes as the
  known-down list: ``ldcore.scd.ship_mask``);
- copies flagged DRAINED (moved away already) are never donated.

The new copyset replaces each member of the rebuilding set with a node of the record's
epoch nodeset that is outside the copyset, not excluded (rebuilding, down, weight 0) and
keeps the replication property, failure domains included.  The choice is a function of
the record (its LSN picks among the valid completions of its copyset), so a donor that
restarts and sends the same record again sends it to the same node.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ldcore.scd import ship_mask
from logdevice.epochstore.events import RebuildingSet
from logdevice.sequencer.copyset import satisfies
from logdevice.storage.flags import FLAG_DRAINED

__all__ = ["EpochPlacement", "donor_mask", "amend_copysets", "destinations",
           "MAX_OPTIONS"]

#: Valid completions kept per copyset; records spread over them by LSN.
MAX_OPTIONS = 64
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


@dataclass(frozen=True)
class EpochPlacement:
    """Where the records of one epoch may live: its nodeset and replication property,
    the nodes' locations, and the nodes that must not get a new copy now."""

    nodeset: tuple[int, ...]
    replication: Any
    locations: Mapping[int, Any] = field(default_factory=dict)
    excluded: frozenset[int] = frozenset()


def donor_mask(copysets: np.ndarray, flags: np.ndarray, me: int,
               rset: RebuildingSet) -> np.ndarray:
    """Bool per record (row of ``copysets``): does node ``me`` donate it?"""
    n = len(copysets)
    if not rset or me in rset.lost or n == 0:
        return np.zeros(n, bool)
    cs = np.asarray(copysets)
    drained_flag = (np.asarray(flags, np.uint32) & np.uint32(FLAG_DRAINED)).astype(np.uint32)
    has_drain: np.ndarray = np.zeros(n, bool)
    mine: np.ndarray = np.zeros(n, bool)
    if rset.draining:
        in_drain = np.isin(cs, np.fromiter(rset.draining, np.int64))
        has_drain = np.asarray(in_drain.any(axis=1))
        if me in rset.draining:
            first = cs[np.arange(n), in_drain.argmax(axis=1)]
            mine = has_drain & (first == me) & (drained_flag == 0)
    if rset.lost:
        lost = sorted(rset.lost)
        mine |= ship_mask(cs, me, lost, flags=drained_flag, rebuilding=lost) & ~has_drain
    return mine


def _mix(lsns: np.ndarray) -> np.ndarray:
    """splitmix64 of each LSN: spreads consecutive records over the options."""
    with np.errstate(over="ignore"):
        z = lsns.astype(np.uint64) + _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def _options(row: tuple[int, ...], rebuilding: Collection[int],
             where: EpochPlacement) -> list[tuple[int, ...]]:
    """Copysets that replace the rebuilding members of ``row`` and keep the property."""
    members = [x for x in row if x >= 0]
    slots = [i for i, x in enumerate(row) if x >= 0 and x in rebuilding]
    candidates = [x for x in where.nodeset
                  if x not in where.excluded and x not in rebuilding and x not in members]
    out: list[tuple[int, ...]] = []
    for combo in itertools.combinations(candidates, len(slots)):
        new = list(row)
        for i, x in zip(slots, combo, strict=True):
            new[i] = x
        if satisfies([x for x in new if x >= 0], where.replication, where.locations):
            out.append(tuple(new))
            if len(out) >= MAX_OPTIONS:
                break
    return out


def amend_copysets(lsns: np.ndarray, copysets: np.ndarray, rset: RebuildingSet,
                   placement: Callable[[int], EpochPlacement]) -> tuple[np.ndarray, np.ndarray]:
    """New copysets for donated records: ``(copysets, placed)``.

    ``placement(epoch)`` says where records of that epoch may go.  ``placed[i]`` is False
    when no node can take record i's copy now (the nodeset has too few eligible nodes);
    its row is returned unchanged.  One decision per distinct (epoch, copyset), applied
    to every record with numpy.
    """
    n = len(lsns)
    cs = np.asarray(copysets, np.int16)
    if n == 0:
        return cs.copy(), np.zeros(0, bool)
    epochs = (np.asarray(lsns, np.uint64) >> np.uint64(32)).astype(np.int64)
    keys = np.column_stack([epochs, cs.astype(np.int64)])
    uniq, inv = np.unique(keys, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    rebuilding = rset.nodes
    tables = [_options(tuple(int(x) for x in u[1:]), rebuilding, placement(int(u[0])))
              for u in uniq]
    counts = np.array([len(t) for t in tables], np.int64)
    width = cs.shape[1]
    opts = np.full((len(uniq), max(1, int(counts.max())), width), -1, np.int16)
    for u, table in enumerate(tables):
        if table:
            opts[u, :len(table)] = table
    placed = counts[inv] > 0
    pick = np.zeros(n, np.int64)
    pick[placed] = (_mix(np.asarray(lsns)[placed])
                    % counts[inv][placed].astype(np.uint64)).astype(np.int64)
    new = np.where(placed[:, None], opts[inv, pick], cs)
    return new, placed


def destinations(copysets: np.ndarray, me: int) -> dict[int, np.ndarray]:
    """Node -> indices of the records (rows) whose copyset names it, ``me`` left out:
    where a donor sends each amended record."""
    cs = np.asarray(copysets)
    out: dict[int, np.ndarray] = {}
    for node in np.unique(cs[cs >= 0]).tolist():
        if node != me:
            out[int(node)] = np.flatnonzero((cs == node).any(axis=1))
    return out
