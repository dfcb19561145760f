"""The Appender: replicates one record (or one BufferedWriter blob) onto R storage nodes.

A sans-I/O state machine: events in (``start``, ``on_stored``, ``on_timeout``,
``on_node_down``, ``retry_now``, ``abort``), actions out (``SendStore``, ``AckAppend``,
``Reject``).  The sequencer owns one per LSN in its window; ``AppenderContext`` holds what
all appenders of a log share (copyset selector, node health, random source, timeouts).

Waves.  An attempt to store the record on one copyset is a *wave* (numbered from 1).  Every
member of the copyset gets a STORE carrying the wave number; a STORED only counts when it
names the current wave, so late answers to an abandoned wave are ignored.  A wave fails
when:

* its store timeout passes: members that stayed silent are graylisted.  The timeout is
  ``initial * 2**(wave-1)`` (capped; LogDevice uses 10 ms .. 1 min), or longer when the
  log has many bytes on their way to disk: each node of the nodeset has about
  ``unstored bytes * R / nodeset size`` of this log queued, and a wave waits at least
  ``STORE_SLACK`` times what that takes at the store rate the log's completed waves
  showed (``store_rate``: ``STORE_RATE_PRIOR`` until measured).  Without that, a
  burst of large blobs times out its first waves while the nodes are merely busy writing,
  and every second wave leaves an extra copy on disk.  When the timeout passes it is
  worked out again with the backlog of that moment (a node writes the stores that came
  later in the same group commits), and the wave waits on if that is later;
* a member answers with an error (NOSPC, OVERLOADED, DISABLED, ...): it is blacklisted;
  the next wave starts at once, since the failed node is now excluded;
* a member the wave still waits for is reported down.

The next wave draws a fresh copyset avoiding down, gray- and blacklisted nodes (and ends a
sticky block).  If graylisting alone makes selection impossible the graylist is cleared
(as LogDevice does); if it is still impossible the appender *waits*: no STORE goes out and
it retries when its timeout passes or ``retry_now`` is called (the sequencer does so when
a node comes back).  An appender that holds an LSN never gives up by itself: dropping an
LSN would leave a hole only epoch recovery can plug, so it retries until it succeeds or
the sequencer is deactivated (``abort``).

Appender stages.  LogDevice may send a wave to R + X nodes and then go through
replication (any R stored), sync-leader (the first ``num-sync-leaders`` nodes of the
copyset stored; only then may the record be released) and leader-redundancy stages,
deleting the extra copies.  We use X = 0: a copyset has exactly R nodes and the record is
replicated only when *all* of them answered STORED in the same wave.  So the leader (the
first node, the one single copy delivery ships from) always holds its copy before the ack
and before release, the sync-leader and leader-redundancy conditions hold trivially, and
no DELETEs are ever needed.  The cost is tail latency: one slow node delays the ack until
its wave times out.  Extras are a possible later optimisation.
"""

from __future__ import annotations

from collections.abc import Hashable
from enum import IntEnum
from random import Random

from logdevice.errors import E
from logdevice.sequencer.actions import AckAppend, Reject, SendStore
from logdevice.sequencer.copyset import Copyset, CopysetSelector, StickyCopysetSelector
from logdevice.sequencer.nodestate import NodeHealth

#: LogDevice's store-timeout bounds, seconds: first wave 10 ms, never more than 1 min.
STORE_TIMEOUT = (0.010, 60.0)
#: A wave waits at least this many times the time its nodes' backlog takes to write.
STORE_SLACK = 4.0
#: Bytes per second a node is assumed to write before a wave measured it: low, since a
#: too-short timeout costs a copy on disk and a too-long one only delays giving up on a
#: node that hangs (one that fails is reported down and ends its waves at once).
STORE_RATE_PRIOR = 4e6
#: The store rate is never taken to be lower than this.
STORE_RATE_FLOOR = 1e6
#: Waves with less backlog per node than this say more about latency than about rate.
RATE_SAMPLE_BYTES = 256 << 10
#: Weight of a new store-rate sample: a slowdown is believed at once, a speed-up slowly.
RATE_ALPHA_DOWN, RATE_ALPHA_UP = 0.5, 0.1


class AppenderState(IntEnum):
    REPLICATING = 0  # a wave is out, waiting for STORED
    WAITING = 1  # no copyset could be picked; retry at ``deadline``
    REPLICATED = 2  # all R members stored in one wave; the client was acked
    ABORTED = 3  # given up (sequencer deactivated); the client got a Reject


