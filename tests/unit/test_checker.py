"""The checker's sans-I/O parts: copyset runs, the node's record budget, the verdict core
(failure domains, rebuilding and silent nodes, progress), the report's JSON contract."""

from __future__ import annotations

import numpy as np
import pytest

from ldcore import availability
from logdevice.checker.report import Report
from logdevice.checker.runs import expand_runs, to_runs
from logdevice.checker.verdict import NodeHoldings, judge
from logdevice.node.roles.availability_role import RecordBudget
from logdevice.shards import AuthoritativeStatus as AS


def _lsns(esns, epoch=1):
    return np.array([(epoch << 32) | e for e in esns], np.uint64)


def _holdings(records, holders):
    """records: {esn: copyset}; holders: {node: [esn...]} -> {node: NodeHoldings}."""
    width = max(len(c) for c in records.values())
    out = {}
    for node, esns in holders.items():
        esns = sorted(esns)
        cs = np.full((len(esns), width), -1, np.int16)
        for i, e in enumerate(esns):
            cs[i, :len(records[e])] = records[e]
        out[node] = NodeHoldings.from_rows(node, _lsns(esns), cs)
    return out


def _place(records):
    holders = {}
    for e, cs in records.items():
        for x in cs:
            holders.setdefault(x, []).append(e)
    return holders


def test_runs_round_trip_and_shape():
    cs = np.array([[0, 1], [0, 1], [2, 1], [0, 1], [0, 1], [0, 1]], np.int16)
    lengths, index, distinct = to_runs(cs)
    assert lengths.tolist() == [2, 1, 3]
    assert distinct.tolist() == [[0, 1], [2, 1]]  # in order of first appearance
    assert index.tolist() == [0, 1, 0]
    assert np.array_equal(expand_runs(lengths, index, distinct), cs)
    empty = to_runs(np.empty((0, 2), np.int16))
    assert [len(a) for a in empty] == [0, 0, 0]
    with pytest.raises(ValueError):
        expand_runs(np.array([1], np.uint32), np.array([3], np.uint32), distinct)


def test_record_budget_holds_back_overdrafts():
    b = RecordBudget(1000, burst=100)
    assert b.charge(100, now=0.0) == 0.0
    assert b.charge(50, now=0.0) == pytest.approx(0.05)
    # 0.2 s later 200 records came back (capped at the burst of 100), 50 were owed.
    assert b.charge(50, now=0.2) == 0.0
    with pytest.raises(ValueError):
        RecordBudget(0)


def test_clean_log_has_no_violations():
    records = {e: [e % 3, (e + 1) % 3] for e in range(1, 50)}
    v = judge(1, 1, _lsns([49])[0], _holdings(records, _place(records)), replication=2,
              nodeset=[0, 1, 2])
    assert v.clean and v.details == []
    assert v.summary["records"] == 49 and v.summary["under_replicated"] == 0


def test_failure_domains_make_placement_violations():
    locations = {0: "r.d.c.row1.rack1", 1: "r.d.c.row1.rack1", 2: "r.d.c.row1.rack2",
                 3: "r.d.c.row1.rack2"}
    records = {1: [0, 2], 2: [0, 1], 3: [1, 3], 4: [2, 3], 5: [0, 3]}
    v = judge(1, 1, _lsns([5])[0], _holdings(records, _place(records)),
              replication={"rack": 2, "node": 2}, nodeset=range(4), locations=locations)
    assert v.counts["placement"] == 2
    bad = sorted((d["lsn_lo"] & 0xFFFFFFFF, d["copysets"][0]) for d in v.details)
    assert bad == [(2, [0, 1]), (4, [2, 3])]
    assert v.counts["durability"] == 0


def test_missing_copy_on_fully_authoritative_node_is_durability():
    records = {e: [0, 1] for e in range(1, 11)}
    holders = _place(records)
    holders[1] = [e for e in holders[1] if e not in (4, 5, 6, 9)]
    v = judge(1, 1, _lsns([10])[0], _holdings(records, holders), replication=2,
              nodeset=[0, 1, 2])
    assert v.counts["durability"] == 4
    runs = [(d["lsn_lo"] & 0xFFFFFFFF, d["lsn_hi"] & 0xFFFFFFFF, d["nodes_missing"])
            for d in v.details]
    assert runs == [(4, 6, [1]), (9, 9, [1])]
    assert v.suspects == {1}
    assert v.summary["under_replicated"] == 4


