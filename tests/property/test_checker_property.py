"""The checker's verdict against a brute-force comparison of per-node record sets.

Placements are random or BookKeeper-style round robin (copyset of entry i = nodes i ..
i+R-1 mod N), with nodeset size - R >= 2 in many cases: the layout where BookKeeper's own
"unavailable entries" query declares everything after a group missing.  Copies go missing
at random, some records lose every copy, some nodes hold copies outside the copyset and
some copysets are forged short (placement violations).  Each epoch may have its own
replication factor (the log's metadata history), and node indices may start at 64 (bits
past the first word of the verdict's per-record bit rows).
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from logdevice.checker.verdict import NodeHoldings, judge


@st.composite
def layouts(draw):
    n_nodes = draw(st.integers(3, 7))
    epochs = draw(st.lists(st.integers(1, 4), min_size=1, max_size=2, unique=True))
    r = {e: draw(st.integers(1, min(3, n_nodes - 1))) for e in sorted(epochs)}
    base = draw(st.sampled_from([0, 64]))
    per_epoch = draw(st.integers(1, 60))
    round_robin = draw(st.booleans())
    seed = draw(st.integers(0, 2**32 - 1))
    p_lose = draw(st.sampled_from([0.0, 0.05, 0.3]))
    p_all = draw(st.sampled_from([0.0, 0.1]))
    p_extra = draw(st.sampled_from([0.0, 0.05]))
    p_forge = draw(st.sampled_from([0.0, 0.05]))
    return n_nodes, r, base, sorted(epochs), per_epoch, round_robin, seed, p_lose, p_all, \
        p_extra, p_forge


def _build(n_nodes, r, base, epochs, per_epoch, round_robin, seed, p_lose, p_all, p_extra,
           p_forge):
    rng = np.random.default_rng(seed)
    records = {}  # lsn -> copyset
    nodes = range(base, base + n_nodes)
    holders = {x: set() for x in nodes}
    i = 0
    for e in epochs:
        for esn in range(1, per_epoch + 1):
            lsn = (e << 32) | esn
            if round_robin:
                cs = [base + (i + j) % n_nodes for j in range(r[e])]
            else:
                cs = [base + int(x) for x in rng.choice(n_nodes, r[e], replace=False)]
            if r[e] > 1 and rng.random() < p_forge:
                cs = cs[:-1]  # too few copies: a placement violation
            i += 1
            records[lsn] = cs
            for x in cs:
                holders[x].add(lsn)
            for x in nodes:
                if x not in cs and rng.random() < p_extra:
                    holders[x].add(lsn)
            if rng.random() < p_all:
                for x in nodes:
                    holders[x].discard(lsn)
            else:
                for x in cs:
                    if rng.random() < p_lose:
                        holders[x].discard(lsn)
    holdings = {}
    for x, held in holders.items():
        lsns = np.array(sorted(held), np.uint64)
        width = max(len(c) for c in records.values())
        cs = np.full((len(lsns), width), -1, np.int16)
        for row, lsn in enumerate(lsns.tolist()):
            cs[row, :len(records[lsn])] = records[lsn]
        holdings[x] = NodeHoldings.from_rows(x, lsns, cs)
    return records, holders, holdings


def _covered(details, category, written):
    out = set()
    for d in details:
        if d["category"] == category:
            out |= {x for x in written if d["lsn_lo"] <= x <= d["lsn_hi"]}
    return out


@settings(max_examples=150, deadline=None)
@given(layouts())
def test_verdict_matches_brute_force(layout):
    n_nodes, r, base = layout[0], layout[1], layout[2]
    records, holders, holdings = _build(*layout)
    lo, hi = 1, max(records)
    v = judge(7, lo, hi, holdings, replication=1, nodeset=range(base + n_nodes),
              max_details=10**6, epochs=sorted(r.items()))

    held_any = set().union(*holders.values())
    # Brute force, record by record, over plain sets.
    missing_copy = {x for x in held_any if any(x not in holders[m] for m in records[x])}
    no_replica = set()
    for e in {x >> 32 for x in held_any}:
        top = max(x for x in held_any if x >> 32 == e)
        no_replica |= {x for x in records if x >> 32 == e and x <= top and x not in held_any}
    bad_place = {x for x in held_any if len(records[x]) < r[x >> 32]}
    extra = sum(1 for x in held_any for m in holders if x in holders[m] and m not in records[x])
    under = {x for x in held_any if sum(x in holders[m] for m in holders) < r[x >> 32]}

    assert v.counts["durability"] == len(missing_copy) + len(no_replica)
    assert v.counts["placement"] == len(bad_place)
    assert v.summary["extra_copies"] == extra
    assert v.summary["under_replicated"] == len(under)
    assert v.summary["no_replica"] == len(no_replica)
    assert v.summary["records"] == len(held_any)
    written = set(records)
    dur = [d for d in v.details if d["kind"] == "missing_copy"]
    assert _covered(dur, "durability", written) == missing_copy
    lost = [d for d in v.details if d["kind"] == "no_replica"]
    assert _covered(lost, "durability", written) == no_replica
    assert _covered(v.details, "placement", written) == bad_place
    # Each detail names exactly the members that miss its records.
    for d in dur:
        for x in _covered([d], "durability", written):
            assert sorted(m for m in records[x] if x not in holders[m]) == d["nodes_missing"]
    assert sum(d["records"] for d in v.details) == (
        v.counts["durability"] + v.counts["placement"])


@settings(max_examples=150, deadline=None)
@given(layouts(), st.lists(st.integers(0, 10**6), max_size=6), st.sampled_from([2, 10**6]))
def test_windows_absorbed_equal_one_verdict(layout, cuts, max_details):
    """The driver judges a log window by window, each window ending on a held LSN, and
    adds the verdicts up: the same counts, summary and (below the detail cap) the same
    details as one verdict over the whole range."""
    n_nodes, r, base = layout[0], layout[1], layout[2]
    records, holders, holdings = _build(*layout)
    lo, hi = 1, max(records)
    kw = dict(replication=1, nodeset=range(base + n_nodes), max_details=max_details,
              epochs=sorted(r.items()))
    whole = judge(7, lo, hi, holdings, **kw)

    held = sorted(set().union(*holders.values()))
    ends = sorted({held[c % len(held)] for c in cuts if held} | {hi})
    parts, start = [], lo
    for end in ends:
        if end >= start:
            parts.append(judge(7, start, end, {x: h.within(start, end)
                                               for x, h in holdings.items()}, **kw))
            start = end + 1
    windowed = parts[0]
    for p in parts[1:]:
        windowed.absorb(p, max_details)

    assert windowed.counts == whole.counts
    assert windowed.summary == whole.summary
    assert (windowed.lo, windowed.hi) == (whole.lo, whole.hi)
    def order(d):
        return d["category"], d["kind"], d["lsn_lo"]

    if max_details > 10**5:
        assert sorted(windowed.details, key=order) == sorted(whole.details, key=order)
    for c in ("placement", "durability", "progress"):
        mine = [d for d in windowed.details if d["category"] == c]
        assert sum(d["records"] for d in mine) == whole.counts[c]
        for kind in {d["kind"] for d in mine} - {"truncated"}:
            assert sum(d["kind"] == kind for d in mine) <= max_details


@settings(max_examples=150, deadline=None)
@given(layouts(), st.lists(st.integers(0, 10**6), max_size=6))
def test_pages_judged_as_they_came_equal_one_holding(layout, cuts):
    """The driver hands ``judge`` each node's pages as they came off the wire: the
    verdict is the one of each node's holdings joined into one."""
    n_nodes, r, base = layout[0], layout[1], layout[2]
    records, holders, holdings = _build(*layout)
    lo, hi = 1, max(records)
    kw = dict(replication=1, nodeset=range(base + n_nodes), max_details=10**6,
              epochs=sorted(r.items()))
    whole = judge(7, lo, hi, holdings, **kw)
    paged = {}
    for x, h in holdings.items():
        lsns = h.lsns.tolist()
        ends = sorted({lsns[c % len(lsns)] for c in cuts if lsns}) + [hi]
        pages, start = [], lo
        for end in ends:
            if end >= start:
                pages.append(h.within(start, end))
                start = end + 1
        paged[x] = pages
    split = judge(7, lo, hi, paged, **kw)
    assert split.counts == whole.counts
    assert split.summary == whole.summary
    assert split.details == whole.details
    assert split.suspects == whole.suspects
