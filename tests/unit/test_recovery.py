"""Epoch recovery as a state machine (``logdevice.sequencer.recovery``), driven without
sockets: storage nodes are real LogsDBs in a tmp dir, SEAL goes to ``LogsDB.seal``,
digests are served by the real ``ServerReadStream`` with the DIGEST flag, STOREs land
with ``LogsDB.write_records`` and the result is read back by the client's ``ReadStream``.
Time is a fake clock the tests move.
"""

from __future__ import annotations

import asyncio
import random
from collections import deque

import numpy as np
import pytest

from ldcore import lsn as ldlsn
from ldcore.checksum import crc32c
from logdevice.config import make_local_config
from logdevice.epochstore import EpochMetadata, FileEpochStore, TailRecord
from logdevice.errors import E
from logdevice.node.roles.storage_role import StorageRole
from logdevice.node.transport.server import Node
from logdevice.protocol import Gap, Records, Seal, Sealed, Start, StartFlag, Store, Stored
from logdevice.protocol.flags import (
    FLAG_BRIDGE,
    FLAG_CHECKSUM,
    FLAG_HOLE,
    FLAG_WRITTEN_BY_RECOVERY,
)
from logdevice.readstream import ReadStream
from logdevice.readstream.server import ServerReadStream
from logdevice.records import DataRecord, GapRecord, GapType
from logdevice.sequencer import NodeHealth, SendStore
from logdevice.sequencer.digest import Digest, precedence
from logdevice.sequencer.recovery import (
    Done,
    EpochProgress,
    EpochRecovery,
    RecoveryEpoch,
    RecoveryState,
    SendSeal,
    StartDigest,
    StopDigest,
    UpdateEpochStore,
)
from logdevice.shards import AuthoritativeStatus
from logdevice.storage.logsdb import LogsDB
from tests.waiting import async_wait_until

LOG = 3
WBR = FLAG_WRITTEN_BY_RECOVERY


def L(epoch: int, esn: int) -> int:
    return ldlsn.compose(epoch, esn)


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


