"""When the cluster starts a rebuilding by itself (``rebuilding.supervisor.decide``)."""

from __future__ import annotations

from logdevice.rebuilding.supervisor import ClusterHealth, decide, rebuilding_limit
from logdevice.shards import AuthoritativeStatus as S

GRACE = 10.0
STORAGE = frozenset(range(5))


def health(dead_for: dict[int, float], held: dict[int, int] | None = None,
           **kw: object) -> ClusterHealth:
    held = held if held is not None else {n: 5 - len(dead_for) for n in dead_for}
    return ClusterHealth(nodes=5, storage_nodes=STORAGE, dead_for=dead_for,
                         held_dead_by=held, **kw)  # type: ignore[arg-type]


def actions(h: ClusterHealth, fraction: float = 0.25) -> list[tuple[int, str]]:
    return [(d.node, d.action) for d in decide(h, GRACE, fraction)]


def test_limit_is_a_fraction_of_the_storage_nodes_and_at_least_one() -> None:
    assert rebuilding_limit(5, 0.25) == 1
    assert rebuilding_limit(8, 0.25) == 2
    assert rebuilding_limit(3, 0.0) == 1
    assert rebuilding_limit(10, 0.3) == 3


def test_a_node_dead_past_the_grace_period_is_rebuilt() -> None:
    assert actions(health({2: 9.9})) == []  # within the grace period: nothing said
    assert actions(health({2: 10.0})) == [(2, "rebuild")]


def test_off_when_the_grace_period_is_zero() -> None:
    assert decide(health({2: 1e6}), 0, 0.25) == []


def test_no_rebuilding_without_a_majority_holding_it_dead() -> None:
    got = decide(health({2: 60.0}, held={2: 2}), GRACE, 0.25)
    assert [(d.node, d.action) for d in got] == [(2, "wait")]
    assert "only 2 of 5 nodes" in got[0].reason
    assert actions(health({2: 60.0}, held={2: 3})) == [(2, "rebuild")]


def test_too_many_down_waits_and_says_why() -> None:
    dead = {1: 60.0, 2: 60.0, 3: 5.0}
    got = decide(health(dead, held={1: 3, 2: 3, 3: 3}), GRACE, 0.25)
    assert [(d.node, d.action) for d in got] == [(1, "wait"), (2, "wait")]
    assert "3 of 5 storage nodes are down or being rebuilt" in got[0].reason
    assert "at most 1" in got[0].reason
    # with a larger fraction both start
    assert actions(health(dead, held={1: 3, 2: 3, 3: 3}), 0.6) == [(1, "rebuild"),
                                                                     (2, "rebuild")]


def test_nodes_being_rebuilt_count_against_the_limit_but_rebuilt_ones_do_not() -> None:
    busy = health({2: 60.0}, rebuilding=frozenset({4}), statuses={4: S.UNAVAILABLE})
    assert actions(busy) == [(2, "wait")]
    done = health({2: 60.0, 4: 600.0}, held={2: 3, 4: 3},
                  statuses={4: S.AUTHORITATIVE_EMPTY})
    assert actions(done) == [(2, "rebuild")]  # N4 is gone but its records are not


def test_nodes_already_dealt_with_are_left_alone() -> None:
    for status in (S.UNAVAILABLE, S.UNDERREPLICATION, S.AUTHORITATIVE_EMPTY):
        h = health({2: 60.0}, statuses={2: status},
                   rebuilding=frozenset({2}) if status != S.AUTHORITATIVE_EMPTY
                   else frozenset())
        assert actions(h, 0.5) == [], status


def test_a_draining_node_that_dies_is_rebuilt_without_it() -> None:
    h = health({2: 60.0}, rebuilding=frozenset({2}))  # draining: still authoritative
    assert actions(h) == [(2, "rebuild")]


def test_non_storage_nodes_are_never_rebuilt() -> None:
    h = ClusterHealth(nodes=6, storage_nodes=STORAGE, dead_for={5: 60.0},
                      held_dead_by={5: 5})
    assert decide(h, GRACE, 0.25) == []


def test_the_longest_dead_is_decided_first() -> None:
    h = health({1: 20.0, 3: 90.0}, held={1: 3, 3: 3})
    assert [d.node for d in decide(h, GRACE, 0.6)] == [3, 1]


def test_an_operators_abort_holds_the_node_back() -> None:
    got = decide(health({2: 60.0}, held_back=frozenset({2})), GRACE, 0.25)
    assert [(d.node, d.action) for d in got] == [(2, "wait")]
    assert "operator aborted" in got[0].reason
