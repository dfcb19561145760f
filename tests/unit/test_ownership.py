"""logdevice.sequencer.ownership: which logs a node serves, takeovers and preemptions."""

from __future__ import annotations

from logdevice.errors import E
from logdevice.placement import sequencer_for
from logdevice.sequencer.ownership import LogOwnership


class View:
    """A failure detector's view: live nodes, all sequencer nodes of weight 1."""

    def __init__(self, live: set[int]) -> None:
        self.live = live

    def sequencer_weights(self) -> dict[int, float]:
        return {n: 1.0 for n in self.live}


def logs_of(node: int, view: View, n: int = 200) -> tuple[list[int], list[int]]:
    """(logs placement gives ``node``, logs it gives another node)."""
    owners = {log: sequencer_for(log, view.sequencer_weights()) for log in range(1, n)}
    return ([x for x, o in owners.items() if o == node],
            [x for x, o in owners.items() if o != node])


def test_placement_decides_and_others_are_redirected():
    view = View({0, 1, 2})
    own = LogOwnership(0, view)
    mine, theirs = logs_of(0, view)
    assert mine and theirs
    assert own.check(mine[0], active_here=False) == (E.OK, None, "")
    status, redirect, why = own.check(theirs[0], active_here=False)
    assert status == E.NOSEQUENCER and redirect == own.owner(theirs[0]) != 0
    assert f"N{redirect}" in why


def test_no_live_node_means_no_sequencer():
    own = LogOwnership(0, View(set()))
    assert own.check(1, active_here=False) == (E.NOSEQUENCER, None,
                                               "no sequencer node is alive")


def test_a_takeover_is_kept_until_placement_gives_the_log_or_it_is_released():
    view = View({0, 1, 2})
    own = LogOwnership(0, view)
    _, theirs = logs_of(0, view)
    log = theirs[0]
    assert own.check(log, active_here=False, no_redirect=True) == (E.OK, None, "")
    assert own.check(log, active_here=True) == (E.OK, None, "")  # no flag needed any more
    assert own.keeps(log)  # a view change keeps a taken-over log
    own.release(log)
    assert own.check(log, active_here=False)[0] == E.NOSEQUENCER
    # A log that placement gives us after a view change is ours by placement.
    own.check(log, active_here=False, no_redirect=True)
    view.live = {0}
    own.view_changed()
    assert own.keeps(log) and own.owner(log) == 0
    view.live = {0, 1, 2}
    own.view_changed()
    assert not own.keeps(log)  # the takeover was dropped when placement gave it to us


def test_a_preempted_log_goes_to_the_sealing_node_while_it_lives():
    view = View({0, 1, 2})
    own = LogOwnership(0, view)
    mine, _ = logs_of(0, view)
    log = mine[0]
    own.preempted(log, 2)
    assert own.check(log, active_here=False) == (E.NOSEQUENCER, 2,
                                                 f"log {log} was taken over by N2")
    assert own.redirect_for(log) == 2
    assert own.check(log, active_here=True) == (E.OK, None, "")  # a new epoch runs here
    view.live = {0, 1}  # the taker died: placement decides again
    assert own.taker(log) is None and own.redirect_for(log) == own.owner(log) == 0
    view.live = {0, 1, 2}
    own.activated(log)  # our own new epoch: the old preemption no longer stands
    assert own.taker(log) is None


def test_a_claim_forgets_a_preemption():
    view = View({0, 1, 2})
    own = LogOwnership(0, view)
    mine, _ = logs_of(0, view)
    own.preempted(mine[0], 1)
    assert own.check(mine[0], active_here=False, no_redirect=True) == (E.OK, None, "")


def test_after_a_view_change_the_logs_given_up_are_those_placement_moved():
    view = View({0, 1, 2})
    own = LogOwnership(0, view)
    mine, theirs = logs_of(0, view)
    taken = theirs[0]
    own.check(taken, active_here=False, no_redirect=True)  # a takeover stays
    assert own.given_up([*mine, taken]) == []
    view.live = {1, 2}  # this node's own placement weight is gone: every log moves...
    own.view_changed()
    assert own.given_up([*mine, taken]) == mine  # ...but the taken-over one
    assert all(own.owner(x) in (1, 2) for x in mine)
    view.live = set()
    own.view_changed()
    assert own.given_up(mine) == mine and own.owner(mine[0]) is None