class Nodes:
    """Storage nodes (LogsDBs) that carry out a recovery's actions, in FIFO order.

    ``down`` nodes drop whatever they are sent; ``mute_stores`` nodes take SEALs and
    digests but never answer STOREs; ``lng[(node, epoch)]`` is what SEALED reports.
    """

    def __init__(self, tmp_path, n: int) -> None:
        self.dbs = {i: LogsDB(tmp_path / f"n{i}") for i in range(n)}
        self.down: set[int] = set()
        self.paused: dict[int, list] = {}  # node -> what it was sent meanwhile
        self.mute_stores: set[int] = set()
        self.lng: dict[tuple[int, int], int] = {}
        self.sent: list = []
        self.payloads: dict[int, tuple[bytes, int] | None] = {}
        self.done: list[Done] = []
        self.epoch_store: FileEpochStore | None = None

    def close(self) -> None:
        for db in self.dbs.values():
            db.close()

    def put(self, node: int, lsn: int, payload: bytes = b"", *, wave: int = 1,
            copyset: tuple[int, ...] = (0, 1), flags: int = 0, ts: int = 1000) -> None:
        """A copy as a sequencer (or an earlier recovery) left it."""
        if payload and not flags & (FLAG_HOLE | FLAG_BRIDGE):
            flags |= FLAG_CHECKSUM
        self.dbs[node].write_records(LOG, [lsn], [ts], [flags], [list(copyset)], payload,
                                     [0, len(payload)], [wave])

    def run(self, rec: EpochRecovery, actions: list) -> None:
        queue = deque(self._capture(rec, a) for a in actions)
        while queue:
            a = queue.popleft()
            self.sent.append(a)
            queue.extend(self._capture(rec, x) for x in self._do(rec, a))

    def _capture(self, rec: EpochRecovery, a):
        """Attach a STORE's payload when it is sent (the node's store sender does)."""
        if isinstance(a, SendStore):
            self.payloads.setdefault(id(a), rec.payload_of(a.request_id))
        return a

    def _do(self, rec: EpochRecovery, a) -> list:
        if isinstance(a, Done):
            self.done.append(a)
            return []
        if isinstance(a, UpdateEpochStore):
            if self.epoch_store is not None:
                self.epoch_store.set_last_clean_epoch(a.log_id, a.last_clean_epoch,
                                                      TailRecord(a.tail_lsn, a.tail_timestamp))
            return rec.on_epoch_store_updated(E.OK)
        if isinstance(a, StopDigest):
            return []
        if a.node in self.down:
            return []
        if a.node in self.paused:
            self.paused[a.node].append(a)
            return []
        db = self.dbs[a.node]
        if isinstance(a, SendSeal):
            sealed = db.seal(a.log_id, a.seal_epoch)
            status = E.PREEMPTED if sealed > a.seal_epoch else E.OK
            return rec.on_sealed(a.node, a.epoch, status, self.lng.get((a.node, a.epoch), 0),
                                 request_id=a.request_id)
        if isinstance(a, StartDigest):
            out = rec.on_digest_started(a.node, a.stream_id, E.OK)
            start = Start(read_stream_id=a.stream_id, log_id=a.log_id, start_lsn=a.start_lsn,
                          until_lsn=a.until_lsn, window_high=a.until_lsn,
                          flags=int(StartFlag.DIGEST))
            stream = ServerReadStream(start, a.node)
            while not stream.done:
                for m in stream.step(db, 0, db.trim_point(a.log_id)):
                    if isinstance(m, Records):
                        out += rec.on_digest_records(a.node, a.stream_id, m.lsns, m.timestamps,
                                                     m.flags, m.waves, m.payloads,
                                                     m.payload_offsets, m.checksums)
                    elif isinstance(m, Gap):
                        out += rec.on_digest_gap(a.node, a.stream_id, m.lo, m.hi)
            return out
        if isinstance(a, SendStore):
            if a.node in self.mute_stores:
                return []
            if a.wave < db.sealed_epoch(a.log_id):  # the storage node's rule for recovery
                return rec.on_stored(a.node, a.lsn, a.wave, E.PREEMPTED)
            payload, checksum = self.payloads.pop(id(a))
            assert not payload or crc32c(payload) == checksum
            db.write_records(a.log_id, [a.lsn], [a.timestamp], [a.flags], [list(a.copyset)],
                             payload, [0, len(payload)], [a.wave])
            return rec.on_stored(a.node, a.lsn, a.wave, E.OK)
        raise AssertionError(a)

    def resume(self, node: int, rec: EpochRecovery) -> None:
        """The paused node reads what it was sent, in order."""
        self.run(rec, self.paused.pop(node))

    # -- reading the result back ------------------------------------------------------------
    def copies(self, lsn: int) -> dict[int, tuple[int, int, bytes, tuple[int, ...]]]:
        """node -> (flags, wave, payload, copyset) of the copies of ``lsn``."""
        out = {}
        for node, db in self.dbs.items():
            rb = db.read_records(LOG, lsn, lsn)
            if len(rb):
                cs = tuple(int(x) for x in rb.copysets[0] if x >= 0)
                out[node] = (int(rb.flags[0]), int(rb.waves[0]), bytes(rb.payload(0)), cs)
        return out

    def read(self, until: int, *, scd: bool = False, replication: int = 2,
             released: int | None = None, nodes=None) -> list:
        """What a client reader delivers from LSN 1 to ``until`` (all nodes answer)."""
        clock = Clock()
        nodes = list(self.dbs) if nodes is None else nodes
        rs = ReadStream(LOG, 1, until, nodes, replication, scd=scd, clock=clock,
                        grace_period=0)
        released = until if released is None else released
        streams: dict[int, ServerReadStream] = {}
        out: list = []
        for _ in range(100):
            for act in rs.take_actions():
                kind = type(act).__name__
                if kind == "SendStart":
                    flags = StartFlag.SINGLE_COPY_DELIVERY if act.scd else 0
                    streams[act.node] = ServerReadStream(Start(
                        read_stream_id=1, log_id=LOG, start_lsn=act.start_lsn,
                        until_lsn=act.until_lsn, window_high=act.window_high,
                        flags=int(flags), filter_version=act.filter_version,
                        known_down=list(act.known_down), replication=replication), act.node)
                    rs.on_started(act.node, E.OK, act.filter_version)
                elif kind == "SendWindow":
                    streams[act.node].on_window(act.window_high, act.filter_version)
                elif kind == "SendStop":
                    streams.pop(act.node, None)
            for node, s in streams.items():
                db = self.dbs[node]
                for m in s.step(db, released, db.trim_point(LOG)):
                    if isinstance(m, Records):
                        rs.on_records(node, m.lsns, m.timestamps, m.flags, m.payloads,
                                      m.payload_offsets, s.filter_version)
                    else:
                        rs.on_gap(node, m.lo, m.hi, m.reason, filter_version=s.filter_version)
            out += rs.poll()
            clock.t += 1.0
            rs.tick()
            if rs.done:
                break
        return out


@pytest.fixture
def nodes(tmp_path):
    made: list[Nodes] = []

    def make(n: int = 5) -> Nodes:
        made.append(Nodes(tmp_path / f"c{len(made)}", n))
        return made[-1]

    yield make
    for c in made:
        c.close()


