"""The per-log Sequencer: LSNs, window, out-of-order acks, in-order release, timers."""

from __future__ import annotations

import heapq
import random

import pytest

from ldcore import lsn as ldlsn
from logdevice.errors import E, InvalidParamError
from logdevice.sequencer import (
    AckAppend,
    CopysetSelector,
    Reactivate,
    Reject,
    Release,
    SendStore,
    Sequencer,
    SequencerState,
)
from logdevice.sequencer.appender import AppenderState
from logdevice.sequencer.nodestate import NodeHealth


class Clock:
    def __init__(self, t=100.0, wall=1_700_000_000_000):
        self.t = t
        self.wall = wall

    def __call__(self):
        return self.t

    def ms(self):
        return self.wall


def make(nodes=range(5), r=2, epoch=3, **kw):
    clock = kw.pop("clock", None) or Clock()
    seq = Sequencer(1, epoch, nodes, r, clock=clock, wall_clock_ms=clock.ms,
                    rng=random.Random(kw.pop("seed", 0)), **kw)
    return seq, clock


def of(actions, kind):
    return [a for a in actions if isinstance(a, kind)]


def store_all(seq, actions, status=E.OK):
    out = []
    for a in of(actions, SendStore):
        out += seq.on_stored(a.node, a.lsn, a.wave, status)
    return out


def test_lsns_count_from_esn_1_in_the_epoch():
    seq, _ = make(epoch=5)
    lsns = []
    for i in range(4):
        acts = seq.append(i, 10)
        assert len(of(acts, SendStore)) == 2
        lsns.append(acts[0].lsn)
    assert lsns == [ldlsn.compose(5, esn) for esn in (1, 2, 3, 4)]
    assert seq.next_lsn == ldlsn.compose(5, 5)
    assert seq.in_flight == 4


def test_ack_after_r_stored_then_release():
    seq, _ = make()
    acts = seq.append("a", 10)
    first, second = of(acts, SendStore)
    assert seq.on_stored(first.node, first.lsn, 1) == []
    out = seq.on_stored(second.node, second.lsn, 1)
    lsn = ldlsn.compose(3, 1)
    assert out == [AckAppend("a", 1, lsn, 1_700_000_000_000), Release(1, lsn, (0, 1, 2, 3, 4))]
    assert seq.lng == lsn and seq.release_lsn == lsn and seq.in_flight == 0
    assert seq.tail() == (lsn, 1_700_000_000_000)


def test_acks_out_of_order_release_in_order():
    seq, clock = make()
    batches = []
    for i in range(3):
        clock.wall += 1
        batches.append(seq.append(i, 10))
    l1, l2, l3 = (b[0].lsn for b in batches)
    # The third and second finish first: acked at once, nothing released.
    out = store_all(seq, batches[2])
    assert of(out, AckAppend) == [AckAppend(2, 1, l3, clock.wall)] and not of(out, Release)
    out = store_all(seq, batches[1])
    assert [a.lsn for a in of(out, AckAppend)] == [l2] and not of(out, Release)
    assert seq.release_lsn == ldlsn.LSN_INVALID and seq.in_flight == 3
    # The first completes: all three retire, one Release for the highest.
    out = store_all(seq, batches[0])
    assert [a.lsn for a in of(out, AckAppend)] == [l1]
    assert of(out, Release) == [Release(1, l3, seq.nodeset)]
    assert seq.lng == l3 and seq.in_flight == 0


def test_release_never_passes_an_unreplicated_record():
    seq, _ = make()
    batches = [seq.append(i, 10) for i in range(5)]
    store_all(seq, batches[0])
    assert seq.release_lsn == batches[0][0].lsn
    # Record 2 has one copy of two; 3..5 are complete.
    seq.on_stored(batches[1][0].node, batches[1][0].lsn, 1)
    for b in batches[2:]:
        store_all(seq, b)
    assert seq.release_lsn == batches[0][0].lsn
    out = seq.on_stored(batches[1][1].node, batches[1][1].lsn, 1)
    assert of(out, Release)[0].lsn == batches[4][0].lsn