def test_rebuilding_nodes_are_reported_apart_and_progress_after_grace():
    records = {e: [0, 1] for e in range(1, 11)}
    holders = _place(records)
    holders[1] = []  # node 1 lost everything and is being rebuilt
    holdings = _holdings(records, {k: v for k, v in holders.items() if v})
    holdings[1] = NodeHoldings.from_rows(1, np.empty(0, np.uint64), np.empty((0, 2), np.int16))
    hi = int(_lsns([10])[0])
    statuses = {1: AS.UNDERREPLICATION}
    v = judge(1, 1, hi, holdings, replication=2, nodeset=[0, 1], statuses=statuses,
              since_ms={1: 1_000}, now_ms=2_000, grace_ms=10_000)
    assert v.clean
    assert v.summary["rebuilding"] == 10
    late = judge(1, 1, hi, holdings, replication=2, nodeset=[0, 1], statuses=statuses,
                 since_ms={1: 1_000}, now_ms=20_000, grace_ms=10_000)
    assert late.counts == {"placement": 0, "durability": 0, "progress": 10,
                           "availability": 0}
    empty = judge(1, 1, hi, holdings, replication=2, nodeset=[0, 1],
                  statuses={1: AS.AUTHORITATIVE_EMPTY}, since_ms={1: 0}, now_ms=10**9)
    assert empty.clean and empty.summary["rebuilding"] == 10


def test_silent_node_is_availability_unless_marked_and_its_copies_unchecked():
    records = {e: [0, 1] for e in range(1, 6)}
    holders = _place(records)
    holdings = _holdings(records, {0: holders[0]})
    hi = int(_lsns([5])[0])
    v = judge(1, 1, hi, holdings, replication=2, nodeset=[0, 1], silent=[1])
    assert v.counts == {"placement": 0, "durability": 0, "progress": 0, "availability": 1}
    assert v.summary["unchecked"] == 5
    marked = judge(1, 1, hi, holdings, replication=2, nodeset=[0, 1], silent=[1],
                   statuses={1: AS.UNAVAILABLE}, since_ms={1: 0}, now_ms=1)
    assert marked.clean


def test_records_nobody_holds_are_found_from_esn_holes():
    records = {e: [0, 1] for e in range(1, 21)}
    holders = {x: [e for e in es if e not in (7, 8, 15)] for x, es in _place(records).items()}
    v = judge(1, 1, int(_lsns([20])[0]), _holdings(records, holders), replication=2,
              nodeset=[0, 1])
    assert v.summary["no_replica"] == 3 and v.counts["durability"] == 3
    lost = [(d["lsn_lo"] & 0xFFFFFFFF, d["lsn_hi"] & 0xFFFFFFFF) for d in v.details]
    assert lost == [(7, 8), (15, 15)]
    # Trimmed records (below lo) are not lost ones.
    v = judge(1, int(_lsns([9])[0]), int(_lsns([20])[0]), _holdings(records, holders),
              replication=2, nodeset=[0, 1])
    assert v.summary["no_replica"] == 1


def test_holdings_use_the_bp34_encoding():
    h = NodeHoldings.from_rows(0, _lsns([1, 2, 4, 5, 7, 8]), np.zeros((6, 1), np.int16))
    assert h.availability() == availability.decode(availability.encode(h.lsns))
    assert h.availability().missing(_lsns([3, 4, 6])).tolist() == [int(_lsns([3])[0]),
                                                                    int(_lsns([6])[0])]
    with pytest.raises(ValueError):
        NodeHoldings.from_rows(0, _lsns([1, 2]), np.zeros((3, 1), np.int16))


def test_report_json_contract_and_exit_codes():
    records = {e: [0, 1] for e in range(1, 4)}
    holders = _place(records)
    holders[0] = [1]
    r = Report()
    r.add(judge(1, 1, int(_lsns([3])[0]), _holdings(records, holders), replication=2,
                nodeset=[0, 1, 2], silent=[2]))
    r.add(judge(2, 1, int(_lsns([3])[0]), _holdings(records, _place(records)),
                replication=2, nodeset=[0, 1, 2], silent=[2]))
    out = r.to_json()
    assert out["violations"] == {"placement": 0, "durability": 2, "progress": 0,
                                 "availability": 1}
    for d in out["details"]:
        assert {"category", "log_id", "lsn_lo", "lsn_hi", "nodes_missing"} <= set(d)
    assert r.exit_code == 1
    assert Report().exit_code == 0
    assert Report(errors=["no epoch store"]).exit_code == 2