def recovery(new_epoch: int = 2, epochs=None, *, n: int = 5, replication: int = 2,
             clock=None, **kw) -> EpochRecovery:
    epochs = epochs or [RecoveryEpoch(1, tuple(range(n)), replication)]
    return EpochRecovery(LOG, new_epoch, epochs, clock=clock or Clock(),
                         rng=random.Random(7), **kw)


def kinds(items: list) -> list:
    """Records as (lsn, payload); gaps as (type name, lo, hi)."""
    out = []
    for it in items:
        if isinstance(it, DataRecord):
            out.append((it.lsn, bytes(it.payload)))
        else:
            assert isinstance(it, GapRecord)
            out.append((GapType(it.type).name, it.lo, it.hi))
    return out


# ------------------------------------------------------------------------------ the digest


def test_precedence_rules():
    seq1, seq2 = precedence(0, 1), precedence(0, 2)
    rec_old, rec_new = precedence(WBR, 3), precedence(WBR, 5)
    hole_new = precedence(WBR | FLAG_HOLE, 5)
    assert seq2 > seq1  # sequencer copies: the higher wave
    assert rec_old > seq2 and precedence(WBR, 1) > precedence(0, 99)  # recovery beats sequencer
    assert rec_new > rec_old  # recovery copies: the higher seal epoch
    assert rec_new > hole_new  # tie: the record survives


def test_digest_picks_winner_and_names_conflicts():
    d = Digest(LOG, 1, L(1, 2))
    d.add(0, L(1, 1), 0, 1, 10, b"below lng")  # only its timestamp counts
    d.add(0, L(1, 3), 0, 1, 11, b"wave1")
    d.add(1, L(1, 3), 0, 2, 12, b"wave2")
    d.add(2, L(1, 3), WBR | FLAG_HOLE, 4, 13)  # an earlier recovery plugged it
    d.add(3, L(1, 3), WBR | FLAG_HOLE, 4, 13)
    d.add(1, L(1, 5), 0, 1, 14, b"five")
    plan = d.plan()
    assert [ldlsn.esn_of(p.lsn) for p in plan] == [3, 4, 5, 6]
    three, four, five, bridge = plan
    assert three.is_hole and three.holders == {2, 3} and three.conflicts == {0, 1}
    assert four.is_hole and not four.holders  # nobody has ESN 4: hole plug
    assert five.payload == b"five" and five.flags & WBR and five.holders == {1}
    assert bridge.is_bridge and bridge.flags & WBR and not bridge.payload
    assert d.max_timestamp == 14


def test_digest_higher_seal_epoch_wins_and_bridge_ends_epoch():
    d = Digest(LOG, 4, 0)
    d.add(0, L(4, 1), WBR, 5, 1, b"by recovery 5")
    d.add(1, L(4, 1), WBR, 6, 1, b"by recovery 6")
    d.add(1, L(4, 2), WBR | FLAG_BRIDGE, 6, 1)
    d.add(2, L(4, 3), 0, 1, 1, b"stale copy past the bridge")
    plan = d.plan()
    assert [(ldlsn.esn_of(p.lsn), p.payload) for p in plan] == [(1, b"by recovery 6"),
                                                                (2, b"")]
    assert plan[0].conflicts == {0} and plan[1].is_bridge


def test_empty_digest_is_just_a_bridge():
    plan = Digest(LOG, 2, L(2, 7)).plan()
    assert len(plan) == 1 and plan[0].is_bridge and plan[0].lsn == L(2, 8)
    assert Digest(LOG, 2, L(2, ldlsn.ESN_MAX)).plan() == []  # no room for one


# ------------------------------------------------------------------------------ end to end


def seed_epoch1(c: Nodes) -> dict[int, bytes]:
    """Epoch 1 as a dead sequencer left it: 1..3 fully replicated (LNG e1n3 known on
    N0, N1), e1n4 on N2 only, e1n5 on a node that is gone, e1n6 on N3 only."""
    acked = {}
    for esn, cs in ((1, (0, 1)), (2, (1, 2)), (3, (0, 3))):
        acked[L(1, esn)] = b"acked %d" % esn
        for node in cs:
            c.put(node, L(1, esn), acked[L(1, esn)], copyset=cs)
    c.put(2, L(1, 4), b"partial 4", copyset=(2, 4))
    c.put(3, L(1, 6), b"partial 6", copyset=(3, 1), wave=2)
    c.lng[(0, 1)] = c.lng[(1, 1)] = L(1, 3)
    c.lng[(2, 1)] = L(1, 1)
    return acked


