"""The checker's verdict on one log: sans-I/O, whole-array numpy, no record loops.

Input: what each node that answered holds in the log's live range (``NodeHoldings``:
the decoded BP-34 availability and one copyset per stored LSN), which nodes did not
answer, the replication property and node locations, and each node's authoritative
status (with when it stopped being fully authoritative).  Output: a ``LogVerdict``.

Let U be every LSN some node holds in ``[lo, hi]``, C[i] the copyset of U[i] (as its
holders stored it), H[i, j] "node j holds U[i]" (``Availability.contains_many``) and
M[i, j] "node j is in C[i]".  Then, per record:

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
``records``.  At most ``max_details`` details per category and log; the
counts are always exact.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ldcore import availability
from logdevice.sequencer.copyset import satisfies
from logdevice.shards import AuthoritativeStatus

__all__ = ["NodeHoldings", "LogVerdict", "judge", "CATEGORIES", "SUMMARY_KEYS"]

CATEGORIES = ("placement", "durability", "progress", "availability")
SUMMARY_KEYS = ("records", "under_replicated", "no_replica", "extra_copies", "rebuilding",
                "unchecked")
MAX_DETAILS = 1000
_ESN_MASK = np.uint64(0xFFFFFFFF)


@dataclass(eq=False)
class NodeHoldings:
    """What one node holds of a log: sorted uint64 ``lsns`` and one int16 copyset row per
    LSN (-1 padded).  ``avail`` is their BP-34 availability (built when not given)."""

    node: int
    lsns: np.ndarray
    copysets: np.ndarray
    avail: Any = None

    def __post_init__(self) -> None:
        self.lsns = np.asarray(self.lsns, dtype=np.uint64)
        cs = np.asarray(self.copysets, dtype=np.int16)
        if cs.ndim != 2:
            cs = cs.reshape(len(self.lsns), -1)
        if len(cs) != len(self.lsns):
            raise ValueError(f"N{self.node}: {len(self.lsns)} LSNs but {len(cs)} copysets")
        self.copysets = cs
        if self.avail is None:
            self.avail = availability.decode(availability.encode(self.lsns))

    def within(self, lo: int, hi: int) -> NodeHoldings:
        """The holdings restricted to ``[lo, hi]``."""
        a = int(np.searchsorted(self.lsns, np.uint64(lo), "left"))
        b = int(np.searchsorted(self.lsns, np.uint64(hi), "right"))
        if a == 0 and b == len(self.lsns):
            return self
        return NodeHoldings(self.node, self.lsns[a:b], self.copysets[a:b])


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


def _pad(cs: np.ndarray, width: int) -> np.ndarray:
    if cs.shape[1] >= width:
        return cs
    return np.pad(cs, ((0, 0), (0, width - cs.shape[1])), constant_values=-1)


def _runs(mask: np.ndarray, key: np.ndarray,
          lsns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Index ranges [start, end] of True rows of ``mask`` with equal ``key`` and
    consecutive LSNs (so a detail's LSN range holds only the records it counts)."""
    idx = np.flatnonzero(mask)
    if not len(idx):
        return idx, idx
    brk = np.ones(len(idx), bool)
    k = key[idx]
    brk[1:] = ((np.diff(idx) != 1) | (k[1:] != k[:-1])
               | (np.diff(lsns[idx]) != np.uint64(1)))
    first = np.flatnonzero(brk)
    last = np.append(first[1:] - 1, len(idx) - 1)
    return idx[first], idx[last]


def _pattern_key(rows: np.ndarray) -> np.ndarray:
    """One int64 per row of a bool matrix, equal iff the rows are equal."""
    if rows.shape[1] == 0:
        return np.zeros(len(rows), np.int64)
    if rows.shape[1] <= 62:
        return rows.astype(np.int64) @ (np.int64(1) << np.arange(rows.shape[1],
                                                                  dtype=np.int64))
    packed = np.packbits(rows, axis=1)
    _, inverse = np.unique(packed, axis=0, return_inverse=True)
    return inverse.reshape(-1).astype(np.int64)


