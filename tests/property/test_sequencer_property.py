"""Random interleavings of appends, STORED replies, losses, timeouts and node failures.

A model network carries the sequencer's STOREs; hypothesis picks which are answered (OK or
an error), which are lost, when time passes and which nodes go down or come back.  After
every step: no record is acked before all R members of one wave's copyset stored it, the
copyset honours the replication property, release moves strictly forward and never past a
record that is not acked, each request is answered at most once, and SEQNOBUFS only comes
with a full window.  The sequencer is also told to sleep at random (it does only with
nothing in flight) and must go on as if it had not.  At the end the network heals and
every accepted append must be acked and released (liveness).
"""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ldcore import lsn as ldlsn
from logdevice.errors import E, InvalidParamError
from logdevice.sequencer import (
    AckAppend,
    Reactivate,
    Reject,
    Release,
    SendStore,
    Sequencer,
    SequencerState,
    satisfies,
)

EPOCH = 4


class Model:
    def __init__(self, nodes, replication, locations, max_in_flight, sticky, seed, max_esn):
        self.t = 0.0
        self.seq = Sequencer(
            9, EPOCH, nodes, replication, locations, clock=lambda: self.t,
            wall_clock_ms=lambda: int(self.t * 1000), rng=random.Random(seed),
            max_in_flight=max_in_flight, store_timeout=(0.01, 0.5),
            sticky=(500, 50.0) if sticky else None, max_esn=max_esn)
        self.replication = replication
        self.locations = locations
        self.r = self.seq.replication.r
        self.pending: list[SendStore] = []
        self.wave_copyset: dict[tuple[int, int], tuple[int, ...]] = {}
        self.ok: dict[tuple[int, int], set[int]] = {}
        self.last_wave: dict[int, int] = {}
        self.lsn_of: dict[object, int] = {}
        self.answered: dict[object, object] = {}
        self.acked: set[int] = set()
        self.released = ldlsn.LSN_INVALID
        self.next_req = 0
        self.last_ts = 0

    # -- applying actions and checking invariants ---------------------------------------------
    def apply(self, actions):
        for a in actions:
            if isinstance(a, SendStore):
                key = (a.lsn, a.wave)
                cs = self.wave_copyset.setdefault(key, a.copyset)
                assert cs == a.copyset and a.node in cs
                assert len(cs) == self.r and satisfies(cs, self.replication, self.locations)
                assert a.lng <= self.seq.lng and ldlsn.epoch_of(a.lsn) == EPOCH
                assert a.wave >= self.last_wave.get(a.lsn, 1)
                self.last_wave[a.lsn] = a.wave
                prev = self.lsn_of.setdefault(a.request_id, a.lsn)
                assert prev == a.lsn
                self.pending.append(a)
            elif isinstance(a, AckAppend):
                assert a.request_id not in self.answered
                self.answered[a.request_id] = a
                assert self.lsn_of[a.request_id] == a.lsn
                # Invariant 1: every member of the latest wave's copyset stored it in that
                # wave (an answer to an older wave must not count for the newer one).
                wave = self.last_wave[a.lsn]
                assert self.ok.get((a.lsn, wave), set()) >= set(self.wave_copyset[a.lsn, wave]), (
                    f"acked {ldlsn.to_string(a.lsn)} without R stored copies in wave {wave}")
                self.acked.add(a.lsn)
            elif isinstance(a, Reject):
                assert a.request_id not in self.answered
                self.answered[a.request_id] = a
                if a.status == E.SEQNOBUFS:
                    assert self.seq.in_flight == self.seq.max_in_flight
                if a.lsn == ldlsn.LSN_INVALID:
                    assert a.request_id not in self.lsn_of
            elif isinstance(a, Release):
                # Invariant 4: release only moves forward, over acked records only.
                assert a.lsn > self.released
                for esn in range(ldlsn.esn_of(self.released) + 1 if self.released else 1,
                                 ldlsn.esn_of(a.lsn) + 1):
                    assert ldlsn.compose(EPOCH, esn) in self.acked, (
                        f"released {ldlsn.to_string(a.lsn)} over unacked e{EPOCH}n{esn}")
                self.released = a.lsn
            else:
                assert isinstance(a, Reactivate)
        assert self.seq.release_lsn == self.released

    # -- operations ---------------------------------------------------------------------------
    def append(self, size):
        req = self.next_req
        self.next_req += 1
        in_flight = self.seq.in_flight
        acts = self.seq.append(req, size)
        stores = [a for a in acts if isinstance(a, SendStore)]
        if stores:
            assert self.seq.in_flight == in_flight + 1
            assert stores[0].timestamp >= self.last_ts
            self.last_ts = stores[0].timestamp
        self.apply(acts)

    def deliver(self, idx, status):
        if not self.pending:
            return
        a = self.pending.pop(idx % len(self.pending))
        if status == E.OK:
            self.ok.setdefault((a.lsn, a.wave), set()).add(a.node)
        self.apply(self.seq.on_stored(a.node, a.lsn, a.wave, status))

    def drop(self, idx):
        if self.pending:
            self.pending.pop(idx % len(self.pending))

    def tick(self, dt):
        self.t += dt
        deadline = self.seq.next_deadline()
        if deadline is not None and deadline <= self.t:
            self.apply(self.seq.on_timer())
        assert self.seq.next_deadline() is None or self.seq.next_deadline() > self.t

    def down(self, node):
        self.apply(self.seq.on_node_down(node))

    def sleep(self):
        idle = self.seq.in_flight == 0
        assert self.seq.sleep() == idle
        assert self.seq.dormant == idle

    def up(self, node):
        self.apply(self.seq.on_node_up(node))

    def heal(self):
        """Everything comes back and every STORE is answered OK: all appends complete."""
        for _ in range(200):
            for n in self.seq.nodeset:
                self.up(n)
            while self.pending:
                self.deliver(0, E.OK)
            if self.seq.in_flight == 0:
                break
            self.tick(11.0)  # past blacklist/graylist expiry and any store timeout
        assert self.seq.in_flight == 0
        accepted = {r for r in self.lsn_of if not isinstance(self.answered.get(r), Reject)}
        assert all(isinstance(self.answered.get(r), AckAppend) for r in accepted)
        if accepted:
            assert self.released == max(self.lsn_of[r] for r in accepted)
        assert len(self.acked) == len(accepted)


