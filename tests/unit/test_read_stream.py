"""ReadStream scenarios: re-ordering, de-duplication, gap detection, flow control.

Driven event by event with a fake clock.  The helpers at the top are shared by the other
``test_read_stream_*`` modules.
"""

from __future__ import annotations

import pytest

from logdevice.readstream import (
    GapReason,
    ReadStream,
    SendStart,
    SendStop,
    SendWindow,
)
from logdevice.records import DataRecord, GapRecord

LOG = 7


class FakeClock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, dt: float) -> None:
        self.t += dt


def make(nodes=(1, 2, 3, 4, 5), r=3, start=1, until=10_000, **kw):
    """A stream and its clock.  Gaps are typed strictly unless the test says otherwise
    (``sequencer_window=0``: a gap at the start of the read is DATALOSS, not BRIDGE)."""
    kw.setdefault("sequencer_window", 0)
    clock = FakeClock()
    rs = ReadStream(LOG, start, until, nodeset=list(nodes), replication=r, clock=clock, **kw)
    return rs, clock


def lsn(epoch: int, esn: int) -> int:
    return (epoch << 32) | esn


def show(items):
    """Compact form of delivered items: ints for records, tuples for gaps."""
    out = []
    for it in items:
        if isinstance(it, DataRecord):
            out.append(it.lsn if it.batch_offset == 0 else (it.lsn, it.batch_offset))
        else:
            assert isinstance(it, GapRecord)
            out.append((it.type.name, it.lo, it.hi))
    return out


def records(rs, node, *lsns, **kw):
    for x in lsns:
        rs.on_record(node, x, b"p%d" % x, **kw)


# ---------------------------------------------------------------------- start-up


def test_start_sends_start_to_every_node():
    rs, _ = make(start=5, until=100, buffer_size=10)
    acts = rs.take_actions()
    assert acts == [SendStart(n, 5, 100, 14, False, (), 1) for n in (1, 2, 3, 4, 5)]
    assert rs.take_actions() == []
    assert rs.poll() == []


def test_bad_parameters():
    from logdevice.errors import InvalidParamError

    with pytest.raises(InvalidParamError):
        make(start=10, until=5)
    with pytest.raises(InvalidParamError):
        make(nodes=())
    with pytest.raises(InvalidParamError):
        make(r={"shelf": 2})


# ------------------------------------------------------------------ re-ordering


def test_reorders_and_delivers_in_lsn_order():
    rs, _ = make()
    rs.on_record(2, 3, b"c", timestamp=33)
    rs.on_record(1, 2, b"b", timestamp=22)
    assert rs.poll() == []
    rs.on_record(3, 1, b"a", timestamp=11)
    got = rs.poll()
    assert got == [DataRecord(LOG, 1, 11, b"a"), DataRecord(LOG, 2, 22, b"b"),
                   DataRecord(LOG, 3, 33, b"c")]


def test_duplicates_dropped():
    rs, _ = make(r=3)
    for node in (1, 2, 3):
        records(rs, node, 1, 2, 3)
    records(rs, 4, 2, 3)
    assert show(rs.poll()) == [1, 2, 3]
    records(rs, 5, 1, 2, 3)  # late copies, below the read pointer
    assert rs.poll() == []


def test_unknown_node_and_malformed_gap_ignored():
    rs, _ = make()
    rs.on_record(99, 1, b"x")
    rs.on_gap(1, 5, 3)
    assert rs.poll() == []
    assert rs.sender(1).next_lsn == 0


# ---------------------------------------- gap detection (LogDevice's worked example)


def _example_prefix(rs):
    """LogDevice's gap-detection example: R=3, nodeset of 5, the reader waits for 52."""
    records(rs, 1, 50)
    records(rs, 2, 50, 51)
    records(rs, 3, 51, 53)
    records(rs, 4, 50)
    records(rs, 5, 51, 53)
    # Only N3 and N5 have passed 52: fewer than N - R + 1 = 3 nodes.
    assert show(rs.poll()) == [50, 51]
    assert rs.poll() == []