@pytest.mark.parametrize("n_distinct", [3, 300, 70_000])
def test_packed_runs_round_trip(n_distinct):
    from logdevice.checker.wire import pack_runs, unpack_runs

    rng = np.random.default_rng(n_distinct)
    lengths = rng.integers(1, 5, 5000).astype(np.uint32)
    index = rng.integers(0, n_distinct, 5000).astype(np.uint32)
    data, width = pack_runs(lengths, index, n_distinct)
    assert width == {3: 1, 300: 2, 70_000: 4}[n_distinct]
    got = unpack_runs(data, 5000, width)
    assert np.array_equal(got[0], lengths) and np.array_equal(got[1], index)
    with pytest.raises(ValueError):
        unpack_runs(data, 5001, width)
    with pytest.raises(ValueError):
        unpack_runs(b"garbage", 10, 1)


def test_packed_availability_holds_exactly_the_bp34_groups_and_is_small():
    from logdevice.checker.wire import pack_availability, unpack_availability

    rng = np.random.default_rng(9)
    lsns = np.flatnonzero(rng.random(100_000) < 2 / 3).astype(np.uint64) + np.uint64(5 << 32)
    for values in (lsns, lsns[:1], lsns[:0], np.arange(1, 10, 3, dtype=np.uint64)):
        bp34 = availability.encode(values)
        packed = pack_availability(bp34)
        held = unpack_availability(packed)
        assert held == availability.decode(bp34)
        assert np.array_equal(held.to_array(), values.astype(np.int64))
    assert len(pack_availability(availability.encode(lsns))) < len(lsns) // 2
    with pytest.raises(ValueError):
        pack_availability(b"\x00" * 63)
    with pytest.raises(ValueError):
        pack_availability(b"\x00\x00\x00\x01" + b"\x00" * 60)  # version 1
    with pytest.raises(ValueError):
        unpack_availability(b"not zstd")


def test_ldshell_argument_helpers():
    import argparse

    from logdevice.tools.ldshell.commands import referenced_tables
    from logdevice.tools.ldshell.main import parse_logs

    assert parse_logs("1,2,10-12") == [1, 2, 10, 11, 12]
    with pytest.raises(argparse.ArgumentTypeError):
        parse_logs("1,x")
    assert referenced_tables("SELECT * FROM nodes JOIN shards USING (node)") == [
        "nodes", "shards"]
    assert referenced_tables("select count(*) from record_csi") == ["record_csi"]


def test_grid_lays_epochs_end_to_end():
    from logdevice.checker.grid import Grid

    a = np.array([(2 << 32) | 5, (2 << 32) | 7, (4 << 32) | 1, (4 << 32) | 3], np.uint64)
    b = np.array([(2 << 32) | 9, (4 << 32) | 2], np.uint64)
    g = Grid.build((2 << 32) | 4, [a, b])
    # epoch 2 from the range's start (ESN 4) to ESN 9; epoch 4 from ESN 1 to 3
    assert g.size == 6 + 3
    assert g.slots(a).tolist() == [1, 3, 6, 8]
    assert g.slots(b).tolist() == [5, 7]
    assert g.lsns(np.arange(g.size)).tolist() == [(2 << 32) | e for e in range(4, 10)] + [
        (4 << 32) | e for e in range(1, 4)]
    assert g.segment_of(np.array([0, 5, 6, 8])).tolist() == [0, 0, 1, 1]
    assert Grid.build(1, [np.empty(0, np.uint64)]).size == 0


