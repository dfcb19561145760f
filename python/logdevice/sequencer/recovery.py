"""Epoch recovery: repair a log's unclean epochs before a new sequencer releases anything,
so that every reader sees one history and nothing below a release pointer changes.

A sans-I/O state machine.  A sequencer activated in epoch E, when the epoch store's last
clean epoch is below E - 1, builds one ``EpochRecovery`` for the epochs in between and
carries out the actions it returns; events come back in through its methods::

    rec = EpochRecovery(log_id, E, [RecoveryEpoch(e, nodeset, replication), ...],
                        clock=loop.time, rng=random.Random())
    rec.start()                                      # -> [SendSeal ...]
    rec.on_sealed(node, epoch, status, lng, max_seen)
    rec.on_digest_started(node, stream_id, status)
    rec.on_digest_records(node, stream_id, lsns, timestamps, flags, waves, payloads,
                          offsets, checksums)
    rec.on_digest_gap(node, stream_id, lo, hi)
    rec.on_stored(node, lsn, wave, status)          # replies to its SendStores
    rec.on_epoch_store_updated(status)
    rec.on_timer()  when  rec.next_deadline() has passed

Per epoch e, independently:

1. **Seal.**  SEAL(seal epoch E - 1) to every node of e's nodeset.  A storage node
   persists the seal, then refuses STOREs of epochs <= E - 1 (PREEMPTED), and answers
   SEALED with the highest last-known-good LSN it saw for e.  Unanswered SEALs are
   re-sent with exponential backoff, a bounded number of times.  The epoch moves on once
   the sealed nodes form an f-majority of the nodeset (``N - R + 1`` nodes, with failure
   domains and authoritative status exactly as the read path counts them): every copyset
   of an acknowledged record then has a sealed member, so no more such record can appear.
2. **Digest.**  A DIGEST read stream on each sealed node from the highest LNG reported
   up to the end of the epoch.  Complete once the nodes whose streams ran to the end form
   an f-majority and either every node that counts finished (or is known down) or
   ``digest_grace`` passed.
   Silent streams are restarted (bounded).  ``digest.Digest`` picks the winning copy of
   each ESN (recovery copies beat sequencer copies, then the higher seal epoch, then the
   higher wave).
3. **Mutate.**  Every ESN from LNG + 1 to the highest one held anywhere is stored on a
   full copyset, marked WRITTEN_BY_RECOVERY with the seal epoch in the wave field: the
   winning copy where one exists, a hole plug (HOLE, empty payload) where none does; then
   a bridge record (BRIDGE) one ESN past the last.  Nodes holding a different version of
   an ESN are overwritten too, and nodes whose digest recovery went on without get every
   decision as well, best effort (not waited for): a copy the dead sequencer left there
   must not contradict a hole plug.  STOREs that fail or time out are retried on a new
   copyset (bounded).

When every epoch is mutated: ``UpdateEpochStore`` (last clean epoch E - 1 and the tail
record), and once that succeeded ``Done(OK, last_released, last_timestamp, nodes)``: the
driver releases up to ``last_released`` (the last epoch's bridge record) on ``nodes`` and
calls ``Sequencer.on_recovery_done``.  Any failure ends in ``Done(status)`` (PREEMPTED
when a newer sequencer sealed the log: deactivate; otherwise start a new recovery later).
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from enum import IntEnum
from random import Random
from typing import Any, NamedTuple

from ldcore import lsn as ldlsn
from logdevice.backoff import ExponentialBackoff
from logdevice.epochstore.outcome import EpochOutcome
from logdevice.errors import E
from logdevice.readstream.fmajority import FailureDomainNodeSet, FMajorityResult
from logdevice.sequencer.actions import SendStore
from logdevice.sequencer.copyset import CopysetSelector
from logdevice.sequencer.digest import Decision, Digest
from logdevice.sequencer.nodestate import NodeHealth

__all__ = [
    "EpochRecovery",
    "RecoveryEpoch",
    "RecoveryState",
    "EpochProgress",
    "SendSeal",
    "StartDigest",
    "StopDigest",
    "UpdateEpochStore",
    "Done",
]

_ESN_MAX = ldlsn.ESN_MAX


# -- actions ----------------------------------------------------------------------------
class SendSeal(NamedTuple):
    """Send SEAL(log_id, seal_epoch) to ``node``, asking for its state of ``epoch``."""

    node: int
    log_id: int
    epoch: int
    seal_epoch: int
    request_id: int


class StartDigest(NamedTuple):
    """Open a DIGEST read stream on ``node`` over ``[start_lsn, until_lsn]``."""

    node: int
    log_id: int
    epoch: int
    stream_id: int
    start_lsn: int
    until_lsn: int


class StopDigest(NamedTuple):
    """Close digest stream ``stream_id`` on ``node``."""

    node: int
    log_id: int
    stream_id: int


class UpdateEpochStore(NamedTuple):
    """Record in the epoch store: recovery finished up to ``last_clean_epoch``, the log's
    tail record is (``tail_lsn``, ``tail_timestamp``), and ``outcomes`` says what it made
    of each epoch (storage nodes that missed the recovery purge against them).  Answer
    with ``on_epoch_store_updated``."""

    log_id: int
    last_clean_epoch: int
    tail_lsn: int
    tail_timestamp: int
    outcomes: tuple[EpochOutcome, ...] = ()


class Done(NamedTuple):
    """Recovery is over.  OK: release up to ``last_released`` on ``nodes`` and start the
    new epoch's releases.  Otherwise ``status`` says why it gave up."""

    log_id: int
    status: E
    last_released: int = 0
    last_timestamp: int = 0
    nodes: tuple[int, ...] = ()
    message: str = ""


