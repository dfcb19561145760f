"""``ReadStream``: the client side of reading one log, as a sans-I/O state machine.

Events in (``on_record``, ``on_records``, ``on_gap``, ``on_started``,
``on_connection_closed``, ``on_checksum_failure``, ``set_trim_point``,
``set_authoritative``, ``tick``), deliverables out (``poll``, ``poll_batch``) and
messages to send out (``take_actions``).  Time only comes from the injected ``clock``.

``ReadStream`` owns the read pointer (the next LSN to deliver) and the trim point, and is
composed of five parts, each owning its state behind a small interface:

* ``Senders`` (``sender``): per-node state (``SenderState``), the filter version,
  reconnect backoff, and the START/WINDOW/STOP messages ``take_actions`` drains;
* ``RecordWindow`` (``window``): the records buffered ahead of the read pointer (by
  handle, de-duplicated) and flow control (how far the nodes may send, when it slides);
* ``GapDetector`` (``gaps``): f-majority gap detection and its grace period; given views
  of the senders and the buffer, decides which gaps to issue at the read pointer;
* ``ScdController`` (``scd``): single copy delivery mode, the known-down list and the
  stall timers; decides failovers, mode changes and when to rewind;
* ``Delivery`` (``delivery``): the output queue (pseudo-records turned into gaps, blobs
  unpacked) and the consumed pointer.

The parts never change one another: the gap detector and the SCD controller only read
the senders and the window, through their public interfaces; what one part's decision
means for another is ``ReadStream``'s to carry out.  An input event updates
``Senders`` and ``RecordWindow``; then, at the end of every event, the stream moves the
read pointer as far as it can (trim gap, a run popped from the window into ``Delivery``,
or the gaps ``GapDetector`` allows), lets ``ScdController`` check for a failover, carries
out a pending rewind once (the controller switches mode; the window is cleared, the
filter version bumped and every node sent START again) and stops past ``until_lsn``.
``poll``/``poll_batch`` run due timers, take from ``Delivery`` and slide the window as
the application consumes (the controller may turn the slide into a rewind).

Typical I/O loop: feed every message from the nodes to the matching ``on_*`` method, then
``poll()`` (or ``poll_batch()``) and send what ``take_actions()`` returns; call ``tick()``
(or ``poll``) again by ``next_deadline()``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from logdevice.errors import E, InvalidParamError
from logdevice.readstream.actions import GapReason
from logdevice.readstream.batches import ReadBatch, as_u8
from logdevice.readstream.delivery import Delivery
from logdevice.readstream.fmajority import (
    AuthoritativeStatus,
    FailureDomainNodeSet,
)
from logdevice.readstream.gaps import GapDetector
from logdevice.readstream.scd import ScdController
from logdevice.readstream.sender import Senders, SenderState
from logdevice.readstream.window import RecordWindow
from logdevice.record_columns import RecordColumns
from logdevice.records import DataRecord, GapRecord, GapType

_EMPTY_OFFSETS = np.zeros(1, dtype=np.int64)


class ReadStream:
    """Reads ``[start_lsn, until_lsn]`` of one log from the nodes of its nodeset.

    Parameters
    ----------
    log_id, start_lsn, until_lsn : int
        What to read (inclusive).
    nodeset : iterable of int
        The storage nodes that may hold copies (the read set).
    replication : int, dict or ReplicationProperty
        Replication factor, or per-scope copies such as ``{"rack": 2, "node": 3}``.
    scd : bool
        Use single copy delivery.
    authoritative : dict node -> AuthoritativeStatus, optional
        Default: every node FULLY_AUTHORITATIVE.
    clock : callable
        Seconds, monotonic.  Every time-based rule reads it.
    locations : dict node -> location, optional
        ``(region, dc, cluster, row, rack)`` labels (or a location string) per node, for
        f-majority across failure domains.
    buffer_size : int
        Window size in records (LogDevice's default 512).
    window_bytes : int
        Let the window grow past ``buffer_size`` while small records keep this many
        payload bytes in it (see ``RecordWindow``); 0 keeps it at ``buffer_size``.
    grace_period : float
        Wait this long before issuing a gap that has an f-majority but not every node's
        answer (0 disables).
    scd_timeout, scd_all_send_all_timeout : float
        Stall times after which silent nodes go on the known-down list, resp. the stream
        falls back to all-send-all.
    sequencer_window : int
        A gap ending within the first ``sequencer_window`` ESNs of an epoch in which
        nothing was delivered yet is a BRIDGE, not DATALOSS (a new sequencer may leave
        the start of its epoch empty).  0 types strictly: a gap reaching into a later
        epoch is split into BRIDGE up to the epoch boundary and DATALOSS after it.
    trim_point : int
        Known trim point (see ``set_trim_point``).
    known_epoch : int, optional
        The newest epoch whose nodeset ``nodeset`` covers (None: every epoch).  A gap
        reaching past it waits (``wants_epoch``): a later epoch may store copies on
        nodes this stream does not read.
    """

    def __init__(self, log_id: int, start_lsn: int, until_lsn: int, nodeset: Iterable[int],
                 replication: Any, scd: bool = False,
                 authoritative: Mapping[int, int] | None = None,
                 clock: Callable[[], float] = time.monotonic, *,
                 locations: Mapping[int, Any] | None = None, buffer_size: int = 512,
                 window_bytes: int = 0,
                 grace_period: float = 0.1, scd_timeout: float = 2.0,
                 scd_all_send_all_timeout: float = 10.0, sequencer_window: int = 1000,
                 flow_control_threshold: float = 0.7, reconnect_delay: float = 0.1,
                 reconnect_max_delay: float = 5.0, trim_point: int = 0,
                 known_epoch: int | None = None) -> None:
        if not 0 <= start_lsn <= until_lsn < 2**64:
            raise InvalidParamError(E.INVALID_PARAM, f"bad LSN range [{start_lsn}, "
                                                     f"{until_lsn}]")
        nodes = list(dict.fromkeys(int(n) for n in nodeset))
        if not nodes:
            raise InvalidParamError(E.INVALID_PARAM, "empty nodeset")
        if buffer_size < 1:
            raise InvalidParamError(E.INVALID_PARAM, f"buffer_size {buffer_size} < 1")
        try:
            self._fmaj = FailureDomainNodeSet(nodes, replication, locations)
            for n, st in (authoritative or {}).items():
                if int(n) in self._fmaj.status:
                    self._fmaj.set_status(int(n), st)
        except ValueError as e:
            raise InvalidParamError(E.INVALID_PARAM, str(e)) from None
        self.log_id = log_id
        self._until = until_lsn
        self._next = start_lsn
        self._trim = trim_point
        ws = max(1, min(buffer_size, until_lsn - start_lsn + 1))
        self._window = RecordWindow(start_lsn, until_lsn, ws, flow_control_threshold,
                                    window_bytes=window_bytes)
        self._clock = clock
        self._senders = Senders(nodes, until_lsn, clock, reconnect_delay, reconnect_max_delay)
        self._delivery = Delivery(log_id, start_lsn, until_lsn)
        self._scd = ScdController(scd, start_lsn, until_lsn, self._senders, self._window,
                                  self._fmaj, clock, scd_timeout, scd_all_send_all_timeout)
        # F-majority gap detection only in all-send-all mode (_rewind keeps it so).
        self._gaps = GapDetector(start_lsn, until_lsn, self._senders.states, self._window,
                                 self._fmaj, clock, grace_period, sequencer_window,
                                 not self._scd.active, known_epoch)
        self._stopped = False
        self._held = False  # events wait for ``settle`` to move the stream on
        self._unsettled = False  # an event came while held
        self._send_starts(self._senders)
        self._after_event()

    # ------------------------------------------------------------- properties

    @property
    def done(self) -> bool:
        """Everything up to ``until_lsn`` was delivered and handed out by ``poll``."""
        return self._next > self._until and not self._delivery.pending

    @property
    def next_lsn(self) -> int:
        """The next LSN the stream will deliver."""
        return self._next

    @property
    def window_high(self) -> int:
        return self._window.high

    @property
    def wants_epoch(self) -> int:
        """An epoch past ``known_epoch`` that a gap decision waits for (0: none): look
        the placement up again and restart the stream at ``next_lsn`` with it."""
        return self._gaps.wants_epoch

    @property
    def pending(self) -> bool:
        """Whether records or gaps wait to be handed out by ``poll``."""
        return self._delivery.pending

    @property
    def filter_version(self) -> int:
        return self._senders.filter_version

    @property
    def scd_active(self) -> bool:
        return self._scd.active

    @property
    def known_down(self) -> frozenset[int]:
        return self._scd.known_down

    @property
    def trim_point(self) -> int:
        return self._trim

    def sender(self, node: int) -> SenderState:
        return self._senders[node]

    def poll(self, max_items: int | None = None) -> list[DataRecord | GapRecord]:
        """Records and gaps deliverable now, in LSN order (at most ``max_items``).

        Runs due timers first.  Afterwards ``take_actions()`` may hold WINDOW or START
        messages (the window slides as the application consumes).
        """
        self.tick()
        out = self._delivery.take(max_items)
        self._after_consume()
        return out

    def poll_batch(self, max_records: int | None = None) -> ReadBatch:
        """Deliverable records as columns (at most ``max_records`` rows) plus the gaps
        among them; see ``ReadBatch`` for how to interleave the two."""
        self.tick()
        batch = self._delivery.take_batch(max_records)
        self._after_consume()
        return batch

    def hold(self) -> None:
        """Let the next events only record what they say, until ``settle``: the read
        pointer moves, SCD decides and a rewind goes out once, at ``settle``, for all of
        them (a loop turn's messages for one stream cost one pass, not one each).  The
        outcome is the same as settling after each, but for the messages a rewind's new
        filter version would have dropped: their records and gaps are true, and the
        rewind clears what they left."""
        self._held = True

    def settle(self) -> None:
        """End a ``hold``: move on from every event since."""
        if self._held:
            self._held = False
            if self._unsettled:
                self._unsettled = False
                self._after_event()

    def take_actions(self) -> list[Any]:
        """Messages to send, oldest first (``SendStart``/``SendWindow``/``SendStop``)."""
        return self._senders.take_actions()

    def next_deadline(self) -> float | None:
        """Clock time at which ``tick`` has work to do (None: only events matter).

        Only work ``tick`` will really do counts: after ``tick`` at time t this is None
        or later than t, so a loop can simply sleep until it."""
        if self._stopped:
            return None
        # (asked after every event: no list built)
        best = self._senders.next_reconnect()
        g = self._gaps.grace_deadline
        if g is not None and (best is None or g < best):
            best = g
        d = self._scd.deadline(self._next)
        if d is not None and (best is None or d < best):
            best = d
        return best

    # ----------------------------------------------------------------- events

    def on_record(self, node: int, lsn: int, payload: Any = b"", flags: int = 0, *,
                  timestamp: int = 0, filter_version: int | None = None) -> None:
        """``node`` sent the record at ``lsn`` (it has nothing else below ``lsn``)."""
        if self._next > self._until or self._stopped:
            return
        s = self._senders.accept(node, filter_version)
        if s is None:
            return
        buf = as_u8(payload)
        self._ingest(s, np.array([lsn], dtype=np.uint64),
                     np.array([timestamp], dtype=np.int64),
                     np.array([flags], dtype=np.uint32), buf,
                     np.array([0, len(buf)], dtype=np.int64))
        self._after_event()

    def on_records(self, node: int, lsns: Any, timestamps: Any, flags: Any,
                   payload_buffer: Any, offsets: Any, filter_version: int | None = None, *,
                   bad: Any = None) -> None:
        """A RECORDS batch from ``node`` (LSN order).  Record ``i`` has payload
        ``payload_buffer[offsets[i]:offsets[i + 1]]``.  ``bad`` (bool mask or indices)
        names records whose checksum failed: they are treated as ``on_checksum_failure``
        and never delivered."""
        if self._next > self._until or self._stopped:
            return
        s = self._senders.accept(node, filter_version)
        if s is None:
            return
        lsns = np.asarray(lsns, dtype=np.uint64)
        n = len(lsns)
        if n == 0:
            return
        ts = np.asarray(timestamps, dtype=np.int64)
        fl = np.asarray(flags, dtype=np.uint32)
        offs = np.asarray(offsets, dtype=np.int64) if len(offsets) else _EMPTY_OFFSETS
        if len(offs) == 1:  # no payloads at all (NO_PAYLOAD reads)
            offs = np.zeros(n + 1, dtype=np.int64)
        failed: list[int] = []
        if bad is not None:
            mask = np.zeros(n, dtype=bool)
            mask[np.asarray(bad)] = True
            if mask.any():
                failed = lsns[mask].tolist()
                kept = RecordColumns(lsns, ts, fl, as_u8(payload_buffer), offs).take(
                    np.flatnonzero(~mask))
                lsns, ts, fl = kept.lsns, kept.timestamps, kept.flags
                payload_buffer, offs = kept.payloads, kept.offsets
        if len(lsns):
            self._ingest(s, lsns, ts, fl, as_u8(payload_buffer), offs)
        for lsn in failed:
            self._checksum_failed(s, lsn)
        self._after_event()

    def _ingest(self, s: SenderState, lsns: np.ndarray, ts: np.ndarray, fl: np.ndarray,
                buf: np.ndarray, offs: np.ndarray) -> None:
        if int(lsns[0]) < s.next_lsn:
            # Below what the node already said it has nothing under: a protocol slip.
            if s.next_lsn > self._until:
                return
            k = int(np.searchsorted(lsns, np.uint64(s.next_lsn)))
            lsns, ts, fl, offs = lsns[k:], ts[k:], fl[k:], offs[k:]
            if len(lsns) == 0:
                return
        n = self._window.insert(lsns, ts, fl, buf, offs)
        if n:  # the node shipped records up to lsns[n - 1]
            end = int(lsns[n - 1]) + 1
            if end > s.next_lsn:
                s.next_lsn = end
            s.shipped_record = True

    def on_gap(self, node: int, lo: int, hi: int, reason: int = GapReason.NO_RECORDS,
               filter_version: int | None = None) -> None:
        """``node`` has nothing (for ``reason``) in ``[lo, hi]``."""
        if self._next > self._until or self._stopped:
            return
        s = self._senders.accept(node, filter_version)
        if s is None or lo > hi:
            return
        if reason == GapReason.TRIM:
            self._trim = max(self._trim, hi)
        elif reason == GapReason.CHECKSUM_FAIL:
            self._checksum_failed(s, hi)
        elif reason == GapReason.UNDER_REPLICATED:
            s.mark_under_replicated(lo, hi, self._next)
        s.advance_to(hi + 1)
        self._after_event()

    def on_checksum_failure(self, node: int, lsn: int,
                            filter_version: int | None = None) -> None:
        """The copy of ``lsn`` from ``node`` failed its checksum.  Call it in the node's
        stream order: after its records below ``lsn``, before those above."""
        self.on_gap(node, lsn, lsn, GapReason.CHECKSUM_FAIL, filter_version)

    def _checksum_failed(self, s: SenderState, lsn: int) -> None:
        # The node's copy exists but is bad: its silence at lsn proves nothing, and in
        # SCD someone else has to ship it.
        s.checksum_failed(lsn, self._next)
        self._scd.mark_down(s.node, self._next)

    def on_started(self, node: int, status: int, filter_version: int) -> None:
        """``node`` answered START (``status`` an ``E``) for ``filter_version``."""
        s = self._senders.get(node)
        if s is None or filter_version != self._senders.filter_version or self._stopped:
            return
        if status in (E.OK, E.REBUILDING):
            self._senders.started(s)
            if s.window_sent < self._window.high:
                # It missed a slide while (re)starting.
                self._senders.send_window(s, self._window.high)
            if status == E.REBUILDING:
                self._scd.mark_down(node, self._next)
        else:
            s.connected = False
            if not self._scd.mark_down(node, self._next):
                self._senders.schedule_reconnect(s)
        self._after_event()

    def on_connection_closed(self, node: int) -> None:
        """The connection to ``node`` is gone; its stream must be started again."""
        s = self._senders.get(node)
        if s is None or self._stopped:
            return
        s.connected = False
        if not self._scd.mark_down(node, self._next):
            self._senders.schedule_reconnect(s)
        self._after_event()

    def set_trim_point(self, lsn: int) -> None:
        """Everything at or below ``lsn`` is trimmed: delivered as one TRIM gap."""
        if lsn > self._trim:
            self._trim = lsn
            self._after_event()

    def set_authoritative(self, node: int, status: int) -> None:
        """The event log changed ``node``'s authoritative status."""
        if node not in self._senders:
            return
        self._fmaj.set_status(node, status)
        if status != AuthoritativeStatus.FULLY_AUTHORITATIVE:
            self._scd.mark_down(node, self._next)
        self._after_event()

    def force_no_scd(self) -> None:
        """Read in all-send-all mode from now on."""
        self._scd.force_no_scd(self._next)
        self._after_event()

    def stop(self) -> None:
        """Close the stream on every node."""
        if not self._stopped:
            self._stopped = True
            self._senders.send_stop_all()

    def tick(self) -> None:
        """Run what is due at ``clock()``: reconnects, the gap grace period, SCD timers."""
        if self._stopped:
            return
        now = self._clock()
        due = self.next_deadline()
        if due is None or due > now:
            return  # nothing is due: every event already left the stream settled
        self._send_starts(self._senders.due_reconnects(now))
        if self._gaps.grace_due(now):
            self._progress(grace_expired=True)
        self._scd.run_timers(now, self._next)
        self._after_event()

    # ------------------------------------------------------- progress and gaps

    def _skip_to(self, lsn: int) -> None:
        """Move the read pointer (and buffer head) forward to ``lsn``."""
        self._window.skip_to(lsn)
        self._next = lsn

    def _progress(self, grace_expired: bool = False) -> None:
        """Deliver whatever the buffer and gap detection allow."""
        win, gaps, delivery = self._window, self._gaps, self._delivery
        until = self._until
        trim = self._trim
        moved = False
        while self._next <= until:
            nxt = self._next
            if trim >= nxt:
                hi = min(trim, until)
                delivery.add_gap(GapType.TRIM, nxt, hi)
                self._skip_to(hi + 1)
            else:
                chunk = win.pop_run() if nxt >= win.head else None
                if chunk is not None:
                    # The read pointer moves past the run (and past the rest of an epoch
                    # a bridge record in it ends).
                    self._next = int(chunk.lsns[-1]) + 1
                    skip = delivery.add_run(chunk)
                    if skip is not None:
                        self._skip_to(skip)
                else:
                    found = gaps.gaps_at(nxt, grace_expired)
                    if not found:
                        break
                    for gtype, lo, hi in found:
                        delivery.add_gap(gtype, lo, hi)
                    self._skip_to(found[-1][2] + 1)
            gaps.cancel_grace()
            moved = True
        if moved:
            self._scd.progressed()

    def _after_event(self) -> None:
        """End of every event: move on, let SCD fail over, carry out a pending rewind
        (once per event), start the stall timers; stop once past ``until_lsn``."""
        if self._held:
            self._unsettled = True
            return
        if self._next <= self._until and not self._stopped:
            self._progress()
            if self._scd.after_progress(self._next):
                self._rewind()
        if self._next > self._until and not self._stopped:
            self.stop()

    # ------------------------------------------------- rewinds and window slides

    def _send_starts(self, states: Iterable[SenderState]) -> None:
        """START (the same one) to each of these nodes."""
        known_down, high = self._scd.start_known_down(), self._window.high
        for s in states:
            self._senders.send_start(s, self._next, high, known_down)

    def _rewind(self) -> None:
        """Start over from the read pointer: clear the buffer, bump the filter version
        (replies to older STARTs are dropped), START every node again, in the mode the
        SCD controller switched to."""
        if not self._scd.begin_rewind(self._next):
            return
        self._window.clear(self._next)
        self._senders.new_version()
        self._gaps.cancel_grace()
        self._gaps.set_fmajority(not self._scd.active)
        self._send_starts(self._senders)

    def _after_consume(self) -> None:
        """The application took records: slide the window if due.  (Taking records alone
        changes nothing the stream decides on: it was settled after its last event.)"""
        if self._window.slide_due(self._delivery.consumed) and self._next <= self._until:
            self._slide()
            self._after_event()

    def _slide(self) -> None:
        self._window.slide(self._delivery.consumed)
        self._scd.on_slide(self._next)
        if self._scd.rewind_pending:
            self._rewind()  # the STARTs carry the new window
            return
        high = self._window.high
        for s in self._senders:
            if s.connected:
                self._senders.send_window(s, high)