def test_copy_left_by_a_timed_out_wave_is_extra_not_missing():
    # Wave 1 stored e1n3 on N0 only (copyset [0, 1]) and timed out; wave 2 stored it on
    # N2 and N3 (copyset [2, 3]).  The complete variant wins: N1 is not missing anything.
    def rows(*cs):
        return np.array(cs, np.int16)

    hold = {0: NodeHoldings.from_rows(0, _lsns([1, 2, 3]), rows([0, 2], [0, 3], [0, 1])),
            1: NodeHoldings.from_rows(1, _lsns([]), np.empty((0, 2), np.int16)),
            2: NodeHoldings.from_rows(2, _lsns([1, 3]), rows([0, 2], [2, 3])),
            3: NodeHoldings.from_rows(3, _lsns([2, 3]), rows([0, 3], [2, 3]))}
    hi = int(_lsns([3])[0])
    v = judge(1, 1, hi, hold, replication=2, nodeset=range(4))
    assert v.clean, v.details
    assert v.summary["extra_copies"] == 1
    # Without the second wave's copies, the record really lacks its copy on N1.
    hold[2] = NodeHoldings.from_rows(2, _lsns([1]), rows([0, 2]))
    hold[3] = NodeHoldings.from_rows(3, _lsns([2]), rows([0, 3]))
    v = judge(1, 1, hi, hold, replication=2, nodeset=range(4))
    assert v.counts["durability"] == 1
    assert v.details[0]["nodes_missing"] == [1]


def test_placement_follows_each_epochs_replication():
    # Epoch 1 was written with R=2, epoch 2 with R=3 (the log's replication changed):
    # two-node copysets are fine in epoch 1 and placement violations in epoch 2.
    cs2, cs3 = [0, 1], [0, 1, 2]
    holdings = {}
    for x in range(3):
        lsns = [*(_lsns([1, 2], epoch=1) if x < 2 else []), *_lsns([1, 2], epoch=2)]
        rows = ([cs2, cs2] if x < 2 else []) + ([cs2, cs3] if x < 2 else [cs3])
        if x == 2:
            lsns = lsns[1:]
        holdings[x] = NodeHoldings.from_rows(x, np.array(lsns, np.uint64),
                                             [r + [-1] * (3 - len(r)) for r in rows])
    v = judge(1, 1, int(_lsns([2], epoch=2)[0]), holdings, replication=3, nodeset=range(3),
              epochs=[(1, {"node": 2}), (2, {"node": 3})])
    assert v.counts["placement"] == 1
    (d,) = v.details
    assert (d["lsn_lo"], d["copysets"]) == (int(_lsns([1], epoch=2)[0]), [cs2])
    assert v.summary["under_replicated"] == 1  # epoch 2 ESN 1: two copies of R=3


def test_a_failing_check_exits_2_not_1(monkeypatch, tmp_path):
    # A bug inside the check (here: a ValueError from the driver) is "could not run",
    # never "violations found".
    from logdevice.checker import driver
    from logdevice.config import Config

    async def broken(config, options=None):
        raise ValueError("cannot reshape array")

    monkeypatch.setattr(driver, "check_cluster", broken)
    config = Config.from_dict({"cluster": "c",
                               "nodes": [{"index": 0, "host": "127.0.0.1", "port": 1}],
                               "logs": [{"name": "l", "id": 1, "replication": 1}],
                               "epoch_store": f"file:{tmp_path}/e.sqlite"})
    report = driver.run_check(config)
    assert report.exit_code == 2
    assert report.errors == ["internal error: ValueError: cannot reshape array"]


def test_a_stale_copyset_is_not_judged_while_the_new_one_has_a_member_restarting():
    # Store wave 1 of ESN 1 named [1, 0, 2] and failed (N1 went down); wave 2 named
    # [3, 2, 4] and was acknowledged; N0 keeps its stale wave-1 copy (and is asked
    # first).  N3 is restarting: the wave-2 copyset must still be the one judged.
    def holding(node, copysets):
        return NodeHoldings.from_rows(node, _lsns([1] if copysets else []),
                                      np.array(copysets or np.zeros((0, 3)), np.int16))

    holdings = {0: holding(0, [[1, 0, 2]]), 1: holding(1, []),
                2: holding(2, [[3, 2, 4]]), 4: holding(4, [[3, 2, 4]])}
    hi = int(_lsns([1])[0])
    v = judge(1, 1, hi, holdings, replication=3, nodeset=range(5), down=[3])
    assert v.counts["durability"] == 0, v.details  # N1 "missing" only in the stale copyset
    assert v.summary["unchecked"] == 1  # N3's copy could not be checked
    # N3 answering without it: no copyset is complete, a missing copy is reported.
    lost = judge(1, 1, hi, holdings | {3: holding(3, [])}, replication=3,
                 nodeset=range(5))
    assert lost.counts["durability"] == 1
