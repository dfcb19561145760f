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
the record's LSN and the candidates (rendezvous hashing), so a donor that restarts and
sends the same record again sends it to the same node.
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
from logdevice.storage.flags import FLAG_DRAINED, FLAG_WRITTEN_BY_RECOVERY

__all__ = ["EpochPlacement", "donor_mask", "amend_copysets", "destinations",
           "newer_or_equal", "MAX_OPTIONS"]

#: Valid completions kept per copyset when the ranked choice breaks a failure domain.
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

    ``placement(epoch)`` says where records of that epoch may go.  Each rebuilding member
    of a copyset is replaced, in its slot, by the eligible candidates a record ranks
    highest (rendezvous hashing of the LSN and the node): records spread evenly, and a
    record keeps its choice when other candidates come or go (a donor that restarts in
    a changed rebuilding set sends it where it sent it before).  Should that choice break
    a failure-domain requirement, the record takes one of the valid completions instead.
    ``placed[i]`` is False when no node can take record i's copy now; its row is
    returned unchanged.  Work is per distinct (epoch, copyset), with numpy over records.
    """
    n = len(lsns)
    cs = np.asarray(copysets, np.int16)
    placed = np.zeros(n, bool)
    new = cs.copy()
    if n == 0:
        return new, placed
    lsns = np.asarray(lsns, np.uint64)
    keys = np.column_stack([(lsns >> np.uint64(32)).astype(np.int64), cs.astype(np.int64)])
    uniq, inv = np.unique(keys, axis=0, return_inverse=True)
    groups = np.split(np.argsort(inv.reshape(-1), kind="stable"),
                      np.cumsum(np.bincount(inv.reshape(-1), minlength=len(uniq)))[:-1])
    rebuilding = rset.nodes
    for key, rows in zip(uniq, groups, strict=True):
        row = tuple(int(x) for x in key[1:])
        where = placement(int(key[0]))
        slots = [i for i, x in enumerate(row) if x >= 0 and x in rebuilding]
        cands = np.array([x for x in where.nodeset if x not in where.excluded
                          and x not in rebuilding and x not in row], np.int64)
        if len(cands) < len(slots):
            continue
        scores = _mix(lsns[rows][:, None] ^ (cands.astype(np.uint64) * _GOLDEN)[None, :])
        ranked = cands[np.argsort(scores, axis=1)[:, ::-1][:, :len(slots)]]
        block = np.repeat(np.array([row], np.int16), len(rows), axis=0)
        block[:, slots] = ranked
        combos, which = np.unique(ranked, axis=0, return_inverse=True)
        kept = [x for x in row if x >= 0 and x not in rebuilding]
        for c, combo in enumerate(combos.tolist()):
            if satisfies(kept + combo, where.replication, where.locations):
                continue
            bad = np.flatnonzero(which.reshape(-1) == c)
            options = _options(row, rebuilding, where)
            if not options:
                block[bad] = -2  # marks "not placed"
                continue
            pick = _mix(lsns[rows][bad]) % np.uint64(len(options))
            block[bad] = np.array(options, np.int16)[pick.astype(np.int64)]
        ok = block[:, 0] != -2
        new[rows[ok]] = block[ok]
        placed[rows[ok]] = True
    return new, placed


def newer_or_equal(flags: np.ndarray, waves: np.ndarray, held_flags: np.ndarray,
                   held_waves: np.ndarray) -> np.ndarray:
    """Bool per record: may a rebuilt copy (``flags``, ``waves``) replace the copy a node
    holds (``held_*``)?  Not when the held one is newer: written by recovery where the
    rebuilt one is not, or from a later wave.  A donor may hold a stale copy from a wave
    its sequencer abandoned; copying it must not undo the wave that was acknowledged."""
    rec = (np.asarray(flags, np.uint32) & np.uint32(FLAG_WRITTEN_BY_RECOVERY)) != 0
    held_rec = (np.asarray(held_flags, np.uint32) & np.uint32(FLAG_WRITTEN_BY_RECOVERY)) != 0
    return (rec > held_rec) | ((rec == held_rec) & (np.asarray(waves) >= np.asarray(held_waves)))


def destinations(new: np.ndarray, old: np.ndarray, me: int
                 ) -> tuple[dict[int, np.ndarray], dict[int, np.ndarray]]:
    """Where a donor sends each amended record: ``(copies, amends)``, each node -> indices
    of the records (rows).  ``copies``: nodes the amended copyset adds (they get a new
    copy); ``amends``: members the record keeps, ``me`` left out (the copyset of their
    copy is amended, the payload stays).  The donor sends the copies first and the
    amends only once every copy is stored, so a copyset never names a node that lacks
    the record."""
    new, old = np.asarray(new), np.asarray(old)
    copies: dict[int, np.ndarray] = {}
    amends: dict[int, np.ndarray] = {}
    for node in np.unique(new[new >= 0]).tolist():
        if node == me:
            continue
        named = (new == node).any(axis=1)
        had = (old == node).any(axis=1)
        if (rows := np.flatnonzero(named & ~had)).size:
            copies[int(node)] = rows
        if (rows := np.flatnonzero(named & had)).size:
            amends[int(node)] = rows
    return copies, amends
