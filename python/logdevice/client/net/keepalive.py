"""When a client stops waiting for a silent node: the keepalive of one connection (sans-I/O).

A node that is paused (SIGSTOP, a long stall of its process or disk) or cut off by the
network keeps its connections open: TCP reports nothing for minutes, and every request
on the connection would wait out its own timeout.  ``Keepalive`` judges the node from
what the client receives instead.  While requests are outstanding on the connection the
node must send something at least every ``dead_after`` seconds: the cluster's dead
timeout, the silence after which the nodes' failure detectors declare a node dead too.
A node that is alive but slow to answer (an append waiting for its storage nodes, a
sequencer waiting for recovery) is sent a probe after ``probe_after`` seconds of silence:
any cheap request that a live node answers at once (the client uses GET_CLUSTER_VIEW),
so only a node that cannot answer at all stays silent for ``dead_after``.  An idle
connection is not judged: nothing is waited for.

Silence that the client could not have heard proves nothing: if this client did not run
for a while (its loop was starved, the process paused), the silence starts again when it
is back, as the nodes' failure detector does after a stall of its own.

The owner calls ``start`` when the first request goes out on an idle connection,
``heard`` whenever bytes arrive, and ``check`` every ``tick`` seconds while requests are
outstanding; ``check`` says whether to probe or to give the node up.  Times are seconds
of one monotonic clock.
"""

from __future__ import annotations

from enum import Enum

__all__ = ["Keepalive", "Verdict"]


class Verdict(Enum):
    """What ``Keepalive.check`` asks of the connection."""

    WAIT = "wait"  # nothing to do yet
    PROBE = "probe"  # send a probe: a live node answers it at once
    GONE = "gone"  # silent for ``dead_after`` with requests outstanding: close it


class Keepalive:
    """Silence tracking of one connection.

    Parameters
    ----------
    dead_after : float
        Silence (with requests outstanding) after which the node is given up; > 0.
    probe_after : float, optional
        Silence after which a probe is sent (and again every ``probe_after`` while the
        silence lasts); default a third of ``dead_after``.
    """

    __slots__ = ("dead_after", "probe_after", "tick", "_quiet_since", "_probed_at",
                 "_last_check")

    def __init__(self, dead_after: float, probe_after: float | None = None) -> None:
        if not dead_after > 0:
            raise ValueError(f"dead_after must be > 0, got {dead_after!r}")
        self.dead_after = float(dead_after)
        self.probe_after = self.dead_after / 3 if probe_after is None else float(probe_after)
        if not 0 < self.probe_after <= self.dead_after:
            raise ValueError(f"need 0 < probe_after <= dead_after, got {self.probe_after!r}")
        #: How often the owner should call ``check`` while requests are outstanding: a
        #: silent node is given up at most this late.
        self.tick = min(self.probe_after, self.dead_after / 6)
        self._quiet_since = 0.0  # when the current silence began
        self._probed_at: float | None = None  # last probe of the current silence
        self._last_check: float | None = None  # None: idle (no check since start)

    @property
    def quiet_since(self) -> float:
        return self._quiet_since

    def start(self, now: float) -> None:
        """A request went out on an idle connection: the node owes an answer from now."""
        self._quiet_since = now
        self._probed_at = None
        self._last_check = now

    def heard(self, now: float) -> None:
        """Bytes arrived from the node."""
        self._quiet_since = now
        self._probed_at = None

    def check(self, now: float, busy: bool) -> Verdict:
        """Judge the silence at ``now``; ``busy``: requests are outstanding."""
        if not busy:
            self._last_check = None
            return Verdict.WAIT
        last, self._last_check = self._last_check, now
        if last is not None and now - last > self.dead_after / 2:
            # We did not run for a while: what the node sent may be waiting unread.
            self.heard(now)
            return Verdict.WAIT
        silence = now - self._quiet_since
        if silence >= self.dead_after:
            return Verdict.GONE
        if silence >= self.probe_after and (
                self._probed_at is None or now - self._probed_at >= self.probe_after):
            self._probed_at = now
            return Verdict.PROBE
        return Verdict.WAIT
