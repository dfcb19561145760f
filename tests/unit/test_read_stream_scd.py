"""ReadStream: single copy delivery failover, rewinds, connections, authoritative status."""

from __future__ import annotations

from logdevice.errors import E
from logdevice.readstream import AuthoritativeStatus, GapReason, SendStart, SendWindow
from tests.unit.test_read_stream import lsn, make, records, show

UNTIL = 10_000
AS = AuthoritativeStatus


def starts(acts, start, window_high, scd, kd, fv):
    nodes = sorted({a.node for a in acts}) if acts else []
    return acts == [SendStart(n, start, UNTIL, window_high, scd, kd, fv) for n in nodes]


def started_all(rs, fv, nodes=(0, 1, 2)):
    for n in nodes:
        rs.on_started(n, E.OK, fv)


# ---------------------------------------------------------------- SCD failover


def test_scd_start_flags():
    rs, _ = make(nodes=(0, 1, 2), r=2, scd=True, buffer_size=4)
    assert starts(rs.take_actions(), 1, 4, True, (), 1)
    assert rs.scd_active


def test_scd_node_stuck_goes_known_down():
    rs, clock = make(nodes=(0, 1, 2), r=2, scd=True, buffer_size=4, scd_timeout=1.0,
                     scd_all_send_all_timeout=5.0)
    rs.take_actions()
    # LSN 1 is node 0's to ship; it hangs.  Nodes 1 and 2 ship 2 and 3.
    records(rs, 1, 2)
    records(rs, 2, 3)
    assert rs.poll() == []
    assert rs.take_actions() == []
    clock.advance(0.75)
    assert rs.poll() == [] and rs.take_actions() == []
    clock.advance(0.25)
    assert rs.poll() == []
    assert starts(rs.take_actions(), 1, 4, True, (0,), 2)
    assert rs.known_down == {0}
    # Anything from before the rewind is ignored, with or without a version stamp.
    records(rs, 1, 1)
    records(rs, 1, 1, filter_version=1)
    assert rs.poll() == []
    started_all(rs, 2)
    records(rs, 1, 1, 2)  # node 1 now ships what node 0 would have
    records(rs, 2, 3)
    assert show(rs.poll()) == [1, 2, 3]


def test_known_down_node_shipping_again_comes_off_at_window_slide():
    rs, clock = make(nodes=(0, 1, 2), r=2, scd=True, buffer_size=4, scd_timeout=1.0)
    rs.take_actions()
    records(rs, 1, 2)
    records(rs, 2, 3)
    clock.advance(1.0)
    rs.tick()
    assert starts(rs.take_actions(), 1, 4, True, (0,), 2)
    started_all(rs, 2)
    records(rs, 0, 4)  # node 0 sees itself known down and ships anyway
    records(rs, 1, 1, 2)
    records(rs, 2, 3)
    assert rs.take_actions() == []  # no rewind before the window slides
    assert show(rs.poll()) == [1, 2, 3, 4]
    # The slide (read pointer past 1 + int(0.7 * 3)) takes node 0 off the list.
    assert starts(rs.take_actions(), 5, 8, True, (), 3)
    assert rs.known_down == frozenset()


def test_scd_all_nodes_pass_forces_all_send_all_then_back_to_scd():
    rs, clock = make(nodes=(0, 1, 2), r=2, scd=True, buffer_size=4)
    rs.take_actions()
    records(rs, 0, 2)
    records(rs, 1, 3)
    assert rs.take_actions() == []
    clock.advance(1.0)
    assert rs.poll() == []  # an f-majority passed 1, but no gap in SCD mode
    rs.on_gap(2, 1, 3)
    # Everyone passed LSN 1 without shipping it: only all-send-all can tell.
    assert rs.poll() == []
    assert starts(rs.take_actions(), 1, 4, False, (), 2)
    assert not rs.scd_active
    started_all(rs, 2)
    records(rs, 0, 2, 3)
    records(rs, 1, 2, 3)
    rs.on_gap(2, 1, 2)
    records(rs, 2, 3)
    assert show(rs.poll()) == [("DATALOSS", 1, 1), 2, 3]
    # Back to SCD at the window slide.
    assert starts(rs.take_actions(), 4, 7, True, (), 3)
    assert rs.scd_active


