"""The per-log Sequencer: LSNs, the sliding window of appenders, LNG and release.

A sans-I/O state machine.  The node activates one per log with an epoch it got from the
epoch store, feeds it events and carries out the actions it returns (see ``actions``)::

    seq = Sequencer(log_id, epoch, nodeset, replication, locations, weights,
                    clock=loop.time, rng=random.Random())
    seq.append(request_id, payload_len, flags)   # -> [SendStore...] or [Reject(...)]
    seq.on_stored(node, lsn, wave, status)       # -> [AckAppend], [Release], new waves...
    seq.on_timer()  when  seq.next_deadline() has passed
    seq.on_node_down(node) / seq.on_node_up(node)

Every event method returns a fresh list of actions and takes an optional ``now`` (seconds
on the injected monotonic ``clock``) so a driver can read the clock once per loop turn;
``append_many`` and ``on_stored_many`` take batches and emit at most one ``Release``.

LSNs are ``compose(epoch, esn)`` with esn counting from 1.  At most ``max_in_flight``
appenders are in the window (issued but not yet retired); beyond that appends get
SEQNOBUFS.  A client is acked as soon as its record is on R nodes, possibly out of LSN
order; appenders *retire* strictly in LSN order, and retiring advances the last known good
LSN (LNG) of the epoch and the release pointer, which goes out as one ``Release`` action.
So the release pointer never passes a record that is not fully replicated.  Records are
stamped with the wall clock in ms, never smaller than the previous record's stamp in the
log.

Idle sequencers.  A node holds a sequencer for every log it sequences, most of them idle
at any time, so one that has nothing in flight can give back what only appends in flight
use: ``sleep()`` drops its window, LSN index and timer heap (``dormant`` is then True) and
keeps only what resuming in the same epoch needs (next ESN, timestamp floor, LNG, release
pointer, the copyset state).  The next append wakes it: nothing about the epoch changes,
so no new activation is needed and LSNs go on from where they were.  A sequencer starts
dormant: its window is allocated by its first append.  Logs with the same nodeset and
replication may share one ``CopysetSelector`` (``selector=``): it holds no per-log state.

Epoch recovery is not done here but in ``recovery.EpochRecovery``.
The seam: a sequencer whose earlier epochs may have an unclean tail is built with
``needs_recovery=True``; it replicates and acks as usual but sends no ``Release`` until
the node, once recovery is done, calls ``on_recovery_done()`` (which then releases
everything retired so far).  ``last_released`` and ``last_timestamp`` are the previous
epochs' clean state (tail and timestamp floor).
"""

from __future__ import annotations

import heapq
import time
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Mapping
from enum import IntEnum
from random import Random
from types import MappingProxyType
from typing import Any

from ldcore import lsn as ldlsn
from logdevice.errors import E, InvalidParamError
from logdevice.sequencer.actions import Reactivate, Reject, Release
from logdevice.sequencer.appender import (
    STORE_TIMEOUT,
    Appender,
    AppenderContext,
    AppenderState,
)
from logdevice.sequencer.copyset import CopysetSelector, Replication, StickyCopysetSelector
from logdevice.sequencer.nodestate import NodeHealth

#: Largest payload one APPEND may carry.
MAX_PAYLOAD_SIZE = 32 << 20
#: Default sliding-window size (LogDevice's max-writes-in-flight).
MAX_IN_FLIGHT = 1000
#: Sticky-copyset block limits when ``sticky=True``: LogDevice's 32 MB / 10 min.
STICKY_BLOCK = (32 << 20, 600_000.0)

_REPLICATED = AppenderState.REPLICATED
_REPLICATING = AppenderState.REPLICATING
_WAITING = AppenderState.WAITING
# What a dormant sequencer holds instead of its window, LSN index and timer heap: shared
# and read-only, so only ``_wake`` can give it real ones.
_NO_WINDOW: Any = ()
_NO_APPENDERS: Any = MappingProxyType({})
_NO_TIMERS: Any = ()