def test_recovery_end_to_end(nodes, tmp_path):
    c = nodes(5)
    acked = seed_epoch1(c)
    c.epoch_store = store = FileEpochStore(tmp_path / "epochs.sqlite")
    store.activate(LOG, EpochMetadata(0, (0, 1, 2, 3, 4), {"node": 2}))
    store.activate(LOG)
    rec = recovery(2, tail=(0, 0))
    c.run(rec, rec.start())
    assert rec.done and c.done == [Done(LOG, E.OK, L(1, 7), 1000, (0, 1, 2, 3, 4))]
    # The digest started at the highest LNG any sealed node reported.
    starts = [a for a in c.sent if isinstance(a, StartDigest)]
    assert {a.start_lsn for a in starts} == {L(1, 3)} and len(starts) == 5
    assert all(db.sealed_epoch(LOG) == 1 for db in c.dbs.values())
    # Re-replicated, plugged and bridged on full copysets, written by recovery with the
    # seal epoch in the wave field.
    for esn, kind in ((4, b"partial 4"), (5, None), (6, b"partial 6"), (7, "bridge")):
        copies = c.copies(L(1, esn))
        rec_copies = {n: v for n, v in copies.items() if v[0] & WBR}
        assert len(rec_copies) == 2, (esn, copies)
        for flags, wave, payload, cs in rec_copies.values():
            assert wave == 1 and set(cs) == set(rec_copies)
            if kind is None:
                assert flags & FLAG_HOLE and payload == b""
            elif kind == "bridge":
                assert flags & FLAG_BRIDGE and payload == b""
            else:
                assert payload == kind and not flags & FLAG_HOLE
    # Nothing at or below LNG was touched.
    for lsn in acked:
        assert not any(v[0] & WBR for v in c.copies(lsn).values())
    # The epoch store: clean up to epoch 1, tail at the bridge.
    state = store.get(LOG)
    assert state.last_clean_epoch == 1 and state.tail == TailRecord(L(1, 7), 1000)
    store.close()
    # Readers (all-send-all and SCD) see the same: records, a HOLE, a BRIDGE to epoch 2.
    want = [(lsn, acked[lsn]) for lsn in sorted(acked)]
    want = [("BRIDGE", 1, L(1, 0))] + want + [
        (L(1, 4), b"partial 4"), ("HOLE", L(1, 5), L(1, 5)), (L(1, 6), b"partial 6"),
        ("BRIDGE", L(1, 7), L(1, ldlsn.ESN_MAX))]
    assert kinds(c.read(L(1, ldlsn.ESN_MAX), released=L(1, 7))) == want
    assert kinds(c.read(L(1, ldlsn.ESN_MAX), released=L(1, 7), scd=True)) == want


def test_waits_for_fmajority_of_seals_with_backoff(nodes):
    c = nodes(5)  # R=2: an f-majority is 4 nodes
    seed_epoch1(c)
    clock = Clock()
    c.down = {3, 4}
    rec = recovery(2, clock=clock, seal_timeout=(0.5, 2.0), seal_attempts=8)
    c.run(rec, rec.start())
    assert rec.state == RecoveryState.SEALING
    assert not any(isinstance(a, StartDigest) for a in c.sent)
    resent = []
    for _ in range(3):
        clock.t = rec.next_deadline()
        resent.append(clock.t)
        before = len(c.sent)
        c.run(rec, rec.on_timer())
        assert {a.node for a in c.sent[before:] if isinstance(a, SendSeal)} == {3, 4}
    assert np.allclose(np.diff(resent), [1.0, 2.0])  # 0.5, 1, 2 (capped at 2)
    # N3 comes back: 4 sealed nodes make an f-majority, recovery goes on without N4.
    c.down = {4}
    clock.t = rec.next_deadline()
    c.run(rec, rec.on_timer())
    assert rec.state == RecoveryState.DIGESTING  # N4 may still answer: grace period
    clock.t = rec.next_deadline()
    c.run(rec, rec.on_timer())
    assert rec.done and c.done[-1].status == E.OK
    assert not c.copies(L(1, 7)).keys() & {4}


def test_no_grace_period_for_nodes_known_down(nodes):
    c = nodes(5)
    seed_epoch1(c)
    c.down = {4}
    health = NodeHealth()
    health.mark_down(4)  # the failure detector says so
    rec = recovery(2, health=health)
    c.run(rec, rec.start())
    assert rec.done and c.done[-1].status == E.OK