def test_worked_example_dataloss_at_52():
    rs, clock = make(start=50)
    _example_prefix(rs)
    clock.advance(10)  # time alone proves nothing
    assert rs.poll() == []
    # N1 sends 54: it has nothing at 52 either.  Three nodes is an f-majority, but N2
    # and N4 have not answered: wait out the grace period.
    records(rs, 1, 54)
    assert rs.poll() == []
    clock.advance(0.099)
    assert rs.poll() == []
    clock.advance(0.002)
    assert show(rs.poll()) == [("DATALOSS", 52, 52), 53, 54]
    assert rs.next_lsn == 55


def test_worked_example_without_grace_period():
    rs, _ = make(start=50, grace_period=0)
    _example_prefix(rs)
    records(rs, 1, 54)
    assert show(rs.poll()) == [("DATALOSS", 52, 52), 53, 54]


def test_worked_example_complete_answer_needs_no_grace():
    rs, _ = make(start=50)
    _example_prefix(rs)
    records(rs, 2, 53)
    records(rs, 4, 55)
    records(rs, 1, 54)  # every node has now passed 52
    assert show(rs.poll()) == [("DATALOSS", 52, 52), 53, 54, 55]


def test_record_arriving_during_grace_period_wins():
    rs, clock = make(start=50)
    _example_prefix(rs)
    records(rs, 1, 54)
    clock.advance(0.05)
    assert rs.poll() == []
    records(rs, 4, 52)  # N4 had it after all
    clock.advance(1)
    assert show(rs.poll()) == [52, 53, 54]


def test_two_gaps():
    rs, _ = make(nodes=(0, 1, 2), r=2)
    records(rs, 0, 1, 3, 5)
    records(rs, 1, 1, 5)
    assert show(rs.poll()) == [1]
    records(rs, 2, 3, 5)
    assert show(rs.poll()) == [("DATALOSS", 2, 2), 3, ("DATALOSS", 4, 4), 5]


def test_gap_inside_window():
    rs, _ = make(nodes=(0, 1, 2), r=2, buffer_size=10)
    for n in (0, 1, 2):
        records(rs, n, 1, 2, 3, 4, 7, 8)
    assert show(rs.poll()) == [1, 2, 3, 4, ("DATALOSS", 5, 6), 7, 8]


def test_gap_extends_to_first_marker():
    """The gap stops at the smallest LSN some node has (or has passed to)."""
    rs, _ = make(nodes=(0, 1, 2), r=2, grace_period=0)
    rs.on_gap(0, 1, 9)
    rs.on_gap(1, 1, 4)
    assert show(rs.poll()) == [("DATALOSS", 1, 4)]
    rs.on_gap(2, 1, 20)
    # Nodes 0 and 2 passed 5..9; node 1 is at 5 (may still send it): f-majority 2.
    assert show(rs.poll()) == [("DATALOSS", 5, 9)]


def test_non_monotonic_gaps():
    rs, _ = make(nodes=(0, 1, 2), r=2, grace_period=0)
    rs.on_gap(0, 1, 10)
    rs.on_gap(0, 3, 5)  # stale, overlapping: must not pull node 0 back
    assert rs.sender(0).next_lsn == 11
    rs.on_gap(1, 1, 6)
    assert show(rs.poll()) == [("DATALOSS", 1, 6)]
    rs.on_gap(1, 2, 3)  # entirely below the read pointer
    records(rs, 2, 8)
    rs.on_gap(1, 7, 12)
    assert show(rs.poll()) == [("DATALOSS", 7, 7), 8, ("DATALOSS", 9, 10)]


def test_dataloss_at_end_of_log():
    rs, _ = make(nodes=(0, 1, 2), r=2, until=10)
    for n in (0, 1, 2):
        records(rs, n, *range(1, 9))
    assert show(rs.poll()) == list(range(1, 9))
    assert not rs.done
    rs.on_gap(0, 9, 10)
    rs.on_gap(1, 9, 10)
    rs.on_gap(2, 9, 10)
    assert show(rs.poll()) == [("DATALOSS", 9, 10)]
    assert rs.done