class RecoveryEpoch(NamedTuple):
    """An epoch to recover and the placement it was written with."""

    epoch: int
    nodeset: tuple[int, ...]
    replication: Any


class RecoveryState(IntEnum):
    SEALING = 0
    DIGESTING = 1
    MUTATING = 2
    CLEAN = 3  # mutated; waits for the other epochs and the epoch store
    UPDATING = 4  # the epoch store update is out
    DONE = 5


class EpochProgress(NamedTuple):
    """Where the recovery of one epoch stands (``EpochRecovery.progress``)."""

    epoch: int
    state: RecoveryState
    nodeset: tuple[int, ...]
    sealed: tuple[int, ...]  # nodes that answered SEAL
    digested: tuple[int, ...]  # nodes whose digest stream reached the end of the epoch
    lng: int  # the highest last known good LSN the sealed nodes reported (0: not yet)
    records: int  # data records the mutation re-replicates
    holes: int  # hole plugs it writes
    bridge: int  # LSN of its bridge record (0: none, or not decided yet)
    pending: int  # decisions not yet stored on a full copyset


# -- per node and per ESN bookkeeping ---------------------------------------------------
class _Seal:
    __slots__ = ("request_id", "attempts", "next_at", "answered", "lng", "gave_up")

    def __init__(self) -> None:
        self.request_id = 0
        self.attempts = 0
        self.next_at = 0.0
        self.answered = False
        self.lng = 0
        self.gave_up = False


class _Stream:
    __slots__ = ("stream_id", "reported_to", "complete", "restarts", "deadline", "failed")

    def __init__(self, stream_id: int, start: int, deadline: float) -> None:
        self.stream_id = stream_id
        self.reported_to = start - 1
        self.complete = False
        self.restarts = 0
        self.deadline = deadline
        self.failed = False


class _Mutation:
    __slots__ = ("decision", "copyset", "targets", "stored", "attempt", "deadline",
                 "excluded", "done")

    def __init__(self, decision: Decision) -> None:
        self.decision = decision
        self.copyset: tuple[int, ...] = ()
        self.targets: frozenset[int] = frozenset()
        self.stored: set[int] = set()
        self.attempt = 0
        self.deadline = 0.0
        self.excluded: set[int] = set()
        self.done = False


