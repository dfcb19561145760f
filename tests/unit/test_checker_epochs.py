"""The checker's verdict against where epochs end, their nodesets, down nodes and drained
copies; the report's bound on details (sans-I/O, plus a node's answer from a real LogsDB
in a tmp dir)."""

from __future__ import annotations

import asyncio

import numpy as np

from logdevice.checker.client import AvailabilityClient
from logdevice.checker.driver import CheckOptions, _Check, _epoch_ends, down_limit_ms
from logdevice.checker.grid import Grid
from logdevice.checker.report import Report
from logdevice.checker.verdict import NodeHoldings, judge
from logdevice.config import make_local_config
from logdevice.storage.flags import FLAG_DRAINED
from logdevice.storage.logsdb import LogsDB
from tests.unit.test_checker import _holdings, _lsns, _place
from tests.unit.test_checker_client import NodeConn


def _lsn(esn, epoch=1):
    return int(_lsns([esn], epoch)[0])


def _empty(node, width=2):
    return NodeHoldings.from_rows(node, np.empty(0, np.uint64), np.empty((0, width), np.int16))


def test_grid_lays_out_epochs_up_to_where_they_end():
    held = np.array([_lsn(1, 2), _lsn(2, 2)], np.uint64)
    # Epoch 2 ends at ESN 5 (two held, three lost); epoch 3 is held by nobody; epoch 4
    # starts past hi; epoch 1 ends before lo.
    g = Grid.build(_lsn(1, 2), [held], {1: 9, 2: 5, 3: 3, 4: 7}, hi=_lsn(2, 4))
    assert g.epochs.tolist() == [2, 3, 4]
    assert g.length.tolist() == [5, 3, 2]
    assert g.slots(held).tolist() == [0, 1]
    assert Grid.build(1, [], {5: 0}).size == 0  # an epoch ending at ESN 0 has nothing


def test_a_lost_tail_and_a_lost_epoch_are_found_from_where_epochs_end():
    records = {e: [0, 1] for e in range(1, 91)}  # epoch 1 had 100 records: 91..100 lost
    holdings = _holdings(records, _place(records))
    hi = _lsn(3, 3)
    blind = judge(1, 1, hi, holdings, replication=2, nodeset=[0, 1])
    assert blind.clean  # the holdings alone cannot tell
    v = judge(1, 1, hi, holdings, replication=2, nodeset=[0, 1],
              ends={1: 100, 2: 4, 3: 3})  # epoch 2 (bridge at 4) and epoch 3 lost wholly
    assert v.summary["no_replica"] == 10 + 4 + 3
    lost = [(d["kind"], d["lsn_lo"], d["lsn_hi"]) for d in v.details]
    assert lost == [("no_replica", _lsn(91), _lsn(100)), ("no_replica", _lsn(1, 2), _lsn(4, 2)),
                    ("no_replica", _lsn(1, 3), _lsn(3, 3))]
    assert v.counts["durability"] == 17
    # A node that did not answer might hold them: not judged then.
    quiet = judge(1, 1, hi, {0: holdings[0]}, replication=2, nodeset=[0, 1], silent=[1],
                  ends={1: 100})
    assert quiet.summary["no_replica"] == 0
    # Nobody answered with anything: the whole expected range is lost.
    gone = judge(1, 1, _lsn(5), {0: _empty(0), 1: _empty(1)}, replication=2,
                 nodeset=[0, 1], ends={1: 5})
    assert gone.summary["no_replica"] == 5 and gone.counts["durability"] == 5


def test_epoch_ends_from_bridges_and_the_release_pointer():
    assert _epoch_ends({2: 7, 3: 1}, _lsn(12, 4)) == {2: 7, 3: 1, 4: 12}
    assert _epoch_ends({4: 9}, _lsn(5, 4)) == {4: 9}  # the bridge is past the pointer
    assert _epoch_ends({}, 0) == {}


def test_copysets_are_checked_against_their_epochs_nodeset():
    # Epoch 1 on nodes {0, 1, 2}, epoch 2 on {1, 2, 3}: [0, 1] is fine in epoch 1 and
    # outside the nodeset in epoch 2.
    rows = {0: [], 1: [], 2: [], 3: []}
    lsns = {0: [], 1: [], 2: [], 3: []}
    for lsn, cs in ((_lsn(1, 1), [0, 1]), (_lsn(2, 1), [1, 2]), (_lsn(1, 2), [0, 1]),
                    (_lsn(2, 2), [2, 3])):
        for x in cs:
            lsns[x].append(lsn)
            rows[x].append(cs)
    holdings = {x: NodeHoldings.from_rows(x, np.array(lsns[x], np.uint64),
                                          np.array(rows[x], np.int16).reshape(-1, 2))
                for x in range(4)}
    epochs = [(1, {"node": 2}, (0, 1, 2)), (2, {"node": 2}, (1, 2, 3))]
    v = judge(1, 1, _lsn(2, 2), holdings, replication=2, nodeset=range(4), epochs=epochs)
    assert v.counts == {"placement": 1, "durability": 0, "progress": 0, "availability": 0}
    (d,) = v.details
    assert (d["kind"], d["lsn_lo"], d["copysets"]) == ("outside_nodeset", _lsn(1, 2),
                                                       [[0, 1]])
    assert v.summary["outside_nodeset"] == 1
    # Entries without a nodeset (older callers) check only the replication.
    assert judge(1, 1, _lsn(2, 2), holdings, replication=2, nodeset=range(4),
                 epochs=[(1, {"node": 2}), (2, {"node": 2})]).clean


