"""The SCD controller of a read stream: single copy delivery failover and mode changes.

In SCD mode each record is shipped by one node of its copyset (the first one not in the
known-down list).  The client keeps the known-down list and changes it by *rewinding*:
clear the buffer, bump the filter version, send START to every node again.  Nodes go on
the list when they cannot send (START failed, socket closed, checksum failure, no
progress within ``scd_timeout``) and come off it at a window slide once they ship records
again.  When the known-down nodes plus the nodes that have already passed the next LSN
cover the whole read set, or nothing moved for ``scd_all_send_all_timeout``, the stream
falls back to all-send-all; it returns to SCD at the next window slide.

``ScdController`` owns the mode, the known-down list and the stall timers, and decides:
it reads the per-node state (``Senders``), the nodes' authoritative status
(``FailureDomainNodeSet``) and the read pointer the stream passes in, and answers with a
pending rewind (``rewind_pending``).  A rewind requested while handling an event is
coalesced: the stream carries it out once, at the end of the event, by calling
``begin_rewind`` (which switches the mode) and then clearing its buffer and sending the
STARTs, which carry ``start_known_down``.
"""

from __future__ import annotations

from collections.abc import Callable

from logdevice.readstream.fmajority import AuthoritativeStatus, FailureDomainNodeSet
from logdevice.readstream.sender import Senders
from logdevice.readstream.window import RecordWindow

_FA = AuthoritativeStatus.FULLY_AUTHORITATIVE


