"""Seal checks: a sequencer makes sure its epoch is still the log's before it answers a tail.

A sequencer hears that a newer epoch took its log over from a STORED(PREEMPTED) or from
a seal of its own node's storage.  One that stores nothing meanwhile (the log is idle,
or the node was cut off while another node's recovery sealed its epoch, and came back)
would answer GET_TAIL from its own release pointer, older than what the newer sequencer
may already have answered: the log's tail would go back.  So, as LogDevice's sequencers
do, it first asks the storage nodes of its nodeset for their seal of the log
(CHECK_SEAL):

- a seal at or above its epoch: it was preempted (``Preempted``, naming the sealing node
  when the storage node knows it);
- ``needed`` nodes (the replication factor R) without one: it was not, as of the check
  (``Confirmed``).  A newer sequencer answers nothing before its recovery sealed an
  f-majority of the nodeset (all but R - 1 nodes), and any R nodes include one of them.

A GET_TAIL that arrives while a check is out waits for the next one: only a check sent
after the request arrived can vouch for the answer.  A check not decided within
``timeout`` (a sequencer cut off from its storage nodes cannot tell) or answered by too
few nodes ends ``Undecided``.  Waiters are the caller's opaque values, handed back in
the verdict.

Sans-I/O, like the other state machines here: calls return actions, the node sends the
``SendCheckSeal``s and answers the waiters; time comes from an injected ``clock``::

    checks = SealChecks(timeout=2.0, clock=loop.time)
    checks.request(log_id, epoch, nodeset, needed, waiter)  # -> [SendCheckSeal ...]
    checks.on_reply(request_id, node, status, seal_epoch, sealed_by)  # -> [Confirmed ...]
    checks.on_timer()  when  checks.next_deadline() has passed
    checks.cancel(log_id)  # the sequencer went away: its waiters, to answer otherwise
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from logdevice.errors import E

__all__ = ["SealChecks", "SendCheckSeal", "Confirmed", "Preempted", "Undecided"]


class SendCheckSeal(NamedTuple):
    """Ask ``node`` for its seal of ``log_id`` (CHECK_SEAL with ``request_id``)."""

    node: int
    log_id: int
    epoch: int
    request_id: int


class Confirmed(NamedTuple):
    """Enough storage nodes hold no seal of ``epoch``: answer ``waiters`` from it."""

    log_id: int
    epoch: int
    waiters: list[Any]


class Preempted(NamedTuple):
    """A storage node holds ``log_id`` sealed at ``seal_epoch`` >= ``epoch``, by node
    ``sealed_by`` (None: not known); every waiter of the log is handed back."""

    log_id: int
    epoch: int
    seal_epoch: int
    sealed_by: int | None
    waiters: list[Any]


class Undecided(NamedTuple):
    """Too few storage nodes answered in time to tell."""

    log_id: int
    epoch: int
    waiters: list[Any]


class _Check:
    """One CHECK_SEAL round of one log's sequencer."""

    __slots__ = ("request_id", "log_id", "epoch", "asked", "needed", "waiters",
                 "unsealed", "answered", "deadline")

    def __init__(self, request_id: int, log_id: int, epoch: int, asked: tuple[int, ...],
                 needed: int, waiters: list[Any], deadline: float) -> None:
        self.request_id = request_id
        self.log_id = log_id
        self.epoch = epoch
        self.asked = asked
        self.needed = needed
        self.waiters = waiters
        self.unsealed: set[int] = set()
        self.answered: set[int] = set()
        self.deadline = deadline


class _Log:
    """One log's check in flight and the waiters for the next one."""

    __slots__ = ("epoch", "nodeset", "needed", "current", "queued")

    def __init__(self, epoch: int, nodeset: tuple[int, ...], needed: int) -> None:
        self.epoch = epoch
        self.nodeset = nodeset
        self.needed = needed
        self.current: _Check | None = None
        self.queued: list[Any] = []


