"""The gap detection part of a read stream: may the read pointer move past an empty slot?

The head of the window buffer is the next LSN to deliver.  When its slot is filled the
contiguous run behind it goes out.  When it is empty, the stream may still move on:

* past the trim point (one TRIM gap; the stream keeps the trim point with its read
  pointer);
* over ESN 0 of an epoch whose first record is buffered (a BRIDGE, no quorum needed);
* over epoch 0, which never holds a record, once every node has passed it (a BRIDGE, in
  SCD mode too: a new log's readers need no all-send-all round to reach epoch 1);
* by f-majority gap detection: once the nodes that passed the LSN form an f-majority (a
  set that meets every possible copyset), no copy can exist.  A complete answer (every
  counting node) issues the gap at once; an incomplete one waits out the grace period
  first, in case a slow node has the record.  Not in SCD mode (the stream switches it
  off and on with the mode, ``set_fmajority``), where a missing LSN more likely means a
  node that should ship it is stuck: the SCD controller fails over instead.

The gap runs up to the first LSN some node has (or stops being silent about).  It is a
BRIDGE when it reaches into a later epoch or ends within the first ``sequencer_window``
ESNs of one in which nothing was delivered yet, DATALOSS otherwise (or whenever no node
is fully authoritative).  With ``sequencer_window`` 0, a BRIDGE reaching into a later
epoch is split at that epoch's ESN 0: BRIDGE up to it, DATALOSS after it.

A stream knows the nodesets of the epochs its placement was looked up for, up to
``known_epoch``.  A later epoch (a sequencer activated since, maybe on other nodes) may
have copies on nodes the stream does not read, so an f-majority of the nodes it reads
says nothing about it: an f-majority gap reaching into such an epoch is not issued, and
``wants_epoch`` tells the stream's owner to look the placement up again (and restart the
stream with it).

``GapDetector`` is given two read-only views when it is built, the per-node state (the
``SenderState`` of every node) and the buffer (``RecordWindow``); ``gaps_at`` returns its
decision, the gaps to issue at the read pointer.  It queues nothing and does not move the
read pointer.  Its own state: the grace period's deadline, and whether f-majority
detection applies.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from ldcore.lsn import ESN_MAX, compose, epoch_of
from logdevice.readstream.fmajority import FailureDomainNodeSet, FMajorityResult
from logdevice.readstream.sender import SenderState
from logdevice.readstream.window import RecordWindow
from logdevice.records import GapType

Gap = tuple[GapType, int, int]  # (type, lo, hi)
_NO_GAPS: tuple[Gap, ...] = ()
_EPOCH_ZERO_END = compose(1, 0)  # ESN 0 of epoch 1: the last LSN no record can have


class GapDetector:
    """Decides the gaps at the read pointer of a stream over ``[start, until]``.

    ``senders`` and ``window`` are read, never changed.  ``nodeset`` answers f-majority
    questions (it follows authoritative status changes); ``grace_period`` 0 issues
    incomplete f-majority gaps at once; ``sequencer_window`` types gaps near the start of
    an epoch (see ``ReadStream``).  ``fmajority`` False (the stream reads in SCD mode,
    see ``set_fmajority``) leaves only the structural bridges (ESN 0, epoch 0).
    """

    def __init__(self, start_lsn: int, until_lsn: int, senders: Collection[SenderState],
                 window: RecordWindow, nodeset: FailureDomainNodeSet,
                 clock: Callable[[], float], grace_period: float, sequencer_window: int,
                 fmajority: bool, known_epoch: int | None = None) -> None:
        self._start = start_lsn
        self._until = until_lsn
        self._senders = senders
        self._window = window
        self._fmaj = nodeset
        self._clock = clock
        self._grace_period = grace_period
        self._grace_deadline: float | None = None
        self._seq_window = sequencer_window
        self._fmajority = fmajority
        self._known_epoch = known_epoch
        #: the newest epoch an f-majority gap had to wait for (0: none)
        self.wants_epoch = 0

    def set_fmajority(self, enabled: bool) -> None:
        """Whether f-majority gap detection applies: not in SCD mode, where a missing
        LSN more likely means a node that should ship it is stuck."""
        self._fmajority = enabled

    # ------------------------------------------------------------- grace period

    @property
    def grace_deadline(self) -> float | None:
        """When an f-majority gap waiting out the grace period may be issued."""
        return self._grace_deadline

    def cancel_grace(self) -> None:
        """The read pointer moved (or the stream rewound): nothing waits any more."""
        self._grace_deadline = None

    def grace_due(self, now: float) -> bool:
        """Whether the grace period ran out by ``now`` (it is then over)."""
        if self._grace_deadline is not None and now >= self._grace_deadline:
            self._grace_deadline = None
            return True
        return False

    # ---------------------------------------------------------------- decisions

    def gaps_at(self, nxt: int, grace_expired: bool) -> tuple[Gap, ...]:
        """The gaps to issue at ``nxt``, the read pointer, whose slot is empty.

        Contiguous from ``nxt`` and in LSN order; the read pointer then moves past the
        last one.  Empty when the stream must wait.  ``grace_expired`` says the grace
        period ran out."""
        window = self._window
        if (nxt & ESN_MAX) == 0 and window.size > 1 and nxt < self._until \
                and window.holds(nxt + 1):
            # ESN 0 never holds a record: an epoch that starts right after it needs no
            # f-majority.
            return ((GapType.BRIDGE, nxt, nxt),)
        if not self._fmajority:
            return self._epoch_zero_bridge(nxt)
        # F-majority detection: a gap at nxt if enough nodes say nothing is there.
        gap: set[int] = set()
        ur: set[int] = set()
        end = 0
        for s in self._senders:
            if s.next_lsn > nxt:
                state, m = s.gap_state(nxt)
                (ur if state == 2 else gap).add(s.node)
                if end == 0 or m < end:
                    end = m
        fmaj = self._fmaj
        res = fmaj.check(gap)
        if ur and res in (FMajorityResult.NONE, FMajorityResult.AUTHORITATIVE_INCOMPLETE):
            # Nodes in under-replicated regions answered too: nobody else can.
            res2 = fmaj.check(gap | ur)
            if res2 in (FMajorityResult.AUTHORITATIVE_COMPLETE,
                        FMajorityResult.NON_AUTHORITATIVE):
                res = (FMajorityResult.AUTHORITATIVE_COMPLETE
                       if res == FMajorityResult.AUTHORITATIVE_INCOMPLETE
                       else FMajorityResult.NON_AUTHORITATIVE)
        if res == FMajorityResult.NONE:
            self._grace_deadline = None
            return _NO_GAPS
        first = window.first_filled()
        if first and (end == 0 or first < end):
            end = first
        if end == 0:
            return _NO_GAPS  # nobody sent anything yet
        hi = min(end - 1, self._until)
        if self._known_epoch is not None and hi > compose(self._known_epoch + 1, 0):
            # The gap covers LSNs of a later epoch (not just its ESN 0, which never holds
            # a record), whose copies may be on nodes this stream does not read.
            self.wants_epoch = max(self.wants_epoch, epoch_of(hi))
            self._grace_deadline = None
            return _NO_GAPS
        gtype = self._gap_type(nxt, min(end, self._until + 1))
        if (res == FMajorityResult.AUTHORITATIVE_INCOMPLETE and not grace_expired
                and self._grace_period > 0
                and (nxt == self._start or gtype != GapType.BRIDGE)):
            if self._grace_deadline is None:
                self._grace_deadline = self._clock() + self._grace_period
            return _NO_GAPS
        self._grace_deadline = None
        hi = min(end - 1, self._until)
        # end may be one past LSN_MAX (2**64): shifts there, not epoch_of.
        if self._seq_window == 0 and gtype == GapType.BRIDGE \
                and (end >> 32) != (nxt >> 32) and (end & ESN_MAX) > 1:
            boundary = (end >> 32) << 32  # ESN 0 of the gap's last epoch
            if boundary >= self._until:
                return ((GapType.BRIDGE, nxt, hi),)
            return ((GapType.BRIDGE, nxt, boundary), (GapType.DATALOSS, boundary + 1, hi))
        return ((gtype, nxt, hi),)

    def _epoch_zero_bridge(self, nxt: int) -> tuple[Gap, ...]:
        """SCD mode at ``nxt`` in epoch 0, which never holds a record (a log's first
        sequencer has epoch 1): once every node has passed the whole epoch, it is one
        BRIDGE with no all-send-all round.  Waiting for every node lets a trim point one
        of them reports come first."""
        if nxt > _EPOCH_ZERO_END:
            return _NO_GAPS
        for s in self._senders:
            if s.next_lsn <= _EPOCH_ZERO_END:
                return _NO_GAPS
        return ((GapType.BRIDGE, nxt, min(_EPOCH_ZERO_END, self._until)),)

    def _gap_type(self, nxt: int, end: int) -> GapType:
        """Type of the gap ``[nxt, end - 1]``."""
        if self._fmaj.all_not_fully_authoritative():
            return GapType.DATALOSS
        e_end = end >> 32
        if (end & ESN_MAX) <= self._seq_window and (nxt == self._start
                                                    or ((nxt - 1) >> 32) < e_end):
            return GapType.BRIDGE
        return GapType.DATALOSS if e_end == nxt >> 32 else GapType.BRIDGE
