"""Copyset selection: the replication property across failure domains, weights, stickiness."""

from __future__ import annotations

import itertools
import random
from collections import Counter

import pytest

from logdevice.sequencer.copyset import (
    CopysetSelector,
    Replication,
    StickyCopysetSelector,
    location_labels,
    satisfies,
)


def _loc(region="r", dc="d", cluster="c", row="w", rack="k"):
    return (region, dc, cluster, row, rack)


# -- Replication ------------------------------------------------------------------------------
def test_replication_forms():
    assert Replication(3).to_dict() == {"node": 3}
    assert Replication({"rack": 2, "node": 3}).to_dict() == {"rack": 2, "node": 3}
    rep = Replication({"rack": 3})
    assert rep.r == 3 and rep.scopes == (("rack", 3),)
    assert Replication({"region": 2, "rack": 3}).scopes == (("region", 2), ("rack", 3))
    assert Replication({"data_center": 2, "node": 2}).scopes == (("dc", 2),)
    assert Replication({"RACK": 2}).scopes == (("rack", 2),)
    # A scope asking for one domain is always met; it is dropped.
    assert Replication({"rack": 1, "node": 2}).scopes == ()

    class ConfigLike:  # logdevice.config's ReplicationProperty exposes to_dict()
        def to_dict(self):
            return {"row": 2, "node": 2}

    assert Replication(ConfigLike()).to_dict() == {"row": 2, "node": 2}
    assert Replication(Replication(2)) == Replication(2)


@pytest.mark.parametrize("bad", [0, {}, {"shelf": 2}, {"rack": 0}, {"node": "2"}, "3", True])
def test_replication_rejects_bad_specs(bad):
    with pytest.raises(ValueError):
        Replication(bad)


def test_location_forms():
    assert location_labels("r1.dc1.c1.row1.rack1") == ("r1", "dc1", "c1", "row1", "rack1")
    assert location_labels("r1.dc1..row1.rack2") == ("r1", "dc1", None, "row1", "rack2")
    assert location_labels(("r1", "dc1")) == ("r1", "dc1", None, None, None)
    assert location_labels(None) == (None,) * 5
    assert location_labels("") == (None,) * 5

    class Loc:
        labels = ("a", "b", "c", "d", "e")

    assert location_labels(Loc()) == ("a", "b", "c", "d", "e")


# -- satisfies --------------------------------------------------------------------------------
def test_satisfies_node_scope():
    assert satisfies([1, 2, 3], 3)
    assert satisfies([1, 2, 3, 4], 3)
    assert not satisfies([1, 2], 3)
    assert not satisfies([1, 1, 2], 3)  # duplicates never count twice


def test_satisfies_racks_are_paths():
    locs = {
        0: _loc(row="row1", rack="rack1"),
        1: _loc(row="row2", rack="rack1"),  # a different rack: same name, other row
        2: _loc(row="row1", rack="rack1"),
    }
    assert satisfies([0, 1], {"rack": 2}, locs)
    assert not satisfies([0, 2], {"rack": 2}, locs)
    assert satisfies([0, 1], {"row": 2}, locs)
    assert not satisfies([0, 1], {"dc": 2}, locs)


def test_satisfies_unknown_domains_do_not_count():
    locs = {0: _loc(rack="a"), 1: None, 2: _loc(rack="")}
    assert not satisfies([0, 1], {"rack": 2}, locs)
    assert not satisfies([1, 2], {"rack": 2}, locs)
    assert satisfies([0, 1, 2], {"node": 3}, locs)
    assert not satisfies([0, 1], {"rack": 2})  # no locations at all


# -- selection over random topologies ---------------------------------------------------------
def _random_topology(rng: random.Random):
    n = rng.randint(2, 9)
    locs = {}
    for node in range(n):
        if rng.random() < 0.08:
            locs[node] = None  # unknown location
            continue
        region = f"r{rng.randint(0, 1)}"
        row = f"w{rng.randint(0, 1)}"
        rack = f"k{rng.randint(0, 2)}"
        locs[node] = (region, "dc", "cl", row, rack)
    r = rng.randint(1, min(4, n))
    spec: dict[str, int] = {"node": r}
    for scope in ("region", "row", "rack"):
        if rng.random() < 0.4:
            spec[scope] = rng.randint(1, r)
    # keep copies non-increasing towards bigger scopes, as a valid property must be
    if "rack" in spec and "row" in spec:
        spec["row"] = min(spec["row"], spec["rack"])
    if "region" in spec:
        spec["region"] = min([spec["region"]] + [spec[s] for s in ("row", "rack") if s in spec])
    weights = {node: rng.choice([0.0, 0.5, 1.0, 1.0, 2.0, 5.0]) for node in range(n)}
    return list(range(n)), spec, locs, weights


def _brute_force_exists(nodes, excluded, spec, locs, weights):
    r = Replication(spec).r
    usable = [n for n in nodes if n not in excluded and weights[n] > 0]
    return any(satisfies(c, spec, locs) for c in itertools.combinations(usable, r))


def test_selection_honours_property_on_random_topologies():
    rng = random.Random(1234)
    checked = picked = 0
    for _ in range(400):
        nodes, spec, locs, weights = _random_topology(rng)
        if not _brute_force_exists(nodes, (), spec, locs, weights):
            with pytest.raises(ValueError):
                CopysetSelector(nodes, spec, locs, weights)
            continue
        sel = CopysetSelector(nodes, spec, locs, weights)
        for _ in range(6):
            excluded = frozenset(n for n in nodes if rng.random() < 0.25)
            exists = _brute_force_exists(nodes, excluded, spec, locs, weights)
            assert sel.can_satisfy(excluded) == exists
            for _ in range(5):
                cs = sel.select(rng, excluded)
                checked += 1
                if not exists:
                    assert cs is None
                    continue
                picked += 1
                assert cs is not None
                assert len(cs) == Replication(spec).r
                assert satisfies(cs, spec, locs), (cs, spec, locs)
                assert not set(cs) & excluded
                assert all(weights[n] > 0 for n in cs)
    assert picked > 1000 and checked > picked