def _row_keys(C: np.ndarray) -> np.ndarray:
    """One int64 per copyset row, equal iff the rows are equal."""
    if C.shape[1] <= 4:  # 16 bits per entry (int16 node indices, -1 padding -> 0)
        shifted = (C.astype(np.int64) + 1) << (16 * np.arange(C.shape[1], dtype=np.int64))
        return shifted.sum(axis=1) if C.shape[1] else np.zeros(len(C), np.int64)
    _, inverse = np.unique(C, axis=0, return_inverse=True)
    return inverse.reshape(-1).astype(np.int64)


def _union(parts: list[np.ndarray]) -> np.ndarray:
    """Sorted distinct values of sorted arrays (a stable sort merges the sorted runs)."""
    if not parts:
        return np.empty(0, np.uint64)
    allv = np.concatenate(parts)
    allv.sort(kind="stable")
    if len(allv) < 2:
        return allv
    keep = np.empty(len(allv), bool)
    keep[0] = True
    np.not_equal(allv[1:], allv[:-1], out=keep[1:])
    return allv[keep]


def _copyset_list(row: np.ndarray) -> list[int]:
    return [int(x) for x in row if x >= 0]


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
    """
    from logdevice.sequencer.copyset import Replication

    rep = Replication(replication)
    statuses = statuses or {}
    since_ms = since_ms or {}
    v = LogVerdict(log_id, lo, hi, silent=set(silent))
    held = {n: h.within(lo, hi) for n, h in holdings.items()}
    U = _union([h.lsns for h in held.values() if len(h.lsns)])
    n = len(U)
    v.summary["records"] = n
    full = AuthoritativeStatus.FULLY_AUTHORITATIVE
    status_of = {x: AuthoritativeStatus(statuses.get(x, full)) for x in
                 set(nodeset) | set(held) | set(silent)}

    # Availability: a fully authoritative node that did not answer.
    for x in sorted(set(silent)):
        if status_of.get(x, full) == full:
            v.counts["availability"] += 1
            v.suspects.add(x)
            v.details.append({"category": "availability", "kind": "not_answering",
                              "log_id": log_id, "lsn_lo": lo, "lsn_hi": hi, "records": 0,
                              "nodes_missing": [x]})
    if n == 0:
        return v

    # C: the copyset of every record, from the first node that holds it.
    width = max(h.copysets.shape[1] for h in held.values())
    C = np.full((n, width), -1, np.int16)
    have = np.zeros(n, bool)
    for h in held.values():
        if not len(h.lsns):
            continue
        pos = np.searchsorted(U, h.lsns)
        new = ~have[pos]
        C[pos[new]] = _pad(h.copysets, width)[new]
        have[pos] = True

    named = np.flatnonzero(np.bincount((C.astype(np.int64) + 1).ravel())[1:]).tolist()
    nodes = sorted(set(status_of) | set(named))
    for x in named:
        status_of.setdefault(x, AuthoritativeStatus(statuses.get(x, full)))
    k = len(nodes)
    H = np.zeros((n, k), bool)
    M = np.zeros((n, k), bool)
    for j, x in enumerate(nodes):
        mine = held.get(x)
        if mine is not None:
            H[:, j] = mine.avail.contains_many(U)
        M[:, j] = np.any(x == C, axis=1)
    answered = np.array([x in held for x in nodes], bool)
    st = np.array([int(status_of[x]) for x in nodes])
    is_full = st == int(full)
    rebuilding = ~is_full
    late = rebuilding & (st != int(AuthoritativeStatus.AUTHORITATIVE_EMPTY)) & np.array(
        [x in since_ms and now_ms - since_ms[x] > grace_ms for x in nodes], bool)

    gone = M & ~H
    miss_dur = gone & (answered & is_full)
    dur_rows = miss_dur.any(axis=1)
    v.summary["rebuilding"] = int((gone & rebuilding).sum())
    miss_prog = gone & late
    prog_rows = miss_prog.any(axis=1)
    v.summary["unchecked"] = int((M & ~answered & is_full).sum())
    v.summary["extra_copies"] = int((H & ~M).sum())
    copies = H.sum(axis=1)
    v.summary["under_replicated"] = int(np.count_nonzero(copies < rep.r))

    # Placement: once per distinct copyset.
    keys = _row_keys(C)
    distinct_keys, first = np.unique(keys, return_index=True)
    bad = np.array([not satisfies(_copyset_list(C[i]), rep, locations) for i in first.tolist()],
                   bool)
    place_rows = (np.isin(keys, distinct_keys[bad]) if bool(bad.any())
                  else np.zeros(n, bool))

    nodes_arr = np.array(nodes)
    out = v.details

    def emit(category: str, kind: str, rows: np.ndarray, key_of: Any,
             missing: np.ndarray | None) -> None:
        if not bool(rows.any()):
            return
        key = np.zeros(n, np.int64)
        key[rows] = key_of(rows)
        starts, ends = _runs(rows, key, U)
        v.counts[category] += int(np.count_nonzero(rows))
        for s, e in zip(starts[:max_details].tolist(), ends[:max_details].tolist(),
                        strict=True):
            nodes_missing = ([] if missing is None
                             else nodes_arr[missing[s]].astype(int).tolist())
            run_cs = np.unique(C[s:e + 1], axis=0)
            out.append({"category": category, "kind": kind, "log_id": log_id,
                        "lsn_lo": int(U[s]), "lsn_hi": int(U[e]), "records": e - s + 1,
                        "nodes_missing": nodes_missing,
                        "copysets": [_copyset_list(r) for r in run_cs[:8]]})
        if len(starts) > max_details:
            out.append({"category": category, "kind": "truncated", "log_id": log_id,
                        "lsn_lo": int(U[starts[max_details]]), "lsn_hi": int(U[ends[-1]]),
                        "records": int(np.count_nonzero(rows[starts[max_details]:])),
                        "nodes_missing": [], "copysets": []})

    emit("placement", "bad_copyset", place_rows, lambda r: keys[r], None)
    emit("durability", "missing_copy", dur_rows, lambda r: _pattern_key(miss_dur[r]),
         miss_dur)
    emit("progress", "under_replicated_past_grace", prog_rows,
         lambda r: _pattern_key(miss_prog[r]), miss_prog)
    for x in nodes_arr[(miss_dur | miss_prog).any(axis=0)].tolist():
        v.suspects.add(int(x))

    # Records nobody holds: holes in an epoch's ESNs below what the nodes hold.
    epochs = np.unique(U >> np.uint64(32))
    if len(epochs) and not v.silent:
        whole = availability.decode(availability.encode(U))
        lost: list[np.ndarray] = []
        starts_of = np.searchsorted(U, epochs << np.uint64(32))
        ends_of = np.searchsorted(U, (epochs + np.uint64(1)) << np.uint64(32)) - 1
        held_in = (ends_of - starts_of + 1).tolist()
        for e, last, count in zip(epochs.tolist(), U[ends_of].tolist(), held_in, strict=True):
            start = max(int(lo), (int(e) << 32) | 1)  # every U of the epoch is at or above
            if int(last) - start + 1 > count:
                expected = np.arange(start, int(last) + 1, dtype=np.uint64)
                lost.append(whole.missing(expected).astype(np.uint64))
        if lost:
            gaps = np.concatenate(lost)
            v.summary["no_replica"] = len(gaps)
            v.counts["durability"] += len(gaps)
            brk = np.flatnonzero(np.diff(gaps) != 1)
            firsts = np.append(gaps[:1], gaps[brk + 1])
            lasts = np.append(gaps[brk], gaps[-1:])
            for a, b in list(zip(firsts.tolist(), lasts.tolist(), strict=True))[:max_details]:
                out.append({"category": "durability", "kind": "no_replica", "log_id": log_id,
                            "lsn_lo": a, "lsn_hi": b, "records": b - a + 1,
                            "nodes_missing": [], "copysets": []})
    return v


def holdings_from_arrays(node: int, lsns: Sequence[int] | np.ndarray,
                         copysets: Sequence[Sequence[int]] | np.ndarray) -> NodeHoldings:
    """A ``NodeHoldings`` from plain LSNs and copysets (tests, tools)."""
    return NodeHoldings(node, np.asarray(lsns, np.uint64), np.asarray(copysets, np.int16))