def test_scd_passes_epoch_zero_without_all_send_all():
    # A log's first epoch is 1: epoch 0 holds no record.  Every node of a new log answers
    # "nothing up to e1n0"; the stream bridges that without a rewind to all-send-all.
    e1n0 = lsn(1, 0)
    rs, _ = make(nodes=(0, 1, 2), r=2, scd=True, until=lsn(1, 100), buffer_size=4,
                 sequencer_window=1000)
    rs.take_actions()
    started_all(rs, 1)
    for n in (0, 1):
        rs.on_gap(n, 1, e1n0)
    assert rs.poll() == []  # node 2 may still report a trim point
    rs.on_gap(2, 1, e1n0)
    assert show(rs.poll()) == [("BRIDGE", 1, e1n0)]
    assert rs.scd_active and rs.filter_version == 1
    assert not [a for a in rs.take_actions() if isinstance(a, SendStart)]
    assert rs.next_lsn == lsn(1, 1)


def test_a_new_logs_first_records_come_with_the_first_start():
    # The window of a read from LSN 1 starts at e1n1 (epoch 0 holds nothing), so the
    # nodes may send a new log's first records at once: no slide, no WINDOW first.
    rs, _ = make(nodes=(0, 1, 2), r=2, scd=True, until=lsn(1, 100), buffer_size=4,
                 sequencer_window=1000)
    assert rs.take_actions() == [SendStart(n, 1, lsn(1, 100), lsn(1, 4), True, (), 1)
                                 for n in (0, 1, 2)]
    started_all(rs, 1)
    records(rs, 0, lsn(1, 1), lsn(1, 2))
    assert rs.poll() == []  # nodes 1 and 2 may still report a trim point
    rs.on_gap(1, 1, lsn(1, 2))
    rs.on_gap(2, 1, lsn(1, 2))
    assert show(rs.poll()) == [("BRIDGE", 1, lsn(1, 0)), lsn(1, 1), lsn(1, 2)]
    assert rs.filter_version == 1


def test_scd_epoch_zero_bridge_yields_to_a_trim_point():
    e1n0 = lsn(1, 0)
    rs, _ = make(nodes=(0, 1, 2), r=2, scd=True, until=lsn(1, 100), buffer_size=4,
                 sequencer_window=1000)
    rs.take_actions()
    rs.on_gap(0, 1, e1n0)
    rs.on_gap(1, 1, e1n0)
    rs.on_gap(2, 1, lsn(1, 5), GapReason.TRIM)
    assert show(rs.poll()) == [("TRIM", 1, lsn(1, 5))]


def test_scd_all_send_all_timeout():
    rs, clock = make(nodes=(0, 1, 2), r=2, scd=True, scd_timeout=1.0,
                     scd_all_send_all_timeout=5.0, buffer_size=4)
    rs.take_actions()
    records(rs, 1, 3)
    clock.advance(1.0)
    rs.tick()
    # Nodes 0 and 2 silent: both known down (one node is left to ship).
    assert starts(rs.take_actions(), 1, 4, True, (0, 2), 2)
    clock.advance(1.0)
    rs.tick()
    assert rs.take_actions() == []  # marking node 1 too would leave nobody
    clock.advance(2.5)
    rs.tick()
    assert rs.take_actions() == []
    clock.advance(0.5)
    rs.tick()
    assert starts(rs.take_actions(), 1, 4, False, (), 3)


def test_passed_known_down_timer_with_nobody_to_mark_is_no_deadline():
    """Once the known-down timer has passed with nobody it could mark, the stream reports
    the all-send-all deadline, never a time in the past that tick would not act on."""
    rs, clock = make(nodes=(0, 1, 2), r=2, scd=True, scd_timeout=1.0,
                     scd_all_send_all_timeout=5.0, buffer_size=4)
    rs.take_actions()
    t0 = clock.t
    records(rs, 1, 3)
    assert rs.next_deadline() == t0 + 1.0
    clock.advance(1.0)
    rs.tick()
    assert starts(rs.take_actions(), 1, 4, True, (0, 2), 2)
    # Marking node 1 too would leave nobody: only the all-send-all timer is left.
    assert rs.next_deadline() == t0 + 5.0
    clock.advance(1.5)
    assert rs.next_deadline() == t0 + 5.0
    for dt in (0.0, 0.1, 0.7, 0.9, 0.4):
        clock.advance(dt)
        rs.tick()
        assert rs.take_actions() == []
        d = rs.next_deadline()
        assert d is None or d > clock.t
    clock.t = rs.next_deadline()
    rs.tick()
    assert starts(rs.take_actions(), 1, 4, False, (), 3)
    assert rs.next_deadline() is None