class AppenderContext:
    """What every appender of one log shares.

    Parameters
    ----------
    log_id : int
    selector : CopysetSelector or StickyCopysetSelector
    rng : random.Random
        Source of randomness for copyset choice (inject a seeded one in tests).
    health : NodeHealth, optional
        Shared node view; a fresh one by default.
    store_timeout : (float, float)
        (initial, maximum) store timeout in seconds; wave ``w`` waits
        ``min(maximum, initial * 2**(w-1))``.
    """

    def __init__(self, log_id: int, selector: CopysetSelector | StickyCopysetSelector,
                 rng: Random, health: NodeHealth | None = None,
                 store_timeout: tuple[float, float] = STORE_TIMEOUT) -> None:
        initial, maximum = store_timeout
        if not 0 < initial <= maximum:
            raise ValueError(f"store_timeout must be (initial, maximum) with "
                             f"0 < initial <= maximum, got {store_timeout!r}")
        self.log_id = log_id
        self.selector = selector
        self.replication = selector.replication
        self.rng = rng
        self.health = health if health is not None else NodeHealth()
        self.timeout_initial, self.timeout_max = float(initial), float(maximum)
        self.lng = 0  # last known good LSN of the epoch; the sequencer keeps it current
        self._sticky = isinstance(selector, StickyCopysetSelector)
        self._share = self.replication.r / max(1, len(selector.nodeset))  # per node
        self.unstored_bytes = 0  # payload bytes of the appenders not yet replicated
        self.store_rate = STORE_RATE_PRIOR  # bytes/s a node drains, from completed waves

    def backlog(self) -> float:
        """Bytes of this log each node of the nodeset has on its way to disk, roughly."""
        return self.unstored_bytes * self._share

    def store_timeout(self, wave: int) -> float:
        """Seconds wave ``wave`` (1-based) waits for its STOREDs, now."""
        backoff = self.timeout_initial * 2.0 ** min(wave - 1, 64)
        drain = STORE_SLACK * self.backlog() / self.store_rate
        return min(self.timeout_max, max(backoff, drain))

    def observe(self, backlog: float, seconds: float) -> None:
        """A wave that started with ``backlog`` bytes per node completed in ``seconds``."""
        if backlog >= RATE_SAMPLE_BYTES and seconds > 0:
            sample = backlog / seconds
            alpha = RATE_ALPHA_DOWN if sample < self.store_rate else RATE_ALPHA_UP
            self.store_rate = max(STORE_RATE_FLOOR, self.store_rate + alpha * (
                sample - self.store_rate))

    def pick(self, payload_len: int, now: float) -> tuple[Copyset | None, E]:
        """A copyset for the next wave, or (None, status) saying why there is none."""
        health = self.health
        excluded = health.excluded(now)
        cs = self._select(excluded, payload_len, now)
        if cs is None and health.graylisted(now):
            health.clear_graylist()
            cs = self._select(health.excluded(now), payload_len, now)
        if cs is None and health.blacklisted(now):
            cs = self._select(health.must_avoid(now), payload_len, now)
        if cs is None:
            return None, self.failure_status(now)
        return cs, E.OK

    def _select(self, excluded: frozenset[int], payload_len: int, now: float) -> Copyset | None:
        if self._sticky:
            return self.selector.select(self.rng, excluded, payload_len, now)  # type: ignore[call-arg]
        return self.selector.select(self.rng, excluded)

    def failure_status(self, now: float) -> E:
        """Why no copyset avoids the excluded nodes.

        DISABLED: too many nodes are down; NOSPC: nodes out of space are what is missing;
        OVERLOADED: otherwise (nodes that answered with other errors).
        """
        health, sel = self.health, self.selector
        down = frozenset(health.down)
        if not sel.can_satisfy(down):
            return E.DISABLED
        black = health.blacklisted(now)
        nospc = {n for n, st in black.items() if st == E.NOSPC}
        if nospc and sel.can_satisfy(down | (black.keys() - nospc)):
            return E.NOSPC
        return E.OVERLOADED

    def wave_failed(self, copyset: Copyset) -> None:
        if self._sticky and copyset:
            self.selector.on_wave_failed(copyset)  # type: ignore[union-attr]