def test_gives_up_without_fmajority(nodes):
    c = nodes(5)
    clock = Clock()
    c.down = {2, 3}
    rec = recovery(2, clock=clock, seal_timeout=(0.5, 1.0), seal_attempts=3)
    c.run(rec, rec.start())
    for _ in range(10):
        deadline = rec.next_deadline()
        if deadline is None:
            break
        clock.t = deadline
        c.run(rec, rec.on_timer())
    assert rec.done and c.done[-1].status == E.TIMEDOUT
    assert sum(isinstance(a, SendSeal) and a.node == 2 for a in c.sent) == 3


def test_authoritative_empty_nodes_are_not_waited_for(nodes):
    c = nodes(5)
    seed_epoch1(c)
    c.down = {3, 4}
    # N4 was rebuilt away: 4 effective nodes, an f-majority is 3 of them.  N3 still
    # counts, so the digest waits out the grace period for it.
    clock = Clock()
    rec = recovery(2, clock=clock, authoritative={4: AuthoritativeStatus.AUTHORITATIVE_EMPTY})
    c.run(rec, rec.start())
    assert rec.state == RecoveryState.DIGESTING
    clock.t += 0.2
    c.run(rec, rec.on_timer())
    assert c.done and c.done[-1].status == E.OK
    # With N3 marked UNDERREPLICATION too, nobody is waited for at all.
    c2 = nodes(5)
    seed_epoch1(c2)
    c2.down = {3, 4}
    rec2 = recovery(2, authoritative={4: AuthoritativeStatus.AUTHORITATIVE_EMPTY,
                                      3: AuthoritativeStatus.UNDERREPLICATION})
    c2.run(rec2, rec2.start())
    assert c2.done and c2.done[-1].status == E.OK


def test_silent_store_target_gets_replaced(nodes):
    c = nodes(4)
    c.put(0, L(1, 1), b"only copy", copyset=(0, 1))
    clock = Clock()
    c.mute_stores = {1, 2}  # sealed and digested, then silent
    rec = recovery(2, n=4, clock=clock, store_timeout=(0.1, 1.0))
    c.run(rec, rec.start())
    assert rec.state == RecoveryState.MUTATING
    for _ in range(20):
        if rec.done:
            break
        clock.t = rec.next_deadline()
        c.run(rec, rec.on_timer())
    assert c.done[-1].status == E.OK
    for lsn in (L(1, 1), L(1, 2)):
        copies = {n: v for n, v in c.copies(lsn).items() if v[0] & WBR}
        assert set(copies) == {0, 3}, copies  # the only copyset avoiding N1 and N2


def test_store_attempts_are_bounded(nodes):
    c = nodes(3)
    clock = Clock()
    c.mute_stores = {0, 1, 2}
    rec = recovery(2, n=3, clock=clock, store_timeout=(0.1, 0.2), store_attempts=3)
    c.run(rec, rec.start())
    for _ in range(20):
        if rec.done:
            break
        clock.t = rec.next_deadline()
        c.run(rec, rec.on_timer())
    assert c.done[-1].status == E.FAILED
    assert sum(isinstance(a, SendStore) for a in c.sent) == 3 * 2


def test_preempted_by_a_newer_seal(nodes):
    c = nodes(3)
    c.dbs[1].seal(LOG, 5)  # a sequencer of epoch 6 got there first
    rec = recovery(2, n=3)
    c.run(rec, rec.start())
    assert c.done[-1].status == E.PREEMPTED
    rec3 = recovery(3, [RecoveryEpoch(1, (0, 1, 2), 2), RecoveryEpoch(2, (0, 1, 2), 2)])
    seals = [a for a in rec3.start() if isinstance(a, SendSeal)]
    assert len(seals) == 6 and {a.seal_epoch for a in seals} == {2}
    out = rec3.on_sealed(0, 1, E.PREEMPTED)
    assert out and out[-1].status == E.PREEMPTED and rec3.done
    assert rec3.on_sealed(1, 1, E.OK) == []  # over: late replies change nothing


def test_several_epochs_with_their_own_nodesets(nodes, tmp_path):
    c = nodes(5)
    c.put(0, L(1, 1), b"e1 a", copyset=(0, 1))
    c.put(1, L(1, 1), b"e1 a", copyset=(0, 1))
    c.put(1, L(1, 2), b"e1 partial", copyset=(1, 2))
    c.put(3, L(2, 1), b"e2 partial", copyset=(3, 4))
    c.lng[(0, 1)] = L(1, 1)
    epochs = [RecoveryEpoch(1, (0, 1, 2), 2), RecoveryEpoch(2, (2, 3, 4), 2)]
    rec = recovery(3, epochs)
    c.run(rec, rec.start())
    done = c.done[-1]
    assert done.status == E.OK and done.last_released == L(2, 2)
    assert done.nodes == (0, 1, 2, 3, 4)
    assert {a.node for a in c.sent if isinstance(a, SendSeal) and a.epoch == 2} == {2, 3, 4}
    assert all(db.sealed_epoch(LOG) == 2 for i, db in c.dbs.items())
    assert set(c.copies(L(1, 3))) <= {0, 1, 2} and set(c.copies(L(2, 2))) <= {2, 3, 4}
    want = [("BRIDGE", 1, L(1, 0)), (L(1, 1), b"e1 a"), (L(1, 2), b"e1 partial"),
            ("BRIDGE", L(1, 3), L(1, ldlsn.ESN_MAX)), ("BRIDGE", L(2, 0), L(2, 0)),
            (L(2, 1), b"e2 partial"), ("BRIDGE", L(2, 2), L(2, ldlsn.ESN_MAX))]
    assert kinds(c.read(L(2, ldlsn.ESN_MAX), released=L(2, 2))) == want