ERRORS = [E.NOSPC, E.OVERLOADED, E.DISABLED]
# Names repeat to weight the mix: mostly appends and replies, some failures and time.
_OPS = ["append"] * 4 + ["deliver"] * 6 + ["error", "drop", "tick", "tick", "down", "up",
                                          "sleep"]
op = st.tuples(st.sampled_from(_OPS), st.integers(0, 10**6))
TICKS = [0.001, 0.005, 0.01, 0.03, 0.2, 1.0]


@st.composite
def topology(draw):
    n = draw(st.integers(2, 7))
    racks = draw(st.integers(1, 3))
    locations = {i: ("reg", "dc", "cl", "row", f"k{i % racks}") for i in range(n)}
    r = draw(st.integers(1, min(3, n)))
    replication = {"node": r}
    if racks > 1 and r > 1 and draw(st.booleans()):
        replication["rack"] = draw(st.integers(2, min(r, racks)))
    return list(range(n)), replication, locations


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topo=topology(), ops=st.lists(op, min_size=10, max_size=150),
       max_in_flight=st.integers(1, 6), sticky=st.booleans(), seed=st.integers(0, 2**32 - 1),
       max_esn=st.sampled_from([8, 2**20]))
def test_random_interleavings_keep_the_write_path_invariants(topo, ops, max_in_flight, sticky,
                                                             seed, max_esn):
    nodes, replication, locations = topo
    try:
        m = Model(nodes, replication, locations, max_in_flight, sticky, seed, max_esn)
    except InvalidParamError:
        return  # this topology cannot satisfy the property at all
    for name, arg in ops:
        if name == "append":
            m.append(1 + arg % 200)
        elif name == "deliver":
            m.deliver(arg, E.OK)
        elif name == "error":
            m.deliver(arg, ERRORS[arg % len(ERRORS)])
        elif name == "drop":
            m.drop(arg)
        elif name == "tick":
            m.tick(TICKS[arg % len(TICKS)])
        elif name == "down":
            m.down(arg % 8)
        elif name == "sleep":
            m.sleep()
        else:
            m.up(arg % 8)
    m.heal()
    if m.seq.state == SequencerState.EXHAUSTED:
        assert m.next_req > 0
