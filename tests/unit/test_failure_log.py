"""``FailureLog``: a repeated task's failures as a warning when they start, a reminder
while they go on, and a line when the task works again; not a line per try."""

import logging

from logdevice.node.roles.failure_log import FailureLog


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_one_warning_per_outage_a_reminder_and_the_recovery(caplog):
    caplog.set_level(logging.INFO, logger="test.failure_log")
    clock = Clock()
    f = FailureLog(logging.getLogger("test.failure_log"), "N1: reading the event log",
                   remind_every=60.0, clock=clock)
    f.succeeded()  # working all along: nothing to say
    assert caplog.records == [] and not f.failing
    for _ in range(120):  # a poll every half second for a minute
        f.failed("TIMEDOUT: ZooKeeper unreachable")
        clock.t += 0.5
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("WARNING", "N1: reading the event log: TIMEDOUT: ZooKeeper unreachable")]
    assert f.failing and f.failures == 120
    f.failed("TIMEDOUT")  # 60 s after the first failure
    assert [r.getMessage() for r in caplog.records][-1] == \
        "N1: reading the event log: still failing after 60 s (121 tries): TIMEDOUT"
    caplog.clear()
    clock.t += 5
    f.succeeded()
    f.succeeded()
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("INFO", "N1: reading the event log: works again after 65 s (121 failed tries)")]
    assert not f.failing and f.failures == 0
    caplog.clear()
    f.failed("again")  # a new outage warns at once
    assert [r.getMessage() for r in caplog.records] == ["N1: reading the event log: again"]