def test_second_recovery_keeps_what_an_interrupted_one_decided(nodes):
    c = nodes(4)
    c.put(0, L(1, 1), b"one", copyset=(0, 1))
    c.put(0, L(1, 3), b"three", copyset=(0, 1))
    c.down = {3}  # holds a copy of e1n2 the first recovery cannot see
    c.put(3, L(1, 2), b"two", copyset=(3, 2))
    clock = Clock()
    first = recovery(2, n=4, clock=clock)
    c.mute_stores = {1, 2}  # only N0 stores: the first recovery never finishes
    c.run(first, first.start())
    clock.t += 0.2
    c.run(first, first.on_timer())
    assert first.state == RecoveryState.MUTATING
    plugged = c.copies(L(1, 2))
    assert plugged[0][0] & FLAG_HOLE and plugged[0][1] == 1
    # A newer sequencer recovers again; now N3 answers with its sequencer copy of e1n2,
    # but the hole plug written by recovery wins.
    c.down, c.mute_stores = set(), set()
    second = recovery(3, [RecoveryEpoch(1, (0, 1, 2, 3), 2), RecoveryEpoch(2, (0, 1, 2, 3), 2)])
    c.run(second, second.start())
    assert c.done[-1].status == E.OK
    assert c.done[-1].last_released == L(2, 1)
    # The first recovery's late STOREs are refused: sealed by the newer sequencer.
    late = first.on_timer(now=clock.t + 100)
    c.run(first, late)
    assert c.done[-1].status == E.PREEMPTED
    items = kinds(c.read(L(2, ldlsn.ESN_MAX), released=L(2, 1)))
    assert (L(1, 2), b"two") not in items and ("HOLE", L(1, 2), L(1, 2)) in items
    assert items[-1] == ("BRIDGE", L(2, 1), L(2, ldlsn.ESN_MAX))
    for node, (flags, *_rest) in c.copies(L(1, 2)).items():
        assert flags & FLAG_HOLE, node  # N3's stale copy was overwritten too


def test_nothing_to_recover_goes_straight_to_the_epoch_store():
    rec = EpochRecovery(LOG, 5, [], clock=Clock(), tail=(L(3, 9), 77))
    out = rec.start()
    assert out == [UpdateEpochStore(LOG, 4, L(3, 9), 77)]
    assert rec.on_epoch_store_updated(E.OK) == [Done(LOG, E.OK, L(3, 9), 77, ())]


def test_epoch_store_failures_are_retried():
    clock = Clock()
    rec = EpochRecovery(LOG, 2, [], clock=clock, epoch_store_attempts=2,
                        store_timeout=(0.5, 1.0))
    assert isinstance(rec.start()[0], UpdateEpochStore)
    assert rec.on_epoch_store_updated(E.TIMEDOUT) == []
    clock.t = rec.next_deadline()
    assert clock.t == pytest.approx(100.5)
    assert isinstance(rec.on_timer()[0], UpdateEpochStore)
    out = rec.on_epoch_store_updated(E.TIMEDOUT)
    assert out[-1].status == E.TIMEDOUT and rec.done


def test_node_left_out_of_the_digest_gets_the_decisions(nodes):
    c = nodes(5)
    seed_epoch1(c)
    clock = Clock()
    c.paused[4] = []  # stopped (its sockets keep what arrives) during the whole recovery
    rec = recovery(2, clock=clock)
    c.run(rec, rec.start())
    clock.t += 0.2  # the digest grace period: go on without N4
    c.run(rec, rec.on_timer())
    assert c.done[-1].status == E.OK
    # N4 processes the dead sequencer's STORE of e1n5 (queued before our SEAL), then our
    # SEAL and the decisions: its stale copy does not survive the hole plug.
    c.put(4, L(1, 5), b"stale, never acked", copyset=(4, 0))
    c.resume(4, rec)
    flags, wave, payload, _ = c.copies(L(1, 5))[4]
    assert flags & FLAG_HOLE and flags & WBR and wave == 1 and payload == b""
    assert c.dbs[4].sealed_epoch(LOG) == 1
    items = kinds(c.read(L(1, ldlsn.ESN_MAX), released=L(1, 7)))
    assert ("HOLE", L(1, 5), L(1, 5)) in items and all(
        x[0] != L(1, 5) for x in items)
    # A STORE of the dead sequencer processed after our SEAL is refused.
    assert c.dbs[4].sealed_epoch(LOG) >= ldlsn.epoch_of(L(1, 5))


