# The sequencer's appenders, compiled: ``AppenderContext`` (what the appenders of one log
# share) and ``Appender`` (one record's waves).  The protocol, its waves, timeouts and
# node lists are described in ``logdevice.sequencer.appender``, which re-exports these
# classes; this module only makes each event cost C calls instead of Python frames.
# The copyset selector and the node health stay Python objects (consulted through their
# methods), so sticky copysets, failure domains and the exclusion lists are theirs.
from enum import IntEnum

# ``logdevice`` (its statuses and the action classes) imports this module while it loads:
# what this module needs of it is looked up when the first context is made.
E = AckAppend = Reject = SendStore = StoreWave = None
cdef object _OK = 0


def _load_logdevice():
    global E, AckAppend, Reject, SendStore, StoreWave, _OK
    from logdevice.errors import E
    from logdevice.sequencer.actions import AckAppend, Reject, SendStore, StoreWave
    _OK = E.OK


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

#: A wave waits this many times the longest answer its members gave lately (seconds
#: remembered), but never longer than ``LATENCY_WAIT_MAX`` for that reason alone: a
#: slower answer came from a node that hung, which should not teach patience (a second
#: is also the least TCP waits before it sends again).
LATENCY_FACTOR, LATENCY_MEMORY, LATENCY_WAIT_MAX = 2.0, 10.0, 1.0

cdef double _SLACK = STORE_SLACK, _FLOOR = STORE_RATE_FLOOR
cdef double _FACTOR = LATENCY_FACTOR, _MEMORY = LATENCY_MEMORY, _WAIT_MAX = LATENCY_WAIT_MAX
cdef double _SAMPLE = RATE_SAMPLE_BYTES, _DOWN = RATE_ALPHA_DOWN, _UP = RATE_ALPHA_UP


class AppenderState(IntEnum):
    REPLICATING = 0  # a wave is out, waiting for STORED
    WAITING = 1  # no copyset could be picked; retry at ``deadline``
    REPLICATED = 2  # all R members stored in one wave; the client was acked
    ABORTED = 3  # given up (sequencer deactivated); the client got a Reject


DEF REPLICATING = 0
DEF WAITING = 1
DEF REPLICATED = 2
DEF ABORTED = 3
cdef tuple _STATES = tuple(AppenderState)


cdef class StoreLatency:
    """How long each storage node took to answer a STORE lately, as this node's
    sequencers saw it: the longest time from a wave's STOREs to a member's answer within
    the last ``LATENCY_MEMORY`` seconds (at least half of it); a wave on that member waits
    ``LATENCY_FACTOR`` times as long (at most ``LATENCY_WAIT_MAX``).

    One instance serves every log of the node (``NodeHealth.latency``).  A node busy
    with many logs' STOREs, or one that pauses now and then (a large group commit, a
    collection, a burst of activations), answers late though no log has more than a
    record or two on its way: the logs' own backlogs cannot tell, this can, so their
    waves wait for it instead of timing out and storing copies again, which would only
    add to its queue.  The longest answer, not an average: answers come by the thousand
    a second, and an average would forget a pause within milliseconds, before the next.
    A node that stops answering sends no samples: it times out as its recent answers say.
    """

    cdef dict _now, _before  # node -> longest answer (s) in this period / the one before
    cdef double _period_start

    def __init__(self):
        self._now = {}
        self._before = {}
        self._period_start = -1e300

    cdef void _roll(self, double now):
        cdef double half = _MEMORY / 2
        if now >= self._period_start + half:
            self._before = self._now if now < self._period_start + 2 * half else {}
            self._now = {}
            self._period_start = now

    cpdef observe(self, node, double seconds, double now):
        """``node`` answered, at ``now``, a STORE sent ``seconds`` before."""
        self._roll(now)
        known = self._now.get(node)
        if known is None or seconds > <double>known:
            self._now[node] = seconds

    cpdef double timeout(self, tuple nodes, double now):
        """Seconds to wait for every one of ``nodes`` to answer (0: none answered lately)."""
        cdef double longest = 0.0, t
        self._roll(now)
        for node in nodes:
            for period in (self._now, self._before):
                known = period.get(node)
                if known is not None:
                    t = known
                    if t > longest:
                        longest = t
        return min(_WAIT_MAX, _FACTOR * longest)