def test_store_carries_lng():
    seq, _ = make()
    a = seq.append("a", 1)
    assert a[0].lng == ldlsn.LSN_INVALID
    store_all(seq, a)
    b = seq.append("b", 1)
    assert b[0].lng == a[0].lsn


def test_window_full_rejects_with_seqnobufs():
    seq, _ = make(max_in_flight=3)
    batches = [seq.append(i, 10) for i in range(3)]
    assert seq.append("x", 10) == [Reject("x", 1, E.SEQNOBUFS)]
    # Acked but not retired still occupies the window (the oldest is not done).
    store_all(seq, batches[1])
    store_all(seq, batches[2])
    assert seq.append("y", 10) == [Reject("y", 1, E.SEQNOBUFS)]
    store_all(seq, batches[0])
    assert seq.in_flight == 0
    acts = seq.append("z", 10)
    assert acts[0].lsn == ldlsn.compose(3, 4)  # rejected appends took no LSN


def test_too_big():
    seq, _ = make(max_payload_size=1000)
    assert seq.append("big", 1001) == [Reject("big", 1, E.TOOBIG)]
    assert len(seq.append("ok", 1000)) == 2


def test_timestamps_never_go_back():
    seq, clock = make(last_timestamp=1_700_000_000_500)
    stamps = []
    for wall in (1_700_000_000_000, 1_700_000_000_600, 1_700_000_000_550, 1_700_000_000_700):
        clock.wall = wall
        stamps.append(seq.append(wall, 1)[0].timestamp)
    assert stamps == [1_700_000_000_500, 1_700_000_000_600, 1_700_000_000_600,
                      1_700_000_000_700]


def test_epoch_exhaustion_asks_for_reactivation():
    seq, _ = make(epoch=9, max_esn=3)
    acts = [seq.append(i, 1) for i in range(3)]
    assert of(acts[2], Reactivate) == [Reactivate(1, 9, E.TOOBIG)]
    assert seq.state == SequencerState.EXHAUSTED
    assert seq.append("late", 1) == [Reject("late", 1, E.AGAIN)]
    # The window still completes and releases.
    for a in acts:
        store_all(seq, a)
    assert seq.release_lsn == ldlsn.compose(9, 3)


def test_default_max_esn_keeps_esn_max_free():
    seq, _ = make()
    assert seq.max_esn == ldlsn.ESN_MAX - 1


def test_store_timeout_starts_new_wave_via_timer():
    seq, clock = make(nodes=range(6), store_timeout=(0.05, 1.0))
    acts = seq.append("a", 1)
    cs1 = acts[0].copyset
    assert seq.next_deadline() == pytest.approx(100.05)
    clock.t = 100.04
    assert seq.on_timer() == []
    clock.t = 100.05
    acts2 = seq.on_timer()
    assert {a.wave for a in acts2} == {2} and not set(acts2[0].copyset) & set(cs1)
    assert seq.next_deadline() == pytest.approx(100.15)
    # Wave-1 answers are ignored now; wave-2 answers complete the record.
    assert store_all(seq, acts) == []
    out = store_all(seq, acts2)
    assert of(out, AckAppend) and of(out, Release)
    assert seq.next_deadline() is None


def test_error_reply_retries_and_blacklists():
    seq, _ = make(nodes=range(6))
    acts = seq.append("a", 1)
    bad = acts[0]
    out = seq.on_stored(bad.node, bad.lsn, 1, E.NOSPC)
    assert {a.wave for a in out} == {2} and bad.node not in out[0].copyset
    assert seq.health.blacklisted(100.0) == {bad.node: E.NOSPC}


def test_node_down_and_up():
    seq, clock = make(nodes=range(3), r=3)
    acts = seq.append("a", 1)
    out = seq.on_node_down(acts[0].node)
    assert out == []  # no other copyset exists: the appender waits
    app = seq.appender(acts[0].lsn)
    assert app.state == AppenderState.WAITING and app.last_status == E.DISABLED
    # New appends cannot be placed either: rejected without taking an LSN.
    assert seq.append("b", 1) == [Reject("b", 1, E.DISABLED)]
    out = seq.on_node_up(acts[0].node)
    assert {a.wave for a in out} == {3} and len(out) == 3
    assert of(store_all(seq, out), AckAppend)[0].lsn == ldlsn.compose(3, 1)
    assert seq.append("c", 1)[0].lsn == ldlsn.compose(3, 2)


