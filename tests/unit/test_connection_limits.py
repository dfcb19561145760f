"""ConnectionLimits, the node's connection bookkeeping, without sockets."""

from logdevice.config import Settings
from logdevice.node.transport.limits import ConnectionLimits


def limits(**kw) -> ConnectionLimits:
    return ConnectionLimits(Settings(**kw))


def test_the_total_is_a_hard_cap_and_closing_makes_room():
    lim = limits(max_connections=2)
    assert lim.admit() and lim.admit() and not lim.admit()
    assert lim.open == 2
    lim.closed(None)
    assert lim.admit() and lim.open == 2


def test_each_principal_has_its_own_share():
    lim = limits(max_connections=10, max_connections_per_principal=2)
    for _ in range(3):
        assert lim.admit()
    assert lim.admit_principal("viewer") is None
    assert lim.admit_principal("viewer") is None
    why = lim.admit_principal("viewer")
    assert why is not None and "viewer already holds 2" in why
    assert lim.admit_principal("writer") is None  # another principal is not held back
    lim.closed("viewer")
    assert lim.admit_principal("viewer") is None


def test_idle_means_silent_past_the_timeout_with_nothing_open():
    lim = limits(client_idle_timeout_ms=10_000)
    assert not lim.idle(last_heard=100.0, now=109.9, busy=False)
    assert lim.idle(last_heard=100.0, now=110.0, busy=False)
    assert not lim.idle(last_heard=100.0, now=500.0, busy=True)  # a read stream is open
    lim.update(Settings(client_idle_timeout_ms=0))  # 0: never idle
    assert not lim.idle(last_heard=0.0, now=1e9, busy=False)


def test_half_received_input_has_one_budget_for_the_node():
    lim = limits(max_buffered_input_bytes=1000)
    assert lim.buffered(600)
    assert not lim.buffered(600)  # 1,200 held: over
    assert lim.buffered(-600) and lim.input_bytes == 600
