"""Single copy delivery failover, rewinds and window slides of a read stream.

In SCD mode each record is shipped by one node of its copyset (the first one not in the
known-down list).  The client keeps the known-down list and changes it by *rewinding*:
clear the buffer, bump the filter version, send START to every node again.  Nodes go on
the list when they cannot send (START failed, socket closed, checksum failure, no
progress within ``scd_timeout``) and come off it at a window slide once they ship records
again.  When the known-down nodes plus the nodes that have already passed the next LSN
cover the whole read set, or nothing moved for ``scd_all_send_all_timeout``, the stream
falls back to all-send-all; it returns to SCD at the next window slide.

A rewind requested while handling an event is coalesced and done once, at the end of it.
"""

from __future__ import annotations

from logdevice.readstream.base import StreamBase
from logdevice.readstream.fmajority import AuthoritativeStatus
from logdevice.readstream.sender import SenderState


class ScdMixin(StreamBase):
    # ------------------------------------------------------------ known-down list

    def _add_known_down(self, node: int) -> bool:
        """Put ``node`` on the known-down list (rewind pending); False if it was there,
        or SCD is not active."""
        if not self._scd_active or node in self._known_down:
            return False
        self._known_down.add(node)
        self._last_kd_change = self._clock()
        self._request_rewind()
        return True

    def _kd_candidates(self) -> set[int]:
        """Nodes that belong on the known-down list when (re)entering SCD mode."""
        fa = AuthoritativeStatus.FULLY_AUTHORITATIVE
        status = self._fmaj.status
        return {s.node for s in self._senders
                if not s.connected or status[s.node] != fa or s.bad_until > self._next}

    def _request_rewind(self, mode: str | None = None) -> None:
        if self._next > self._until:
            return
        self._rewind_pending = True
        if mode is not None:
            self._mode_pending = mode

    # ------------------------------------------------------------------- rewind

    def _send_start(self, s: SenderState) -> None:
        kd = tuple(sorted(self._known_down)) if self._scd_active else None
        self._senders.send_start(s, self._next, self._window.high, kd)

    def _rewind(self) -> None:
        self._rewind_pending = False
        mode, self._mode_pending = self._mode_pending, None
        if self._next > self._until:
            return
        self._window.clear(self._next)
        self._senders.new_version()
        self._gaps.cancel_grace()
        if mode == "asa":
            self._scd_active = False
            self._known_down.clear()
        elif mode == "scd":
            self._scd_active = True
            self._known_down = self._kd_candidates()
            self._stall_since = None
            self._last_kd_change = self._clock()
        if self._scd_active and len(self._known_down) >= len(self._senders):
            # Nobody left to ship: every copy must come from everyone.
            self._scd_active = False
            self._known_down.clear()
        for s in self._senders:
            self._send_start(s)

    # -------------------------------------------------------------- failover

    def _check_scd_failover(self) -> None:
        """After progress stalled in SCD mode: fail over if nobody can send next."""
        nxt = self._next
        kd = self._known_down
        cannot = set(kd)
        ur_not_kd = []
        for s in self._senders:
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
                self._add_known_down(n)
        else:
            self._request_rewind("asa")

    def _has_evidence(self) -> bool:
        """Whether anything shows that LSNs past the read pointer exist (a buffered
        record, or a node that has passed it): only then is a stall suspicious."""
        if self._window.first_filled() != 0:
            return True
        nxt = self._next
        return self._senders.any_passed(nxt)

    def _note_stall(self) -> None:
        if (self._scd_active and self._stall_since is None and self._next <= self._until
                and self._has_evidence()):
            self._stall_since = self._clock()

    def _scd_to_mark(self) -> list[int]:
        """Nodes the known-down timer would put on the list: those not yet past the read
        pointer, or none if that would leave nobody to ship."""
        nxt = self._next
        down = [s.node for s in self._senders
                if s.node not in self._known_down and s.next_lsn <= nxt]
        if down and len(self._known_down) + len(down) < len(self._senders):
            return down
        return []

    def _scd_timer_deadlines(self) -> tuple[float | None, float | None]:
        """``(known_down, all_send_all)``: the times at which ``_scd_timers`` acts, None
        for a timer it cannot act on.  While a rewind is pending neither runs (it goes
        out with the event); a passed known-down timer with nobody to mark stays off until
        an event changes who could be marked."""
        if not self._scd_active or self._stall_since is None or self._rewind_pending:
            return None, None
        asa = self._stall_since + self._asa_timeout
        kd = max(self._stall_since, self._last_kd_change) + self._scd_timeout
        return (kd if self._scd_to_mark() else None), asa

    def _scd_timers(self, now: float) -> None:
        kd, asa = self._scd_timer_deadlines()
        if kd is not None and now >= kd:
            for n in self._scd_to_mark():
                self._add_known_down(n)
        elif asa is not None and now >= asa:
            self._request_rewind("asa")

    def _scd_deadline(self) -> float | None:
        kd, asa = self._scd_timer_deadlines()
        if kd is None:
            return asa
        return kd if asa is None else min(kd, asa)

    # ---------------------------------------------------------------- window

    def _after_consume(self) -> None:
        """The application took records: slide the window if due."""
        if self._window.slide_due(self._delivery.consumed) and self._next <= self._until:
            self._slide()
        self._after_event()

    def _slide(self) -> None:
        self._window.slide(self._delivery.consumed)
        if self._scd_active:
            fa = AuthoritativeStatus.FULLY_AUTHORITATIVE
            back = [n for n in self._known_down
                    if (s := self._senders[n]).shipped_record and s.connected
                    and self._fmaj.status[n] == fa and s.bad_until <= self._next]
            if back:
                self._known_down.difference_update(back)
                self._last_kd_change = self._clock()
                self._request_rewind()
        elif (self._scd_wanted and not self._rewind_pending
              and len(self._kd_candidates()) < len(self._senders)):
            self._request_rewind("scd")
        if self._rewind_pending:
            self._rewind()  # the STARTs carry the new window
            return
        for s in self._senders:
            if s.connected:
                self._send_window(s)

    def _send_window(self, s: SenderState) -> None:
        self._senders.send_window(s, self._window.high)