def test_waiting_appender_retries_on_its_timer():
    seq, clock = make(nodes=range(3), r=3, store_timeout=(0.01, 1.0))
    acts = seq.append("a", 1)
    seq.on_node_down(acts[0].node)
    seq.health.mark_up(acts[0].node)  # comes back without the sequencer being told
    clock.t = seq.next_deadline()
    out = seq.on_timer()
    assert len(of(out, SendStore)) == 3


def test_needs_recovery_holds_releases():
    prev = ldlsn.compose(2, 40)
    seq, _ = make(needs_recovery=True, last_released=prev, last_timestamp=5)
    a = seq.append("a", 1)
    out = store_all(seq, a)
    assert of(out, AckAppend) and not of(out, Release)  # acked, not released
    assert seq.tail() == (prev, 5)
    out = seq.on_recovery_done(last_released=ldlsn.compose(2, 42), last_timestamp=6)
    assert out == [Release(1, a[0].lsn, seq.nodeset)]
    assert seq.release_lsn == a[0].lsn


def test_recovery_done_with_nothing_retired():
    seq, _ = make(needs_recovery=True, last_released=ldlsn.compose(2, 40))
    assert seq.on_recovery_done(ldlsn.compose(2, 42), 77) == []
    assert seq.tail() == (ldlsn.compose(2, 42), 77)


def test_deactivate_rejects_unacked_with_their_lsn():
    seq, _ = make()
    a, b = seq.append("a", 1), seq.append("b", 1)
    store_all(seq, b)  # acked, not released
    out = seq.deactivate()
    assert out == [Reject("a", 1, E.CANCELLED, a[0].lsn)]
    assert seq.state == SequencerState.DEACTIVATED and seq.in_flight == 0
    assert seq.append("c", 1) == [Reject("c", 1, E.NOSEQUENCER)]
    assert store_all(seq, a) == []
    assert seq.next_deadline() is None


def test_batches_coalesce_release_and_group_stores():
    seq, _ = make(nodes=range(4))
    acts = seq.append_many([(i, 10, 0) for i in range(50)])
    assert len(acts) == 100
    groups: dict[int, list[SendStore]] = {}
    for a in acts:
        groups.setdefault(a.node, []).append(a)
    assert sum(len(v) for v in groups.values()) == 100
    for node, lst in groups.items():
        assert all(a.node == node for a in lst)
        assert [a.lsn for a in lst] == sorted(a.lsn for a in lst)
    replies = [(a.node, a.lsn, a.wave, E.OK) for a in reversed(acts)]
    out = seq.on_stored_many(replies)
    assert len(of(out, AckAppend)) == 50
    assert of(out, Release) == [Release(1, ldlsn.compose(3, 50), seq.nodeset)]


def test_sticky_sequencer_reuses_copysets():
    seq, _ = make(nodes=range(8), r=3, sticky=(10_000, 60_000.0))
    copysets = []
    for i in range(300):
        acts = seq.append(i, 100)
        copysets.append(acts[0].copyset)
        store_all(seq, acts)
    changes = sum(1 for x, y in zip(copysets, copysets[1:], strict=False) if x != y)
    assert changes <= 3  # 100 records of 100 bytes per 10 kB block
    # A failed wave ends the block.
    acts = seq.append("x", 100)
    seq.on_stored(acts[0].node, acts[0].lsn, 1, E.OVERLOADED)
    assert seq.append("y", 100)[0].copyset != copysets[-1]


def test_failure_domains_in_the_sequencer():
    locs = {n: f"r.d.c.row{n % 3}.rack{n}" for n in range(9)}
    seq, _ = make(nodes=range(9), r={"row": 3}, locations=locs)
    for i in range(50):
        cs = seq.append(i, 1)[0].copyset
        assert len({n % 3 for n in cs}) == 3


