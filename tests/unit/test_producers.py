"""The idempotent-append table: a retried blob gets the first attempt's answer."""

from __future__ import annotations

from logdevice.errors import E
from logdevice.sequencer.producers import ADMIT_NEW, ADMIT_WAIT, ProducerTable


def test_retry_while_in_flight_waits_for_the_first_attempt():
    t = ProducerTable()
    assert t.admit(1, 77, 5, "first") is ADMIT_NEW
    assert t.admit(1, 77, 5, "retry") is ADMIT_WAIT
    assert t.finish(1, 77, 5, E.OK, lsn=100, timestamp=9) == ["first", "retry"]
    done = t.admit(1, 77, 5, "late retry")
    assert (done.verdict, done.lsn, done.timestamp) == ("done", 100, 9)
    assert t.duplicates == 2


def test_failure_forgets_so_the_retry_is_new():
    t = ProducerTable()
    assert t.admit(1, 77, 5, "first") is ADMIT_NEW
    assert t.admit(1, 77, 5, "retry") is ADMIT_WAIT
    assert t.finish(1, 77, 5, E.SEQNOBUFS) == ["first", "retry"]
    assert t.admit(1, 77, 5, "again") is ADMIT_NEW


def test_producers_logs_and_sequence_numbers_are_apart():
    t = ProducerTable()
    assert t.admit(1, 77, 5, "a") is ADMIT_NEW
    assert t.admit(2, 77, 5, "b") is ADMIT_NEW  # another log
    assert t.admit(1, 78, 5, "c") is ADMIT_NEW  # another producer
    assert t.admit(1, 77, 6, "d") is ADMIT_NEW  # the next blob
    assert t.finish(1, 77, 6, E.OK, lsn=3) == ["d"]
    assert t.finish(1, 99, 1, E.OK, lsn=3) == []  # never admitted


def test_windows_are_bounded():
    t = ProducerTable(window=3, max_producers=2)
    for seq in range(1, 6):
        t.admit(1, 77, seq, seq)
        t.finish(1, 77, seq, E.OK, lsn=seq)
    assert t.admit(1, 77, 5, "x").verdict == "done"
    assert t.admit(1, 77, 1, "y") is ADMIT_NEW  # forgotten: beyond the window
    t.admit(1, 78, 1, "p")
    t.admit(1, 79, 1, "q")  # a third producer: the least recently used (77) goes
    assert t.admit(1, 77, 5, "z") is ADMIT_NEW