def test_progress_says_who_took_part_and_what_recovery_wrote(nodes):
    c = nodes(5)
    seed_epoch1(c)
    clock = Clock()
    c.paused[4] = []
    rec = recovery(2, clock=clock)
    everyone = (0, 1, 2, 3, 4)
    assert rec.progress() == [EpochProgress(1, RecoveryState.SEALING, everyone, (), (), 0, 0,
                                            0, 0, 0)]
    c.run(rec, rec.start())
    # N4 never answers: the digest waits out its grace period without it.
    (p,) = rec.progress()
    assert (p.state, p.sealed, p.digested, p.lng) == (
        RecoveryState.DIGESTING, (0, 1, 2, 3), (0, 1, 2, 3), L(1, 3))
    clock.t += 0.2
    c.run(rec, rec.on_timer())
    assert c.done[-1].status == E.OK
    # e1n4 and e1n6 re-replicated, e1n5 plugged, the bridge at e1n7.
    assert rec.progress() == [EpochProgress(1, RecoveryState.CLEAN, everyone, (0, 1, 2, 3),
                                            (0, 1, 2, 3), L(1, 3), 2, 1, L(1, 7), 0)]


def test_driver_rows_follow_the_recovery_and_its_outcome(nodes):
    from types import SimpleNamespace

    from logdevice.node.roles.recovery_driver import RecoveryDriver, RecoveryRow
    from logdevice.protocol import RecoveryList, table_columns

    assert RecoveryRow._fields == table_columns(RecoveryList)
    c = nodes(5)
    seed_epoch1(c)
    clock = Clock()
    owner = SimpleNamespace(node=SimpleNamespace(loop=SimpleNamespace(time=clock)))
    rec = recovery(3, [RecoveryEpoch(1, (0, 1, 2, 3, 4), 2), RecoveryEpoch(2, (0, 1, 2), 2)],
                   clock=clock)
    driver = RecoveryDriver(owner, SimpleNamespace(log_id=LOG), rec, 1, None, {})
    clock.t += 1.5
    rows = driver.rows(clock())
    assert [(r.log_id, r.epoch, r.seal_epoch, r.attempt, r.state, r.outcome) for r in rows] \
        == [(LOG, 1, 2, 2, "sealing", ""), (LOG, 2, 2, 2, "sealing", "")]
    assert all(r.duration_ms == 1500 and r.last_clean_epoch == 0 for r in rows)
    c.run(rec, rec.start())
    driver.ended = clock.t = clock.t + 0.5
    rows = driver.rows(clock.t + 60)  # a finished recovery's duration stays put
    assert [(r.epoch, r.state, r.outcome, r.last_clean_epoch, r.duration_ms) for r in rows] \
        == [(1, "done", "OK", 2, 2000), (2, "done", "OK", 2, 2000)]
    assert (rows[0].records, rows[0].holes, rows[0].bridge) == (2, 1, L(1, 7))
    # Epoch 2 has nothing past its last known good: just a bridge record.
    assert (rows[1].records, rows[1].holes, rows[1].bridge) == (0, 0, L(2, 1))
    failed = recovery(3, clock=clock)
    driver = RecoveryDriver(owner, SimpleNamespace(log_id=LOG), failed, 0, None, {})
    failed.abort(E.PREEMPTED, "sealed by N3")
    (row,) = driver.rows(clock())
    assert (row.state, row.outcome, row.message, row.last_clean_epoch) == (
        "failed", "PREEMPTED", "sealed by N3", 0)


# ------------------------------------------------------------------------------ storage side


class _Peer:
    """An in-process connection end that collects what the role sends."""

    _ids = iter(range(5000, 10**6))

    def __init__(self, role: str = "node", node: int | None = 1) -> None:
        self.id = next(self._ids)
        self.peer_role = role
        self.peer_node = node
        self.closed = False
        self.attrs: dict = {}
        self.sent: list = []

    def send(self, msg) -> bool:
        self.sent.append(msg)
        return True

    def send_many(self, msgs) -> bool:
        self.sent += list(msgs)
        return True

    def pause_reading(self, reason: str) -> None:
        pass

    def resume_reading(self, reason: str) -> None:
        pass