def test_tail_gap_past_until_is_capped():
    rs, _ = make(nodes=(0, 1, 2), r=2, until=5)
    for n in (0, 1, 2):
        records(rs, n, 1, 2)
        rs.on_gap(n, 3, 2**64 - 1)
    assert show(rs.poll()) == [1, 2, ("DATALOSS", 3, 5)]
    assert rs.done


def test_nothing_before_first_answer():
    """An f-majority of gaps says nothing until someone bounds it."""
    rs, _ = make(nodes=(0, 1, 2), r=2)
    rs.on_started(0, 0, 1)
    assert rs.poll() == []


# -------------------------------------------------------------- flow control


def test_window_slides_at_threshold():
    rs, _ = make(nodes=(0, 1), r=2, start=100, buffer_size=10)
    rs.take_actions()
    # window_high = 109; slide once the read pointer passes 100 + int(0.7 * 9) = 106.
    records(rs, 0, *range(100, 106))
    assert show(rs.poll()) == list(range(100, 106))
    assert rs.take_actions() == []
    records(rs, 0, 106)
    assert show(rs.poll()) == [106]
    assert rs.take_actions() == [SendWindow(0, 116, 1), SendWindow(1, 116, 1)]
    assert rs.window_high == 116


def test_window_only_slides_as_the_application_consumes():
    rs, _ = make(nodes=(0, 1), r=2, start=1, buffer_size=4)
    rs.take_actions()
    records(rs, 0, 1, 2, 3, 4)
    assert rs.take_actions() == []  # nothing polled yet
    assert show(rs.poll(max_items=2)) == [1, 2]
    assert rs.take_actions() == []
    assert show(rs.poll(max_items=1)) == [3]
    acts = rs.take_actions()
    assert acts == [SendWindow(0, 7, 1), SendWindow(1, 7, 1)]
    assert show(rs.poll()) == [4]


def test_until_reached_done_and_stop():
    rs, _ = make(nodes=(0, 1), r=1, start=1, until=3)
    rs.take_actions()
    records(rs, 1, 1, 2)
    assert not rs.done
    records(rs, 0, 3)
    assert rs.take_actions() == [SendStop(0), SendStop(1)]
    assert not rs.done  # delivered but not yet handed out
    assert show(rs.poll()) == [1, 2, 3]
    assert rs.done
    records(rs, 0, 4)
    assert rs.poll() == []


def test_records_past_until_ignored():
    rs, _ = make(nodes=(0,), r=1, start=1, until=2)
    records(rs, 0, 1, 2, 3)
    assert show(rs.poll()) == [1, 2]
    assert rs.done


# ---------------------------------------------------------------- pseudo-records


def test_hole_plug_is_a_hole_gap():
    from logdevice.protocol.flags import FLAG_HOLE

    rs, _ = make(nodes=(0,), r=1)
    records(rs, 0, 1)
    rs.on_record(0, 2, b"", FLAG_HOLE)
    records(rs, 0, 3)
    assert show(rs.poll()) == [1, ("HOLE", 2, 2), 3]


def test_recovery_copy_replaces_a_sequencer_copy_still_buffered():
    """A node that missed recovery sent its own copy of LSN 2 where recovery wrote a hole
    plug; the plug arrives while LSN 2 still waits (LSN 1 is missing): the plug wins,
    whatever the order the copies came in."""
    from logdevice.protocol.flags import FLAG_HOLE, FLAG_WRITTEN_BY_RECOVERY

    plug = FLAG_HOLE | FLAG_WRITTEN_BY_RECOVERY
    for first_stale in (True, False):
        rs, _ = make(nodes=(0, 1, 2), r=1)
        copies = [(0, b"stale", 0), (1, b"", plug)]
        for node, payload, flags in copies if first_stale else copies[::-1]:
            rs.on_record(node, 2, payload, flags)
            assert rs.poll() == []
        rs.on_record(2, 1, b"one")
        assert show(rs.poll()) == [1, ("HOLE", 2, 2)]
    # A later sequencer copy never replaces a recovery copy; nor does an equal one.
    rs, _ = make(nodes=(0, 1, 2, 3), r=1)
    rs.on_record(0, 2, b"rec", FLAG_WRITTEN_BY_RECOVERY)
    rs.on_record(1, 2, b"seq", 0)
    rs.on_record(2, 2, b"rec2", FLAG_WRITTEN_BY_RECOVERY)
    rs.on_record(3, 1, b"one")
    assert [bytes(r.payload) for r in rs.poll()] == [b"one", b"rec"]


