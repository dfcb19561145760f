"""The idempotent-append table: a retried blob gets the first attempt's answer."""

from __future__ import annotations

from logdevice.errors import E
from logdevice.sequencer.producers import ADMIT_CONFLICT, ADMIT_NEW, ADMIT_WAIT, ProducerTable


def test_retry_while_in_flight_waits_for_the_first_attempt():
    t = ProducerTable()
    assert t.admit(1, 77, 5, "first", 0) is ADMIT_NEW
    assert t.admit(1, 77, 5, "retry", 0) is ADMIT_WAIT
    assert t.finish(1, 77, 5, E.OK, lsn=100, timestamp=9) == ["first", "retry"]
    done = t.admit(1, 77, 5, "late retry", 0)
    assert (done.verdict, done.lsn, done.timestamp) == ("done", 100, 9)
    assert t.duplicates == 2


def test_failure_forgets_so_the_retry_is_new():
    t = ProducerTable()
    assert t.admit(1, 77, 5, "first", 0) is ADMIT_NEW
    assert t.admit(1, 77, 5, "retry", 0) is ADMIT_WAIT
    assert t.finish(1, 77, 5, E.SEQNOBUFS) == ["first", "retry"]
    assert t.admit(1, 77, 5, "again", 0) is ADMIT_NEW


def test_producers_logs_and_sequence_numbers_are_apart():
    t = ProducerTable()
    assert t.admit(1, 77, 5, "a", 0) is ADMIT_NEW
    assert t.admit(2, 77, 5, "b", 0) is ADMIT_NEW  # another log
    assert t.admit(1, 78, 5, "c", 0) is ADMIT_NEW  # another producer
    assert t.admit(1, 77, 6, "d", 0) is ADMIT_NEW  # the next blob
    assert t.finish(1, 77, 6, E.OK, lsn=3) == ["d"]
    assert t.finish(1, 99, 1, E.OK, lsn=3) == []  # never admitted


def test_windows_are_bounded():
    t = ProducerTable(window=3, max_producers=2)
    for seq in range(1, 6):
        t.admit(1, 77, seq, seq, 0)
        t.finish(1, 77, seq, E.OK, lsn=seq)
    assert t.admit(1, 77, 5, "x", 0).verdict == "done"
    assert t.admit(1, 77, 1, "y", 0) is ADMIT_NEW  # forgotten: beyond the window
    t.admit(1, 78, 1, "p", 0)
    t.admit(1, 79, 1, "q", 0)  # a third producer: the least recently used (77) goes
    assert t.admit(1, 77, 5, "z", 0) is ADMIT_NEW


def test_a_retry_with_another_payload_is_a_conflict():
    t = ProducerTable()
    assert t.admit(1, 77, 5, "first", 0xAAAA) is ADMIT_NEW
    assert t.admit(1, 77, 5, "other data", 0xBBBB).verdict == ADMIT_CONFLICT
    assert t.finish(1, 77, 5, E.OK, lsn=100) == ["first"]
    clash = t.admit(1, 77, 5, "other data", 0xBBBB)
    assert (clash.verdict, clash.lsn) == (ADMIT_CONFLICT, 100)
    assert t.admit(1, 77, 5, "true retry", 0xAAAA).verdict == "done"
    assert (t.conflicts, t.duplicates) == (2, 1)


def test_remembered_blobs_answer_retries():
    t = ProducerTable()
    t.remember(1, 77, 5, 100, 9, 0xAAAA)
    t.remember(1, 77, 5, 100, 9, 0xAAAA)  # named by two storage nodes
    done = t.admit(1, 77, 5, "retry", 0xAAAA)
    assert (done.verdict, done.lsn, done.timestamp) == ("done", 100, 9)
    assert t.admit(1, 77, 5, "clash", 0xBBBB).verdict == ADMIT_CONFLICT
    assert t.duplicates == 1
