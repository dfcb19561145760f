"""The Appender state machine: waves, growing store timeouts, gray- and blacklisting."""

from __future__ import annotations

import random

import pytest

from ldcore.appenders import LATENCY_MEMORY, LATENCY_WAIT_MAX
from logdevice.errors import E
from logdevice.sequencer.actions import AckAppend, Reject, SendStore
from logdevice.sequencer.appender import (
    Appender,
    AppenderContext,
    AppenderState,
    StoreLatency,
)
from logdevice.sequencer.copyset import CopysetSelector, StickyCopysetSelector, satisfies
from logdevice.sequencer.nodestate import NodeHealth

LOG = 7
LSN = (3 << 32) | 1


def make(nodes=range(6), r=3, seed=0, timeout=(0.01, 60.0), sticky=False, locations=None,
         replication=None):
    sel = CopysetSelector(nodes, replication or r, locations)
    if sticky:
        sel = StickyCopysetSelector(sel, 10**9, 10**9)
    ctx = AppenderContext(LOG, sel, random.Random(seed), NodeHealth(5.0, 10.0), timeout)
    return ctx, Appender(ctx, "req", LSN, 1000, flags=4, payload_len=100)


def stores(actions):
    out = [a for a in actions if isinstance(a, SendStore)]
    assert len(out) == len(actions)
    return out


def test_first_wave_sends_store_to_each_member():
    ctx, app = make()
    acts = stores(app.start(0.0))
    assert len(acts) == 3
    cs = acts[0].copyset
    assert [a.node for a in acts] == list(cs)
    assert all(a.copyset is cs for a in acts)  # one tuple per wave
    assert {(a.log_id, a.lsn, a.wave, a.timestamp, a.flags, a.request_id) for a in acts} == {
        (LOG, LSN, 1, 1000, 4, "req")}
    assert app.state == AppenderState.REPLICATING
    assert app.deadline == pytest.approx(0.01)


def test_ack_only_after_all_r_stored():
    _, app = make()
    cs = app.start(0.0)[0].copyset
    assert app.on_stored(cs[1], 1, E.OK, 0.001) == []
    assert app.on_stored(cs[1], 1, E.OK, 0.001) == []  # a duplicate does not count twice
    assert app.on_stored(99, 1, E.OK, 0.001) == []  # a stranger does not count
    assert app.on_stored(cs[2], 1, E.OK, 0.002) == []
    acts = app.on_stored(cs[0], 1, E.OK, 0.003)
    assert acts == [AckAppend("req", LOG, LSN, 1000)]
    assert app.replicated and app.deadline is None
    # The leader (first node, the SCD shipper) stored before the ack: sync-leader stage holds.
    assert cs[0] in app.stored
    assert app.on_stored(cs[0], 1, E.OK, 0.004) == []


def test_timeout_graylists_silent_nodes_and_starts_new_wave():
    ctx, app = make(nodes=range(8))
    cs1 = app.start(0.0)[0].copyset
    app.on_stored(cs1[0], 1, E.OK, 0.001)
    assert app.on_timeout(0.005) == []  # not due yet
    acts = stores(app.on_timeout(0.01))
    assert ctx.health.graylisted(0.01) == frozenset(cs1[1:])
    cs2 = acts[0].copyset
    assert {a.wave for a in acts} == {2}
    assert not set(cs2) & set(cs1[1:])
    assert app.stored == set()
    assert app.deadline == pytest.approx(0.01 + 0.02)


def test_store_timeouts_grow_and_are_capped():
    ctx, app = make(nodes=range(6), r=1)
    now = 0.0
    app.start(now)
    seen = []
    for _ in range(16):
        seen.append(round(app.deadline - now, 6))
        now = app.deadline
        ctx.health.clear_graylist()  # keep nodes available so every wave is a real one
        app.on_timeout(now)
    assert seen[:5] == [0.01, 0.02, 0.04, 0.08, 0.16]
    assert seen[-1] == 60.0 and max(seen) == 60.0
    assert app.wave == 17
    assert ctx.store_timeout(1) == 0.01 and ctx.store_timeout(10**6) == 60.0


def test_store_latency_remembers_the_slowest_recent_answer():
    lat = StoreLatency()
    assert lat.timeout((0, 1), 0.0) == 0.0
    lat.observe(0, 0.3, 1.0)  # one slow answer among many fast ones
    for i in range(1000):
        lat.observe(0, 0.002, 1.0 + i / 1000)
    assert lat.timeout((0,), 2.0) == pytest.approx(2 * 0.3)
    assert lat.timeout((0, 1), 2.0) == lat.timeout((0,), 2.0)  # node 1: no answers, no say
    assert lat.timeout((0,), 1.0 + LATENCY_MEMORY / 2 + 0.1) == pytest.approx(2 * 0.3)
    # Forgotten a memory later, when only fast answers came since.
    lat.observe(0, 0.002, 1.0 + LATENCY_MEMORY / 2 + 0.2)
    assert lat.timeout((0,), 1.0 + LATENCY_MEMORY + 0.3) == pytest.approx(2 * 0.002)
    assert lat.timeout((0,), 1.0 + 2 * LATENCY_MEMORY) == 0.0
    lat.observe(1, 30.0, 50.0)  # a node that hung: its answer teaches no more than this
    assert lat.timeout((1,), 50.0) == LATENCY_WAIT_MAX