class Appender:
    """Replication of one record; see the module docstring for the protocol.

    Parameters
    ----------
    ctx : AppenderContext
    request_id : hashable
        The node's handle for the client request (and the payload it keeps).
    lsn, timestamp, flags, payload_len : int
        What the STOREs carry (the payload itself stays with the node).
    """

    __slots__ = ("ctx", "request_id", "lsn", "timestamp", "flags", "payload_len", "state",
                 "wave", "copyset", "stored", "deadline", "armed", "last_status",
                 "wave_started", "wave_backlog")

    def __init__(self, ctx: AppenderContext, request_id: Hashable, lsn: int, timestamp: int,
                 flags: int = 0, payload_len: int = 0) -> None:
        self.ctx = ctx
        self.request_id = request_id
        self.lsn = lsn
        self.timestamp = timestamp
        self.flags = flags
        self.payload_len = payload_len
        self.state = AppenderState.WAITING
        self.wave = 0
        self.copyset: Copyset = ()
        self.stored: set[int] = set()
        self.deadline: float | None = None  # when on_timeout has work to do
        self.armed: float | None = None  # the deadline the driver's timer was set for
        self.last_status = E.OK  # why the last wave could not pick a copyset
        self.wave_started = 0.0
        self.wave_backlog = 0.0  # the log's backlog per node when the wave went out

    @property
    def replicated(self) -> bool:
        return self.state == AppenderState.REPLICATED

    # -- events ---------------------------------------------------------------------------
    def start(self, now: float, copyset: Copyset | None = None) -> list:
        """Send wave 1 (on ``copyset`` when the caller already picked one)."""
        if self.wave != 0:
            raise RuntimeError("Appender.start called twice")
        self.ctx.unstored_bytes += self.payload_len
        return self._next_wave(now, copyset)

    def on_stored(self, node: int, wave: int, status: E | int, now: float) -> list:
        """A STORED reply from ``node`` for ``wave``."""
        if (wave != self.wave or self.state != AppenderState.REPLICATING
                or node not in self.copyset or node in self.stored):
            return []  # an old wave, a stranger, a duplicate, or we are done
        if status == E.OK:
            stored = self.stored
            stored.add(node)
            if len(stored) < len(self.copyset):
                return []
            self.state = AppenderState.REPLICATED
            self.deadline = None
            ctx = self.ctx
            ctx.unstored_bytes -= self.payload_len
            ctx.observe(self.wave_backlog, now - self.wave_started)
            return [AckAppend(self.request_id, self.ctx.log_id, self.lsn, self.timestamp)]
        self.ctx.health.blacklist(node, status, now)
        self.ctx.wave_failed(self.copyset)
        return self._next_wave(now)

    def on_timeout(self, now: float) -> list:
        """Called once ``now >= deadline``: the wave timed out, or a wait is over."""
        if self.deadline is None or now < self.deadline:
            return []
        if self.state == AppenderState.REPLICATING:
            # Stores that arrived since the wave went out are written in the same group
            # commits as this one: judge the wait by the backlog now, if it grew.
            later = self.wave_started + self.ctx.store_timeout(self.wave)
            if later > now:
                self.deadline = later
                return []
            health = self.ctx.health
            for node in self.copyset:
                if node not in self.stored:
                    health.graylist(node, now)
            self.ctx.wave_failed(self.copyset)
        return self._next_wave(now)

    def on_node_down(self, node: int, now: float) -> list:
        """``node`` is down: if the current wave still waits for it, give up on the wave.

        The driver marks the node down in ``ctx.health`` first, so the next copyset avoids it.
        """
        if (self.state != AppenderState.REPLICATING or node not in self.copyset
                or node in self.stored):
            return []
        self.ctx.wave_failed(self.copyset)
        return self._next_wave(now)

    def retry_now(self, now: float) -> list:
        """A waiting appender tries to pick a copyset now (nodes came back)."""
        if self.state != AppenderState.WAITING or self.wave == 0:
            return []
        return self._next_wave(now)

    def abort(self, status: E) -> list:
        """Give up (sequencer deactivated): reject the client unless already acked."""
        if self.state in (AppenderState.REPLICATED, AppenderState.ABORTED):
            return []
        if self.wave:
            self.ctx.unstored_bytes -= self.payload_len
        self.state = AppenderState.ABORTED
        self.deadline = None
        return [Reject(self.request_id, self.ctx.log_id, status, self.lsn)]

    # -- internals ------------------------------------------------------------------------
    def _next_wave(self, now: float, copyset: Copyset | None = None) -> list:
        ctx = self.ctx
        self.wave += 1
        self.stored = set()
        self.wave_started, self.wave_backlog = now, ctx.backlog()
        self.deadline = now + ctx.store_timeout(self.wave)
        if copyset is None:
            copyset, self.last_status = ctx.pick(self.payload_len, now)
        if copyset is None:
            self.state = AppenderState.WAITING
            self.copyset = ()
            return []
        self.state = AppenderState.REPLICATING
        self.copyset = copyset
        args = (ctx.log_id, self.lsn, self.wave, copyset, self.timestamp, self.flags, ctx.lng,
                self.request_id)
        return [SendStore(node, *args) for node in copyset]