def test_event_that_makes_marking_possible_brings_the_known_down_timer_back():
    rs, clock = make(nodes=(0, 1, 2, 3), r=2, scd=True, scd_timeout=1.0,
                     scd_all_send_all_timeout=5.0, buffer_size=4)
    rs.take_actions()
    t0 = clock.t
    records(rs, 0, 2)  # LSN 1 is missing: the stall starts
    rs.on_connection_closed(1)
    assert starts(rs.take_actions(), 1, 4, True, (1,), 2)
    clock.advance(1.5)
    # After the rewind nobody has passed LSN 1: marking 0, 2, 3 would leave nobody.
    rs.tick()
    assert rs.take_actions() == []
    assert rs.next_deadline() == t0 + 5.0
    rs.on_record(2, 3, b"p3", filter_version=2)  # node 2 passed LSN 1
    assert rs.next_deadline() == t0 + 1.0  # already due: 0 and 3 can be marked now
    rs.tick()
    assert starts(rs.take_actions(), 1, 4, True, (0, 1, 3), 3)
    assert rs.next_deadline() > clock.t


def test_after_tick_the_deadline_is_in_the_future():
    """Whatever time tick runs at, next_deadline is then None or later."""
    rs, clock = make(nodes=(0, 1, 2, 3), r=2, scd=True, scd_timeout=0.3,
                     scd_all_send_all_timeout=1.1, buffer_size=4, reconnect_delay=0.1)
    rs.take_actions()
    records(rs, 2, 2)
    rs.on_connection_closed(3)
    for step in range(200):
        clock.advance(0.01 * (step % 7))
        rs.tick()
        rs.take_actions()
        d = rs.next_deadline()
        assert d is None or d > clock.t
        if d is not None and step % 3 == 0:
            clock.t = d  # also tick exactly at the deadline
            rs.tick()
            d = rs.next_deadline()
            assert d is None or d > clock.t


def test_no_stall_timers_while_tailing():
    """Caught up with the tail, silence is normal: no known-down, no failover."""
    rs, clock = make(nodes=(0, 1, 2), r=2, scd=True, scd_timeout=1.0,
                     scd_all_send_all_timeout=2.0)
    rs.take_actions()
    records(rs, 0, 1)
    records(rs, 1, 2)
    records(rs, 2, 3)
    assert show(rs.poll()) == [1, 2, 3]
    clock.advance(100)
    rs.tick()
    assert rs.take_actions() == []
    assert rs.next_deadline() is None


def test_checksum_failure_in_scd():
    rs, _ = make(nodes=(0, 1, 2), r=2, scd=True)
    rs.take_actions()
    # Node 0 ships 1..3 but the copy of 1 fails its checksum.
    rs.on_records(0, [1, 2, 3], [0, 0, 0], [0, 0, 0], b"BADp2p3", [0, 3, 5, 7], bad=[0])
    assert rs.poll() == []
    assert starts(rs.take_actions(), 1, 512, True, (0,), 2)
    started_all(rs, 2)
    rs.on_record(1, 1, b"good")
    records(rs, 0, 2, 3)
    got = rs.poll()
    assert show(got) == [1, 2, 3]
    assert got[0].payload == b"good"


def test_checksum_failure_in_all_send_all():
    rs, _ = make(nodes=(0, 1, 2), r=2, grace_period=0)
    rs.on_records(0, [1, 2], [0, 0], [0, 0], b"BADp2", [0, 3, 5], bad=[0])
    records(rs, 1, 3)
    # Node 0's silence at 1 proves nothing (its copy is bad): no f-majority yet.
    assert rs.poll() == []
    rs.on_record(2, 1, b"good")
    got = rs.poll()
    assert show(got) == [1, 2, 3]
    assert [r.payload for r in got] == [b"good", b"p2", b"p3"]


def test_checksum_failure_gap_reason():
    from logdevice.readstream import GapReason

    rs, _ = make(nodes=(0, 1, 2), r=2, scd=True)
    rs.take_actions()
    rs.on_gap(0, 1, 1, GapReason.CHECKSUM_FAIL)
    assert rs.known_down == {0}
    assert len(rs.take_actions()) == 3