def test_a_wave_waits_for_members_that_answer_other_logs_late():
    """The nodes took 300 ms to answer other logs' waves: the first wave waits twice
    that, not the 10 ms backoff."""
    ctx, app = make(nodes=range(3), r=2)
    for node in range(3):
        ctx.health.latency.observe(node, 0.3, 0.0)
    app.start(0.0)
    assert app.deadline == pytest.approx(0.6)
    assert app.on_timeout(0.5) == []  # still due later: no second wave


def test_a_member_that_stops_answering_still_times_out():
    """Answer times come only from answers: a node that falls silent keeps the short
    timeout it had, and its wave moves on at the backoff."""
    ctx, app = make(nodes=range(8))
    for node in range(8):
        ctx.health.latency.observe(node, 0.002, 0.0)
    cs1 = app.start(0.0)[0].copyset
    app.on_stored(cs1[0], 1, E.OK, 0.002)
    acts = stores(app.on_timeout(0.01))
    assert {a.wave for a in acts} == {2}
    assert ctx.health.graylisted(0.01) == frozenset(cs1[1:])


def test_bad_timeout_bounds():
    with pytest.raises(ValueError):
        make(timeout=(0.0, 1.0))
    with pytest.raises(ValueError):
        make(timeout=(2.0, 1.0))


def test_stored_from_old_wave_is_ignored():
    _, app = make(nodes=range(8))
    cs1 = app.start(0.0)[0].copyset
    cs2 = app.on_timeout(0.01)[0].copyset
    for n in cs1:
        assert app.on_stored(n, 1, E.OK, 0.011) == []
    assert app.stored == set()
    for n in cs2[:-1]:
        app.on_stored(n, 2, E.OK, 0.012)
    assert app.on_stored(cs2[-1], 2, E.OK, 0.013)[0].lsn == LSN


@pytest.mark.parametrize("status", [E.NOSPC, E.OVERLOADED, E.DISABLED])
def test_error_reply_blacklists_and_retries_at_once(status):
    ctx, app = make(nodes=range(8))
    cs1 = app.start(0.0)[0].copyset
    acts = stores(app.on_stored(cs1[1], 1, status, 0.002))
    assert ctx.health.blacklisted(0.002) == {cs1[1]: status}
    assert acts[0].wave == 2 and cs1[1] not in acts[0].copyset
    # The blacklisting lasts blacklist_seconds (10 s here), then the node is usable again.
    assert cs1[1] in ctx.health.excluded(9.9)
    assert cs1[1] not in ctx.health.excluded(10.003)


def test_node_down_moves_the_wave_on():
    ctx, app = make(nodes=range(8))
    cs1 = app.start(0.0)[0].copyset
    app.on_stored(cs1[0], 1, E.OK, 0.001)
    assert app.on_node_down(cs1[0], 0.002) == []  # it already stored: keep waiting
    assert app.on_node_down(100, 0.002) == []
    ctx.health.mark_down(cs1[1])
    acts = stores(app.on_node_down(cs1[1], 0.002))
    assert acts[0].wave == 2 and cs1[1] not in acts[0].copyset


def test_waits_when_no_copyset_and_retries():
    ctx, app = make(nodes=range(4), r=3)
    cs1 = app.start(0.0)[0].copyset
    spare = next(n for n in range(4) if n not in cs1)
    for n in (spare, cs1[0]):
        ctx.health.mark_down(n)
    assert app.on_node_down(cs1[0], 0.001) == []
    assert app.state == AppenderState.WAITING and app.last_status == E.DISABLED
    assert app.wave == 2 and app.copyset == ()
    # Its deadline passes with the nodes still down: wait again, longer.
    assert app.on_timeout(app.deadline) == []
    assert app.wave == 3 and app.state == AppenderState.WAITING
    ctx.health.mark_up(spare)
    acts = stores(app.retry_now(0.1))
    assert acts[0].wave == 4 and set(acts[0].copyset) == set(range(4)) - {cs1[0]}


def test_graylist_is_cleared_when_it_alone_blocks_selection():
    ctx, app = make(nodes=range(3), r=3)
    cs1 = app.start(0.0)[0].copyset
    acts = stores(app.on_timeout(0.01))  # all three graylisted; only choice is all three
    assert set(acts[0].copyset) == set(cs1)
    assert ctx.health.graylisted(0.01) == frozenset()


