"""What the write path knows about storage nodes: down, graylisted, blacklisted, and how
long they take to answer a STORE.

``NodeHealth`` is the sequencer-side view (LogDevice's NodeSetState) that copyset selection
consults: nodes the failure detector reports down, nodes *graylisted* because they stayed
silent through a store timeout, and nodes *blacklisted* because they answered a STORE with
an error (no space, overloaded, disabled, ...), and nodes the event log says refuse new
copies (being rebuilt or drained: ``set_refusing``).  Gray- and blacklisting expire after
a while; ``down`` lasts until ``mark_up``, refusal until the event log lifts it.  One
instance may be shared by every sequencer of a node (it is keyed by node index only),
and should be: its ``latency`` (``StoreLatency``) learns from every log's waves how long
each node takes to answer, which a log with one record on its way could not learn alone.
Time is passed in (seconds, monotonic).
"""

from __future__ import annotations

import math

from ldcore.appenders import StoreLatency
from logdevice.errors import E

#: How long a silent node stays graylisted (seconds).
GRAYLIST_SECONDS = 5.0
#: How long a node that answered with an error stays blacklisted (seconds).
BLACKLIST_SECONDS = 10.0


class NodeHealth:
    """Down / graylisted / blacklisted storage nodes, with expiry.

    Parameters
    ----------
    graylist_seconds, blacklist_seconds : float
        How long a graylisting or blacklisting lasts.
    """

    def __init__(self, graylist_seconds: float = GRAYLIST_SECONDS,
                 blacklist_seconds: float = BLACKLIST_SECONDS) -> None:
        self.graylist_seconds = graylist_seconds
        self.blacklist_seconds = blacklist_seconds
        self.down: set[int] = set()
        self.refusing: frozenset[int] = frozenset()
        self._gray: dict[int, float] = {}  # node -> until
        self._black: dict[int, tuple[float, E]] = {}  # node -> (until, status)
        self._excluded: frozenset[int] = frozenset()
        self._valid_until = math.inf  # the cached exclusion set is stale from this time on
        self._dirty = False
        self.latency = StoreLatency()

    # -- events ---------------------------------------------------------------------------
    def mark_down(self, node: int) -> None:
        if node not in self.down:
            self.down.add(node)
            self._dirty = True

    def mark_up(self, node: int) -> None:
        """The node is back: forget that it was down, gray- or blacklisted."""
        if node in self.down or node in self._gray or node in self._black:
            self.down.discard(node)
            self._gray.pop(node, None)
            self._black.pop(node, None)
            self._dirty = True

    def set_refusing(self, nodes: frozenset[int]) -> None:
        """The nodes that take no new copies now (from the event log).  A node that
        leaves the set is forgiven the REBUILDING answers it was blacklisted for."""
        if nodes == self.refusing:
            return
        for node in self.refusing - nodes:
            self.forgive(node)
        self.refusing = frozenset(nodes)
        self._dirty = True

    def forgive(self, node: int) -> None:
        """Forget gray- and blacklisting of ``node`` (it reconnected afresh)."""
        if self._gray.pop(node, None) is not None or self._black.pop(node, None) is not None:
            self._dirty = True

    def graylist(self, node: int, now: float) -> None:
        self._gray[node] = now + self.graylist_seconds
        self._dirty = True

    def blacklist(self, node: int, status: E | int, now: float) -> None:
        try:
            st = E(status)
        except ValueError:  # a status this version does not know: still an error
            st = E.FAILED
        self._black[node] = (now + self.blacklist_seconds, st)
        self._dirty = True

    def clear_graylist(self) -> None:
        """Forget all graylistings (done when they alone make selection impossible)."""
        if self._gray:
            self._gray.clear()
            self._dirty = True

    # -- queries --------------------------------------------------------------------------
    def excluded(self, now: float) -> frozenset[int]:
        """Nodes copyset selection must avoid now (a cached frozenset)."""
        if self._dirty or now >= self._valid_until:
            self._expire(now)
            self._excluded = frozenset(self.down | self.refusing | self._gray.keys()
                                       | self._black.keys())
            self._valid_until = min(
                [*self._gray.values(), *(u for u, _ in self._black.values()), math.inf])
            self._dirty = False
        return self._excluded

    def _expire(self, now: float) -> None:
        for node in [n for n, until in self._gray.items() if until <= now]:
            del self._gray[node]
        for node in [n for n, (until, _) in self._black.items() if until <= now]:
            del self._black[node]

    def must_avoid(self, now: float) -> frozenset[int]:
        """The nodes selection avoids even when the others cannot hold a copyset: down,
        out of space, overloaded or being rebuilt.  A node blacklisted for a failure of
        its own (it was stopping, its connection broke) is worth another try before an
        append fails."""
        self.excluded(now)
        return frozenset(self.down | self.refusing
                         | {n for n, (_, st) in self._black.items()
                            if st in (E.NOSPC, E.OVERLOADED, E.REBUILDING)})

    def graylisted(self, now: float) -> frozenset[int]:
        self.excluded(now)
        return frozenset(self._gray)

    def blacklisted(self, now: float) -> dict[int, E]:
        """Blacklisted node -> the status it answered with."""
        self.excluded(now)
        return {n: st for n, (_, st) in self._black.items()}
