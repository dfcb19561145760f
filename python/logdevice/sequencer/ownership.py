"""Which logs a node sequences (sans-I/O): placement's choice, takeovers and preemptions.

A log's sequencer runs where ``placement.sequencer_for`` puts it among the live sequencer
nodes.  Two things override that choice:

- a takeover: a client that cannot reach the log's node sends ``NO_REDIRECT``, and this
  node then serves the log (``claim``) until placement gives it the log anyway or its
  sequencer stops (``release``);
- a preemption: the node whose recovery sealed our epoch took the log
  (``preempted``); requests for the log go there while the failure detector holds that
  node alive, instead of activating a new epoch here on the next request.

``LogOwnership`` keeps those two sets and a cache of placement's answers, cleared when
the cluster view or the config changes (``view_changed``).  The sequencer role asks it
whether to serve a request (``check``) and where to send one it does not serve
(``redirect_for``).
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import Protocol

from logdevice.errors import E
from logdevice.placement import sequencer_for, sequencers_for

__all__ = ["LiveNodes", "LogOwnership"]

log = logging.getLogger("logdevice.node.sequencer")  # the sequencer role's log


class LiveNodes(Protocol):
    """What ownership asks the failure detector."""

    @property
    def live(self) -> Collection[int]:
        """Nodes placement counts as alive now."""

    def sequencer_weights(self) -> dict[int, float]:
        """Live sequencer nodes and their weights."""


class LogOwnership:
    """The logs node ``me`` serves, given the failure detector's view (``live``)."""

    def __init__(self, me: int, live: LiveNodes) -> None:
        self.me = me
        self.live = live
        self._owners: dict[int, int | None] = {}  # placement's answers in this view
        self._taken_over: set[int] = set()  # logs served here for NO_REDIRECT requests
        self._preempted_by: dict[int, int] = {}  # log -> the node that sealed our epoch

    def owner(self, log_id: int) -> int | None:
        """The node placement puts ``log_id``'s sequencer on now (None: no node alive)."""
        try:
            return self._owners[log_id]
        except KeyError:
            owner = self._owners[log_id] = sequencer_for(log_id,
                                                         self.live.sequencer_weights())
            return owner

    def view_changed(self) -> None:
        """The live nodes, their weights or the nodes changed: ask placement again."""
        self._owners.clear()

    def given_up(self, log_ids: Collection[int]) -> list[int]:
        """After a view change: the logs of ``log_ids`` this node stops serving (those
        ``keeps`` says no to), placement asked once for all of them."""
        ids = list(log_ids)
        owners = sequencers_for(ids, self.live.sequencer_weights()).tolist()
        self._owners.update(
            (log_id, None if o < 0 else o) for log_id, o in zip(ids, owners, strict=True))
        return [log_id for log_id in ids if not self.keeps(log_id)]

    def keeps(self, log_id: int) -> bool:
        """After a view change: whether this node keeps serving ``log_id``.  A log that
        placement now gives us is ours by placement, no longer a takeover."""
        if self.owner(log_id) == self.me:
            self._taken_over.discard(log_id)
            return True
        return log_id in self._taken_over

    def check(self, log_id: int, active_here: bool,
              no_redirect: bool = False) -> tuple[E, int | None, str]:
        """(status, redirect, message) for a request on ``log_id``: OK if this node
        serves it.  ``active_here``: a sequencer of the log runs here; ``no_redirect``:
        the client asks this node to serve the log (it cannot reach the owner)."""
        if no_redirect:
            self.claim(log_id, active_here)
        if log_id in self._taken_over:
            return E.OK, None, ""
        owner = self.owner(log_id)
        if owner != self.me:
            if owner is None:
                return E.NOSEQUENCER, None, "no sequencer node is alive"
            return E.NOSEQUENCER, owner, f"log {log_id} is sequenced by N{owner}"
        taker = self.taker(log_id)
        if taker is not None and not active_here:
            return E.NOSEQUENCER, taker, f"log {log_id} was taken over by N{taker}"
        return E.OK, None, ""

    def claim(self, log_id: int, active_here: bool) -> None:
        """A client that cannot reach the log's sequencer asks this node to serve it."""
        self._preempted_by.pop(log_id, None)
        if active_here or log_id in self._taken_over:
            return
        owner = self.owner(log_id)
        if owner != self.me:
            log.info("log %d: taking it over from N%s for a client that cannot reach it",
                     log_id, owner)
            self._taken_over.add(log_id)

    def release(self, log_id: int) -> None:
        """The log's sequencer here stopped (or never started): no takeover to keep."""
        self._taken_over.discard(log_id)

    def preempted(self, log_id: int, by: int) -> None:
        """Node ``by`` sealed our epoch of ``log_id``: requests go there while it lives."""
        self._preempted_by[log_id] = by

    def activated(self, log_id: int) -> None:
        """A sequencer of ``log_id`` started here: no other node's takeover stands."""
        self._preempted_by.pop(log_id, None)

    def taker(self, log_id: int) -> int | None:
        """The node that took ``log_id`` from us, while the failure detector holds it
        alive."""
        taker = self._preempted_by.get(log_id)
        return taker if taker is not None and taker in self.live.live else None

    def redirect_for(self, log_id: int) -> int | None:
        """Where a request this node no longer serves should go."""
        taker = self.taker(log_id)
        return taker if taker is not None else self.owner(log_id)