class SealChecks:
    """The seal checks of one node's sequencers.

    Parameters
    ----------
    timeout : float
        Seconds a check may take before it ends ``Undecided``.
    clock : callable
        Monotonic seconds.
    """

    def __init__(self, timeout: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.timeout = timeout
        self._clock = clock
        self._logs: dict[int, _Log] = {}
        self._by_request: dict[int, _Check] = {}
        self._deadlines: list[tuple[float, int]] = []  # (deadline, request id), lazy
        self._ids = itertools.count(1)

    def request(self, log_id: int, epoch: int, nodeset: Iterable[int], needed: int,
                waiter: Any, now: float | None = None) -> list:
        """``waiter`` wants the tail of ``log_id``'s sequencer in ``epoch`` (whose
        storage nodes are ``nodeset``, ``needed`` of them must vouch)."""
        state = self._logs.get(log_id)
        if state is None or state.epoch != epoch:
            out = self._drop(log_id) if state is not None else []
            nodes = tuple(dict.fromkeys(int(n) for n in nodeset))
            state = self._logs[log_id] = _Log(epoch, nodes, max(1, min(needed, len(nodes))))
        else:
            out = []
        state.queued.append(waiter)
        if state.current is None:
            self._start(out, state, log_id, self._clock() if now is None else now)
        return out

    def on_reply(self, request_id: int, node: int, status: E | int, seal_epoch: int = 0,
                 sealed_by: int = -1, now: float | None = None) -> list:
        """``node``'s answer to CHECK_SEAL ``request_id``: OK with its seal of the log
        (``seal_epoch``, 0 if none, set by ``sealed_by``, -1 if not known), or why
        it cannot tell."""
        check = self._by_request.get(request_id)
        if check is None or node not in check.asked or node in check.answered:
            return []
        check.answered.add(node)
        state = self._logs[check.log_id]
        out: list = []
        if status == E.OK and seal_epoch >= check.epoch:
            waiters = check.waiters + state.queued
            self._forget(check)
            del self._logs[check.log_id]
            out.append(Preempted(check.log_id, check.epoch, seal_epoch,
                                 sealed_by if sealed_by >= 0 else None, waiters))
            return out
        if status == E.OK:
            check.unsealed.add(node)
        if len(check.unsealed) >= check.needed:
            self._finish(out, state, check, Confirmed(check.log_id, check.epoch,
                                                      check.waiters), now)
        elif len(check.answered) == len(check.asked):
            self._finish(out, state, check, Undecided(check.log_id, check.epoch,
                                                      check.waiters), now)
        return out

    def next_deadline(self) -> float | None:
        """When ``on_timer`` next has work (monotonic seconds), or None."""
        heap, live = self._deadlines, self._by_request
        while heap:
            deadline, request_id = heap[0]
            check = live.get(request_id)
            if check is not None and check.deadline == deadline:
                return deadline
            heapq.heappop(heap)
        return None

    def on_timer(self, now: float | None = None) -> list:
        """End every check past its deadline ``Undecided``."""
        now = self._clock() if now is None else now
        out: list = []
        heap = self._deadlines
        while heap and heap[0][0] <= now:
            _, request_id = heapq.heappop(heap)
            check = self._by_request.get(request_id)
            if check is not None and check.deadline <= now:
                self._finish(out, self._logs[check.log_id], check,
                             Undecided(check.log_id, check.epoch, check.waiters), now)
        return out

    def cancel(self, log_id: int) -> list[Any]:
        """The log's sequencer went away: forget its checks; the waiters, to answer."""
        state = self._logs.pop(log_id, None)
        if state is None:
            return []
        waiters = list(state.queued)
        if state.current is not None:
            waiters = state.current.waiters + waiters
            self._forget(state.current)
        return waiters

    def _drop(self, log_id: int) -> list:
        """A request for a newer epoch of the log: the older epoch's waiters cannot be
        vouched for any more."""
        state = self._logs[log_id]
        return [Undecided(log_id, state.epoch, self.cancel(log_id))]

    def _start(self, out: list, state: _Log, log_id: int, now: float) -> None:
        request_id = next(self._ids)
        check = _Check(request_id, log_id, state.epoch, state.nodeset, state.needed,
                       state.queued, now + self.timeout)
        state.queued = []
        state.current = check
        self._by_request[request_id] = check
        heapq.heappush(self._deadlines, (check.deadline, request_id))
        out.extend(SendCheckSeal(n, log_id, state.epoch, request_id) for n in state.nodeset)

    def _finish(self, out: list, state: _Log, check: _Check, verdict: Any,
                now: float | None) -> None:
        self._forget(check)
        state.current = None
        out.append(verdict)
        if state.queued:
            self._start(out, state, check.log_id, self._clock() if now is None else now)
        else:
            del self._logs[check.log_id]

    def _forget(self, check: _Check) -> None:
        self._by_request.pop(check.request_id, None)
