"""What ``ldshell rebuilding`` says about each node that is down or being rebuilt."""

from __future__ import annotations

from logdevice.epochstore.events import RebuildingSet
from logdevice.rebuilding.explain import explain_waits
from logdevice.shards import AuthoritativeStatus as S

NODES = range(5)
GRACE = 600_000


def test_a_node_up_and_authoritative_is_not_mentioned() -> None:
    assert explain_waits(NODES, RebuildingSet(), {}, {}, [], GRACE) == {}


def test_dead_nodes_within_and_past_the_grace_period() -> None:
    waits = explain_waits(NODES, RebuildingSet(), {}, {1: 60_000, 2: 700_000}, [
        {"type": "SHARD_REBUILD_DEFERRED", "node": 2, "reason": "3 of 5 storage nodes "
         "are down"}], GRACE)
    assert waits[1] == ("down for 60 s; rebuilt by itself if still down in 540 s "
                        "(grace period 600 s)")
    assert waits[2] == "down for 700 s; not rebuilt yet: 3 of 5 storage nodes are down"
    off = explain_waits(NODES, RebuildingSet(), {}, {1: 60_000}, [], 0)
    assert "self-initiated rebuilding is off" in off[1] and "mark-unrecoverable 1" in off[1]


def test_a_rebuilding_names_the_donors_it_waits_for() -> None:
    rset = RebuildingSet(version=7, lost=frozenset({3}), donors=frozenset({0, 1, 2, 4}),
                         done=frozenset({0}))
    events = [{"type": "SHARD_NEEDS_REBUILD", "node": 3, "reason": "dead for 601 s"}]
    waits = explain_waits(NODES, rset, {3: S.UNAVAILABLE}, {3: 601_000, 4: 2_000},
                          events, GRACE)
    assert waits[3] == ("being rebuilt, UNAVAILABLE (dead for 601 s); waiting for donors "
                        "N1, N2, N4; donors down: N4 (the rebuilding waits for them)")
    assert waits[4].startswith("down for 2 s")


def test_rebuilt_and_drained_nodes() -> None:
    events = [{"type": "SHARD_NEEDS_REBUILD", "node": 1, "drain": True},
              {"type": "SHARD_NEEDS_REBUILD", "node": 2}]
    statuses = {1: S.AUTHORITATIVE_EMPTY, 2: S.AUTHORITATIVE_EMPTY,
                3: S.AUTHORITATIVE_EMPTY}
    waits = explain_waits(NODES, RebuildingSet(), statuses, {3: 5_000}, events, GRACE)
    assert waits[1].startswith("drained") and "undrain 1" in waits[1]
    assert waits[2] == "rebuilt; acknowledging at its next read of the event log"
    assert waits[3] == "rebuilt; down: it acknowledges when it comes back"


def test_an_operators_abort_is_explained() -> None:
    events = [{"type": "SHARD_ABORT_REBUILD", "node": 2, "operator": True,
               "reason": "rebuilding aborted by an operator"}]
    waits = explain_waits(NODES, RebuildingSet(), {}, {2: 900_000}, events, GRACE)
    assert "rebuilt by itself again only after it comes back and dies again" in waits[2]