@pytest.mark.parametrize("kw", [
    {"epoch": 0},
    {"epoch": ldlsn.EPOCH_MAX + 1},
    {"max_in_flight": 0},
    {"max_esn": 0},
    {"r": 6},
    {"store_timeout": (0.0, 1.0)},
    {"last_released": ldlsn.compose(3, 1)},
])
def test_invalid_params(kw):
    with pytest.raises(InvalidParamError):
        make(**kw)


def test_retired_sequencer_finishes_its_window_and_takes_nothing_new():
    # The log's group changed: the epoch ends without a Reactivate of its own (the role
    # activates the next one) and what it holds is still acknowledged and released.
    seq, _ = make()
    held = seq.append("a", 10)
    assert seq.retire() == [] and seq.state == SequencerState.EXHAUSTED
    assert of(seq.append("b", 10), Reject)[0].status == E.AGAIN
    done = store_all(seq, held)
    assert [a.request_id for a in of(done, AckAppend)] == ["a"] and of(done, Release)
    assert not seq.in_flight and not of(done, Reactivate)


def _store_events(seqs, appends, service, now):
    """Run STOREs through storage nodes that each write theirs one after another,
    ``service(payload bytes)`` seconds each, with the sequencers' timers, until every STORE
    sent has landed.  ``seqs`` share the clock ``now`` (a one-item list); ``appends`` are
    their first actions.  Returns (acked, copies per (log, LSN))."""
    busy: dict[int, float] = {}
    events: list = []  # (time, node, log, lsn, wave): a STORE lands on the node's disk
    copies: dict[tuple[int, int], set[int]] = {}
    sizes: dict[tuple[int, int], int] = {}
    acked = 0

    def run(actions):
        nonlocal acked
        for a in actions:
            if isinstance(a, SendStore):
                key = (a.log_id, a.lsn)
                done = max(now[0], busy.get(a.node, 0.0)) + service(sizes[key])
                busy[a.node] = done
                heapq.heappush(events, (done, a.node, a.log_id, a.lsn, a.wave))
            elif isinstance(a, AckAppend):
                acked += 1

    by_log = {seq.log_id: seq for seq in seqs}
    for actions, size in appends:
        for a in of(actions, SendStore):
            sizes[a.log_id, a.lsn] = size
        run(actions)
    while events:
        deadline, seq = min(((s.next_deadline(), s) for s in seqs
                             if s.next_deadline() is not None), default=(None, None),
                            key=lambda x: x[0])
        if deadline is not None and deadline < events[0][0]:
            now[0] = deadline
            run(seq.on_timer(deadline))
            continue
        now[0], node, log_id, lsn, wave = heapq.heappop(events)
        copies.setdefault((log_id, lsn), set()).add(node)
        run(by_log[log_id].on_stored(node, lsn, wave, E.OK, now[0]))
    return acked, copies


def _burst_copies(payload, count, rate, seed=1):
    """Append ``count`` records of ``payload`` bytes at once to a sequencer over 3 nodes
    (R=2, store timeout 100 ms .. 60 s) whose storage nodes each write their STOREs one
    after another at ``rate`` bytes/s plus 1 ms.  Returns (acked, copies per LSN)."""
    now = [0.0]
    seq = Sequencer(1, 1, [0, 1, 2], 2, clock=lambda: now[0], rng=random.Random(seed),
                    store_timeout=(0.1, 60.0))
    first = seq.append_many([(i, payload, 0) for i in range(count)])
    acked, copies = _store_events([seq], [(first, payload)], lambda n: n / rate + 0.001, now)
    return acked, {lsn: c for (_, lsn), c in copies.items()}


