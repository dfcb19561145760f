"""WriterRecalls: the writers' blobs a log holds, once all but R - 1 storage nodes
answered; refusals and silence asked again, rebuilding nodes never counted."""

from __future__ import annotations

from logdevice.errors import E
from logdevice.sequencer.writer_recall import Recalled, SendGetWriterBlobs, WriterRecalls


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _asks(actions) -> dict[int, int]:
    return {a.node: a.request_id for a in actions if type(a) is SendGetWriterBlobs}


def test_done_once_all_but_r_minus_one_answered_and_the_grace_passed():
    clock = Clock()
    recalls = WriterRecalls(ask_timeout=2.0, grace=0.1, clock=clock)
    asks = _asks(recalls.start(7, 3, [0, 1, 2, 3, 4], 3, since_ms=1000))
    assert sorted(asks) == [0, 1, 2, 3, 4]
    assert recalls.on_reply(asks[0], 0, E.OK, [10], [55], [1], [2000], [9]) == []
    assert recalls.on_reply(asks[1], 1, E.OK, [10, 12], [55, 55], [1, 2],
                            [2000, 2001], [9, 8]) == []
    assert recalls.on_reply(asks[2], 2, E.OK) == []  # three of five: enough, grace runs
    assert recalls.next_deadline() == clock.now + 0.1
    clock.now += 0.1
    out = recalls.on_timer()
    assert out == [Recalled(7, 3, [(55, 1, 10, 2000, 9), (55, 2, 12, 2001, 8)])]
    assert not recalls.running(7, 3)


def test_everyone_answered_ends_it_at_once():
    clock = Clock()
    recalls = WriterRecalls(clock=clock)
    asks = _asks(recalls.start(7, 2, [0, 1], 2, since_ms=0))
    assert recalls.on_reply(asks[0], 0, E.OK) == []
    assert recalls.on_reply(asks[1], 1, E.OK, [5], [9], [4], [1], [3]) == [
        Recalled(7, 2, [(9, 4, 5, 1, 3)])]


def test_rebuilding_nodes_never_count_and_refusals_are_asked_again():
    clock = Clock()
    recalls = WriterRecalls(ask_timeout=2.0, retry_delay=0.2, grace=0.1, clock=clock)
    asks = _asks(recalls.start(7, 2, [0, 1, 2], 2, since_ms=0))  # needs two answers
    assert recalls.on_reply(asks[0], 0, E.REBUILDING) == []
    assert recalls.on_reply(asks[1], 1, E.OK) == []
    assert recalls.on_reply(asks[2], 2, E.AGAIN) == []  # a purge is under way
    clock.now += 0.2
    again = _asks(recalls.on_timer())
    assert list(again) == [2]
    assert recalls.on_reply(again[2], 2, E.OK) == [Recalled(7, 2, [])]


def test_a_silent_node_is_asked_again_and_stale_answers_ignored():
    clock = Clock()
    recalls = WriterRecalls(ask_timeout=2.0, clock=clock)
    asks = _asks(recalls.start(7, 2, [0, 1], 2, since_ms=0))
    clock.now += 2.0
    again = _asks(recalls.on_timer())
    assert sorted(again) == [0, 1]
    assert recalls.on_reply(asks[0], 0, E.OK) == []  # the first ask's late answer
    assert recalls.on_reply(again[0], 0, E.OK) == []
    assert recalls.on_reply(again[1], 1, E.OK) == [Recalled(7, 2, [])]


def test_a_new_epoch_replaces_the_recall_and_cancel_drops_it():
    recalls = WriterRecalls(clock=Clock())
    first = _asks(recalls.start(7, 2, [0], 1, since_ms=0))
    assert recalls.start(7, 2, [0], 1, since_ms=0) == []  # already under way
    second = _asks(recalls.start(7, 3, [0], 1, since_ms=0))
    assert recalls.on_reply(first[0], 0, E.OK) == []
    assert recalls.on_reply(second[0], 0, E.OK) == [Recalled(7, 3, [])]
    third = _asks(recalls.start(7, 4, [0], 1, since_ms=0))
    recalls.cancel(7)
    assert recalls.on_reply(third[0], 0, E.OK) == []
    assert recalls.next_deadline() is None