def test_two_rewinds_in_a_row():
    rs, _ = make(nodes=(0, 1, 2, 3), r=2, scd=True)
    rs.take_actions()
    rs.on_connection_closed(0)
    assert starts(rs.take_actions(), 1, 512, True, (0,), 2)
    rs.on_started(1, E.FAILED, 2)
    assert starts(rs.take_actions(), 1, 512, True, (0, 1), 3)
    rs.on_started(2, E.OK, 2)  # stale answer to the first rewind
    rs.on_record(2, 1, b"x", filter_version=2)
    rs.on_record(2, 1, b"x")  # node 2 has not acknowledged version 3 yet
    assert rs.poll() == []
    rs.on_started(2, E.OK, 3)
    rs.on_record(2, 1, b"x")
    assert show(rs.poll()) == [1]
    rs.on_record(3, 2, b"y", filter_version=3)
    assert show(rs.poll()) == [2]


def test_rewinds_coalesce_within_one_event():
    rs, _ = make(nodes=(0, 1, 2, 3), r=2, scd=True)
    rs.take_actions()
    rs.on_records(0, [1, 2], [0, 0], [0, 0], b"", [], bad=[0, 1])
    assert starts(rs.take_actions(), 1, 512, True, (0,), 2)


def test_all_nodes_known_down_means_all_send_all():
    rs, _ = make(nodes=(0, 1), r=2, scd=True)
    rs.take_actions()
    rs.on_connection_closed(0)
    assert starts(rs.take_actions(), 1, 512, True, (0,), 2)
    rs.on_connection_closed(1)
    assert starts(rs.take_actions(), 1, 512, False, (), 3)


def test_force_no_scd():
    rs, _ = make(nodes=(0, 1, 2), r=2, scd=True, buffer_size=4)
    rs.take_actions()
    rs.force_no_scd()
    assert starts(rs.take_actions(), 1, 4, False, (), 2)
    started_all(rs, 2)
    records(rs, 0, 1, 2, 3)
    assert show(rs.poll()) == [1, 2, 3]
    acts = rs.take_actions()  # the slide does not go back to SCD
    assert all(isinstance(a, SendWindow) for a in acts) and len(acts) == 3


# ------------------------------------------------------------ connections


def test_connection_closed_all_send_all_reconnects_with_backoff():
    rs, clock = make(nodes=(0, 1, 2), r=2, reconnect_delay=0.1, reconnect_max_delay=0.3)
    rs.take_actions()
    records(rs, 0, 1)
    rs.on_connection_closed(0)
    assert rs.take_actions() == []
    assert rs.next_deadline() == clock.t + 0.1
    clock.advance(0.1)
    rs.tick()
    assert rs.take_actions() == [SendStart(0, 2, UNTIL, 512, False, (), 1)]
    assert rs.sender(0).next_lsn == 0  # it will resend from the read pointer
    rs.on_started(0, E.AGAIN, 1)
    clock.advance(0.19)
    rs.tick()
    assert rs.take_actions() == []
    clock.advance(0.02)
    rs.tick()
    assert rs.take_actions() == [SendStart(0, 2, UNTIL, 512, False, (), 1)]
    rs.on_connection_closed(0)
    clock.advance(0.3)  # capped
    rs.tick()
    assert len(rs.take_actions()) == 1
    rs.on_started(0, E.OK, 1)
    records(rs, 0, 2)
    assert show(rs.poll()) == [1, 2]


def test_window_catch_up_after_restart():
    rs, clock = make(nodes=(0, 1), r=1, buffer_size=4)
    rs.take_actions()
    rs.on_connection_closed(0)
    clock.advance(0.1)
    rs.tick()
    assert rs.take_actions() == [SendStart(0, 1, UNTIL, 4, False, (), 1)]
    records(rs, 1, 1, 2, 3)
    assert show(rs.poll()) == [1, 2, 3]
    # The window slid while node 0 was starting: only node 1 heard of it.
    assert rs.take_actions() == [SendWindow(1, 7, 1)]
    rs.on_started(0, E.OK, 1)
    assert rs.take_actions() == [SendWindow(0, 7, 1)]
    rs.on_started(1, E.OK, 1)
    assert rs.take_actions() == []