class SequencerState(IntEnum):
    ACTIVE = 0
    EXHAUSTED = 1  # ESN space used up or retired: finishes its window, takes no appends
    DEACTIVATED = 2  # stopped; every unacked append was rejected


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class Sequencer:
    """Sequencer of one log in one epoch.

    Parameters
    ----------
    log_id : int
    epoch : int
        From the epoch store, ``EPOCH_MIN .. EPOCH_MAX``.
    nodeset : iterable of int
        Storage nodes of this epoch; RELEASE goes to all of them.
    replication : int, mapping, or ReplicationProperty
        e.g. ``2`` or ``{"rack": 2, "node": 3}``.
    locations : mapping node -> location, optional
        ``(region, dc, cluster, row, rack)`` tuples, location strings or config Locations.
    weights : mapping node -> float, optional
        Storage weights (default 1.0 each; 0 = never write there).
    clock : callable -> float
        Monotonic seconds, used for timeouts and graylist expiry.
    wall_clock_ms : callable -> int
        Milliseconds since the Unix epoch, used to stamp records.
    rng : random.Random
        Copyset randomness; seeded in tests.
    max_in_flight : int
        Sliding window size; a full window rejects with SEQNOBUFS.
    store_timeout : (float, float)
        (initial, maximum) store timeout in seconds.
    sticky : bool or (int, float), optional
        Sticky copysets: ``True`` for 32 MB / 10 min blocks, or (block_bytes, block_ms).
    max_payload_size : int
        Larger appends get TOOBIG.
    health : NodeHealth, optional
        Share one between the node's sequencers; a private one by default.
    last_released, last_timestamp : int
        Release pointer and record timestamp the previous epochs ended with.
    needs_recovery : bool
        Hold releases until ``on_recovery_done()`` (see the module docstring).
    max_esn : int
        Last ESN to issue; by default ``ESN_MAX - 1``, keeping ``ESN_MAX`` free so epoch
        recovery always has room for the epoch's bridge record.
    store_waves : bool
        Emit one ``StoreWave`` per wave (all members of its copyset) instead of one
        ``SendStore`` per member: fewer actions for a driver that sends them together.
    selector : CopysetSelector, optional
        A selector built for this nodeset and replication, shared with other sequencers
        (it keeps no per-log state); built from the arguments above when not given.

    Raises
    ------
    InvalidParamError
        Bad epoch or window, or a nodeset that can never satisfy the replication.
    """

    __slots__ = ("ctx", "log_id", "epoch", "nodeset", "replication", "health", "state",
                 "max_in_flight", "max_payload_size", "max_esn", "needs_recovery", "_clock",
                 "_wall", "_next_esn", "_last_ts", "_window", "_by_lsn", "_timers", "dormant",
                 "last_active", "lng", "_lng_ts", "release_lsn", "_release_ts",
                 "_release_due")

    def __init__(self, log_id: int, epoch: int, nodeset: Iterable[int], replication: Any,
                 locations: Mapping[int, Any] | None = None,
                 weights: Mapping[int, float] | None = None, *,
                 clock: Callable[[], float] = time.monotonic,
                 wall_clock_ms: Callable[[], int] = _wall_clock_ms,
                 rng: Random | None = None,
                 max_in_flight: int = MAX_IN_FLIGHT,
                 store_timeout: tuple[float, float] = STORE_TIMEOUT,
                 sticky: bool | tuple[int, float] | None = None,
                 max_payload_size: int = MAX_PAYLOAD_SIZE,
                 health: NodeHealth | None = None,
                 last_released: int = ldlsn.LSN_INVALID,
                 last_timestamp: int = 0,
                 needs_recovery: bool = False,
                 max_esn: int = ldlsn.ESN_MAX - 1,
                 store_waves: bool = False,
                 selector: CopysetSelector | None = None) -> None:
        if not ldlsn.EPOCH_MIN <= epoch <= ldlsn.EPOCH_MAX:
            raise InvalidParamError(message=f"log {log_id}: epoch {epoch} out of range")
        if max_in_flight < 1:
            raise InvalidParamError(message=f"max_in_flight must be >= 1, got {max_in_flight}")
        if not ldlsn.ESN_MIN <= max_esn <= ldlsn.ESN_MAX:
            raise InvalidParamError(message=f"max_esn {max_esn} out of range")
        if last_released >= ldlsn.compose(epoch, ldlsn.ESN_MIN):
            raise InvalidParamError(message=f"log {log_id}: last_released "
                                    f"{ldlsn.to_string(last_released)} is not before epoch "
                                    f"{epoch}")
        try:
            if selector is None:
                base = CopysetSelector(nodeset, replication, locations, weights)
            else:
                base = selector
                if tuple(dict.fromkeys(int(n) for n in nodeset)) != base.nodeset \
                        or Replication(replication) != base.replication:
                    raise ValueError(f"the shared selector is for nodeset "
                                     f"{list(base.nodeset)}, replication "
                                     f"{base.replication.to_dict()}")
            picker: CopysetSelector | StickyCopysetSelector = base
            if sticky is True:
                sticky = STICKY_BLOCK
            if sticky:
                block_bytes, block_ms = sticky
                picker = StickyCopysetSelector(base, int(block_bytes), float(block_ms))
            self.ctx = AppenderContext(log_id, picker, rng if rng is not None else Random(),
                                       health, store_timeout, store_waves)
        except ValueError as exc:
            raise InvalidParamError(message=f"log {log_id}: {exc}") from None
        self.log_id = log_id
        self.epoch = epoch
        self.nodeset: tuple[int, ...] = base.nodeset
        self.replication = base.replication
        self.health = self.ctx.health
        self.state = SequencerState.ACTIVE
        self.max_in_flight = max_in_flight
        self.max_payload_size = max_payload_size
        self.max_esn = max_esn
        self.needs_recovery = needs_recovery
        self._clock = clock
        self._wall = wall_clock_ms
        self._next_esn = ldlsn.ESN_MIN
        self._last_ts = last_timestamp
        # Dormant until the first append (see the module docstring).
        self._window: deque[Appender] = _NO_WINDOW
        self._by_lsn: dict[int, Appender] = _NO_APPENDERS
        self._timers: list[tuple[float, int]] = _NO_TIMERS  # (deadline, lsn) heap, lazy
        self.dormant = True
        #: Clock reading of the last append taken (or refused), for idleness.
        self.last_active = clock()
        self.lng = ldlsn.LSN_INVALID  # last known good of this epoch (last retired)
        self._lng_ts = last_timestamp
        self.release_lsn = last_released
        self._release_ts = last_timestamp
        self._release_due = False

    # -- views ----------------------------------------------------------------------------
    @property
    def in_flight(self) -> int:
        """Appenders in the window (issued, not yet retired)."""
        return len(self._window)

    @property
    def next_lsn(self) -> int:
        """The LSN the next accepted append gets."""
        return ldlsn.compose(self.epoch, min(self._next_esn, ldlsn.ESN_MAX))

    def tail(self) -> tuple[int, int]:
        """(last released LSN, its timestamp in ms): what GET_TAIL answers."""
        return self.release_lsn, self._release_ts

    def appender(self, lsn: int) -> Appender | None:
        """The in-window appender for ``lsn`` (for inspection)."""
        return self._by_lsn.get(lsn)

    # -- appends --------------------------------------------------------------------------
    def append(self, request_id: Hashable, payload_len: int, flags: int = 0,
               now: float | None = None) -> list:
        """Accept (or reject) one append; returns its wave-1 ``SendStore``s or a ``Reject``.

        Rejections (no LSN taken): TOOBIG (``payload_len > max_payload_size``), SEQNOBUFS
        (window full), DISABLED / NOSPC / OVERLOADED (no copyset can be placed now, see
        ``AppenderContext.failure_status``), AGAIN (epoch exhausted, a new sequencer is
        needed), NOSEQUENCER (deactivated).  The append that takes the last ESN is accepted
        and followed by a ``Reactivate`` action.
        """
        out: list = []
        now = self._clock() if now is None else now
        self.last_active = now
        self._append(out, request_id, payload_len, flags, now, self._wall())
        return out

    def append_many(self, requests: Iterable[tuple[Hashable, int, int]],
                    now: float | None = None) -> list:
        """``append`` for each (request_id, payload_len, flags), in order, one action list
        (the records are stamped with one wall-clock reading)."""
        out: list = []
        now = self._clock() if now is None else now
        self.last_active = now
        wall_ms = self._wall()
        for request_id, payload_len, flags in requests:
            self._append(out, request_id, payload_len, flags, now, wall_ms)
        return out

    def _append(self, out: list, request_id: Hashable, payload_len: int, flags: int,
                now: float, wall_ms: int) -> None:
        log_id = self.log_id
        if self.state != SequencerState.ACTIVE:
            status = E.AGAIN if self.state == SequencerState.EXHAUSTED else E.NOSEQUENCER
            out.append(Reject(request_id, log_id, status))
            return
        if payload_len > self.max_payload_size:
            out.append(Reject(request_id, log_id, E.TOOBIG))
            return
        if len(self._window) >= self.max_in_flight:
            out.append(Reject(request_id, log_id, E.SEQNOBUFS))
            return
        # Pick before taking an LSN: an append that cannot be placed must not leave a hole.
        copyset, status = self.ctx.pick(payload_len, now)
        if copyset is None:
            out.append(Reject(request_id, log_id, status))
            return
        if self.dormant:
            self._wake()
        esn = self._next_esn
        self._next_esn = esn + 1
        lsn = ldlsn.compose(self.epoch, esn)
        ts = wall_ms if wall_ms > self._last_ts else self._last_ts
        self._last_ts = ts
        app = Appender(self.ctx, request_id, lsn, ts, flags, payload_len)
        out += app.start(now, copyset)
        self._window.append(app)
        self._by_lsn[lsn] = app
        self._arm(app)
        if esn >= self.max_esn:
            self.state = SequencerState.EXHAUSTED
            # E.TOOBIG is LogDevice's internal status for "ESN space exhausted".
            out.append(Reactivate(log_id, self.epoch, E.TOOBIG))

    # -- idleness --------------------------------------------------------------------------
    def _wake(self) -> None:
        self._window = deque()
        self._by_lsn = {}
        self._timers = []
        self.dormant = False

    def sleep(self) -> bool:
        """Give back the window, LSN index and timer heap if nothing is in flight (see
        Idle sequencers in the module docstring); whether the sequencer is dormant now.
        Nothing else changes: the next append goes on in the same epoch."""
        if self._window:
            return False
        self._window = _NO_WINDOW
        self._by_lsn = _NO_APPENDERS
        self._timers = _NO_TIMERS
        self.dormant = True
        return True

    # -- replies and timers ---------------------------------------------------------------
    def on_stored(self, node: int, lsn: int, wave: int, status: E | int = E.OK,
                  now: float | None = None) -> list:
        """A STORED reply (``status`` OK or the node's error) for ``lsn`` in ``wave``."""
        out: list = []
        self._stored(out, node, lsn, wave, status, self._clock() if now is None else now)
        self._flush_release(out)
        return out

    def on_stored_many(self, replies: Iterable[tuple[int, int, int, E | int]],
                       now: float | None = None) -> list:
        """``on_stored`` for each (node, lsn, wave, status); at most one ``Release``."""
        out: list = []
        now = self._clock() if now is None else now
        for node, lsn, wave, status in replies:
            self._stored(out, node, lsn, wave, status, now)
        self._flush_release(out)
        return out

    def _stored(self, out: list, node: int, lsn: int, wave: int, status: E | int,
                now: float) -> None:
        app = self._by_lsn.get(lsn)
        if app is None:
            return
        out += app.on_stored(node, wave, status, now)
        if app.state == _REPLICATED:
            if app is self._window[0]:
                self._retire()
        elif app.deadline != app.armed:
            self._arm(app)

    def next_deadline(self) -> float | None:
        """When ``on_timer`` next has work (monotonic seconds), or None."""
        timers, by_lsn = self._timers, self._by_lsn
        while timers:
            deadline, lsn = timers[0]
            app = by_lsn.get(lsn)
            if app is not None and app.deadline == deadline:
                return deadline
            heapq.heappop(timers)
        return None

    def on_timer(self, now: float | None = None) -> list:
        """Handle every store timeout and wait that is due."""
        now = self._clock() if now is None else now
        out: list = []
        timers, by_lsn = self._timers, self._by_lsn
        due: list[Appender] = []
        while timers and timers[0][0] <= now:
            deadline, lsn = heapq.heappop(timers)
            app = by_lsn.get(lsn)
            if app is not None and app.deadline == deadline:
                due.append(app)
        for app in due:
            out += app.on_timeout(now)
            self._arm(app)
        return out

    def _arm(self, app: Appender) -> None:
        d = app.deadline
        if d is not None and d != app.armed:
            heapq.heappush(self._timers, (d, app.lsn))
        app.armed = d

    # -- node events ----------------------------------------------------------------------
    def on_node_down(self, node: int, now: float | None = None) -> list:
        """The failure detector says ``node`` is down: waves waiting for it move on."""
        now = self._clock() if now is None else now
        self.health.mark_down(node)
        out: list = []
        for app in list(self._window):
            if app.state == _REPLICATING and node in app.copyset:
                out += app.on_node_down(node, now)
                self._arm(app)
        return out

    def on_node_up(self, node: int, now: float | None = None) -> list:
        """``node`` is back: appenders waiting for a copyset try again."""
        now = self._clock() if now is None else now
        self.health.mark_up(node)
        out: list = []
        for app in list(self._window):
            if app.state == _WAITING:
                out += app.retry_now(now)
                self._arm(app)
        return out

    # -- release --------------------------------------------------------------------------
    def _retire(self) -> None:
        window, by_lsn = self._window, self._by_lsn
        app = None
        while window and window[0].state == _REPLICATED:
            app = window.popleft()
            del by_lsn[app.lsn]
        if app is not None:
            self.lng = app.lsn
            self._lng_ts = app.timestamp
            self.ctx.lng = app.lsn
            self._release_due = True

    def _flush_release(self, out: list) -> None:
        if not self._release_due or self.needs_recovery:
            return
        self._release_due = False
        if self.lng > self.release_lsn:
            self.release_lsn = self.lng
            self._release_ts = self._lng_ts
            out.append(Release(self.log_id, self.lng, self.nodeset))

    def on_recovery_done(self, last_released: int | None = None,
                         last_timestamp: int | None = None) -> list:
        """Epoch recovery of the earlier epochs finished: start releasing.

        ``last_released`` / ``last_timestamp`` are what recovery settled the earlier epochs
        at (the tail to report while this epoch has released nothing).
        """
        if last_released is not None and last_released > self.release_lsn:
            self.release_lsn = last_released
            if last_timestamp is not None:
                self._release_ts = last_timestamp
        if last_timestamp is not None and last_timestamp > self._last_ts:
            self._last_ts = last_timestamp
        self.needs_recovery = False
        self._release_due = True
        out: list = []
        self._flush_release(out)
        return out

    def retire(self) -> list:
        """Take no more appends but finish the window (like an exhausted epoch): the log's
        metadata changed and a new epoch will follow it.  Returns the actions (none)."""
        if self.state == SequencerState.ACTIVE:
            self.state = SequencerState.EXHAUSTED
        return []

    def deactivate(self, status: E = E.CANCELLED) -> list:
        """Stop: reject every append not yet acked (with its LSN), drop the window.

        Records acked but not released stay for the next epoch's recovery to release.
        """
        out: list = []
        for app in self._window:
            out += app.abort(status)
        self._window = _NO_WINDOW
        self._by_lsn = _NO_APPENDERS
        self._timers = _NO_TIMERS
        self.dormant = True
        self.state = SequencerState.DEACTIVATED
        return out