class ScdController:
    """Single copy delivery state of a stream over ``[start, until]`` (``scd`` False:
    all-send-all for good)."""

    def __init__(self, scd: bool, start_lsn: int, until_lsn: int, senders: Senders,
                 window: RecordWindow, nodeset: FailureDomainNodeSet,
                 clock: Callable[[], float], scd_timeout: float,
                 all_send_all_timeout: float) -> None:
        self._until = until_lsn
        self._senders = senders
        self._states = senders.states
        self._window = window
        self._fmaj = nodeset
        self._clock = clock
        self._scd_timeout = scd_timeout
        self._asa_timeout = all_send_all_timeout
        self._wanted = bool(scd)  # the log uses SCD and the user did not force it off
        self._active = bool(scd)
        self._known_down: set[int] = set()
        self._rewind_pending = False
        self._mode_pending: str | None = None  # "scd" / "asa": the pending rewind's mode
        self._stall_since: float | None = None
        self._last_kd_change = clock()
        if self._active:
            self._known_down = self._kd_candidates(start_lsn)
            if len(self._known_down) >= len(senders):
                self._active = False
                self._known_down = set()

    # ------------------------------------------------------------------- state

    @property
    def active(self) -> bool:
        return self._active

    @property
    def known_down(self) -> frozenset[int]:
        return frozenset(self._known_down) if self._active else frozenset()

    def start_known_down(self) -> tuple[int, ...] | None:
        """The known-down list a START carries (sorted), None in all-send-all mode."""
        return tuple(sorted(self._known_down)) if self._active else None

    @property
    def rewind_pending(self) -> bool:
        return self._rewind_pending

    # ---------------------------------------------------------- known-down list

    def mark_down(self, node: int, nxt: int) -> bool:
        """Put ``node`` on the known-down list (rewind pending); False if it was there,
        or SCD is not active.  ``nxt`` is the read pointer."""
        if not self._active or node in self._known_down:
            return False
        self._known_down.add(node)
        self._last_kd_change = self._clock()
        self._request_rewind(nxt)
        return True

    def _kd_candidates(self, nxt: int) -> set[int]:
        """Nodes that belong on the known-down list when (re)entering SCD mode."""
        status = self._fmaj.status
        return {s.node for s in self._states
                if not s.connected or status[s.node] != _FA or s.bad_until > nxt}

    def _request_rewind(self, nxt: int, mode: str | None = None) -> None:
        if nxt > self._until:
            return
        self._rewind_pending = True
        if mode is not None:
            self._mode_pending = mode

    def force_no_scd(self, nxt: int) -> None:
        """Read in all-send-all mode from now on."""
        self._wanted = False
        if self._active:
            self._request_rewind(nxt, "asa")

    # ------------------------------------------------------------------- rewind

    def begin_rewind(self, nxt: int) -> bool:
        """The stream carries out the pending rewind from ``nxt``: switch to the mode
        it asked for.  False if there is nothing to rewind (the stream is done)."""
        self._rewind_pending = False
        mode, self._mode_pending = self._mode_pending, None
        if nxt > self._until:
            return False
        if mode == "asa":
            self._active = False
            self._known_down.clear()
        elif mode == "scd":
            self._active = True
            self._known_down = self._kd_candidates(nxt)
            self._stall_since = None
            self._last_kd_change = self._clock()
        if self._active and len(self._known_down) >= len(self._senders):
            # Nobody left to ship: every copy must come from everyone.
            self._active = False
            self._known_down.clear()
        return True

    # -------------------------------------------------------------- failover

    def after_progress(self, nxt: int) -> bool:
        """The stream moved as far as it could, to ``nxt``: fail over if nobody can send
        it (SCD mode).  True if a rewind is pending: the stream carries it out now.
        Otherwise start the stall timers if the stream looks stuck (after a rewind there
        is nothing to note: nothing is buffered and no node has passed ``nxt``)."""
        if self._active and not self._rewind_pending and nxt <= self._until:
            self._check_failover(nxt)
        if self._rewind_pending:
            return True
        if (self._active and self._stall_since is None and nxt <= self._until
                and (self._window.first_filled() != 0 or self._senders.any_passed(nxt))):
            # Something shows that LSNs past nxt exist (a buffered record, or a node
            # that has passed it): only then is a stall suspicious.
            self._stall_since = self._clock()
        return False

    def _check_failover(self, nxt: int) -> None:
        """Progress stalled at ``nxt`` in SCD mode: fail over if nobody can send it."""
        kd = self._known_down
        # Most of the time someone can still send nxt: count before building anything.
        unable = len(kd)
        for s in self._states:
            if s.next_lsn > nxt and s.node not in kd:
                unable += 1
        if unable < len(self._senders):
            return
        cannot = set(kd)
        ur_not_kd = []
        for s in self._states:
            if s.next_lsn > nxt:
                n = s.node
                cannot.add(n)
                if n not in kd and s.gap_state(nxt)[0] == 2:
                    ur_not_kd.append(n)
        if len(cannot) < len(self._senders):
            return
        if ur_not_kd:
            # Nodes that reported missing data: read their share from the other copies.
            for n in ur_not_kd:
                self.mark_down(n, nxt)
        else:
            self._request_rewind(nxt, "asa")

    def progressed(self) -> None:
        """The read pointer moved: no stall."""
        self._stall_since = None

    def _to_mark(self, nxt: int) -> list[int]:
        """Nodes the known-down timer would put on the list: those not yet past the read
        pointer, or none if that would leave nobody to ship."""
        kd = self._known_down
        down = [s.node for s in self._states if s.node not in kd and s.next_lsn <= nxt]
        if down and len(kd) + len(down) < len(self._senders):
            return down
        return []

    def _can_mark(self, nxt: int) -> bool:
        """Whether ``_to_mark`` names anyone (counted: asked after every event)."""
        kd = self._known_down
        down = 0
        for s in self._states:
            if s.next_lsn <= nxt and s.node not in kd:
                down += 1
        return down > 0 and len(kd) + down < len(self._senders)

    def _timer_deadlines(self, nxt: int) -> tuple[float | None, float | None]:
        """``(known_down, all_send_all)``: the times at which ``run_timers`` acts, None
        for a timer it cannot act on.  While a rewind is pending neither runs (it goes
        out with the event); a passed known-down timer with nobody to mark stays off until
        an event changes who could be marked."""
        if not self._active or self._stall_since is None or self._rewind_pending:
            return None, None
        asa = self._stall_since + self._asa_timeout
        kd = max(self._stall_since, self._last_kd_change) + self._scd_timeout
        return (kd if self._can_mark(nxt) else None), asa

    def run_timers(self, now: float, nxt: int) -> None:
        """Run the stall timers due at ``now``."""
        kd, asa = self._timer_deadlines(nxt)
        if kd is not None and now >= kd:
            for n in self._to_mark(nxt):
                self.mark_down(n, nxt)
        elif asa is not None and now >= asa:
            self._request_rewind(nxt, "asa")

    def deadline(self, nxt: int) -> float | None:
        """When ``run_timers`` next has work to do (None: only events matter)."""
        kd, asa = self._timer_deadlines(nxt)
        if kd is None:
            return asa
        return kd if asa is None else min(kd, asa)

    # ---------------------------------------------------------------- window

    def on_slide(self, nxt: int) -> None:
        """The window slides: known-down nodes that ship again come off the list; a
        stream that fell back to all-send-all returns to SCD (both by a rewind)."""
        if self._active:
            status = self._fmaj.status
            senders = self._senders
            back = [n for n in self._known_down
                    if (s := senders[n]).shipped_record and s.connected
                    and status[n] == _FA and s.bad_until <= nxt]
            if back:
                self._known_down.difference_update(back)
                self._last_kd_change = self._clock()
                self._request_rewind(nxt)
        elif (self._wanted and not self._rewind_pending
              and len(self._kd_candidates(nxt)) < len(self._senders)):
            self._request_rewind(nxt, "scd")