cdef class AppenderContext:
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
        ``min(maximum, initial * 2**(w-1))``, or longer when its nodes are busy (see
        ``store_timeout``).
    store_waves : bool
        Emit one ``StoreWave`` per wave instead of a ``SendStore`` per member.
    """

    cdef public object log_id, selector, replication, rng, health
    cdef public StoreLatency latency  # the health's: shared by every log of the node
    cdef public double timeout_initial, timeout_max, store_rate
    cdef public object lng  # last known good LSN of the epoch; the sequencer keeps it
    cdef public long long unstored_bytes  # payload bytes of the appenders not replicated
    cdef public bint store_waves
    cdef bint _sticky
    cdef double _share  # a node's part of the log's bytes: R / nodeset size

    def __init__(self, log_id, selector, rng, health=None, store_timeout=STORE_TIMEOUT,
                 store_waves=False):
        from logdevice.sequencer.copyset import StickyCopysetSelector
        from logdevice.sequencer.nodestate import NodeHealth
        if StoreWave is None:
            _load_logdevice()
        initial, maximum = store_timeout
        if not 0 < initial <= maximum:
            raise ValueError(f"store_timeout must be (initial, maximum) with "
                             f"0 < initial <= maximum, got {store_timeout!r}")
        self.log_id = log_id
        self.selector = selector
        self.replication = selector.replication
        self.rng = rng
        self.health = health if health is not None else NodeHealth()
        self.latency = self.health.latency
        self.timeout_initial, self.timeout_max = float(initial), float(maximum)
        self.lng = 0
        self._sticky = isinstance(selector, StickyCopysetSelector)
        self._share = self.replication.r / max(1, len(selector.nodeset))
        self.unstored_bytes = 0
        self.store_rate = STORE_RATE_PRIOR
        self.store_waves = store_waves

    cpdef double backlog(self):
        """Bytes of this log each node of the nodeset has on its way to disk, roughly."""
        return self.unstored_bytes * self._share

    cpdef double store_timeout(self, long long wave, tuple copyset=(), double now=0.0):
        """Seconds wave ``wave`` (1-based) on ``copyset`` waits for its STOREDs at ``now``:
        the backoff, or longer while this log's backlog needs longer to be written or the
        members answered slowly lately (``StoreLatency``)."""
        cdef double backoff = self.timeout_initial * 2.0 ** min(wave - 1, 64)
        cdef double drain = _SLACK * self.backlog() / self.store_rate
        cdef double answer = self.latency.timeout(copyset, now) if copyset else 0.0
        return min(self.timeout_max, max(backoff, drain, answer))

    cpdef observe(self, double backlog, double seconds):
        """A wave that started with ``backlog`` bytes per node completed in ``seconds``."""
        cdef double sample, alpha
        if backlog >= _SAMPLE and seconds > 0:
            sample = backlog / seconds
            alpha = _DOWN if sample < self.store_rate else _UP
            self.store_rate = max(_FLOOR, self.store_rate + alpha * (sample - self.store_rate))

    cpdef tuple pick(self, long long payload_len, double now):
        """A copyset for the next wave, or (None, status) saying why there is none."""
        health = self.health
        cs = self._select(health.excluded(now), payload_len, now)
        if cs is None and health.graylisted(now):
            health.clear_graylist()
            cs = self._select(health.excluded(now), payload_len, now)
        if cs is None and health.blacklisted(now):
            cs = self._select(health.must_avoid(now), payload_len, now)
        if cs is None:
            return None, self.failure_status(now)
        return cs, _OK

    cdef object _select(self, excluded, long long payload_len, double now):
        if self._sticky:
            return self.selector.select(self.rng, excluded, payload_len, now)
        return self.selector.select(self.rng, excluded)

    def failure_status(self, double now):
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

    cpdef wave_failed(self, tuple copyset):
        if self._sticky and copyset:
            self.selector.on_wave_failed(copyset)


cdef class Appender:
    """Replication of one record; see ``logdevice.sequencer.appender`` for the protocol.

    Parameters
    ----------
    ctx : AppenderContext
    request_id : hashable
        The node's handle for the client request (and the payload it keeps).
    lsn, timestamp, flags, payload_len : int
        What the STOREs carry (the payload itself stays with the node).
    """

    cdef public AppenderContext ctx
    cdef public object request_id, lsn, timestamp, flags
    cdef public long long payload_len
    cdef int _state
    cdef public long long wave
    cdef public tuple copyset
    cdef public set stored
    cdef public object deadline  # when on_timeout has work to do (None: nothing)
    cdef public object armed  # the deadline the driver's timer was set for
    cdef public object last_status  # why the last wave could not pick a copyset
    cdef public double wave_started
    cdef public double wave_backlog  # the log's backlog per node when the wave went out

    def __init__(self, AppenderContext ctx, request_id, lsn, timestamp, flags=0,
                 long long payload_len=0):
        self.ctx = ctx
        self.request_id = request_id
        self.lsn = lsn
        self.timestamp = timestamp
        self.flags = flags
        self.payload_len = payload_len
        self._state = WAITING
        self.wave = 0
        self.copyset = ()
        self.stored = set()
        self.deadline = None
        self.armed = None
        self.last_status = _OK
        self.wave_started = 0.0
        self.wave_backlog = 0.0

    @property
    def state(self):
        return _STATES[self._state]

    @property
    def replicated(self):
        return self._state == REPLICATED

    # -- events ---------------------------------------------------------------------------
    cpdef list start(self, double now, tuple copyset=None):
        """Send wave 1 (on ``copyset`` when the caller already picked one)."""
        if self.wave != 0:
            raise RuntimeError("Appender.start called twice")
        self.ctx.unstored_bytes += self.payload_len
        return self._next_wave(now, copyset)

    cpdef list on_stored(self, node, long long wave, status, double now):
        """A STORED reply from ``node`` for ``wave``."""
        if (wave != self.wave or self._state != REPLICATING
                or node not in self.copyset or node in self.stored):
            return []  # an old wave, a stranger, a duplicate, or we are done
        cdef AppenderContext ctx = self.ctx
        ctx.latency.observe(node, now - self.wave_started, now)
        if status == 0:
            self.stored.add(node)
            if len(self.stored) < len(self.copyset):
                return []
            self._state = REPLICATED
            self.deadline = None
            ctx.unstored_bytes -= self.payload_len
            ctx.observe(self.wave_backlog, now - self.wave_started)
            return [AckAppend(self.request_id, ctx.log_id, self.lsn, self.timestamp)]
        ctx.health.blacklist(node, status, now)
        ctx.wave_failed(self.copyset)
        return self._next_wave(now, None)

    cpdef list on_timeout(self, double now):
        """Called once ``now >= deadline``: the wave timed out, or a wait is over."""
        if self.deadline is None or now < self.deadline:
            return []
        cdef AppenderContext ctx = self.ctx
        cdef double later
        if self._state == REPLICATING:
            # Stores that arrived since the wave went out are written in the same group
            # commits as this one: judge the wait by the backlog now, if it grew.
            later = self.wave_started + ctx.store_timeout(self.wave, self.copyset, now)
            if later > now:
                self.deadline = later
                return []
            health = ctx.health
            for node in self.copyset:
                if node not in self.stored:
                    health.graylist(node, now)
            ctx.wave_failed(self.copyset)
        return self._next_wave(now, None)

    cpdef list on_node_down(self, node, double now):
        """``node`` is down: if the current wave still waits for it, give up on the wave.

        The driver marks the node down in ``ctx.health`` first, so the next copyset avoids it.
        """
        if (self._state != REPLICATING or node not in self.copyset
                or node in self.stored):
            return []
        self.ctx.wave_failed(self.copyset)
        return self._next_wave(now, None)

    cpdef list retry_now(self, double now):
        """A waiting appender tries to pick a copyset now (nodes came back)."""
        if self._state != WAITING or self.wave == 0:
            return []
        return self._next_wave(now, None)

    cpdef list abort(self, status):
        """Give up (sequencer deactivated): reject the client unless already acked."""
        if self._state == REPLICATED or self._state == ABORTED:
            return []
        if self.wave:
            self.ctx.unstored_bytes -= self.payload_len
        self._state = ABORTED
        self.deadline = None
        return [Reject(self.request_id, self.ctx.log_id, status, self.lsn)]

    # -- internals ------------------------------------------------------------------------
    cdef list _next_wave(self, double now, tuple copyset):
        cdef AppenderContext ctx = self.ctx
        self.wave += 1
        self.stored = set()
        self.wave_started = now
        self.wave_backlog = ctx.backlog()
        if copyset is None:
            copyset, self.last_status = ctx.pick(self.payload_len, now)
        if copyset is None:
            self._state = WAITING
            self.copyset = ()
            self.deadline = now + ctx.store_timeout(self.wave)
            return []
        self.deadline = now + ctx.store_timeout(self.wave, copyset, now)
        self._state = REPLICATING
        self.copyset = copyset
        if ctx.store_waves:
            return [StoreWave(ctx.log_id, self.lsn, self.wave, copyset, self.timestamp,
                              self.flags, ctx.lng, self.request_id)]
        return [SendStore(node, ctx.log_id, self.lsn, self.wave, copyset, self.timestamp,
                          self.flags, ctx.lng, self.request_id) for node in copyset]


def draw_distinct(list nodes, list cum, Py_ssize_t r, rand, Py_ssize_t tries):
    """Up to ``r`` distinct nodes drawn by weight (``cum``: cumulative weights of
    ``nodes``), at most ``tries`` draws of ``rand()``: exactly what a loop of
    ``nodes[bisect_right(cum, rand() * cum[-1])]`` draws, rejecting repeats."""
    cdef Py_ssize_t n = len(cum), lo, hi, mid
    if n == 0 or n != len(nodes):
        raise ValueError("draw_distinct needs one cumulative weight per node")
    cdef double total = cum[n - 1], x
    cdef list chosen = []
    for _ in range(tries):
        x = rand() * total
        lo, hi = 0, n
        while lo < hi:  # bisect_right
            mid = (lo + hi) >> 1
            if x < <double>cum[mid]:
                hi = mid
            else:
                lo = mid + 1
        node = nodes[lo if lo < n else n - 1]  # (x < total unless rounding says otherwise)
        if node not in chosen:
            chosen.append(node)
            if len(chosen) == r:
                break
    return chosen
