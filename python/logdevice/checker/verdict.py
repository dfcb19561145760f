"""The checker's verdict on one log: sans-I/O, whole-array numpy, no record loops.

Input: what each node that answered holds in the log's live range (``NodeHoldings``:
the LSNs decoded from its BP-34 availability and one copyset per stored LSN), which
nodes did not answer, the replication property and node locations, and each node's
authoritative status (with when it stopped being fully authoritative).  Output: a
``LogVerdict``.

The LSNs are laid out on a ``grid.Grid`` (one slot per ESN of each epoch present).  For
slot i, C[i] is the copyset its holders stored, H[x][i] "node x holds it" and M[x][i]
"node x is in C[i]"; each is one boolean array per node.  Then, per record:

- **placement**: C[i] does not satisfy the replication property (failure domains
  included); decided once per distinct copyset.
- **durability**: M & ~H on a node that answered and is fully authoritative: a copy the
  copyset promises is gone.  Also durability: an LSN inside an epoch's stored ESN range
  that no node holds (``no_replica``: ESNs are dense up to the release pointer, so a
  hole there is a record with no copy left), judged only when every node answered.
- **progress**: M & ~H on a node that is being rebuilt (UNDERREPLICATION / UNAVAILABLE
  in the event log) for longer than the grace period.
- **availability**: a node that did not answer while fully authoritative (the event log
  does not say it is unavailable).  Counted per node, not per record.

Counted apart, never violations: copies missing on nodes being rebuilt or
authoritative-empty (``rebuilding``), records held by fewer than R nodes
(``under_replicated``), records held by nobody (``no_replica``), copies on nodes outside
the copyset (``extra_copies``), and copies that could not be checked because a copyset
member did not answer (``unchecked``).

Violations are reported as runs: records of consecutive LSNs with the same problem (same
nodes missing, same bad copyset) make one detail with ``lsn_lo``, ``lsn_hi`` and
``records``.  At most ``max_details`` details per category and log; the counts are
always exact.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ldcore import availability
from logdevice.checker.grid import Grid
from logdevice.checker.runs import row_keys
from logdevice.sequencer.copyset import satisfies
from logdevice.shards import AuthoritativeStatus

__all__ = ["NodeHoldings", "LogVerdict", "judge", "CATEGORIES", "SUMMARY_KEYS"]

CATEGORIES = ("placement", "durability", "progress", "availability")
SUMMARY_KEYS = ("records", "under_replicated", "no_replica", "extra_copies", "rebuilding",
                "unchecked")
MAX_DETAILS = 1000


def _distinct_rows(cs: np.ndarray) -> np.ndarray:
    if not len(cs):
        return cs
    _, first = np.unique(row_keys(cs), return_index=True)
    return cs[first]


@dataclass(eq=False)
class NodeHoldings:
    """What one node holds of a log: sorted uint64 ``lsns`` and one int16 copyset row per
    LSN (-1 padded).  ``distinct`` may list the distinct copysets (the tables the node
    sent: saves a sort of the rows)."""

    node: int
    lsns: np.ndarray
    copysets: np.ndarray
    distinct: np.ndarray | None = None  # the distinct copysets, when known (the wire's)

    def __post_init__(self) -> None:
        self.lsns = np.asarray(self.lsns, dtype=np.uint64)
        cs = np.asarray(self.copysets, dtype=np.int16)
        if cs.ndim != 2:
            cs = cs.reshape(len(self.lsns), -1)
        if len(cs) != len(self.lsns):
            raise ValueError(f"N{self.node}: {len(self.lsns)} LSNs but {len(cs)} copysets")
        if self.distinct is None:
            self.distinct = _distinct_rows(cs)
        self.copysets = cs

    def availability(self) -> Any:
        """The holdings as a decoded BP-34 availability (``ldcore.availability``)."""
        return availability.decode(availability.encode(self.lsns))

    def within(self, lo: int, hi: int) -> NodeHoldings:
        """The holdings restricted to ``[lo, hi]``."""
        a = int(np.searchsorted(self.lsns, np.uint64(lo), "left"))
        b = int(np.searchsorted(self.lsns, np.uint64(hi), "right"))
        if a == 0 and b == len(self.lsns):
            return self
        return NodeHoldings(self.node, self.lsns[a:b], self.copysets[a:b],
                            distinct=self.distinct)


@dataclass
class LogVerdict:
    """The outcome for one log over ``[lo, hi]``: per-category violation counts, details
    (dicts, see the module docstring), the summary counts, and ``suspects``: nodes named
    by a durability or availability violation (the driver asks them again)."""

    log_id: int
    lo: int
    hi: int
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CATEGORIES, 0))
    details: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SUMMARY_KEYS, 0))
    suspects: set[int] = field(default_factory=set)
    silent: set[int] = field(default_factory=set)

    @property
    def clean(self) -> bool:
        return not any(self.counts.values())


def _runs(mask: np.ndarray, key: np.ndarray,
          segment: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Slot ranges [start, end] of True ``mask`` slots that are consecutive, in one
    segment (so consecutive LSNs) and have equal ``key`` (both given per True slot)."""
    idx = np.flatnonzero(mask)
    if not len(idx):
        return idx, idx
    brk = np.ones(len(idx), bool)
    brk[1:] = (np.diff(idx) != 1) | (key[1:] != key[:-1]) | (segment[1:] != segment[:-1])
    first = np.flatnonzero(brk)
    last = np.append(first[1:] - 1, len(idx) - 1)
    return idx[first], idx[last]