def test_nodes_blacklisted_for_their_own_failure_are_tried_before_failing():
    """R=3 of 5 with two nodes down: a third node blacklisted because it was restarting
    (SHUTDOWN, a broken connection) is used rather than failing the append."""
    ctx, _ = make(nodes=range(5), r=3)
    h = ctx.health
    h.mark_down(0)
    h.mark_down(1)
    h.blacklist(2, E.SHUTDOWN, 0.0)
    cs, status = ctx.pick(0, 0.0)
    assert status == E.OK and set(cs) == {2, 3, 4}
    h.blacklist(2, E.OVERLOADED, 0.0)  # asked to be left alone: that is respected
    assert ctx.pick(0, 0.0) == (None, E.OVERLOADED)


def test_failure_status():
    ctx, app = make(nodes=range(4), r=3)
    h = ctx.health
    assert ctx.pick(0, 0.0)[1] == E.OK
    h.blacklist(0, E.NOSPC, 0.0)
    h.blacklist(1, E.NOSPC, 0.0)
    assert ctx.pick(0, 0.0) == (None, E.NOSPC)
    h.blacklist(0, E.OVERLOADED, 0.0)
    # Node 1 lacks space but giving it back would not be enough: overloaded is the reason.
    h.blacklist(2, E.OVERLOADED, 0.0)
    assert ctx.pick(0, 0.0) == (None, E.OVERLOADED)
    h.mark_down(2)
    h.mark_down(3)
    assert ctx.pick(0, 0.0) == (None, E.DISABLED)


def test_abort():
    _, app = make()
    app.start(0.0)
    assert app.abort(E.CANCELLED) == [Reject("req", LOG, E.CANCELLED, LSN)]
    assert app.abort(E.CANCELLED) == []
    assert app.state == AppenderState.ABORTED and app.deadline is None
    _, app = make()
    for a in app.start(0.0):
        app.on_stored(a.node, 1, E.OK, 0.0)
    assert app.abort(E.CANCELLED) == []  # already acked: nothing to take back
    with pytest.raises(RuntimeError):
        app.start(0.0)


def test_waves_honour_failure_domains():
    locs = {n: ("r", "d", "c", f"w{n % 2}", f"k{n % 4}") for n in range(8)}
    ctx, app = make(nodes=range(8), replication={"row": 2, "node": 3}, locations=locs, seed=3)
    now, acts = 0.0, app.start(0.0)
    for _ in range(6):
        assert satisfies(acts[0].copyset, {"row": 2, "node": 3}, locs)
        now = app.deadline
        ctx.health.clear_graylist()
        acts = app.on_timeout(now)


def test_sticky_block_is_broken_by_a_failed_wave():
    ctx, app = make(nodes=range(8), sticky=True)
    cs1 = app.start(0.0)[0].copyset
    assert ctx.selector.current == cs1
    app.on_stored(cs1[0], 1, E.OVERLOADED, 0.001)
    assert ctx.selector.current != cs1
    assert ctx.selector.blocks_started == 2


def test_answer_to_an_old_wave_does_not_count_in_the_new_one():
    # Three nodes, R=2: when one member fails, the next wave must reuse the other member.
    ctx, app = make(nodes=range(3), r=2)
    a, b = app.start(0.0)[0].copyset
    acts = stores(app.on_stored(b, 1, E.OVERLOADED, 0.001))
    cs2 = acts[0].copyset
    assert a in cs2 and b not in cs2
    c = next(n for n in cs2 if n != a)
    assert app.on_stored(a, 1, E.OK, 0.002) == []  # wave 1's answer arrives late
    assert app.on_stored(c, 2, E.OK, 0.003) == []  # still waiting for a in wave 2
    assert app.on_stored(a, 2, E.OK, 0.004)[0].lsn == LSN


def test_unknown_error_status_still_blacklists():
    ctx, app = make(nodes=range(8))
    cs1 = app.start(0.0)[0].copyset
    acts = stores(app.on_stored(cs1[0], 1, 9999, 0.001))
    assert ctx.health.blacklisted(0.001) == {cs1[0]: E.FAILED}
    assert acts[0].wave == 2


def test_nodes_refusing_copies_are_avoided_until_the_event_log_lifts_it():
    h = NodeHealth(5.0, 10.0)
    h.set_refusing(frozenset({2}))
    h.blacklist(2, E.REBUILDING, now=0.0)
    assert 2 in h.excluded(0.0) and 2 in h.must_avoid(0.0)
    assert 2 in h.excluded(100.0)  # the blacklisting expired; the refusal did not
    h.blacklist(2, E.REBUILDING, now=100.0)
    h.set_refusing(frozenset())  # acknowledged: forgiven at once, not in 10 s
    assert 2 not in h.excluded(100.0) and 2 not in h.must_avoid(100.0)
    ctx = AppenderContext(LOG, CopysetSelector(range(3), 2), random.Random(1), h, (0.01, 1.0))
    h.set_refusing(frozenset({0}))
    for _ in range(50):
        cs, st = ctx.pick(10, now=200.0)
        assert st == E.OK and 0 not in cs