class _Epoch:
    """Recovery of one epoch."""

    def __init__(self, spec: RecoveryEpoch, locations: Mapping[int, Any] | None,
                 weights: Mapping[int, float] | None,
                 authoritative: Mapping[int, int] | None) -> None:
        self.epoch = spec.epoch
        self.nodeset = tuple(dict.fromkeys(int(n) for n in spec.nodeset))
        self.fmaj = FailureDomainNodeSet(self.nodeset, spec.replication, locations)
        for n, st in (authoritative or {}).items():
            if int(n) in self.fmaj.status:
                self.fmaj.set_status(int(n), st)
        self.selector = CopysetSelector(self.nodeset, spec.replication, locations, weights)
        self.state = RecoveryState.SEALING
        self.seals = {n: _Seal() for n in self.nodeset}
        self.streams: dict[int, _Stream] = {}
        self.digest: Digest | None = None
        self.until = ldlsn.compose(self.epoch, _ESN_MAX)
        self.fmaj_since: float | None = None
        self.mutations: dict[int, _Mutation] = {}
        self.pending = 0
        self.last_lsn = 0  # the epoch's last LSN after recovery (its bridge record)
        self.outcome: EpochOutcome | None = None  # what the mutation makes of the epoch
        self.unheard: tuple[int, ...] = ()  # nodes whose digest recovery did without

    def sealed(self) -> set[int]:
        return {n for n, s in self.seals.items() if s.answered}

    def hopeless(self, node: int) -> bool:
        """The node will not take part (gave up on it, or it does not count)."""
        if node not in self.fmaj.counting:
            return True
        seal = self.seals[node]
        if seal.gave_up:
            return True
        st = self.streams.get(node)
        return st is not None and st.failed


