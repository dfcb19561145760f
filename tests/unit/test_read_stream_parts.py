"""The parts ReadStream is composed of, each through its own interface: Senders, the
GapDetector, the ScdController and Delivery (RecordWindow: test_read_stream_delivery)."""

from __future__ import annotations

import numpy as np

from ldcore import codec
from logdevice.protocol.flags import FLAG_BRIDGE, FLAG_BUFFERED_WRITER_BLOB, FLAG_HOLE
from logdevice.readstream.actions import SendStart, SendStop, SendWindow
from logdevice.readstream.delivery import Delivery
from logdevice.readstream.fmajority import (
    AuthoritativeStatus,
    FailureDomainNodeSet,
    FMajorityResult,
)
from logdevice.readstream.gaps import GapDetector
from logdevice.readstream.scd import ScdController
from logdevice.readstream.sender import Senders
from logdevice.readstream.window import RecordWindow
from logdevice.record_columns import RecordColumns
from logdevice.records import DataRecord, GapRecord, GapType

E = 1 << 32


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _senders(nodes=(1, 2, 3), until=100, clock=None) -> Senders:
    return Senders(nodes, until, clock or Clock(), 0.125, 0.5)


# ------------------------------------------------------------------ senders


def test_senders_messages_versions_and_reconnects():
    clock = Clock()
    ss = _senders(clock=clock)
    assert [s.node for s in ss] == [1, 2, 3] == [s.node for s in ss.states]
    assert len(ss) == 3 and 2 in ss and 9 not in ss and ss.get(9) is None
    ss.send_start(ss[1], 5, 20, None)
    ss.send_start(ss[2], 5, 20, (3,))
    ss.send_window(ss[1], 30)
    ss.send_stop_all()
    assert ss.take_actions() == [SendStart(1, 5, 100, 20, False, (), 1),
                                 SendStart(2, 5, 100, 20, True, (3,), 1),
                                 SendWindow(1, 30, 1),
                                 SendStop(1), SendStop(2), SendStop(3)]
    assert ss.take_actions() == []
    assert ss[1].window_sent == 30 and ss[2].window_sent == 20
    # Filter versions: a reply to an older START is dropped; one without a version
    # counts once the node acknowledged the current one.
    ss.new_version()
    assert ss.filter_version == 2
    assert ss.accept(1, 1) is None and ss.accept(1, None) is None
    assert ss.accept(1, 2) is ss[1] and ss.accept(1, None) is ss[1]
    assert ss.accept(9, 2) is None
    # Reconnect backoff doubles up to the max; started() resets it.
    s = ss[3]
    for now, at in ((0.0, 0.125), (0.125, 0.375), (0.375, 0.875), (0.875, 1.375)):
        clock.t = now
        ss.schedule_reconnect(s)
        assert s.reconnect_at == at and ss.next_reconnect() == at
        assert ss.due_reconnects(at - 0.01) == [] and ss.due_reconnects(at) == [s]
        ss.send_start(s, 5, 20, None)
        assert s.reconnect_at is None
    ss.started(s)
    assert s.connected and s.acked_version == 2
    assert ss.next_reconnect() is None
    clock.t = 2.0  # the backoff starts over
    ss.schedule_reconnect(s)
    assert s.reconnect_at == 2.125


def test_sender_state_updates():
    ss = _senders()
    s = ss[1]
    s.advance_to(10)
    assert s.next_lsn == 10
    s.advance_to(5)
    assert s.next_lsn == 10 and not ss.any_passed(10) and ss.any_passed(9)
    s.checksum_failed(12, 10)
    assert s.next_lsn == 13 and s.bad_until == 13
    assert s.gap_state(10) == (1, 12) and s.gap_state(12) == (2, 13)


# ---------------------------------------------------------------- gap detector


S = E + 5000  # far from the start of its epoch: a gap here is DATALOSS


def _detector(nodes=(1, 2, 3), r=2, grace=0.5, start=S, until=S + 100, seq_window=1000,
              buffer=8):
    clock = Clock()
    ss = _senders(nodes, until, clock)
    win = RecordWindow(start, until, buffer, 0.7)
    fmaj = FailureDomainNodeSet(nodes, r)
    return GapDetector(start, until, ss.states, win, fmaj, clock, grace, seq_window, True), \
        ss, win, fmaj, clock


