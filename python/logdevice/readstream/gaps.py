"""Moving the read pointer: deliver what is buffered, and detect gaps.

The head of the window buffer is the next LSN to deliver.  When its slot is filled the
contiguous run behind it goes out.  When it is empty, the stream may still move on:

* past the trim point (one TRIM gap);
* over ESN 0 of an epoch whose first record is buffered (a BRIDGE, no quorum needed);
* by gap detection: once the nodes that passed the LSN form an f-majority (a set that
  meets every possible copyset), no copy can exist.  A complete answer (every counting
  node) issues the gap at once; an incomplete one waits out the grace period first, in
  case a slow node has the record.  Never in SCD mode, where a missing LSN more likely
  means a node that should ship it is stuck: ``scd`` fails over instead.

The gap runs up to the first LSN some node has (or stops being silent about), and is
typed by ``_gap_type`` below.
"""

from __future__ import annotations

from logdevice.readstream.actions import ESN_MAX
from logdevice.readstream.base import StreamBase
from logdevice.readstream.batches import Chunk
from logdevice.readstream.fmajority import FMajorityResult
from logdevice.records import GapType


class GapsMixin(StreamBase):
    def _skip_to(self, lsn: int) -> None:
        """Move the read pointer (and buffer head) forward to ``lsn``."""
        self._window.skip_to(lsn)
        self._next = lsn

    def _deliver_run(self, chunk: Chunk) -> None:
        """Queue a run popped from the buffer; the read pointer moves past it (and past
        the rest of an epoch a bridge record in it ends)."""
        self._next = int(chunk.lsns[-1]) + 1
        skip = self._delivery.add_run(chunk)
        if skip is not None:
            self._skip_to(skip)

    def _progress(self, grace_expired: bool = False) -> bool:
        """Deliver whatever the buffer and gap detection allow; True if anything moved."""
        moved = False
        win = self._window
        while self._next <= self._until:
            nxt = self._next
            if self._trim >= nxt:
                hi = min(self._trim, self._until)
                self._delivery.add_gap(GapType.TRIM, nxt, hi)
                self._skip_to(hi + 1)
            else:
                chunk = win.pop_run()
                if chunk is not None:
                    self._deliver_run(chunk)
                elif (nxt & ESN_MAX) == 0 and win.size > 1 and nxt < self._until \
                        and win.holds(nxt + 1):
                    # ESN 0 never holds a record: an epoch that starts right after it
                    # needs no f-majority.
                    self._delivery.add_gap(GapType.BRIDGE, nxt, nxt)
                    self._skip_to(nxt + 1)
                elif self._scd_active or not self._detect_gap(grace_expired):
                    break
            moved = True
            self._grace_deadline = None
            self._stall_since = None
        return moved

    def _detect_gap(self, grace_expired: bool) -> bool:
        """Issue a gap at the read pointer if enough nodes say nothing is there."""
        nxt = self._next
        gap: set[int] = set()
        ur: set[int] = set()
        end = 0
        for s in self._senders:
            if s.next_lsn > nxt:
                state, m = s.gap_state(nxt)
                (ur if state == 2 else gap).add(s.node)
                if end == 0 or m < end:
                    end = m
        res = self._fmaj.check(gap)
        if ur and res in (FMajorityResult.NONE, FMajorityResult.AUTHORITATIVE_INCOMPLETE):
            # Nodes in under-replicated regions answered too: nobody else can.
            res2 = self._fmaj.check(gap | ur)
            if res2 in (FMajorityResult.AUTHORITATIVE_COMPLETE,
                        FMajorityResult.NON_AUTHORITATIVE):
                res = (FMajorityResult.AUTHORITATIVE_COMPLETE
                       if res == FMajorityResult.AUTHORITATIVE_INCOMPLETE
                       else FMajorityResult.NON_AUTHORITATIVE)
        if res == FMajorityResult.NONE:
            self._grace_deadline = None
            return False
        first = self._window.first_filled()
        if first and (end == 0 or first < end):
            end = first
        if end == 0:
            return False  # nobody sent anything yet
        gtype = self._gap_type(min(end, self._until + 1))
        if (res == FMajorityResult.AUTHORITATIVE_INCOMPLETE and not grace_expired
                and self._grace_period > 0
                and (nxt == self._start or gtype != GapType.BRIDGE)):
            if self._grace_deadline is None:
                self._grace_deadline = self._clock() + self._grace_period
            return False
        self._grace_deadline = None
        hi = min(end - 1, self._until)
        if self._seq_window == 0 and gtype == GapType.BRIDGE \
                and (end >> 32) != (nxt >> 32) and (end & ESN_MAX) > 1:
            boundary = (end >> 32) << 32  # ESN 0 of the gap's last epoch
            if boundary >= self._until:
                self._delivery.add_gap(GapType.BRIDGE, nxt, hi)
            else:
                self._delivery.add_gap(GapType.BRIDGE, nxt, boundary)
                self._delivery.add_gap(GapType.DATALOSS, boundary + 1, hi)
        else:
            self._delivery.add_gap(gtype, nxt, hi)
        self._skip_to(hi + 1)
        return True

    def _gap_type(self, end: int) -> GapType:
        """Type of the gap ``[next, end - 1]``."""
        if self._fmaj.all_not_fully_authoritative():
            return GapType.DATALOSS
        nxt = self._next
        e_end = end >> 32
        if (end & ESN_MAX) <= self._seq_window and (nxt == self._start
                                                    or ((nxt - 1) >> 32) < e_end):
            return GapType.BRIDGE
        return GapType.DATALOSS if e_end == nxt >> 32 else GapType.BRIDGE