def test_trim_point():
    rs, _ = make(nodes=(0, 1), r=2, start=1)
    records(rs, 0, 3, 4)  # a node that has not trimmed yet
    rs.set_trim_point(3)
    assert show(rs.poll()) == [("TRIM", 1, 3), 4]
    records(rs, 1, 4, 5)
    assert show(rs.poll()) == [5]


def test_trim_gap_from_a_node():
    rs, _ = make(nodes=(0, 1), r=2, start=1)
    rs.on_gap(0, 1, 10, GapReason.TRIM)
    assert show(rs.poll()) == [("TRIM", 1, 10)]
    assert rs.trim_point == 10


def test_gap_reason_under_replicated_does_not_count():
    rs, _ = make(nodes=(0, 1, 2), r=2, grace_period=0)
    rs.on_gap(0, 1, 5, GapReason.UNDER_REPLICATED)
    rs.on_gap(1, 1, 5)
    assert rs.poll() == []  # node 0 may be missing records: no f-majority
    rs.on_gap(2, 1, 5)
    assert show(rs.poll()) == [("DATALOSS", 1, 5)]


def test_checksum_failure_only_marks_its_own_lsn():
    """A node whose copy of 2 is bad still says authoritatively that it has no 1."""
    rs, _ = make(nodes=(0, 1, 2), r=2, grace_period=0)
    rs.on_checksum_failure(0, 2)
    records(rs, 1, 2)
    assert show(rs.poll()) == [("DATALOSS", 1, 1), 2]


def test_under_replicated_regions_are_exact():
    rs, _ = make(nodes=(0, 1, 2), r=2, grace_period=0)
    rs.on_gap(0, 1, 1)
    rs.on_gap(0, 2, 3, GapReason.UNDER_REPLICATED)
    rs.on_gap(0, 4, 6)
    rs.on_gap(0, 7, 8, GapReason.UNDER_REPLICATED)
    rs.on_gap(0, 9, 9, GapReason.CHECKSUM_FAIL)
    s = rs.sender(0)
    assert (s.ur_regions, s.next_lsn) == ([(2, 4), (7, 10)], 10)
    rs.on_gap(1, 1, 9)
    # Node 0 counts where it said "nothing" (1, 4..6), not in its regions.
    assert show(rs.poll()) == [("DATALOSS", 1, 1)]
    rs.on_gap(2, 1, 2)
    assert show(rs.poll()) == [("DATALOSS", 2, 2)]
    rs.on_gap(2, 3, 9)
    assert show(rs.poll()) == [("DATALOSS", 3, 3), ("DATALOSS", 4, 6), ("DATALOSS", 7, 9)]


def test_next_deadline_is_the_grace_period():
    rs, clock = make(start=50)
    _example_prefix(rs)
    assert rs.next_deadline() is None
    records(rs, 1, 54)
    assert rs.next_deadline() == clock.t + 0.1
    clock.t = rs.next_deadline()
    rs.tick()
    assert rs.next_deadline() is None
    assert show(rs.poll()) == [("DATALOSS", 52, 52), 53, 54]


def test_stop_by_the_application():
    rs, _ = make(nodes=(0, 1), r=1)
    rs.take_actions()
    records(rs, 0, 1)
    rs.stop()
    assert rs.take_actions() == [SendStop(0), SendStop(1)]
    records(rs, 0, 2)
    rs.on_connection_closed(1)
    assert show(rs.poll()) == [1]
    assert rs.take_actions() == []
