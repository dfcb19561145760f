"""Seal checks: a sequencer's tail is vouched for by R storage nodes without a newer seal,
a seal at or above its epoch preempts it, and too few answers leave it undecided."""

from __future__ import annotations

from logdevice.errors import E
from logdevice.sequencer.seal_check import (
    Confirmed,
    Preempted,
    SealChecks,
    SendCheckSeal,
    Undecided,
)

LOG = 7
EPOCH = 5
NODESET = (1, 2, 3, 4)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def sent(actions: list) -> dict[int, int]:
    """node -> request id of the CHECK_SEALs among ``actions``."""
    return {a.node: a.request_id for a in actions if type(a) is SendCheckSeal}


def test_r_nodes_without_a_newer_seal_confirm_the_tail():
    checks = SealChecks(timeout=2.0, clock=Clock())
    asked = sent(checks.request(LOG, EPOCH, NODESET, 2, "w1"))
    assert set(asked) == set(NODESET)
    # An older seal (the recovery of our own epoch sealed EPOCH - 1) vouches for us.
    assert checks.on_reply(asked[1], 1, E.OK, seal_epoch=EPOCH - 1, sealed_by=0) == []
    assert checks.on_reply(asked[1], 1, E.OK) == []  # the same node twice counts once
    assert checks.on_reply(asked[3], 3, E.OK) == [Confirmed(LOG, EPOCH, ["w1"])]
    assert checks.next_deadline() is None
    assert checks.on_reply(asked[2], 2, E.OK, seal_epoch=EPOCH + 1) == []  # too late


def test_a_newer_seal_preempts_and_hands_back_every_waiter():
    checks = SealChecks(timeout=2.0, clock=Clock())
    asked = sent(checks.request(LOG, EPOCH, NODESET, 2, "w1"))
    assert checks.request(LOG, EPOCH, NODESET, 2, "w2") == []  # waits for the next check
    assert checks.on_reply(asked[4], 4, E.OK) == []
    out = checks.on_reply(asked[2], 2, E.OK, seal_epoch=EPOCH, sealed_by=3)
    assert out == [Preempted(LOG, EPOCH, EPOCH, 3, ["w1", "w2"])]
    assert checks.cancel(LOG) == []


def test_a_request_during_a_check_waits_for_a_check_sent_after_it():
    checks = SealChecks(timeout=2.0, clock=Clock())
    first = sent(checks.request(LOG, EPOCH, NODESET, 2, "early"))
    checks.on_reply(first[1], 1, E.OK)
    checks.request(LOG, EPOCH, NODESET, 2, "late")
    out = checks.on_reply(first[2], 2, E.OK)
    assert out[0] == Confirmed(LOG, EPOCH, ["early"])
    second = sent(out[1:])
    assert set(second) == set(NODESET) and set(second.values()).isdisjoint(first.values())
    # Answers to the first check vouch for nothing in the second.
    assert checks.on_reply(first[3], 3, E.OK) == []
    checks.on_reply(second[3], 3, E.OK)
    assert checks.on_reply(second[4], 4, E.OK) == [Confirmed(LOG, EPOCH, ["late"])]


def test_too_few_answers_or_none_in_time_leave_it_undecided():
    clock = Clock()
    checks = SealChecks(timeout=2.0, clock=clock)
    asked = sent(checks.request(LOG, EPOCH, NODESET, 3, "w1"))
    checks.on_reply(asked[1], 1, E.OK)
    checks.on_reply(asked[2], 2, E.CONNFAILED)
    checks.on_reply(asked[3], 3, E.OK)
    assert checks.on_reply(asked[4], 4, E.DISABLED) == [Undecided(LOG, EPOCH, ["w1"])]

    asked = sent(checks.request(LOG, EPOCH, NODESET, 3, "w2"))
    checks.on_reply(asked[1], 1, E.OK)
    assert checks.next_deadline() == clock.now + 2.0
    assert checks.on_timer() == []
    clock.now += 2.0
    assert checks.on_timer() == [Undecided(LOG, EPOCH, ["w2"])]
    assert checks.next_deadline() is None


def test_a_nodeset_smaller_than_r_needs_every_node():
    checks = SealChecks(timeout=2.0, clock=Clock())
    asked = sent(checks.request(LOG, EPOCH, (1, 2), 3, "w1"))
    assert checks.on_reply(asked[1], 1, E.OK) == []
    assert checks.on_reply(asked[2], 2, E.OK) == [Confirmed(LOG, EPOCH, ["w1"])]


def test_cancel_and_a_newer_epoch_hand_the_waiters_back():
    checks = SealChecks(timeout=2.0, clock=Clock())
    sent(checks.request(LOG, EPOCH, NODESET, 2, "w1"))
    checks.request(LOG, EPOCH, NODESET, 2, "w2")
    assert checks.cancel(LOG) == ["w1", "w2"]
    assert checks.next_deadline() is None
    sent(checks.request(LOG, EPOCH, NODESET, 2, "old"))
    out = checks.request(LOG, EPOCH + 1, NODESET, 2, "new")
    assert out[0] == Undecided(LOG, EPOCH, ["old"])
    assert {a.epoch for a in out[1:]} == {EPOCH + 1}