def _copyset_list(row: np.ndarray) -> list[int]:
    return [int(x) for x in row if x >= 0]


def _any(masks: list[np.ndarray], size: int) -> np.ndarray:
    out = np.zeros(size, bool)
    for m in masks:
        out |= m
    return out


def judge(log_id: int, lo: int, hi: int, holdings: Mapping[int, NodeHoldings], *,
          replication: Any, nodeset: Collection[int], silent: Collection[int] = (),
          locations: Mapping[int, Any] | None = None,
          statuses: Mapping[int, AuthoritativeStatus] | None = None,
          since_ms: Mapping[int, int] | None = None, now_ms: int = 0,
          grace_ms: int = 600_000, max_details: int = MAX_DETAILS) -> LogVerdict:
    """Judge one log over ``[lo, hi]`` (its live range: trim point + 1 .. last released).

    Parameters
    ----------
    holdings : {node: NodeHoldings}
        Every node that answered (records outside ``[lo, hi]`` are ignored).
    replication : int, dict, ReplicationProperty or Replication
    nodeset : collection of int
        Nodes the log may have placed records on (all its epochs' nodesets).
    silent : collection of int
        Nodes asked that did not answer (after the re-check).
    locations : {node: location}
        For failure-domain requirements of ``replication``.
    statuses : {node: AuthoritativeStatus}
        From the event log; missing nodes are fully authoritative.
    since_ms, now_ms, grace_ms
        When each non-fully-authoritative node left that state, the time now, and how
        long under-replication may last before it is a progress violation.

    Notes
    -----
    The work is done over the slots of a ``grid.Grid`` (one per LSN of each epoch
    present), one boolean array per node: H[x] (holds) and M[x] (named by the copyset);
    every step is a whole-array operation, never a loop over records.
    """
    from logdevice.sequencer.copyset import Replication

    rep = Replication(replication)
    statuses = statuses or {}
    since_ms = since_ms or {}
    full = AuthoritativeStatus.FULLY_AUTHORITATIVE
    v = LogVerdict(log_id, lo, hi, silent=set(silent))
    held = {x: h.within(lo, hi) for x, h in holdings.items()}

    def status(x: int) -> AuthoritativeStatus:
        return AuthoritativeStatus(statuses.get(x, full))

    # Availability: a fully authoritative node that did not answer.
    for x in sorted(v.silent):
        if status(x) == full:
            v.counts["availability"] += 1
            v.suspects.add(x)
            v.details.append({"category": "availability", "kind": "not_answering",
                              "log_id": log_id, "lsn_lo": lo, "lsn_hi": hi, "records": 0,
                              "nodes_missing": [x], "copysets": []})

    grid = Grid.build(lo, [h.lsns for h in held.values()])
    G = grid.size
    if G == 0:
        return v

    # Per slot: which nodes hold it (H) and its copyset, one int16 column per entry.
    width = max(h.copysets.shape[1] for h in held.values())
    slots = {x: grid.slots(h.lsns) for x, h in held.items()}
    H: dict[int, np.ndarray] = {}
    for x, at in slots.items():
        H[x] = np.zeros(G, bool)
        H[x][at] = True
    # Holders may disagree on a copyset: a wave that timed out leaves copies that name an
    # older copyset.  Take a variant whose members all hold the record when there is one
    # (the wave that completed), else any.
    top = max([*held, *(int(h.copysets.max(initial=-1)) for h in held.values())])
    holds = np.zeros((top + 2, G), bool)  # row x + 1: node x holds the slot (row 0: -1)
    for x, have in H.items():
        holds[x + 1] = have
    holds[0] = True  # padding entries are no constraint
    cols = [np.full(G, -1, np.int16) for _ in range(width)]
    chosen = np.zeros(G, bool)
    complete = np.zeros(G, bool)
    for x, h in held.items():
        at = slots[x]
        if not len(at):
            continue
        ok = np.ones(len(at), bool)
        for w in range(h.copysets.shape[1]):
            ok &= holds[h.copysets[:, w].astype(np.int64) + 1, at]
        take = ~chosen[at] | (ok & ~complete[at])
        for w in range(width):
            src = h.copysets[:, w] if w < h.copysets.shape[1] else np.full(len(at), -1)
            cols[w][at[take]] = src[take]
        chosen[at] = True
        complete[at[take]] = ok[take]
    present = chosen
    n = int(np.count_nonzero(present))
    v.summary["records"] = n

    # The nodes' copyset tables (small) name every node a copyset names.
    tables = [h.distinct for h in held.values() if h.distinct is not None and len(h.distinct)]
    table = _distinct_rows(np.concatenate([np.pad(t, ((0, 0), (0, width - t.shape[1])),
                                                  constant_values=-1) for t in tables])
                           if tables else np.empty((0, width), np.int16))
    named = sorted({int(x) for x in np.unique(table) if x >= 0})
    nodes = sorted(set(nodeset) | set(held) | v.silent | set(named))
    none = np.zeros(G, bool)
    M = {x: _any([c == x for c in cols], G) for x in nodes}
    gone = {x: M[x] & ~H.get(x, none) for x in nodes}
    answered_full = [x for x in nodes if x in held and status(x) == full]
    rebuilding = [x for x in nodes if status(x) != full]
    late = [x for x in rebuilding if status(x) != AuthoritativeStatus.AUTHORITATIVE_EMPTY
            and x in since_ms and now_ms - since_ms[x] > grace_ms]

    dur_rows = _any([gone[x] for x in answered_full], G)
    prog_rows = _any([gone[x] for x in late], G)
    v.summary["rebuilding"] = sum(int(np.count_nonzero(gone[x])) for x in rebuilding)
    v.summary["unchecked"] = sum(int(np.count_nonzero(M[x])) for x in nodes
                                 if x not in held and status(x) == full)
    v.summary["extra_copies"] = sum(int(np.count_nonzero(H[x] & ~M[x])) for x in held)
    copies = np.zeros(G, np.uint8)
    for have in H.values():
        copies += have
    v.summary["under_replicated"] = int(np.count_nonzero(present & (copies < rep.r)))

    # Placement: once per distinct copyset.
    keys = np.zeros(G, np.int64)
    if width <= 4:
        for w, c in enumerate(cols):
            keys |= (c.astype(np.int64) + 1) << (16 * w)
    else:
        keys = row_keys(np.stack(cols, axis=1))
    # The candidates are the copyset tables' rows, not the records.
    bad_rows = [row for row in table if not satisfies(_copyset_list(row), rep, locations)]
    if bad_rows:
        bad_keys = row_keys(np.array(bad_rows, np.int16)) if width > 4 else np.array(
            [sum((int(x) + 1) << (16 * w) for w, x in enumerate(row)) for row in bad_rows],
            np.int64)
        place_rows = present & np.isin(keys, bad_keys)
    else:
        place_rows = none

    out = v.details

    def emit(category: str, kind: str, rows: np.ndarray, key_of: Any,
             missing: list[int] | None) -> None:
        if not bool(rows.any()):
            return
        idx = np.flatnonzero(rows)
        starts, ends = _runs(rows, key_of(idx), grid.segment_of(idx))
        v.counts[category] += len(idx)
        lo_lsn = grid.lsns(starts).tolist()
        hi_lsn = grid.lsns(ends).tolist()
        for r, (s, e) in enumerate(zip(starts[:max_details].tolist(),
                                       ends[:max_details].tolist(), strict=True)):
            nodes_missing = [] if missing is None else [x for x in missing if gone[x][s]]
            block = np.stack([c[s:e + 1] for c in cols], axis=1)
            run_cs = np.unique(block[(block >= 0).any(axis=1)], axis=0)
            out.append({"category": category, "kind": kind, "log_id": log_id,
                        "lsn_lo": lo_lsn[r], "lsn_hi": hi_lsn[r], "records": e - s + 1,
                        "nodes_missing": nodes_missing,
                        "copysets": [_copyset_list(row) for row in run_cs[:8]]})
        if len(starts) > max_details:
            rest = idx[idx >= starts[max_details]]
            out.append({"category": category, "kind": "truncated", "log_id": log_id,
                        "lsn_lo": lo_lsn[max_details], "lsn_hi": hi_lsn[-1],
                        "records": len(rest), "nodes_missing": [], "copysets": []})

    def pattern(among: list[int]) -> Any:
        def key_of(idx: np.ndarray) -> np.ndarray:
            key = np.zeros(len(idx), np.int64)
            for j, x in enumerate(among):  # one bit per node: which ones miss the record
                key |= gone[x][idx].astype(np.int64) << (j % 63)
            return key
        return key_of

    emit("placement", "bad_copyset", place_rows, lambda idx: keys[idx], None)
    emit("durability", "missing_copy", dur_rows, pattern(answered_full), answered_full)
    emit("progress", "under_replicated_past_grace", prog_rows, pattern(late), late)
    for x in answered_full:
        if bool((gone[x] & dur_rows).any()):
            v.suspects.add(x)
    for x in late:
        if bool(gone[x].any()):
            v.suspects.add(x)

    # LSNs nobody holds inside an epoch's range: records with no copy left.  Judged only
    # when every node answered (a silent one might hold them).
    if not v.silent:
        lost = ~present
        if bool(lost.any()):
            v.summary["no_replica"] = int(np.count_nonzero(lost))
            emit("durability", "no_replica", lost, lambda idx: np.zeros(len(idx), np.int64),
                 None)
    return v


def holdings_from_arrays(node: int, lsns: Sequence[int] | np.ndarray,
                         copysets: Sequence[Sequence[int]] | np.ndarray) -> NodeHoldings:
    """A ``NodeHoldings`` from plain LSNs and copysets (tests, tools)."""
    return NodeHoldings(node, np.asarray(lsns, np.uint64), np.asarray(copysets, np.int16))