def _store(rid: int, epoch: int, esns, lng: int = 0, recovery_epoch: int = 0) -> Store:
    n = len(esns)
    return Store(request_id=rid, log_id=LOG, epoch=epoch, last_known_good=lng,
                 recovery_epoch=recovery_epoch,
                 lsns=np.array([L(epoch, e) for e in esns], np.uint64),
                 timestamps=np.full(n, 1000, np.int64), flags=np.zeros(n, np.uint32),
                 waves=np.ones(n, np.uint32), copysets=np.array([[0, 1]] * n, np.int16),
                 payload_offsets=np.zeros(n + 1, np.uint64), payloads=b"")


def test_storage_role_seal(tmp_path):
    cfg = make_local_config(3, 2, logs=range(1, 11), root=tmp_path, ports=[1, 2, 3])

    async def reply(peer: _Peer, kind: type):
        await async_wait_until(lambda: any(isinstance(m, kind) for m in peer.sent), 10,
                               message=f"no {kind.__name__} sent")
        found = [m for m in peer.sent if isinstance(m, kind)]
        peer.sent.clear()
        return found[-1]

    # The epoch store has issued epochs 1 and 2 (nodes refuse epochs it has not).
    with FileEpochStore(tmp_path / "epochs.sqlite") as store:
        for _ in range(2):
            store.activate(LOG, EpochMetadata(0, (0, 1, 2), {"node": 2}))

    async def main() -> None:
        node = Node(cfg, 0)
        with LogsDB(tmp_path / "db") as db:
            role = StorageRole(node, db)
            node.add_role(role)
            assert Seal in role.handlers()
            on_store, on_seal = role.handlers()[Store], role.handlers()[Seal]
            await role.start()
            seq = _Peer()
            on_store(seq, _store(1, 1, [1, 2, 3], lng=L(1, 2)))
            assert (await reply(seq, Stored)).status == E.OK
            on_seal(seq, Seal(request_id=7, log_id=LOG, seal_epoch=1, epoch=1))
            sealed = await reply(seq, Sealed)
            assert (sealed.status, sealed.request_id, sealed.epoch, sealed.node_index) == (
                E.OK, 7, 1, 0)
            assert sealed.last_known_good == L(1, 2) and sealed.max_seen_lsn == L(1, 3)
            assert db.sealed_epoch(LOG) == 1
            # The old sequencer is refused; recovery (seal epoch 1) is not.
            on_store(seq, _store(2, 1, [4]))
            assert (await reply(seq, Stored)).status == E.PREEMPTED
            on_store(seq, _store(3, 1, [4], recovery_epoch=1))
            assert (await reply(seq, Stored)).status == E.OK
            # Recovery copies do not count as the epoch's LNG; a newer epoch is untouched.
            on_store(seq, _store(4, 2, [1], lng=L(2, 1)))
            assert (await reply(seq, Stored)).status == E.OK
            on_seal(seq, Seal(request_id=8, log_id=LOG, seal_epoch=1, epoch=1))
            assert (await reply(seq, Sealed)).last_known_good == L(1, 2)
            # A lower seal than the one in force: PREEMPTED, naming the seal.
            on_seal(seq, Seal(request_id=9, log_id=LOG, seal_epoch=2, epoch=2))
            assert (await reply(seq, Sealed)).last_known_good == L(2, 1)
            on_seal(seq, Seal(request_id=10, log_id=LOG, seal_epoch=1, epoch=1))
            late = await reply(seq, Sealed)
            assert (late.status, late.seal_epoch) == (E.PREEMPTED, 2)
            # Epochs the store has not issued are refused, STOREs and SEALs alike.
            on_store(seq, _store(13, 3, [1]))
            assert (await reply(seq, Stored)).status == E.INVALID_PARAM
            on_seal(seq, Seal(request_id=14, log_id=LOG, seal_epoch=2**64 - 1))
            assert (await reply(seq, Sealed)).status == E.INVALID_PARAM
            assert db.sealed_epoch(LOG) == 2
            # Only nodes seal; unknown logs are NOTFOUND.
            client = _Peer("client", None)
            on_seal(client, Seal(request_id=11, log_id=LOG, seal_epoch=3))
            assert client.sent[-1].status == E.ACCESS and db.sealed_epoch(LOG) == 2
            on_seal(seq, Seal(request_id=12, log_id=999, seal_epoch=3))
            assert (await reply(seq, Sealed)).status == E.NOTFOUND
            await role.stop()
            role.close()

    asyncio.run(main())