def test_gap_detector_fmajority_complete_and_incomplete():
    gd, ss, _, _, clock = _detector()
    assert gd.gaps_at(S, False) == ()  # nobody answered
    ss[1].advance_to(S + 4)
    assert gd.gaps_at(S, False) == ()  # 1 of 3, R=2: no f-majority
    ss[2].advance_to(S + 6)
    # An f-majority, but node 3 is silent: wait out the grace period.
    assert gd.gaps_at(S, False) == () and gd.grace_deadline == 0.5
    clock.t = 0.4
    assert not gd.grace_due(0.4) and gd.gaps_at(S, False) == ()
    assert gd.grace_deadline == 0.5  # not restarted
    assert gd.grace_due(0.5) and gd.grace_deadline is None
    # Up to the first LSN some node may have: S + 4.
    assert gd.gaps_at(S, True) == ((GapType.DATALOSS, S, S + 3),)
    # Everyone answered: at once.  Not at all when the stream says no f-majority (SCD).
    ss[3].advance_to(S + 8)
    gd.set_fmajority(False)
    assert gd.gaps_at(S, False) == ()
    gd.set_fmajority(True)
    assert gd.gaps_at(S, False) == ((GapType.DATALOSS, S, S + 3),)
    gd.cancel_grace()
    assert gd.grace_deadline is None


def test_alike_node_sets_share_their_shape_but_not_their_statuses():
    """Node sets built alike (a reader builds one per log) start from one shared shape;
    a node's status changed in one of them changes nothing in the others."""
    a, b = FailureDomainNodeSet((1, 2, 3), 2), FailureDomainNodeSet([1, 2, 3], {"node": 2})
    a.set_status(3, AuthoritativeStatus.AUTHORITATIVE_EMPTY)
    a.set_status(2, AuthoritativeStatus.UNDERREPLICATION)
    assert tuple(a.effective) == (1, 2) and a.counting == {1}
    assert tuple(b.effective) == (1, 2, 3) and b.counting == {1, 2, 3}
    assert FailureDomainNodeSet((1, 2, 3), 2).counting == {1, 2, 3}
    assert b.replication_factor == 2 and b.check({1, 2}) == FMajorityResult.AUTHORITATIVE_INCOMPLETE
    assert a.check({1}) == FMajorityResult.AUTHORITATIVE_COMPLETE


def test_gap_detector_bridges():
    # ESN 0 of an epoch whose first record is buffered: a bridge, even without f-majority.
    gd, ss, win, _, _ = _detector(start=2 * E, until=3 * E)
    win.insert(np.array([2 * E + 1], dtype=np.uint64), np.zeros(1, dtype=np.int64),
               np.zeros(1, dtype=np.uint32), np.zeros(0, dtype=np.uint8),
               np.zeros(2, dtype=np.int64))
    assert win.holds(2 * E + 1) and win.first_filled() == 2 * E + 1
    gd.set_fmajority(False)
    assert gd.gaps_at(2 * E, False) == ((GapType.BRIDGE, 2 * E, 2 * E),)
    # A gap reaching into a later epoch is a bridge; with sequencer_window 0 it is split
    # at the later epoch's ESN 0.
    for seq_window, expect in ((1000, ((GapType.BRIDGE, E + 5, 2 * E + 2),)),
                               (0, ((GapType.BRIDGE, E + 5, 2 * E),
                                    (GapType.DATALOSS, 2 * E + 1, 2 * E + 2)))):
        gd, ss, _, _, _ = _detector(start=E + 1, until=3 * E, seq_window=seq_window)
        for s in ss:
            s.advance_to(2 * E + 3)
        assert gd.gaps_at(E + 5, False) == expect


def test_gap_detector_follows_authoritative_status():
    gd, ss, _, fmaj, _ = _detector()
    ss[1].advance_to(S + 4)
    ss[2].advance_to(S + 4)
    fmaj.set_status(3, AuthoritativeStatus.AUTHORITATIVE_EMPTY)
    # Node 3 left the nodeset: 1 and 2 are every counting node, no grace period.
    assert gd.gaps_at(S, False) == ((GapType.DATALOSS, S, S + 3),)
    # Near the start of an epoch, at the stream's start: a bridge.
    gd, ss, _, _, _ = _detector(start=E + 1, until=E + 100)
    for s in ss:
        s.advance_to(E + 5)
    assert gd.gaps_at(E + 1, False) == ((GapType.BRIDGE, E + 1, E + 4),)


# ------------------------------------------------------------------ SCD controller


def _scd(nodes=(1, 2, 3), until=100, scd=True):
    clock = Clock()
    ss = _senders(nodes, until, clock)
    win = RecordWindow(1, until, 8, 0.7)
    fmaj = FailureDomainNodeSet(nodes, 2)
    return ScdController(scd, 1, until, ss, win, fmaj, clock, 2.0, 10.0), ss, win, clock


