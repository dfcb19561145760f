"""Where a client sends a log's appends: the cluster view and the sequencer routing (sans-I/O).

The client keeps the last cluster view it fetched (alive nodes, sequencer weights), a
short list of nodes it could not reach itself ("suspects", routed around for a while) and
a per-log cache of where the sequencer was found.  ``route(log_id)`` answers with the
same weighted rendezvous hash the nodes use (``placement.sequencer_for``), so in a steady
cluster the first APPEND already lands on the owner; a node's redirect overrides it.
Nodes the view holds dead are never routed to, nor redirected to.

Takeovers.  When the node the view names is one the client could not reach itself
(suspected: refused, silent, cut off) while the cluster holds it alive, the client sends
the log's requests to the next node of the hash flagged ``NO_REDIRECT``: that node takes
the log over (see ``node.roles.sequencer_role``).  The same happens when a node redirects to a
suspect, and when two nodes redirect to each other (their views disagree: the one
redirected to twice is asked to serve).  Such a route sticks while its node is alive in
the view: the client does not move the log back and forth by itself; a view in which
that node is the hash's choice turns it into a plain route.

Time comes from an injected ``clock`` so tests drive it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from logdevice.config import Config
from logdevice.placement import sequencer_for
from logdevice.protocol import ClusterView

__all__ = ["Routing"]


class Routing:
    """Cluster view, suspects and per-log sequencer cache of one client.

    Parameters
    ----------
    config : Config
        Until a view is fetched, every sequencer node of the config counts as alive with
        its configured weight.
    suspect_time : float
        Seconds a node that failed us is left out of routing.
    view_refresh_interval : float
        Minimum seconds between view fetches (``view_due``).
    clock : callable
        Monotonic seconds.
    """

    def __init__(self, config: Config, *, suspect_time: float = 1.0,
                 view_refresh_interval: float = 0.1,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.suspect_time = suspect_time
        self.view_refresh_interval = view_refresh_interval
        self.clock = clock
        self.weights: dict[int, float] = config.sequencer_weights()
        self.alive: frozenset[int] = frozenset(n.index for n in config.nodes)
        self.view_time: float | None = None  # when the last view arrived (clock)
        self.view_from: int | None = None
        self._suspects: dict[int, float] = {}
        self._cache: dict[int, int] = {}
        self._takeovers: set[int] = set()  # logs whose cached route says NO_REDIRECT

    # ------------------------------------------------------------------ view

    def update_view(self, view: ClusterView) -> None:
        """Adopt a fetched view; cached routes that it may contradict are dropped, except
        takeover routes to nodes it holds alive."""
        alive = frozenset(i for i in view.alive if self.config.has_node(i))
        weights = {s.node_index: float(s.weight) for s in view.sequencers
                   if self.config.has_node(s.node_index)}
        if not weights:  # a node that reports no sequencers: keep the config's
            weights = self.config.sequencer_weights()
        changed = alive != self.alive or weights != self.weights
        self.alive = alive or self.alive
        self.weights = weights
        if changed:
            kept = {log_id: self._cache[log_id] for log_id in self._takeovers
                    if self._cache[log_id] in self.alive}
            self._cache = kept
            self._takeovers = {log_id for log_id, node in kept.items()
                               if node != sequencer_for(log_id, self.weights, self.alive)}
        self.view_time = self.clock()
        self.view_from = view.node_index

    def view_age(self) -> float:
        """Seconds since the last view arrived (infinite before the first)."""
        return float("inf") if self.view_time is None else self.clock() - self.view_time

    def view_due(self) -> bool:
        """Whether a refresh is allowed now (none fetched yet, or the last one is older
        than ``view_refresh_interval``)."""
        return (self.view_time is None
                or self.clock() - self.view_time >= self.view_refresh_interval)

    def view_sources(self, rotate: int = 0) -> list[int]:
        """Nodes to ask for a view, best first: believed alive and not suspected (in
        index order, rotated left by ``rotate``), then the rest of the config (someone
        may have come back)."""
        now = self.clock()
        everyone = sorted(n.index for n in self.config.nodes)
        good = [i for i in everyone if i in self.alive and not self._is_suspect(i, now)]
        if rotate and good:
            k = rotate % len(good)
            good = good[k:] + good[:k]
        return good + [i for i in everyone if i not in good]

    # ------------------------------------------------------------------ suspects

    def suspect(self, node: int) -> None:
        """We could not reach ``node``: route around it for ``suspect_time``."""
        self._suspects[node] = self.clock() + self.suspect_time
        for log_id in [k for k, v in self._cache.items() if v == node]:
            self.forget(log_id)

    def is_suspect(self, node: int) -> bool:
        return self._is_suspect(node, self.clock())

    def clear_suspect(self, node: int) -> None:
        self._suspects.pop(node, None)

    def _is_suspect(self, node: int, now: float) -> bool:
        until = self._suspects.get(node)
        if until is None:
            return False
        if until <= now:
            del self._suspects[node]
            return False
        return True

    # ------------------------------------------------------------------ routing

    def route(self, log_id: int) -> tuple[int | None, bool]:
        """``(node, no_redirect)``: where to send ``log_id``'s sequencer requests (None if
        no candidate is alive), and whether to flag them ``NO_REDIRECT`` (a takeover)."""
        node = self._cache.get(log_id)
        if node is not None:
            return node, log_id in self._takeovers
        now = self.clock()
        candidates = [i for i in self.alive if not self._is_suspect(i, now)]
        choice = sequencer_for(log_id, self.weights, self.alive)  # the cluster's
        node = sequencer_for(log_id, self.weights, candidates)
        if node is None:  # everyone suspected: try the view's choice anyway
            node = choice
        if node is None:
            return None, False
        self._cache[log_id] = node
        if node != choice:
            self._takeovers.add(log_id)
            return node, True
        return node, False

    def sequencer(self, log_id: int) -> int | None:
        """The node to send ``log_id``'s APPEND to, or None if no candidate is alive."""
        return self.route(log_id)[0]

    def redirect(self, log_id: int, node: int, source: int | None = None) -> bool:
        """Node ``source`` said ``log_id``'s sequencer is ``node``.  Followed unless the
        view holds ``node`` dead (False: the caller should refresh its view) or we could
        not reach it ourselves (then ``source`` is asked to take the log over)."""
        if not self.config.has_node(node):
            return False
        if self._is_suspect(node, self.clock()):
            if source is None or source == node:
                return False
            self.take_over(log_id, source)
            return True
        if node not in self.alive:
            self.forget(log_id)
            return False
        self._cache[log_id] = node
        self._takeovers.discard(log_id)
        return True

    def take_over(self, log_id: int, node: int) -> None:
        """Send ``log_id``'s requests to ``node`` flagged ``NO_REDIRECT``."""
        self._cache[log_id] = node
        self._takeovers.add(log_id)

    def forget(self, log_id: int) -> None:
        self._cache.pop(log_id, None)
        self._takeovers.discard(log_id)

    def storage_nodes(self, log_id: int) -> list[int]:
        """Where storage-side requests (head, trim, find_time, data_size) go: every
        storage node of the config.  The client does not read the epoch store, so it
        uses this superset of every nodeset the log ever had."""
        return [n.index for n in self.config.storage_nodes()]