@pytest.mark.parametrize("rate", [50e6, 400e6])
def test_a_burst_of_large_blobs_is_not_stored_twice(rate):
    """100 blobs of 1 MB at once: the nodes need 0.3-2.7 s to write their share, far past
    the 100 ms first-wave timeout.  The wave timeout follows the bytes queued for the
    nodes, so the first waves wait for them instead of starting second waves that leave
    extra copies (before: ~94 of 100 records ended up with 3 copies)."""
    acked, copies = _burst_copies(1 << 20, 100, rate)
    assert acked == 100
    extra = sum(len(c) - 2 for c in copies.values())
    assert extra <= 2, f"{extra} extra copies of 100 records"


def test_many_logs_on_busy_nodes_are_not_stored_twice():
    """600 logs, one 100 B append each, all at once, on 3 nodes sharing one NodeHealth and
    taking 0.5 ms per STORE: each node has a fifth of a second of STOREs queued, past the
    100 ms first-wave timeout, though no log has more than one record on its way.  The
    wave timeout follows how long the nodes take to answer (measured across every log),
    so the first waves wait for them instead of starting second waves that leave extra
    copies and more work for the busy nodes (before: most records got a third copy)."""
    now = [0.0]
    health = NodeHealth()
    seqs = [Sequencer(log_id, 1, [0, 1, 2], 2, clock=lambda: now[0],
                      rng=random.Random(log_id), store_timeout=(0.1, 60.0), health=health)
            for log_id in range(1, 601)]
    first = [(seq.append(log_id, 100), 100) for log_id, seq in enumerate(seqs, 1)]
    acked, copies = _store_events(seqs, first, lambda n: 0.0005, now)
    assert acked == 600
    extra = sum(len(c) - 2 for c in copies.values())
    assert extra <= 6, f"{extra} extra copies of 600 records"


def test_small_appends_keep_the_short_first_wave_timeout():
    seq = Sequencer(1, 1, [0, 1, 2], 2, clock=lambda: 0.0, rng=random.Random(1),
                    store_timeout=(0.1, 60.0))
    seq.append_many([(i, 100, 0) for i in range(500)])
    assert seq.next_deadline() == pytest.approx(0.1)


def test_an_idle_sequencer_sleeps_and_resumes_in_the_same_epoch():
    seq, clock = make(epoch=4)
    assert seq.dormant and seq.in_flight == 0  # no window until the first append
    first = seq.append("a", 10)
    assert not seq.dormant
    assert not seq.sleep() and not seq.dormant  # "a" is in flight: the window stays
    store_all(seq, first)
    assert seq.sleep() and seq.dormant
    assert seq.next_deadline() is None and seq.on_timer() == []
    assert seq.on_node_down(1) == [] and seq.on_node_up(1) == []
    # The next append goes on at the next ESN of the same epoch, later in time.
    clock.wall -= 100  # the wall clock went back: the stamps do not
    second = seq.append("b", 10)
    assert not seq.dormant
    lsn = ldlsn.compose(4, 2)
    assert of(second, SendStore)[0].lsn == lsn
    out = store_all(seq, second)
    assert of(out, AckAppend) == [AckAppend("b", 1, lsn, 1_700_000_000_000)]
    assert of(out, Release) == [Release(1, lsn, (0, 1, 2, 3, 4))]
    assert seq.tail() == (lsn, 1_700_000_000_000)


def test_a_dormant_sequencer_deactivates_and_retires():
    seq, _ = make()
    store_all(seq, seq.append("a", 10))
    assert seq.sleep()
    assert seq.deactivate(E.PREEMPTED) == [] and seq.state == SequencerState.DEACTIVATED
    assert seq.append("b", 10) == [Reject("b", 1, E.NOSEQUENCER)]
    retired, _ = make()
    retired.retire()
    assert retired.append("c", 10) == [Reject("c", 1, E.AGAIN)] and retired.dormant


def test_a_shared_selector_must_fit_the_nodeset_and_replication():
    base = CopysetSelector(range(5), 2)
    a, _ = make(selector=base)
    b, _ = make(selector=base)
    assert a.ctx.selector is b.ctx.selector is base
    assert of(a.append("x", 10), SendStore)
    with pytest.raises(InvalidParamError):
        make(nodes=range(4), selector=base)
    with pytest.raises(InvalidParamError):
        make(r=3, selector=base)