def test_rack_spread_with_few_racks():
    # 6 nodes in 2 racks, 3 copies over 2 racks: every copyset must mix racks.
    locs = {n: _loc(rack=f"k{n % 2}") for n in range(6)}
    sel = CopysetSelector(range(6), {"rack": 2, "node": 3}, locs)
    rng = random.Random(5)
    for _ in range(500):
        cs = sel.select(rng)
        assert len({n % 2 for n in cs}) == 2
    # Losing one whole rack makes the property impossible.
    assert sel.select(rng, {0, 2, 4}) is None
    assert not sel.can_satisfy({0, 2, 4})


def test_constructor_rejects_impossible_nodesets():
    with pytest.raises(ValueError, match="cannot satisfy"):
        CopysetSelector([1, 2], 3)
    with pytest.raises(ValueError, match="cannot satisfy"):
        CopysetSelector([1, 2, 3], {"rack": 2}, {n: _loc() for n in (1, 2, 3)})
    with pytest.raises(ValueError, match="cannot satisfy"):
        CopysetSelector([1, 2, 3], 2, weights={1: 1.0, 2: 0.0, 3: 0.0})
    with pytest.raises(ValueError, match="weight"):
        CopysetSelector([1, 2, 3], 2, weights={1: -1.0})


# -- weights ----------------------------------------------------------------------------------
def test_weights_bias_selection_r1():
    weights = {0: 1.0, 1: 2.0, 2: 3.0, 3: 4.0}
    sel = CopysetSelector(weights, 1, weights=weights)
    rng = random.Random(42)
    n = 40_000
    counts = Counter(sel.select(rng)[0] for _ in range(n))
    for node, w in weights.items():
        assert abs(counts[node] / n - w / 10.0) < 0.012, (node, counts)


def test_weights_bias_leader_and_membership_r2():
    weights = {0: 1.0, 1: 1.0, 2: 1.0, 3: 6.0, 4: 0.0}
    sel = CopysetSelector(weights, 2, weights=weights)
    rng = random.Random(7)
    n = 20_000
    leaders: Counter[int] = Counter()
    members: Counter[int] = Counter()
    for _ in range(n):
        cs = sel.select(rng)
        leaders[cs[0]] += 1
        members.update(cs)
    assert members[4] == 0  # weight 0: never written to
    assert abs(leaders[3] / n - 6 / 9) < 0.015  # the first copy is drawn by weight
    # node 3 is missed only if both picks are light: 1 - (3/9) * (2/8) = 11/12
    assert abs(members[3] / n - 11 / 12) < 0.015
    # a light node: leader 1/9, or second after node 3 (6/9 * 1/3) or after a light (2/9 * 1/8)
    for light in (0, 1, 2):
        assert abs(members[light] / n - 13 / 36) < 0.015


def test_selection_is_deterministic_for_a_seed():
    locs = {n: _loc(rack=f"k{n % 3}") for n in range(9)}
    a = CopysetSelector(range(9), {"rack": 3}, locs)
    b = CopysetSelector(range(9), {"rack": 3}, locs)
    ra, rb = random.Random(99), random.Random(99)
    assert [a.select(ra) for _ in range(50)] == [b.select(rb) for _ in range(50)]


# -- sticky copysets --------------------------------------------------------------------------
def _sticky(block_bytes=1000, block_ms=60_000.0):
    return StickyCopysetSelector(CopysetSelector(range(8), 3), block_bytes, block_ms)


def _runs(seq):
    return [len(list(g)) for _, g in itertools.groupby(seq)]


def test_sticky_runs_are_long():
    sticky = _sticky(block_bytes=1000)
    rng = random.Random(3)
    picks = [sticky.select(rng, (), 10, now=i * 0.001) for i in range(1000)]
    runs = _runs(picks)
    # 100 records of 10 bytes fill a block (consecutive blocks may repeat a copyset by chance,
    # which only makes runs longer).
    assert all(r >= 100 for r in runs[:-1])
    assert sticky.blocks_started == 10
    assert len(set(picks)) > 1


def test_sticky_block_ends_on_time():
    sticky = _sticky(block_bytes=10**9, block_ms=100.0)
    rng = random.Random(4)
    for i in range(50):
        sticky.select(rng, (), 10, now=i * 0.01)  # 0.5 s: a new block every 100 ms
    assert sticky.blocks_started == 5


def test_sticky_block_breaks_on_failure_and_exclusion():
    sticky = _sticky(block_bytes=10**9)
    rng = random.Random(5)
    first = sticky.select(rng, (), 1, 0.0)
    assert sticky.select(rng, (), 1, 0.0) is first
    sticky.on_wave_failed((99, 98, 97))  # not the block's copyset: no effect
    assert sticky.select(rng, (), 1, 0.0) is first
    sticky.on_wave_failed(first)
    second = sticky.select(rng, (), 1, 0.0)
    assert sticky.blocks_started == 2
    third = sticky.select(rng, {second[0]}, 1, 0.0)  # a member is excluded: new block
    assert second[0] not in third
    assert sticky.blocks_started == 3


def test_sticky_rejects_bad_limits():
    with pytest.raises(ValueError):
        _sticky(block_bytes=0)