def test_a_node_down_within_the_grace_period_is_counted_apart():
    records = {e: [0, 1] for e in range(1, 6)}
    holdings = _holdings(records, {0: _place(records)[0]})
    hi = _lsn(5)
    v = judge(1, 1, hi, holdings, replication=2, nodeset=[0, 1, 2], down=[1],
              ends={1: 8})
    assert v.clean and v.down == {1} and not v.unavailable
    assert v.summary["unchecked"] == 5
    assert v.summary["no_replica"] == 0  # a down node might hold what nobody else does
    # Copies lost on a node that answered are still found meanwhile.
    holdings[0] = NodeHoldings.from_rows(0, _lsns([1, 2, 4, 5]), np.array([[0, 1]] * 4))
    holdings[2] = NodeHoldings.from_rows(2, _lsns([3]), np.array([[0, 2]]))
    v = judge(1, 1, hi, holdings, replication=2, nodeset=[0, 1, 2], down=[1])
    assert v.counts["durability"] == 1 and v.details[0]["nodes_missing"] == [0]
    r = Report()
    r.add(v)
    r.down_nodes[1] = 2500
    assert r.to_json()["down_nodes"] == {"1": 2500}
    assert r.violations["availability"] == 0


def test_details_are_bounded_with_a_count_of_what_was_left_out():
    # Every other record lost its copy on N1: 50 runs of one record each.
    records = {e: [0, 1] for e in range(1, 101)}
    holders = _place(records)
    holders[1] = [e for e in holders[1] if e % 2]
    holdings = _holdings(records, holders)
    v = judge(1, 1, _lsn(100), holdings, replication=2, nodeset=[0, 1], max_details=10)
    assert v.counts["durability"] == 50
    assert v.left_out == 40
    kept = [d for d in v.details if d["kind"] == "missing_copy"]
    (folded,) = [d for d in v.details if d["kind"] == "truncated"]
    assert len(kept) == 10 and folded["records"] == 40
    # Windows added up keep the bound: the next window's runs are counted, not kept.
    w = judge(1, _lsn(101), _lsn(200), _holdings(
        {e: [0, 1] for e in range(101, 201)},
        {0: list(range(101, 201)), 1: [e for e in range(101, 201) if e % 2]}),
        replication=2, nodeset=[0, 1], max_details=10)
    v.absorb(w, max_details=10)
    assert v.counts["durability"] == 100 and v.left_out == 90
    assert sum(d["kind"] == "missing_copy" for d in v.details) == 10
    # The report's own cap spans logs; availability is counted from the nodes, not from
    # the details listed.
    r = Report(max_details=5)
    r.add(v)
    silent = judge(2, 1, _lsn(3), _holdings({1: [0, 1]}, {0: [1]}), replication=2,
                   nodeset=[0, 1], silent=[1])
    r.add(silent)
    out = r.to_json()
    assert len(out["details"]) == 5
    # 5 more missing_copy and the availability one (the truncated one was counted)
    assert out["details_left_out"] == 90 + 5 + 1
    assert out["violations"]["availability"] == 1 and out["violations"]["durability"] == 100


def test_drained_copies_are_not_listed_by_the_node(tmp_path):
    cfg = make_local_config(3, 2, logs=[1], root=tmp_path, ports=[1, 2, 3])
    with LogsDB(tmp_path / "db") as db:
        # LSNs 5 and 6 were drained off this node (kept with their old copyset [0, 1]).
        db.write_records(1, [4, 5, 6, 7], [1, 2, 3, 4], [0, FLAG_DRAINED, FLAG_DRAINED, 0],
                         [[0, 1], [0, 1], [0, 1], [0, 2]], b"abcd", [0, 1, 2, 3, 4])
        client = AvailabilityClient(cfg)
        client.conns[0] = NodeConn(db)  # type: ignore[assignment]
        got = asyncio.run(client.fetch_log(0, 1))
        assert got.holdings.lsns.tolist() == [4, 7]
        assert np.array_equal(got.holdings.copysets, [[0, 1], [0, 2]])



def test_a_node_just_past_the_grace_period_is_down_until_the_event_log_can_say_so(tmp_path):
    # The supervisor may hold a node dead up to a dead timeout after the node asked does,
    # and writes the event log at its next poll: until then a node killed for good (or
    # slow to restart) cannot be in the event log, so it is down, not unavailable.
    assert down_limit_ms(3000, dead_timeout_ms=3000, poll_ms=500) == 6500
    cfg = make_local_config(3, 2, logs=[1], root=tmp_path, ports=[1, 2, 3])
    s = cfg.settings
    check = _Check(cfg, CheckOptions())
    assert check.down_limit_ms == (s.self_rebuild_grace_period_ms + s.dead_timeout_ms
                                   + s.rebuilding_poll_ms)
    asyncio.run(check.asker.close())
    # A grace given explicitly is exact.
    check = _Check(cfg, CheckOptions(down_grace_ms=0))
    assert check.down_limit_ms == 0
    asyncio.run(check.asker.close())