class EpochRecovery:
    """Recovers epochs ``(last clean epoch, new_epoch)`` of ``log_id``.

    Parameters
    ----------
    log_id : int
    new_epoch : int
        The epoch of the sequencer that runs the recovery; the seal epoch is
        ``new_epoch - 1``.
    epochs : iterable of RecoveryEpoch
        The epochs to recover (each with its nodeset and replication).
    locations, weights : mapping node -> ..., optional
        As for ``CopysetSelector``; locations also shape the f-majority.
    clock : callable -> float
        Monotonic seconds for every timer.
    rng : random.Random
        Copyset choice.
    authoritative : mapping node -> AuthoritativeStatus, optional
        From the event log; AUTHORITATIVE_EMPTY nodes leave the f-majority.
    health : NodeHealth, optional
        The node's view of down / gray- / blacklisted storage nodes (avoided for copies).
    tail : (int, int)
        The log's tail record (LSN, timestamp ms) before these epochs.
    ids : iterator of int, optional
        Source of SEAL request ids and digest stream ids (unique per node connection).
    seal_timeout : (float, float)
        (first, largest) wait before re-sending a SEAL; doubles per attempt.
    seal_attempts : int
        SEALs sent to one node before giving up on it.
    digest_timeout : float
        A digest stream silent this long is restarted ...
    digest_restarts : int
        ... at most this many times.
    digest_grace : float
        How long to wait for the rest once an f-majority finished its digest.
    store_timeout : (float, float)
        (first, largest) wait for STOREDs of one mutation attempt; doubles per attempt.
    store_attempts : int
        Copysets tried per ESN before recovery fails.
    epoch_store_attempts : int
        Epoch store updates tried before recovery fails.
    """

    def __init__(self, log_id: int, new_epoch: int, epochs: Iterable[RecoveryEpoch],
                 locations: Mapping[int, Any] | None = None,
                 weights: Mapping[int, float] | None = None, *,
                 clock: Callable[[], float] = time.monotonic,
                 rng: Random | None = None,
                 authoritative: Mapping[int, int] | None = None,
                 health: NodeHealth | None = None,
                 tail: tuple[int, int] = (0, 0),
                 ids: Iterator[int] | None = None,
                 seal_timeout: tuple[float, float] = (0.5, 4.0),
                 seal_attempts: int = 8,
                 digest_timeout: float = 3.0,
                 digest_restarts: int = 3,
                 digest_grace: float = 0.2,
                 store_timeout: tuple[float, float] = (0.5, 4.0),
                 store_attempts: int = 8,
                 epoch_store_attempts: int = 5) -> None:
        if not ldlsn.EPOCH_MIN < new_epoch <= ldlsn.EPOCH_MAX:
            raise ValueError(f"log {log_id}: cannot recover before epoch {new_epoch}")
        self.log_id = log_id
        self.new_epoch = new_epoch
        self.seal_epoch = new_epoch - 1
        self._clock = clock
        self.rng = rng if rng is not None else Random()
        self.health = health if health is not None else NodeHealth()
        self._ids = ids if ids is not None else itertools.count(1)
        self.token = object()  # part of every request id of this recovery's STOREs
        self._seal_backoff = ExponentialBackoff(*seal_timeout)
        self.seal_attempts = seal_attempts
        self.digest_timeout = digest_timeout
        self.digest_restarts = digest_restarts
        self.digest_grace = digest_grace
        self._store_backoff = ExponentialBackoff(*store_timeout)
        self.store_attempts = store_attempts
        self.epoch_store_attempts = epoch_store_attempts
        self.epochs: dict[int, _Epoch] = {}
        for spec in sorted(epochs, key=lambda s: s.epoch):
            if not ldlsn.EPOCH_MIN <= spec.epoch < new_epoch:
                raise ValueError(f"log {log_id}: epoch {spec.epoch} is not before "
                                 f"{new_epoch}")
            self.epochs[spec.epoch] = _Epoch(spec, locations, weights, authoritative)
        self.tail_lsn, self.tail_ts = tail
        self._phase: RecoveryState | None = None  # UPDATING, DONE; None while epochs run
        self._streams: dict[int, tuple[_Epoch, int]] = {}  # stream id -> (epoch, node)
        self._seal_ids: dict[int, tuple[_Epoch, int]] = {}  # request id -> (epoch, node)
        self._payloads: dict[Hashable, tuple[bytes, int]] = {}
        self._store_timers: list[tuple[float, int, int]] = []  # (deadline, lsn, attempt)
        self._by_lsn: dict[int, tuple[_Epoch, _Mutation]] = {}
        self._es_attempts = 0
        self._es_retry_at: float | None = None
        self.result: Done | None = None

    # -- views ------------------------------------------------------------------------------
    @property
    def state(self) -> RecoveryState:
        """UPDATING or DONE, else the state of the least advanced epoch."""
        if self._phase is not None:
            return self._phase
        return min((ep.state for ep in self.epochs.values()), default=RecoveryState.CLEAN)

    @property
    def done(self) -> bool:
        return self._phase == RecoveryState.DONE

    def digest(self, epoch: int) -> Digest | None:
        return self.epochs[epoch].digest

    def payload_of(self, request_id: Hashable) -> tuple[bytes, int] | None:
        """(payload, crc32c) a ``SendStore`` of this recovery carries."""
        return self._payloads.get(request_id)

    def nodes(self) -> tuple[int, ...]:
        """Every storage node of the epochs in recovery."""
        return tuple(sorted({n for ep in self.epochs.values() for n in ep.nodeset}))

    def progress(self) -> list[EpochProgress]:
        """Each epoch's state, who took part and what the mutation writes, oldest first."""
        out = []
        for ep in self.epochs.values():
            decisions = [m.decision for m in ep.mutations.values()]
            bridges = [d.lsn for d in decisions if d.is_bridge]
            holes = sum(1 for d in decisions if d.is_hole)
            out.append(EpochProgress(
                ep.epoch, ep.state, ep.nodeset, tuple(sorted(ep.sealed())),
                tuple(sorted(n for n, st in ep.streams.items() if st.complete)),
                ep.digest.lng if ep.digest is not None else 0,
                len(decisions) - holes - len(bridges), holes, max(bridges, default=0),
                ep.pending))
        return out

    # -- start --------------------------------------------------------------------------------
    def start(self, now: float | None = None) -> list:
        """Seal every epoch's nodeset (nothing to recover: straight to the epoch store)."""
        now = self._clock() if now is None else now
        out: list = []
        for ep in self.epochs.values():
            for node in ep.nodeset:
                self._send_seal(out, ep, node, now)
        self._advance(out, now)
        return out

    def _send_seal(self, out: list, ep: _Epoch, node: int, now: float) -> None:
        seal = ep.seals[node]
        seal.attempts += 1
        seal.next_at = now + self._seal_backoff.delay(seal.attempts - 1)
        self._seal_ids.pop(seal.request_id, None)
        seal.request_id = next(self._ids)
        self._seal_ids[seal.request_id] = (ep, node)
        out.append(SendSeal(node, self.log_id, ep.epoch, self.seal_epoch, seal.request_id))

    # -- seal ---------------------------------------------------------------------------------
    def on_sealed(self, node: int, epoch: int, status: E | int = E.OK,
                  last_known_good: int = 0, max_seen_lsn: int = 0,
                  request_id: int | None = None, now: float | None = None) -> list:
        """SEALED from ``node`` for ``epoch`` (``request_id``, when given, must be the
        latest SEAL's)."""
        now = self._clock() if now is None else now
        out: list = []
        ep = self.epochs.get(epoch)
        if ep is None or self.done or node not in ep.seals:
            return out
        seal = ep.seals[node]
        if request_id is not None and request_id != seal.request_id:
            return out
        if status == E.PREEMPTED:
            self._finish(out, E.PREEMPTED, f"N{node} is sealed by a newer sequencer")
            return out
        if status != E.OK:
            if seal.attempts >= self.seal_attempts:
                seal.gave_up = True
            self._advance(out, now)
            return out
        if seal.answered:
            return out
        seal.answered = True
        if ldlsn.epoch_of(last_known_good) == epoch:
            seal.lng = last_known_good
        elif last_known_good > ep.until:  # released past the epoch: it is all good
            seal.lng = ep.until
        if ep.state == RecoveryState.DIGESTING:
            self._start_stream(out, ep, node, now)
        self._advance(out, now)
        return out

    # -- digest -------------------------------------------------------------------------------
    def _start_digest(self, out: list, ep: _Epoch, now: float) -> None:
        ep.state = RecoveryState.DIGESTING
        lng = max((s.lng for s in ep.seals.values() if s.answered), default=0)
        ep.digest = Digest(self.log_id, ep.epoch, lng)
        if ldlsn.esn_of(ep.digest.lng) >= _ESN_MAX:
            self._mutate(out, ep, now)  # released to the end already: nothing to do
            return
        for node in ep.nodeset:
            if ep.seals[node].answered:
                self._start_stream(out, ep, node, now)

    def _digest_start(self, ep: _Epoch) -> int:
        assert ep.digest is not None
        lng = ep.digest.lng
        # From LNG itself when it is a record: its timestamp is the tail's.
        return lng if ldlsn.esn_of(lng) else lng + 1

    def _start_stream(self, out: list, ep: _Epoch, node: int, now: float) -> None:
        old = ep.streams.get(node)
        sid = next(self._ids)
        start = self._digest_start(ep)
        st = _Stream(sid, start, now + self.digest_timeout)
        if old is not None:
            st.restarts = old.restarts + 1
            self._streams.pop(old.stream_id, None)
            out.append(StopDigest(node, self.log_id, old.stream_id))
        ep.streams[node] = st
        self._streams[sid] = (ep, node)
        out.append(StartDigest(node, self.log_id, ep.epoch, sid, start, ep.until))

    def _stream(self, node: int, stream_id: int) -> tuple[_Epoch, _Stream] | None:
        found = self._streams.get(stream_id)
        if found is None or found[1] != node:
            return None
        ep = found[0]
        st = ep.streams.get(node)
        if st is None or st.stream_id != stream_id or ep.state != RecoveryState.DIGESTING:
            return None
        return ep, st

    def on_digest_started(self, node: int, stream_id: int, status: E | int,
                          now: float | None = None) -> list:
        """STARTED for a digest stream; an error ends that stream (retried later)."""
        now = self._clock() if now is None else now
        out: list = []
        found = self._stream(node, stream_id)
        if found is None or status == E.OK:
            return out
        ep, st = found
        st.failed = st.restarts >= self.digest_restarts
        st.deadline = now + self.digest_timeout  # restart when it comes due
        if st.failed:
            self._advance(out, now)
        return out

    def on_digest_records(self, node: int, stream_id: int, lsns: Any, timestamps: Any,
                          flags: Any, waves: Any, payloads: Any, offsets: Any,
                          checksums: Any = None, now: float | None = None) -> list:
        """A RECORDS frame of a digest stream (numpy columns as on the wire)."""
        now = self._clock() if now is None else now
        found = self._stream(node, stream_id)
        if found is None or not len(lsns):
            return []
        ep, st = found
        assert ep.digest is not None
        ep.digest.add_batch(node, lsns, timestamps, flags, waves, payloads, offsets,
                            checksums)
        return self._progress(ep, st, int(lsns[-1]), now)

    def on_digest_gap(self, node: int, stream_id: int, lo: int, hi: int,
                      now: float | None = None) -> list:
        """A GAP of a digest stream: nothing (usable) on the node in ``[lo, hi]``."""
        now = self._clock() if now is None else now
        found = self._stream(node, stream_id)
        if found is None:
            return []
        return self._progress(found[0], found[1], hi, now)

    def _progress(self, ep: _Epoch, st: _Stream, upto: int, now: float) -> list:
        out: list = []
        if upto > st.reported_to:
            st.reported_to = upto
            st.deadline = now + self.digest_timeout
        if st.reported_to >= ep.until and not st.complete:
            st.complete = True
            self._advance(out, now)
        return out

    def _digest_ready(self, ep: _Epoch, now: float) -> bool | None:
        """True: the digest is complete; False: wait; None: it never can be."""
        complete = {n for n, st in ep.streams.items() if st.complete}
        res = ep.fmaj.check(complete)
        if res in (FMajorityResult.AUTHORITATIVE_COMPLETE, FMajorityResult.NON_AUTHORITATIVE):
            return True
        if res == FMajorityResult.AUTHORITATIVE_INCOMPLETE:
            down = self.health.down  # known dead: no use waiting for them
            if all(n in complete or n in down or ep.hopeless(n) for n in ep.nodeset):
                return True
            if ep.fmaj_since is None:
                ep.fmaj_since = now
            return now >= ep.fmaj_since + self.digest_grace
        ep.fmaj_since = None
        if all(n in complete or ep.hopeless(n) for n in ep.nodeset):
            return None
        return False

    # -- mutation -----------------------------------------------------------------------------
    def _mutate(self, out: list, ep: _Epoch, now: float) -> None:
        ep.state = RecoveryState.MUTATING
        for node, st in ep.streams.items():
            self._streams.pop(st.stream_id, None)
            out.append(StopDigest(node, self.log_id, st.stream_id))
        assert ep.digest is not None
        ep.unheard = tuple(n for n in ep.nodeset
                           if not (n in ep.streams and ep.streams[n].complete))
        lng_esn = ldlsn.esn_of(ep.digest.lng)
        if lng_esn >= _ESN_MAX:
            plan: list[Decision] = []
            ep.last_lsn = ep.until
        else:
            plan = ep.digest.plan()
            ep.last_lsn = plan[-1].lsn if plan else ep.until
        ep.outcome = EpochOutcome.from_plan(ep.epoch, lng_esn,
                                            (ldlsn.esn_of(d.lsn) for d in plan),
                                            (d.flags for d in plan))
        for d in plan:
            m = _Mutation(d)
            ep.mutations[d.lsn] = m
            self._by_lsn[d.lsn] = (ep, m)
            rid = (self.token, d.lsn)
            self._payloads[rid] = (d.payload, d.checksum)
            ep.pending += 1
            self._store(out, ep, m, now)
        if not ep.pending:
            ep.state = RecoveryState.CLEAN

    def _store(self, out: list, ep: _Epoch, m: _Mutation, now: float) -> None:
        """Send attempt ``m.attempt + 1`` of a mutation to a fresh copyset."""
        if m.attempt >= self.store_attempts:
            self._finish(out, E.FAILED, f"epoch {ep.epoch}: could not store "
                         f"{ldlsn.to_string(m.decision.lsn)} on a full copyset")
            return
        m.attempt += 1
        unsealed = {n for n in ep.nodeset if not ep.seals[n].answered}
        avoid = set(self.health.excluded(now)) | m.excluded
        copyset = None
        for excluded in (avoid | unsealed, avoid, m.excluded, ()):
            copyset = ep.selector.select(self.rng, excluded)
            if copyset is not None:
                break
        if copyset is None:
            self._finish(out, E.FAILED, f"epoch {ep.epoch}: no copyset for recovery")
            return
        d = m.decision
        extra = tuple(sorted(d.conflicts - set(copyset) - m.excluded))
        m.copyset = tuple(copyset) + extra
        m.targets = frozenset(m.copyset)
        m.stored = set()
        m.deadline = now + self._store_backoff.delay(m.attempt - 1)
        heapq.heappush(self._store_timers, (m.deadline, d.lsn, m.attempt))
        rid = (self.token, d.lsn)
        lng = ep.digest.lng if ep.digest is not None else 0
        for node in m.copyset:
            out.append(SendStore(node, self.log_id, d.lsn, self.seal_epoch, m.copyset,
                                 d.timestamp, d.flags, lng, rid))
        if m.attempt == 1:
            # Nodes whose digest we did without may hold (or still receive, from the old
            # sequencer's STOREs queued before our SEAL) a copy that contradicts the
            # decision: send them the decision too, without waiting for them.
            for node in ep.unheard:
                if node not in m.targets:
                    out.append(SendStore(node, self.log_id, d.lsn, self.seal_epoch,
                                         m.copyset, d.timestamp, d.flags, lng, rid))

    def on_stored(self, node: int, lsn: int, wave: int, status: E | int = E.OK,
                  now: float | None = None) -> list:
        """A STORED reply for one of this recovery's STOREs."""
        out: list = []
        self._stored(out, node, lsn, status, self._clock() if now is None else now)
        return out

    def on_stored_many(self, replies: Iterable[tuple[int, int, int, E | int]],
                       now: float | None = None) -> list:
        """``on_stored`` for each (node, lsn, wave, status)."""
        now = self._clock() if now is None else now
        out: list = []
        for node, lsn, _wave, status in replies:
            self._stored(out, node, lsn, status, now)
        return out

    def _stored(self, out: list, node: int, lsn: int, status: E | int, now: float) -> None:
        found = self._by_lsn.get(lsn)
        if found is None or self.done:
            return
        ep, m = found
        if m.done or node not in m.targets or node in m.stored:
            return
        if status == E.PREEMPTED:
            self._finish(out, E.PREEMPTED, f"N{node} refused a recovery STORE: sealed by a "
                         "newer sequencer")
            return
        if status != E.OK:
            self.health.blacklist(node, status, now)
            m.excluded.add(node)
            self._store(out, ep, m, now)
            return
        m.stored.add(node)
        if len(m.stored) == len(m.targets):
            m.done = True
            self._payloads.pop((self.token, lsn), None)
            ep.pending -= 1
            if ep.pending == 0:
                ep.state = RecoveryState.CLEAN
                self._advance(out, now)

    def on_node_down(self, node: int, now: float | None = None) -> list:
        """``node`` is down: mutations waiting for it move to another copyset."""
        now = self._clock() if now is None else now
        out: list = []
        for ep in self.epochs.values():
            if ep.state != RecoveryState.MUTATING:
                continue
            for m in ep.mutations.values():
                if not self.done and not m.done and node in m.targets \
                        and node not in m.stored:
                    m.excluded.add(node)
                    self._store(out, ep, m, now)
        return out

    # -- epoch store --------------------------------------------------------------------------
    def on_epoch_store_updated(self, status: E | int = E.OK, message: str = "",
                               now: float | None = None) -> list:
        """Outcome of the ``UpdateEpochStore`` action."""
        now = self._clock() if now is None else now
        out: list = []
        if self.state != RecoveryState.UPDATING:
            return out
        if status == E.OK:
            self._finish(out, E.OK)
        elif status == E.PREEMPTED or self._es_attempts >= self.epoch_store_attempts:
            self._finish(out, E(status), f"epoch store update failed: {message}")
        else:
            self._es_retry_at = now + self._store_backoff.delay(self._es_attempts - 1)
        return out

    def _update_epoch_store(self, out: list) -> None:
        self._phase = RecoveryState.UPDATING
        self._es_attempts += 1
        self._es_retry_at = None
        outcomes = tuple(ep.outcome for ep in self.epochs.values() if ep.outcome is not None)
        out.append(UpdateEpochStore(self.log_id, self.seal_epoch, self.tail_lsn,
                                    self.tail_ts, outcomes))

    # -- driving --------------------------------------------------------------------------
    def _advance(self, out: list, now: float) -> None:
        """Move every epoch (and then the whole recovery) along as far as it can go."""
        if self.done:
            return
        for ep in self.epochs.values():
            if ep.state == RecoveryState.SEALING:
                sealed = ep.sealed()
                res = ep.fmaj.check(sealed)
                if res != FMajorityResult.NONE:
                    self._start_digest(out, ep, now)
                elif all(ep.seals[n].answered or ep.hopeless(n) for n in ep.nodeset):
                    self._finish(out, E.TIMEDOUT, f"epoch {ep.epoch}: too few nodes of "
                                 f"{list(ep.nodeset)} answered SEAL ({sorted(sealed)})")
                    return
            if ep.state == RecoveryState.DIGESTING:
                ready = self._digest_ready(ep, now)
                if ready is None:
                    self._finish(out, E.TIMEDOUT, f"epoch {ep.epoch}: too few digests")
                    return
                if ready:
                    self._mutate(out, ep, now)
            if self.done:
                return
        if self._phase is None and all(
                ep.state == RecoveryState.CLEAN for ep in self.epochs.values()):
            for ep in self.epochs.values():
                if ep.digest is not None:
                    self.tail_ts = max(self.tail_ts, ep.digest.max_timestamp)
                if ep.last_lsn > self.tail_lsn:
                    self.tail_lsn = ep.last_lsn
            self._update_epoch_store(out)

    def next_deadline(self) -> float | None:
        """When ``on_timer`` next has work (clock seconds), or None."""
        if self.done:
            return None
        best: float | None = None

        def take(t: float) -> None:
            nonlocal best
            if best is None or t < best:
                best = t

        for ep in self.epochs.values():
            if ep.state in (RecoveryState.SEALING, RecoveryState.DIGESTING):
                for s in ep.seals.values():
                    if not s.answered and not s.gave_up:
                        take(s.next_at)
            if ep.state == RecoveryState.DIGESTING:
                for st in ep.streams.values():
                    if not st.complete and not st.failed:
                        take(st.deadline)
                if ep.fmaj_since is not None:
                    take(ep.fmaj_since + self.digest_grace)
        timers = self._store_timers
        while timers:
            deadline, lsn, attempt = timers[0]
            found = self._by_lsn.get(lsn)
            if found is not None and not found[1].done and found[1].attempt == attempt:
                take(deadline)
                break
            heapq.heappop(timers)
        if self._es_retry_at is not None:
            take(self._es_retry_at)
        return best

    def on_timer(self, now: float | None = None) -> list:
        """Re-send SEALs, restart silent digest streams, retry timed-out STOREs and the
        epoch store, end the digest grace period: whatever is due."""
        now = self._clock() if now is None else now
        out: list = []
        if self.done:
            return out
        for ep in self.epochs.values():
            if ep.state in (RecoveryState.SEALING, RecoveryState.DIGESTING):
                for node, s in ep.seals.items():
                    if s.answered or s.gave_up or now < s.next_at:
                        continue
                    if s.attempts >= self.seal_attempts:
                        s.gave_up = True
                    else:
                        self._send_seal(out, ep, node, now)
            if ep.state == RecoveryState.DIGESTING:
                for node, st in list(ep.streams.items()):
                    if st.complete or st.failed or now < st.deadline:
                        continue
                    if st.restarts >= self.digest_restarts:
                        st.failed = True
                    else:
                        self._start_stream(out, ep, node, now)
        timers = self._store_timers
        while timers and timers[0][0] <= now and not self.done:
            _, lsn, attempt = heapq.heappop(timers)
            found = self._by_lsn.get(lsn)
            if found is None or found[1].done or found[1].attempt != attempt:
                continue
            ep, m = found
            for node in m.targets - m.stored:
                self.health.graylist(node, now)
                m.excluded.add(node)
            self._store(out, ep, m, now)
        if self._es_retry_at is not None and now >= self._es_retry_at and not self.done:
            self._update_epoch_store(out)
        self._advance(out, now)
        return out

    def abort(self, status: E = E.CANCELLED, message: str = "") -> list:
        """Give up now (the sequencer went away); closes the digest streams."""
        out: list = []
        self._finish(out, status, message or "recovery aborted")
        return out

    def _finish(self, out: list, status: E, message: str = "") -> None:
        if self.done:
            return
        self._phase = RecoveryState.DONE
        for ep in self.epochs.values():
            if ep.state == RecoveryState.DIGESTING:
                for node, st in ep.streams.items():
                    out.append(StopDigest(node, self.log_id, st.stream_id))
        self._streams.clear()
        self._payloads.clear()
        if status == E.OK:
            self.result = Done(self.log_id, E.OK, self.tail_lsn, self.tail_ts, self.nodes())
        else:
            self.result = Done(self.log_id, status, message=message)
        out.append(self.result)
