"""The checker's verdict on one log: sans-I/O, whole-array numpy, no record loops.

Input: what each node that answered holds in the log's live range (``NodeHoldings``:
the LSNs decoded from its BP-34 availability and, per stored LSN, which of the node's
distinct copysets it has), which nodes did not answer, the replication property (per
epoch, from the log's metadata history) and node locations, and each node's
authoritative status (with when it stopped being fully authoritative).  Output: a
``LogVerdict``.

The LSNs are laid out on a ``grid.Grid`` (one slot per ESN of each epoch present).  The
nodes the log involves get one bit each, so for slot i three bit rows say it all: H[i]
(the nodes holding it), M[i] (the nodes its copyset names) and M[i] & ~H[i] (the copies
it is missing).  Then, per record:

- **placement**: its copyset names a node outside its epoch's nodeset
  (``outside_nodeset``), or does not satisfy its epoch's replication property, failure
  domains included (``bad_copyset``); decided once per distinct copyset and placement.
- **durability**: a missing copy on a node that answered and is fully authoritative: a
  copy the copyset promises is gone.  Also durability: an LSN inside an epoch's range
  that no node holds (``no_replica``: ESNs are dense up to where the epoch ends, so a
  hole there is a record with no copy left), judged only when every node answered.  An
  epoch ends where the caller says (recovery's bridge record, the release pointer), so
  a lost tail or a wholly lost epoch is found; otherwise at the highest ESN held.
- **progress**: a missing copy on a node that is being rebuilt (UNDERREPLICATION /
  UNAVAILABLE in the event log) for longer than the grace period.
- **availability**: a node that did not answer while fully authoritative (the event log
  does not say it is unavailable) and not known to be down within the grace period.
  Counted per node, not per record.

Counted apart, never violations: nodes that did not answer but that the cluster holds
dead for less than the grace period (``down``: a restart, a short outage; self-initiated
rebuilding takes over after it), copies missing on nodes being rebuilt or
authoritative-empty (``rebuilding``), records held by fewer than R nodes
(``under_replicated``), records held by nobody (``no_replica``), copies on nodes outside
the copyset (``extra_copies``), and copies that could not be checked because a copyset
member did not answer (``unchecked``).

Violations are reported as runs: records of consecutive LSNs with the same problem (same
nodes missing, same bad copyset) make one detail with ``lsn_lo``, ``lsn_hi`` and
``records``.  At most ``max_details`` details per category and log (``left_out`` counts
the runs past that); the counts are always exact.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ldcore import availability
from ldcore.holders import merge_holders
from logdevice.checker.grid import Grid
from logdevice.checker.runs import to_runs
from logdevice.sequencer.copyset import Replication, satisfies
from logdevice.shards import AuthoritativeStatus

__all__ = ["NodeHoldings", "LogVerdict", "judge", "CATEGORIES", "SUMMARY_KEYS"]

CATEGORIES = ("placement", "durability", "progress", "availability")
SUMMARY_KEYS = ("records", "under_replicated", "no_replica", "extra_copies", "rebuilding",
                "unchecked", "outside_nodeset")
MAX_DETAILS = 1000


def _pad(table: np.ndarray, width: int) -> np.ndarray:
    if table.shape[1] == width:
        return table
    return np.pad(table, ((0, 0), (0, width - table.shape[1])), constant_values=-1)


@dataclass(eq=False)
class NodeHoldings:
    """What one node holds of a log: sorted uint64 ``lsns`` and their copysets as runs:
    run i covers the next ``run_lengths[i]`` LSNs, whose copyset is row ``run_rows[i]`` of
    ``table`` (the node's distinct copysets, int16, -1 padded).  The wire sends copysets
    this way; ``from_rows`` takes one row per LSN."""

    node: int
    lsns: np.ndarray
    run_lengths: np.ndarray
    run_rows: np.ndarray
    table: np.ndarray

    def __post_init__(self) -> None:
        self.lsns = np.asarray(self.lsns, dtype=np.uint64)
        self.run_lengths = np.asarray(self.run_lengths, dtype=np.int64)
        self.run_rows = np.asarray(self.run_rows, dtype=np.int64)
        table = np.asarray(self.table, dtype=np.int16)
        self.table = table.reshape(len(table), -1) if table.ndim != 2 else table
        if len(self.run_lengths) != len(self.run_rows):
            raise ValueError(f"N{self.node}: {len(self.run_lengths)} run lengths but "
                             f"{len(self.run_rows)} run copysets")
        if int(self.run_lengths.sum()) != len(self.lsns) or (
                len(self.run_lengths) and int(self.run_lengths.min()) < 0):
            raise ValueError(f"N{self.node}: runs cover {int(self.run_lengths.sum())} "
                             f"records, {len(self.lsns)} LSNs")
        if len(self.run_rows) and not 0 <= int(self.run_rows.min()) <= \
                int(self.run_rows.max()) < len(self.table):
            raise ValueError(f"N{self.node}: a copyset index is outside its table of "
                             f"{len(self.table)}")

    @classmethod
    def from_rows(cls, node: int, lsns: Sequence[int] | np.ndarray,
                  copysets: Sequence[Sequence[int]] | np.ndarray) -> NodeHoldings:
        """From one copyset row per LSN (int16, -1 padded)."""
        lsns = np.asarray(lsns, dtype=np.uint64)
        cs = np.asarray(copysets, dtype=np.int16)
        if cs.ndim != 2:
            cs = cs.reshape(len(lsns), -1)
        if len(cs) != len(lsns):
            raise ValueError(f"N{node}: {len(lsns)} LSNs but {len(cs)} copysets")
        lengths, rows, table = to_runs(cs)
        return cls(node, lsns, lengths, rows, table)

    @property
    def copysets(self) -> np.ndarray:
        """One copyset row per LSN."""
        return self.table[np.repeat(self.run_rows, self.run_lengths)]

    def availability(self) -> Any:
        """The holdings as a decoded BP-34 availability (``ldcore.availability``)."""
        return availability.decode(availability.encode(self.lsns))

    def within(self, lo: int, hi: int) -> NodeHoldings:
        """The holdings restricted to ``[lo, hi]``."""
        a = int(np.searchsorted(self.lsns, np.uint64(lo), "left"))
        b = int(np.searchsorted(self.lsns, np.uint64(hi), "right"))
        if a == 0 and b == len(self.lsns):
            return self
        ends = np.cumsum(self.run_lengths)
        starts = ends - self.run_lengths
        i = int(np.searchsorted(ends, a, "right"))  # runs i .. j - 1 meet [a, b)
        j = int(np.searchsorted(starts, b, "left"))
        lengths = np.minimum(ends[i:j], b) - np.maximum(starts[i:j], a)
        keep = lengths > 0
        return NodeHoldings(self.node, self.lsns[a:b], lengths[keep], self.run_rows[i:j][keep],
                            self.table)


@dataclass
class LogVerdict:
    """The outcome for one log over ``[lo, hi]``: per-category violation counts, details
    (dicts, see the module docstring; ``left_out`` counts the runs of violations not
    listed as details of their own), the summary counts, ``suspects``: nodes named by a
    durability or availability violation (the driver asks them again), the nodes that
    did not answer (``silent``, of which ``unavailable`` are violations) and the nodes
    that did not answer but are down within the grace period (``down``)."""

    log_id: int
    lo: int
    hi: int
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CATEGORIES, 0))
    details: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SUMMARY_KEYS, 0))
    suspects: set[int] = field(default_factory=set)
    silent: set[int] = field(default_factory=set)
    unavailable: set[int] = field(default_factory=set)
    down: set[int] = field(default_factory=set)
    left_out: int = 0

    @property
    def clean(self) -> bool:
        return not any(self.counts.values())

    def absorb(self, part: LogVerdict, max_details: int = MAX_DETAILS) -> None:
        """Add the verdict of the next window of the same log: counts and summaries add
        up, a silent node stays one availability violation, a run of violations the
        window border cut is joined back into one detail, and each category keeps at most
        ``max_details`` details of each kind (the rest fold into one ``truncated``
        detail)."""
        self.lo, self.hi = min(self.lo, part.lo), max(self.hi, part.hi)
        for name in SUMMARY_KEYS:
            self.summary[name] += part.summary[name]
        self.suspects |= part.suspects
        self.silent |= part.silent
        self.unavailable |= part.unavailable
        self.down |= part.down
        self.left_out += part.left_out
        shown: dict[tuple[str, str], int] = {}  # (category, kind) -> details kept
        last: dict[tuple[str, str], dict[str, Any]] = {}  # (category, kind) -> detail
        for d in self.details:
            key = (d["category"], d["kind"])
            shown[key] = shown.get(key, 0) + 1
            last[key] = d
        for d in part.details:
            c = d["category"]
            prev, folded = last.get((c, d["kind"])), last.get((c, "truncated"))
            if c == "availability":  # one detail per silent node, over every window
                same = [a for a in self.details if a["category"] == c
                        and a["nodes_missing"] == d["nodes_missing"]]
                if same:
                    same[0]["lsn_hi"] = max(same[0]["lsn_hi"], d["lsn_hi"])
                    continue
            if prev is not None and _joins(prev, d):
                prev["lsn_hi"], prev["records"] = d["lsn_hi"], prev["records"] + d["records"]
                copysets = {tuple(x) for x in prev["copysets"] + d["copysets"]}
                prev["copysets"] = [list(x) for x in sorted(copysets)[:8]]
            elif d["kind"] != "truncated" and shown.get((c, d["kind"]), 0) < max_details:
                self.details.append(dict(d))
                shown[c, d["kind"]] = shown.get((c, d["kind"]), 0) + 1
                last[c, d["kind"]] = self.details[-1]
            else:
                if d["kind"] != "truncated":  # (a truncated one's runs are counted)
                    self.left_out += 1
                if folded is not None:
                    folded["lsn_hi"] = d["lsn_hi"]
                    folded["records"] += d["records"]
                else:
                    self.details.append({**d, "kind": "truncated", "nodes_missing": [],
                                         "copysets": []})
                    last[c, "truncated"] = self.details[-1]
        for c in ("placement", "durability", "progress"):
            self.counts[c] += part.counts[c]
        self.counts["availability"] = len(self.unavailable)


def _joins(prev: dict[str, Any], d: dict[str, Any]) -> bool:
    """Is detail ``d`` the continuation of ``prev`` (the next LSN, the same problem)?"""
    return (prev["kind"] == d["kind"] != "truncated" and prev["lsn_hi"] + 1 == d["lsn_lo"]
            and prev["nodes_missing"] == d["nodes_missing"]
            and (d["category"] != "placement" or prev["copysets"] == d["copysets"]))


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


class _NodeBits:
    """One bit per node the log involves.  A set of nodes is a *bit row* (``words``
    uint64s); per-slot bit rows are kept as one 1-D array per word."""

    def __init__(self, nodes: Sequence[int]) -> None:
        self.nodes = list(nodes)
        self.words = max(1, (len(self.nodes) + 63) // 64)
        self.pos = {x: i for i, x in enumerate(self.nodes)}

    def of(self, nodes: Collection[int]) -> list[np.uint64]:
        """The bit row of ``nodes``."""
        row = [0] * self.words
        for x in nodes:
            p = self.pos[x]
            row[p // 64] |= 1 << (p % 64)
        return [np.uint64(w) for w in row]

    def members(self, table: np.ndarray) -> np.ndarray:
        """Bit rows of the copysets of ``table`` (node indices, -1 padded), plus a last
        all-zero row (no copyset)."""
        lookup = np.full(max(self.nodes, default=0) + 1, -1, np.int64)
        lookup[self.nodes] = np.arange(len(self.nodes))
        out = np.zeros((len(table) + 1, self.words), np.uint64)
        rows = np.arange(len(table))
        for w in range(table.shape[1]):
            col = table[:, w].astype(np.int64)
            ok = col >= 0
            p = lookup[col[ok]]
            np.bitwise_or.at(out, (rows[ok], p // 64),
                             np.uint64(1) << (p % 64).astype(np.uint64))
        return out

    def listed(self, row: Sequence[Any]) -> list[int]:
        """The nodes whose bits are set in one bit row."""
        return [x for i, x in enumerate(self.nodes) if int(row[i // 64]) >> (i % 64) & 1]


def _any(cols: Sequence[np.ndarray], mask: Sequence[np.uint64]) -> np.ndarray:
    """Per slot: does its bit row share a bit with ``mask``?"""
    out = np.zeros(len(cols[0]), bool)
    for col, m in zip(cols, mask, strict=True):
        if m:
            out |= (col & m) != 0
    return out


def _count(cols: Sequence[np.ndarray], mask: Sequence[np.uint64] | None = None) -> int:
    """Set bits in all slots' bit rows (within ``mask``)."""
    if mask is None:
        return sum(int(np.bitwise_count(c).sum(dtype=np.int64)) for c in cols)
    return sum(int(np.bitwise_count(c & m).sum(dtype=np.int64))
               for c, m in zip(cols, mask, strict=True) if m)


#: How an epoch's records must be placed: its replication property and its nodeset
#: (None: not known, not checked).
Placement = tuple[Replication, frozenset[int] | None]


def _placement_per_slot(grid: Grid, epochs: Sequence[Sequence[Any]],
                        default: Replication) -> tuple[list[Placement], np.ndarray | None]:
    """The placements in force in the grid's epochs, and each slot's index into them (an
    epoch follows the last metadata entry at or below it); None instead of the index
    when every slot has the first one."""
    places: list[Placement] = [(default, None)]
    index = {places[0]: 0}
    firsts = np.array([int(entry[0]) for entry in epochs], np.uint64)
    seg_place = np.zeros(len(grid.epochs), np.int64)
    entry_of = np.searchsorted(firsts, grid.epochs, side="right") - 1
    for seg, entry in enumerate(entry_of.tolist()):
        if entry >= 0:
            meta = epochs[entry]
            nodeset = frozenset(int(x) for x in meta[2]) if len(meta) > 2 else None
            place = (Replication(meta[1]), nodeset)
            seg_place[seg] = index.setdefault(place, len(places))
            if seg_place[seg] == len(places):
                places.append(place)
    if bool((seg_place == seg_place[0]).all()):
        return [places[int(seg_place[0])]], None
    return places, np.repeat(seg_place, grid.length)


def judge(log_id: int, lo: int, hi: int,
          holdings: Mapping[int, NodeHoldings | Sequence[NodeHoldings]], *,
          replication: Any, nodeset: Collection[int], silent: Collection[int] = (),
          locations: Mapping[int, Any] | None = None,
          statuses: Mapping[int, AuthoritativeStatus] | None = None,
          since_ms: Mapping[int, int] | None = None, now_ms: int = 0,
          grace_ms: int = 600_000, max_details: int = MAX_DETAILS,
          epochs: Sequence[Sequence[Any]] = (), ends: Mapping[int, int] | None = None,
          down: Collection[int] = ()) -> LogVerdict:
    """Judge one log over ``[lo, hi]`` (its live range: trim point + 1 .. last released).

    Parameters
    ----------
    holdings : {node: NodeHoldings or list of NodeHoldings}
        Every node that answered (records outside ``[lo, hi]`` are ignored); a list holds
        a node's pages as they came, LSN ranges apart (judged as they are: no copy of
        the log's share is made to join them).
    replication : int, dict, ReplicationProperty or Replication
        The log's replication property, for epochs ``epochs`` does not cover.
    nodeset : collection of int
        Nodes the log may have placed records on (all its epochs' nodesets).
    silent : collection of int
        Nodes asked that did not answer (after the re-check).
    down : collection of int
        Nodes asked that did not answer and that the cluster holds dead for less than
        the grace period (a restart, a short outage): not violations, counted apart.
    locations : {node: location}
        For failure-domain requirements of the replication properties.
    statuses : {node: AuthoritativeStatus}
        From the event log; missing nodes are fully authoritative.
    since_ms, now_ms, grace_ms
        When each non-fully-authoritative node left that state, the time now, and how
        long under-replication may last before it is a progress violation.
    epochs : sequence of (first_epoch, replication[, nodeset])
        The log's metadata history, ascending: records of epoch e were placed under the
        replication (and on the nodeset, when given) of the last entry whose first epoch
        is at most e.
    ends : {epoch: last ESN}, optional
        Where epochs end (recovery's bridge record, the release pointer): every ESN up
        to there is a record someone must hold, also where no node holds anything past
        it.  Epochs it does not name end at the highest ESN a node holds.

    Notes
    -----
    The work is done over the slots of a ``grid.Grid`` (one per LSN of each epoch
    present) with one bit row per slot, every step a whole-array operation, never a loop
    over records.
    """
    statuses = statuses or {}
    since_ms = since_ms or {}
    full = AuthoritativeStatus.FULLY_AUTHORITATIVE
    v = LogVerdict(log_id, lo, hi, silent=set(silent), down=set(down) - set(silent))
    # (node, page) pairs: a node's pages hold disjoint LSN ranges, so the merge below
    # takes each as a holder of its own at the node's bit.
    pages = [(x, page.within(lo, hi)) for x, h in holdings.items()
             for page in ([h] if isinstance(h, NodeHoldings) else h)]
    held = set(holdings)

    def status(x: int) -> AuthoritativeStatus:
        return AuthoritativeStatus(statuses.get(x, full))

    # Availability: a fully authoritative node that did not answer.
    for x in sorted(v.silent):
        if status(x) == full:
            v.counts["availability"] += 1
            v.unavailable.add(x)
            v.suspects.add(x)
            v.details.append({"category": "availability", "kind": "not_answering",
                              "log_id": log_id, "lsn_lo": lo, "lsn_hi": hi, "records": 0,
                              "nodes_missing": [x], "copysets": []})

    grid = Grid.build(lo, [h.lsns for _, h in pages], ends, hi)
    G = grid.size
    if G == 0:
        return v

    # One table of the distinct copysets of every page, and each page's rows in it.
    width = max((h.table.shape[1] for _, h in pages), default=0)
    stacked = (np.concatenate([_pad(h.table, width) for _, h in pages]) if pages
               else np.empty((0, 0), np.int16))
    lengths, runs, table = to_runs(stacked)
    global_row = np.repeat(runs, lengths).astype(np.intp)
    to_table, at = [], 0
    for _, h in pages:
        to_table.append(global_row[at:at + len(h.table)])
        at += len(h.table)
    D = len(table)

    named = sorted({int(x) for x in np.unique(table) if x >= 0})
    nodes = sorted(set(nodeset) | set(held) | v.silent | v.down | set(named))
    bits = _NodeBits(nodes)
    member_of = bits.members(table)  # row D: no copyset

    # Per slot: which nodes hold it (bit rows), and the copyset it is judged by.
    hold_rows, copies, cs_slot = merge_holders(
        grid.start, grid.base, grid.length,
        [(h.lsns, h.run_lengths, h.run_rows, rows, bits.pos[x])
         for (x, h), rows in zip(pages, to_table, strict=True)], member_of,
        np.array(bits.of([x for x in nodes if x not in held]), np.uint64))
    present = cs_slot < D
    v.summary["records"] = int(np.count_nonzero(present))

    hold = [hold_rows[:, w] for w in range(bits.words)]
    member = [np.take(member_of[:, w], cs_slot) for w in range(bits.words)]
    gone = [m & ~h for m, h in zip(member, hold, strict=True)]
    answered_full = [x for x in nodes if x in held and status(x) == full]
    rebuilding = [x for x in nodes if status(x) != full]
    late = [x for x in rebuilding if status(x) != AuthoritativeStatus.AUTHORITATIVE_EMPTY
            and x in since_ms and now_ms - since_ms[x] > grace_ms]
    unheld_full = [x for x in nodes if x not in held and status(x) == full]
    full_bits, late_bits = bits.of(answered_full), bits.of(late)

    dur_rows = _any(gone, full_bits)
    prog_rows = _any(gone, late_bits)
    v.summary["rebuilding"] = _count(gone, bits.of(rebuilding))
    v.summary["unchecked"] = _count(member, bits.of(unheld_full))
    v.summary["extra_copies"] = _count([h & ~m for h, m in zip(hold, member, strict=True)])

    # Placement per epoch: R for under-replication, the property and the nodeset for
    # placement.
    places, place_slot = _placement_per_slot(grid, epochs, Replication(replication))
    r_of = np.array([rep.r for rep, _ in places], np.int64)
    r_slot = r_of[0] if place_slot is None else r_of[place_slot]
    v.summary["under_replicated"] = int(np.count_nonzero(present & (copies < r_slot)))
    # Placement: once per distinct copyset and placement.
    bad = np.zeros((len(places), D + 1), bool)
    outside = np.zeros((len(places), D + 1), bool)
    copysets = [_copyset_list(row) for row in table]
    for k, (rep, members) in enumerate(places):
        bad[k, :D] = [not satisfies(cs, rep, locations) for cs in copysets]
        if members is not None:
            outside[k, :D] = [not members.issuperset(cs) for cs in copysets]

    def per_slot(flags: np.ndarray) -> np.ndarray:
        if not bool(flags.any()):
            return np.zeros(G, bool)
        return present & (flags[0][cs_slot] if place_slot is None
                          else flags[place_slot, cs_slot])

    outside_rows = per_slot(outside)
    v.summary["outside_nodeset"] = int(np.count_nonzero(outside_rows))
    place_rows = per_slot(bad) & ~outside_rows  # each record counted once

    out = v.details

    def emit(category: str, kind: str, rows: np.ndarray, key_of: Any,
             missing: list[np.uint64] | None) -> None:
        if not bool(rows.any()):
            return
        idx = np.flatnonzero(rows)
        starts, ends = _runs(rows, key_of(idx), grid.segment_of(idx))
        v.counts[category] += len(idx)
        lo_lsn = grid.lsns(starts).tolist()
        hi_lsn = grid.lsns(ends).tolist()
        for r, (s, e) in enumerate(zip(starts[:max_details].tolist(),
                                       ends[:max_details].tolist(), strict=True)):
            nodes_missing = ([] if missing is None else
                             bits.listed([g[s] & m for g, m in zip(gone, missing, strict=True)]))
            in_run = np.unique(cs_slot[s:e + 1])
            run_cs = sorted(_copyset_list(table[d]) for d in in_run[in_run < D])
            out.append({"category": category, "kind": kind, "log_id": log_id,
                        "lsn_lo": lo_lsn[r], "lsn_hi": hi_lsn[r], "records": e - s + 1,
                        "nodes_missing": nodes_missing, "copysets": run_cs[:8]})
        if len(starts) > max_details:
            v.left_out += len(starts) - max_details
            rest = idx[idx >= starts[max_details]]
            out.append({"category": category, "kind": "truncated", "log_id": log_id,
                        "lsn_lo": lo_lsn[max_details], "lsn_hi": hi_lsn[-1],
                        "records": len(rest), "nodes_missing": [], "copysets": []})

    def pattern(mask: list[np.uint64]) -> Any:
        def key_of(idx: np.ndarray) -> np.ndarray:  # which of the nodes miss the record
            missing = np.stack([g[idx] & m for g, m in zip(gone, mask, strict=True)], axis=1)
            if bits.words == 1:
                return missing[:, 0]
            return np.unique(missing, axis=0, return_inverse=True)[1].reshape(-1)
        return key_of

    emit("placement", "outside_nodeset", outside_rows, lambda idx: cs_slot[idx], None)
    emit("placement", "bad_copyset", place_rows, lambda idx: cs_slot[idx], None)
    emit("durability", "missing_copy", dur_rows, pattern(full_bits), full_bits)
    emit("progress", "under_replicated_past_grace", prog_rows, pattern(late_bits),
         late_bits)
    for rows, mask in ((dur_rows, full_bits), (prog_rows, late_bits)):
        if bool(rows.any()):
            v.suspects |= set(bits.listed([np.bitwise_or.reduce(g[rows] & m)
                                           for g, m in zip(gone, mask, strict=True)]))

    # LSNs nobody holds inside an epoch's range: records with no copy left.  Judged only
    # when every node answered (a silent or down one might hold them).
    if not v.silent and not v.down:
        lost = ~present
        if bool(lost.any()):
            v.summary["no_replica"] = int(np.count_nonzero(lost))
            emit("durability", "no_replica", lost, lambda idx: np.zeros(len(idx), np.int64),
                 None)
    return v


def holdings_from_arrays(node: int, lsns: Sequence[int] | np.ndarray,
                         copysets: Sequence[Sequence[int]] | np.ndarray) -> NodeHoldings:
    """A ``NodeHoldings`` from plain LSNs and copysets (tests, tools)."""
    return NodeHoldings.from_rows(node, lsns, copysets)