def test_scd_controller_known_down_and_rewinds():
    sc, ss, _, clock = _scd()
    assert sc.active and sc.known_down == frozenset() and sc.start_known_down() == ()
    assert sc.mark_down(2, 1) and not sc.mark_down(2, 1)
    assert sc.known_down == {2} and sc.start_known_down() == (2,)
    assert sc.after_progress(1)  # the rewind goes out at the end of the event
    assert sc.begin_rewind(1) and not sc.rewind_pending and sc.active
    # Node 2 ships again: it comes off the list at the next window slide.
    ss[2].shipped_record = True
    sc.on_slide(1)
    assert sc.rewind_pending and sc.known_down == frozenset()
    assert sc.begin_rewind(1)
    # No rewind past until_lsn.
    sc.mark_down(3, 101)
    assert not sc.rewind_pending
    assert not sc.begin_rewind(101)
    # All-send-all for good: nothing to mark, no START carries a list.
    sc.force_no_scd(1)
    assert sc.after_progress(1) and sc.begin_rewind(1)
    assert not sc.active and sc.start_known_down() is None and not sc.mark_down(1, 1)
    ss[1].shipped_record = True
    sc.on_slide(1)
    assert not sc.rewind_pending  # not wanted any more


def test_scd_controller_failover_and_timers():
    sc, ss, _, clock = _scd()
    # Every node has passed LSN 1: nobody can ship it, fall back to all-send-all.
    for s in ss:
        s.advance_to(3)
    assert sc.after_progress(1) and sc.begin_rewind(1)
    assert not sc.active
    # Back to SCD at a window slide.
    sc.on_slide(1)
    assert sc.rewind_pending and sc.begin_rewind(1) and sc.active
    # A stall: node 1 has passed the read pointer, 2 and 3 are silent.
    for s in ss:
        s.reset_for_start()
    ss[1].advance_to(5)
    clock.t = 1.0
    assert not sc.after_progress(1)
    assert sc.deadline(1) == 3.0  # scd_timeout after the stall began
    sc.run_timers(2.9, 1)
    assert not sc.rewind_pending
    sc.run_timers(3.0, 1)
    assert sc.rewind_pending and sc.known_down == {2, 3}
    assert sc.deadline(1) is None  # the rewind goes out with the event
    sc.progressed()
    assert sc.begin_rewind(1)


def test_scd_controller_starts_in_all_send_all_without_shippers():
    clock = Clock()
    ss = _senders((1, 2), 100, clock)
    for s in ss:
        s.connected = False
    sc = ScdController(True, 1, 100, ss, RecordWindow(1, 100, 8, 0.7),
                       FailureDomainNodeSet((1, 2), 2), clock, 2.0, 10.0)
    assert not sc.active and sc.known_down == frozenset()


# ------------------------------------------------------------------------ delivery


def _chunk(lsns, flags, payloads):
    offs = np.cumsum([0] + [len(p) for p in payloads]).astype(np.int64)
    buf = np.frombuffer(b"".join(payloads), dtype=np.uint8) if any(payloads) \
        else np.zeros(0, dtype=np.uint8)
    n = len(lsns)
    return RecordColumns(np.asarray(lsns, dtype=np.uint64), np.arange(n, dtype=np.int64),
                         np.asarray(flags, dtype=np.uint32), buf, offs)


def test_delivery_runs_pseudo_records_and_blobs():
    d = Delivery(7, 1, 100)
    assert not d.pending and d.consumed == 1
    blob = codec.encode([b"p", b"q"])
    assert d.add_run(_chunk([1, 2, 3, 4], [0, FLAG_HOLE, FLAG_BUFFERED_WRITER_BLOB, 0],
                            [b"a", b"", blob, b"d"])) is None
    d.add_gap(GapType.DATALOSS, 5, 6)
    assert d.pending
    got = d.take(max_items=3)
    assert got == [DataRecord(7, 1, 0, b"a"), GapRecord(7, GapType.HOLE, 2, 2),
                   DataRecord(7, 3, 2, b"p", 0)]
    assert d.consumed == 4  # LSN 3 still has a row to hand out
    batch = d.take_batch()
    assert batch.lsns.tolist() == [3, 4] and batch.batch_offsets.tolist() == [1, 0]
    assert [bytes(batch.payload(i)) for i in range(2)] == [b"q", b"d"]
    assert batch.gaps == [GapRecord(7, GapType.DATALOSS, 5, 6)]
    assert d.consumed == 7 and not d.pending


def test_delivery_bridge_record_ends_its_epoch():
    d = Delivery(7, E + 1, 5 * E)
    skip = d.add_run(_chunk([E + 1, E + 2], [0, FLAG_BRIDGE | FLAG_HOLE], [b"a", b""]))
    assert skip == 2 * E
    assert [x if isinstance(x, GapRecord) else x.lsn for x in d.take()] == [
        E + 1, GapRecord(7, GapType.BRIDGE, E + 2, 2 * E - 1)]
    # A blob that does not decode: its payloads are lost for every reader alike.
    d.add_run(_chunk([2 * E + 1], [FLAG_BUFFERED_WRITER_BLOB], [b"junk"]))
    assert d.take() == [GapRecord(7, GapType.DATALOSS, 2 * E + 1, 2 * E + 1)]
