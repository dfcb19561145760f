"""The sender state part of a read stream: what it knows about each node of the read set
(``SenderState``) and the read set as a whole (``Senders``: filter version, reconnects,
the START/WINDOW/STOP messages to the nodes).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, ValuesView

from logdevice.backoff import ExponentialBackoff
from logdevice.readstream.actions import SendStart, SendStop, SendWindow


class SenderState:
    """What the stream knows about one node of the read set.

    ``next_lsn`` is the smallest LSN the node may still send: a record at X or a gap
    ending at X - 1 says it has nothing below X.  ``ur_regions`` are under-replicated
    ranges ``[lo, until)``: the node may be missing records there (or holds a copy that
    failed its checksum), so its "nothing here" does not count for gap detection.
    ``bad_until`` remembers a checksum failure: while the read pointer is below it, the
    node stays off the SCD read set.
    """

    __slots__ = (
        "node",
        "next_lsn",
        "ur_regions",
        "bad_until",
        "acked_version",
        "connected",
        "shipped_record",
        "reconnect_at",
        "reconnects",
        "window_sent",
    )

    def __init__(self, node: int) -> None:
        self.node = node
        self.next_lsn = 0
        self.ur_regions: list[tuple[int, int]] = []
        self.bad_until = 0
        self.acked_version = 1  # the first START is implicitly acknowledged
        self.connected = True
        self.shipped_record = False  # sent a record since its last START
        self.reconnect_at: float | None = None
        self.reconnects = 0  # STARTs resent since it last acknowledged one (the backoff)
        self.window_sent = 0  # window_high in the last START or WINDOW sent to it

    def reset_for_start(self) -> None:
        """A new START goes out: the node will resend from the read pointer."""
        self.next_lsn = 0
        self.ur_regions = []
        self.shipped_record = False
        self.reconnect_at = None

    def mark_under_replicated(self, lo: int, hi: int, next_to_deliver: int) -> None:
        """The node may be missing records in ``[lo, hi]`` (regions arrive in LSN order,
        like everything a node sends)."""
        regions = [r for r in self.ur_regions if r[1] > next_to_deliver]
        if regions and regions[-1][1] >= lo:
            last = regions[-1]
            regions[-1] = (min(last[0], lo), max(last[1], hi + 1))
        else:
            regions.append((lo, hi + 1))
        self.ur_regions = regions

    def gap_state(self, next_to_deliver: int) -> tuple[int, int]:
        """``(state, marker)`` for the LSN ``next_to_deliver``: state 0 NONE (may still
        send it), 1 GAP, 2 UNDER_REPLICATED; marker is the next LSN where the state
        changes (a gap cannot extend past it)."""
        if self.next_lsn <= next_to_deliver:
            return 0, 0
        for lo, until in self.ur_regions:
            if until > next_to_deliver:
                if lo <= next_to_deliver:
                    return 2, until
                return 1, lo
        return 1, self.next_lsn

    def advance_to(self, lsn: int) -> None:
        """The node has nothing below ``lsn`` (a gap ending at ``lsn - 1``)."""
        if lsn > self.next_lsn:
            self.next_lsn = lsn

    def checksum_failed(self, lsn: int, next_to_deliver: int) -> None:
        """The node's copy of ``lsn`` exists but is bad: its silence there proves nothing
        (it counts as under-replicated) and it stays off the SCD read set until the read
        pointer passes ``lsn``."""
        self.mark_under_replicated(lsn, lsn, next_to_deliver)
        self.bad_until = max(self.bad_until, lsn + 1)
        self.advance_to(lsn + 1)

    def __repr__(self) -> str:
        return (f"SenderState(node={self.node}, next_lsn={self.next_lsn}, "
                f"ur_regions={self.ur_regions}, connected={self.connected}, "
                f"acked_version={self.acked_version})")


@functools.lru_cache(maxsize=16)
def _schedule(initial: float, maximum: float) -> ExponentialBackoff:
    return ExponentialBackoff(initial, maximum)


class Senders:
    """The read set as one part: every node's ``SenderState``, the stream's filter
    version, reconnect backoff, and the messages to the nodes.

    Messages go out through ``take_actions`` (``SendStart``, ``SendWindow``,
    ``SendStop``), never through a socket.  The filter version stamps every START and
    WINDOW; a rewind bumps it (``new_version``) so that replies to an older START are
    dropped (``accept``).  ``states`` (like iterating) yields the ``SenderState`` of each
    node, in nodeset order: the view the gap detector and the SCD controller read (and
    never change).
    """

    def __init__(self, nodes: Iterable[int], until_lsn: int, clock: Callable[[], float],
                 reconnect_delay: float, reconnect_max_delay: float) -> None:
        self._states = {n: SenderState(n) for n in nodes}
        # One schedule for every node; each node counts its own attempts (``delay`` reads
        # no state: streams with the same settings share one schedule).
        self._backoff = _schedule(reconnect_delay, reconnect_max_delay)
        self._view = self._states.values()  # the nodeset is fixed: a live view of it
        self._until = until_lsn
        self._clock = clock
        self._filter_version = 1
        self._actions: list[SendStart | SendWindow | SendStop] = []

    # ------------------------------------------------------------------ the set

    @property
    def states(self) -> ValuesView[SenderState]:
        """Every node's state, in nodeset order: what iterating yields, as a live view
        (iterating it costs no Python call per step)."""
        return self._view

    def __len__(self) -> int:
        return len(self._states)

    def __iter__(self) -> Iterator[SenderState]:
        return iter(self._states.values())

    def __contains__(self, node: object) -> bool:
        return node in self._states

    def __getitem__(self, node: int) -> SenderState:
        return self._states[node]

    def get(self, node: int) -> SenderState | None:
        return self._states.get(node)

    def any_passed(self, lsn: int) -> bool:
        """Whether some node has said it has nothing more at ``lsn``."""
        for s in self._view:  # noqa: SIM110  (a generator costs a frame; runs per event)
            if s.next_lsn > lsn:
                return True
        return False

    # ---------------------------------------------------------------- versions

    @property
    def filter_version(self) -> int:
        return self._filter_version

    def new_version(self) -> None:
        """A rewind: replies to STARTs sent before it no longer count."""
        self._filter_version += 1

    def accept(self, node: int, filter_version: int | None) -> SenderState | None:
        """The node's state if a message from it carrying ``filter_version`` (None: the
        message has none, it belongs to the last START the node acknowledged) is
        current; None if it must be dropped."""
        s = self._states.get(node)
        if s is None:
            return None
        if filter_version is not None:
            if filter_version != self._filter_version:
                return None  # from before the last rewind
            s.acked_version = filter_version
        elif s.acked_version != self._filter_version:
            return None
        return s

    # ------------------------------------------------------------- connections

    def started(self, s: SenderState) -> None:
        """The node acknowledged the current START."""
        s.acked_version = self._filter_version
        s.connected = True
        s.reconnects = 0
        s.reconnect_at = None

    def schedule_reconnect(self, s: SenderState) -> None:
        """Send START to the node again after its backoff (doubling up to the max)."""
        if s.reconnect_at is None:
            s.reconnect_at = self._clock() + self._backoff.delay(s.reconnects)
            s.reconnects += 1

    def due_reconnects(self, now: float) -> list[SenderState]:
        due = []
        for s in self._view:  # a loop, not a comprehension: this runs at every poll
            if s.reconnect_at is not None and now >= s.reconnect_at:
                due.append(s)
        return due

    def next_reconnect(self) -> float | None:
        best = None  # (asked after every event: no list built)
        for s in self._states.values():
            t = s.reconnect_at
            if t is not None and (best is None or t < best):
                best = t
        return best

    # ---------------------------------------------------------------- messages

    def send_start(self, s: SenderState, start_lsn: int, window_high: int,
                   known_down: tuple[int, ...] | None) -> None:
        """START to the node: resend from ``start_lsn``; single copy delivery with
        ``known_down`` unless it is None."""
        s.reset_for_start()
        s.window_sent = window_high
        self._actions.append(SendStart(s.node, start_lsn, self._until, window_high,
                                       known_down is not None, known_down or (),
                                       self._filter_version))

    def send_window(self, s: SenderState, window_high: int) -> None:
        s.window_sent = window_high
        self._actions.append(SendWindow(s.node, window_high, self._filter_version))

    def send_stop_all(self) -> None:
        self._actions.extend(SendStop(n) for n in self._states)

    def take_actions(self) -> list[SendStart | SendWindow | SendStop]:
        out, self._actions = self._actions, []
        return out