def test_started_rebuilding_in_scd():
    rs, _ = make(nodes=(0, 1, 2), r=2, scd=True)
    rs.take_actions()
    rs.on_started(0, E.REBUILDING, 1)
    assert rs.known_down == {0}
    assert starts(rs.take_actions(), 1, 512, True, (0,), 2)


# ------------------------------------------------------- authoritative status


def test_authoritative_empty_leaves_the_nodeset():
    auth = {3: AS.AUTHORITATIVE_EMPTY}
    rs, clock = make(nodes=(0, 1, 2, 3), r=2, authoritative=auth)
    rs.on_gap(0, 1, 5)
    rs.on_gap(1, 1, 5)
    # Effective nodeset {0, 1, 2}: two answers are an f-majority (incomplete).
    assert rs.poll() == []
    clock.advance(0.1)
    assert show(rs.poll()) == [("DATALOSS", 1, 5)]
    rs.on_gap(0, 6, 9)
    rs.on_gap(1, 6, 9)
    rs.on_gap(2, 1, 9)
    assert show(rs.poll()) == [("DATALOSS", 6, 9)]  # complete: no grace period


def test_without_authoritative_empty_two_of_four_is_not_enough():
    rs, clock = make(nodes=(0, 1, 2, 3), r=2)
    rs.on_gap(0, 1, 5)
    rs.on_gap(1, 1, 5)
    clock.advance(10)
    assert rs.poll() == []


def test_underreplication_non_authoritative_gap():
    auth = {1: AS.UNDERREPLICATION, 2: AS.UNDERREPLICATION}
    rs, _ = make(nodes=(0, 1, 2), r=2, authoritative=auth)
    rs.on_gap(0, 1, 5)
    # No f-majority is possible, but every node that can answer did.
    assert show(rs.poll()) == [("DATALOSS", 1, 5)]


def test_unavailable_node_counts_but_is_waited_for():
    rs, clock = make(nodes=(0, 1, 2), r=2, authoritative={2: AS.UNAVAILABLE})
    rs.on_gap(0, 1, 5)
    rs.on_gap(1, 1, 5)
    assert rs.poll() == []
    clock.advance(0.1)
    assert show(rs.poll()) == [("DATALOSS", 1, 5)]


def test_authoritative_change_mid_stream():
    rs, _ = make(nodes=(0, 1, 2, 3), r=2, grace_period=0)
    rs.on_gap(0, 1, 5)
    rs.on_gap(1, 1, 5)
    assert rs.poll() == []
    rs.set_authoritative(3, AS.AUTHORITATIVE_EMPTY)
    assert show(rs.poll()) == [("DATALOSS", 1, 5)]


def test_scd_starts_with_non_authoritative_nodes_known_down():
    rs, _ = make(nodes=(0, 1, 2, 3), r=2, scd=True,
                 authoritative={3: AS.AUTHORITATIVE_EMPTY, 2: AS.UNAVAILABLE})
    assert starts(rs.take_actions(), 1, 512, True, (2, 3), 1)


def test_failure_domain_fmajority():
    # Three racks of two nodes; copies span two racks.
    loc = {0: "r.d.c.row.A", 1: "r.d.c.row.A", 2: "r.d.c.row.B", 3: "r.d.c.row.B",
           4: "r.d.c.row.C", 5: "r.d.c.row.C"}
    rs, _ = make(nodes=range(6), r={"rack": 2}, locations=loc, grace_period=0)
    for n in (0, 2, 4, 1):  # four nodes, but only rack A complete: not enough
        rs.on_gap(n, 1, 5)
    assert rs.poll() == []
    rs.on_gap(3, 1, 5)  # racks A and B complete: every copyset touches one of them
    assert show(rs.poll()) == [("DATALOSS", 1, 5)]


def test_failure_domain_two_complete_racks_of_four_nodes():
    loc = {0: ("r", "d", "c", "w", "A"), 1: ("r", "d", "c", "w", "A"),
           2: ("r", "d", "c", "w", "B"), 3: ("r", "d", "c", "w", "B"),
           4: ("r", "d", "c", "w", "C"), 5: ("r", "d", "c", "w", "C")}
    rs, _ = make(nodes=range(6), r={"rack": 2, "node": 2}, locations=loc, grace_period=0)
    for n in (0, 1, 2, 3):  # node scope would need 5 of 6; rack scope is satisfied
        rs.on_gap(n, 1, 5)
    assert show(rs.poll()) == [("DATALOSS", 1, 5)]
