"""Epoch recovery on the node: carries out ``EpochRecovery``'s actions (sequencer side).

The sequencer role starts a recovery when it activates a log whose epoch store says
earlier epochs are not clean; the new ``Sequencer`` meanwhile acks appends but releases
nothing.  ``Recoveries`` owns the running recoveries and moves bytes for them:

- ``SendSeal`` -> SEAL on the link to the storage node; SEALED comes back on it.
- ``StartDigest`` / ``StopDigest`` -> START with the DIGEST flag / STOP: the storage
  nodes' read streams serve the digest (past the release pointer, with waves and
  copysets); STARTED, RECORDS and GAP come back on the link.
- ``SendStore`` -> the sequencer role's ``StoreSender``, like an appender's STOREs: the
  payload is kept in the role's table of appends under the action's request id, and the
  driver stands in for the repaired epoch's sequencer (``recovery_epoch`` goes into the
  STORE, STORED comes back to ``on_stored``).
- ``UpdateEpochStore`` -> ``EpochStore.set_last_clean_epoch`` in the epoch-store thread.
- ``Done`` -> OK: RELEASE up to the last recovered epoch's bridge record on every node of
  the recovered and the current nodesets, then ``Sequencer.on_recovery_done``.
  PREEMPTED: the sequencer deactivates (a newer one sealed the log).  Anything else: a
  new recovery after a backoff (``RETRY_DELAY`` doubling up to ``RETRY_MAX``).

A recovery of an epoch whose sequencer still runs here (an exhausted epoch finishing its
window) waits until that sequencer is done, so each (log, epoch) has one STORE owner.

``Recoveries.describe`` reports the running recoveries and the last ``HISTORY`` finished
ones, one row per epoch (GET_RECOVERIES, ldshell's ``recoveries`` table).
"""

from __future__ import annotations

import itertools
import logging
import time
from collections import deque
from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from logdevice.backoff import ExponentialBackoff
from logdevice.epochstore import EpochStore, LogEpochState, TailRecord
from logdevice.errors import E, LogDeviceError
from logdevice.node.roles.role import NodeServices, Peer
from logdevice.protocol import Gap, Records, Seal, Sealed, Start, Started, StartFlag, Stop
from logdevice.sequencer import SendStore, Sequencer, SequencerState
from logdevice.sequencer.recovery import (
    Done,
    EpochRecovery,
    RecoveryEpoch,
    RecoveryState,
    SendSeal,
    StartDigest,
    StopDigest,
    UpdateEpochStore,
)

if TYPE_CHECKING:
    import asyncio

    from logdevice.node.roles.store_sender import StoreSender

log = logging.getLogger("logdevice.node.recovery")


class RecoveryHost(Protocol):
    """What recovery uses of the sequencer role that owns it."""

    @property
    def node(self) -> NodeServices: ...
    @property
    def sequencers(self) -> Mapping[int, Sequencer]: ...  # log -> its active sequencer
    @property
    def sender(self) -> StoreSender: ...  # sends the recovery's STOREs and releases
    @property
    def rng(self) -> Any: ...
    @property
    def health(self) -> Any: ...

    def live_sequencer(self, log_id: int, epoch: int) -> Sequencer | None: ...
    def hand_over(self, log_id: int, epoch: int, keep: Sequencer) -> None: ...
    def placement(self) -> tuple[dict[int, Any], dict[int, float]]: ...
    def keep_payload(self, rid: Any, log_id: int, payload: Any, checksum: int) -> None: ...
    def drop_payload(self, rid: Any) -> None: ...
    def on_epoch_store(self, fn: Callable[[EpochStore], Any]) -> asyncio.Future[Any]: ...
    def recovered(self, seq: Sequencer, last_released: int, last_timestamp: int,
                  nodes: Collection[int]) -> None: ...
    def deactivate(self, log_id: int, status: E) -> None: ...

#: Seconds before a failed recovery is tried again (doubling up to RETRY_MAX).
RETRY_DELAY = 0.5
RETRY_MAX = 10.0
_RETRY_BACKOFF = ExponentialBackoff(RETRY_DELAY, RETRY_MAX)
#: Seconds between checks for a still running sequencer of an epoch to recover, and the
#: longest wait for it.
DRAIN_POLL = 0.05
DRAIN_MAX = 30.0
#: Finished recoveries a node remembers for ``describe``.
HISTORY = 100
_DIGEST = int(StartFlag.DIGEST)


class RecoveryRow(NamedTuple):
    """One epoch of one recovery, as ``Recoveries.describe`` reports it (the columns of
    RECOVERY_LIST)."""

    log_id: int
    epoch: int  # the epoch recovered
    seal_epoch: int  # the recovering sequencer's epoch - 1
    attempt: int  # 1 for the first try
    state: str  # sealing, digesting, mutating, clean, updating; done or failed once over
    outcome: str  # how it ended (an E name); "" while it runs
    message: str
    nodeset: tuple[int, ...]
    sealed: tuple[int, ...]
    digested: tuple[int, ...]
    lng: int
    records: int  # data records re-replicated
    holes: int  # hole plugs written
    bridge: int  # LSN of the bridge record (0: none)
    pending: int  # decisions not yet stored on a full copyset
    last_clean_epoch: int  # recorded in the epoch store (0: not yet)
    started_ms: int  # wall clock
    duration_ms: int  # so far, while it runs


class RecoveryDriver:
    """One running ``EpochRecovery`` and what it holds on the node."""

    def __init__(self, owner: Recoveries, seq: Sequencer, machine: EpochRecovery,
                 attempt: int, state: LogEpochState, statuses: dict[int, Any]) -> None:
        self.owner = owner
        self.seq = seq
        self.machine = machine
        self.log_id = seq.log_id
        self.attempt = attempt
        self.state = state  # the epoch store's view it started from (for a retry)
        self.statuses = statuses
        self.recovery_epoch = machine.seal_epoch  # read by the StoreSender
        self.rids: set[Any] = set()
        self.timer: tuple[float, asyncio.TimerHandle] | None = None
        self.started_ms = time.time_ns() // 1_000_000
        self.t0 = owner.node.loop.time()
        self.ended: float | None = None  # loop time it finished

    def __repr__(self) -> str:
        return (f"<RecoveryDriver log {self.log_id} epoch {self.seq.epoch} "
                f"{self.machine.state.name}>")

    def on_stored(self, replies: list[tuple]) -> None:
        self.owner.run(self, self.machine.on_stored_many(replies))

    def rows(self, now: float) -> list[RecoveryRow]:
        """One row per epoch of this recovery, as of loop time ``now``."""
        m = self.machine
        result = m.result
        ok = result is not None and result.status == E.OK
        end = self.ended if self.ended is not None else now
        rows = []
        for p in m.progress():
            if result is not None:
                state = "done" if ok else "failed"
            elif m.state == RecoveryState.UPDATING:
                state = "updating"
            else:
                state = p.state.name.lower()
            rows.append(RecoveryRow(
                self.log_id, p.epoch, m.seal_epoch, self.attempt + 1, state,
                E(result.status).name if result is not None else "",
                result.message if result is not None else "", p.nodeset, p.sealed,
                p.digested, p.lng, p.records, p.holes, p.bridge, p.pending,
                m.seal_epoch if ok else 0, self.started_ms, int((end - self.t0) * 1000)))
        return rows


class Recoveries:
    """The recoveries of the sequencer role's logs."""

    def __init__(self, role: RecoveryHost) -> None:
        self.role = role
        self.node = role.node
        self.by_log: dict[int, RecoveryDriver] = {}
        self._by_epoch: dict[tuple[int, int], RecoveryDriver] = {}
        self._requests: dict[int, RecoveryDriver] = {}  # SEAL request / stream id -> driver
        self._ids = itertools.count(1)
        self._retries: dict[int, asyncio.TimerHandle] = {}
        self.completed = 0  # figures for tests
        self.failed = 0
        self._history: deque[list[RecoveryRow]] = deque(maxlen=HISTORY)

    # -- life cycle -------------------------------------------------------------------------
    def start(self, seq: Sequencer, state: LogEpochState, statuses: dict[int, Any],
              attempt: int = 0, waited: float = 0.0) -> None:
        """Recover the epochs of ``state`` between its last clean epoch and ``seq``'s."""
        log_id = seq.log_id
        self._retries.pop(log_id, None)
        if seq.state == SequencerState.DEACTIVATED or self.role.sequencers.get(log_id) \
                is not seq:
            return
        todo = range(state.last_clean_epoch + 1, seq.epoch)
        draining = [self.role.live_sequencer(log_id, e) for e in todo]
        if any(d is not None and d.in_flight and d.state != SequencerState.DEACTIVATED
               for d in draining) and waited < DRAIN_MAX:
            # An exhausted sequencer of an epoch to recover still finishes its window (a
            # seal would preempt its appends); past DRAIN_MAX the seal wins.
            self._retries[log_id] = self.node.loop.call_later(
                DRAIN_POLL, self.start, seq, state, statuses, attempt, waited + DRAIN_POLL)
            return
        for e in todo:  # drained: recovery owns their STOREs now
            self.role.hand_over(log_id, e, seq)
        epochs = []
        for e in todo:
            md = state.metadata_for_epoch(e)
            if md is not None:
                epochs.append(RecoveryEpoch(e, md.nodeset, md.replication))
        group = self.node.config.log_group(log_id)
        tail = state.tail
        role = self.role
        try:
            machine = EpochRecovery(
                log_id, seq.epoch, epochs, *role.placement(),
                clock=self.node.loop.time, rng=role.rng, authoritative=statuses,
                health=role.health, ids=self._ids,
                tail=(tail.lsn, tail.timestamp) if tail is not None else (0, 0),
                store_timeout=(max(group.store_timeout_ms[0] / 1000, 0.1),
                               group.store_timeout_ms[1] / 1000))
        except ValueError as exc:
            log.error("log %d: cannot recover epochs %s: %s", log_id, list(todo), exc)
            self._retry(seq, state, statuses, attempt)
            return
        driver = RecoveryDriver(self, seq, machine, attempt, state, statuses)
        self.by_log[log_id] = driver
        for e in machine.epochs:
            self._by_epoch[(log_id, e)] = driver
        log.info("log %d: recovering epochs %s before epoch %d (attempt %d)", log_id,
                 list(machine.epochs), seq.epoch, attempt + 1)
        self.run(driver, machine.start())

    def abort(self, log_id: int, status: E = E.CANCELLED) -> None:
        """The log's sequencer went away: stop its recovery (no retry)."""
        handle = self._retries.pop(log_id, None)
        if handle is not None:
            handle.cancel()
        driver = self.by_log.get(log_id)
        if driver is not None:
            self.run(driver, driver.machine.abort(status))

    def stop(self) -> None:
        for log_id in list(self.by_log) + list(self._retries):
            self.abort(log_id, E.SHUTDOWN)

    def describe(self) -> list[RecoveryRow]:
        """The last ``HISTORY`` finished recoveries (oldest first), then the running ones:
        one row per epoch."""
        now = self.node.loop.time()
        rows = [r for finished in self._history for r in finished]
        for driver in self.by_log.values():
            rows += driver.rows(now)
        return rows

    def store_owner(self, log_id: int, epoch: int) -> RecoveryDriver | None:
        """The recovery that STOREs into ``epoch`` of ``log_id``, if any."""
        return self._by_epoch.get((log_id, epoch))

    def on_node_down(self, node: int) -> None:
        for driver in list(self.by_log.values()):
            self.run(driver, driver.machine.on_node_down(node))

    # -- replies from storage nodes ---------------------------------------------------------
    def _driver(self, request_id: int) -> RecoveryDriver | None:
        driver = self._requests.get(request_id)
        if driver is None or driver.machine.done:
            return None
        return driver

    @staticmethod
    def _node(conn: Peer, fallback: int = -1) -> int:
        return conn.peer_node if conn.peer_node is not None else fallback

    def on_sealed(self, conn: Peer, msg: Sealed) -> None:
        driver = self._driver(msg.request_id)
        if driver is not None:
            node = self._node(conn, msg.node_index)
            self.run(driver, driver.machine.on_sealed(
                node, msg.epoch or msg.seal_epoch, msg.status, msg.last_known_good,
                msg.max_seen_lsn, request_id=msg.request_id))

    def on_started(self, conn: Peer, msg: Started) -> None:
        driver = self._driver(msg.read_stream_id)
        if driver is not None and msg.status != E.OK:
            self.run(driver, driver.machine.on_digest_started(
                self._node(conn), msg.read_stream_id, msg.status))

    def on_records(self, conn: Peer, msg: Records) -> None:
        driver = self._driver(msg.read_stream_id)
        if driver is not None:
            self.run(driver, driver.machine.on_digest_records(
                self._node(conn), msg.read_stream_id, msg.lsns, msg.timestamps, msg.flags,
                msg.waves, msg.payloads, msg.payload_offsets, msg.checksums))

    def on_gap(self, conn: Peer, msg: Gap) -> None:
        driver = self._driver(msg.read_stream_id)
        if driver is not None:
            self.run(driver, driver.machine.on_digest_gap(
                self._node(conn), msg.read_stream_id, msg.lo, msg.hi))

    # -- actions ----------------------------------------------------------------------------
    def run(self, driver: RecoveryDriver, actions: list) -> None:
        node = self.node
        machine = driver.machine
        for a in actions:
            t = type(a)
            if t is SendStore:
                rid = a.request_id
                if rid not in driver.rids:
                    kept = machine.payload_of(rid)
                    if kept is None:
                        continue
                    driver.rids.add(rid)
                    self.role.keep_payload(rid, a.log_id, kept[0], kept[1])
                self.role.sender.store(a)
            elif t is SendSeal:
                self._requests[a.request_id] = driver
                node.send_to_node(a.node, Seal(request_id=a.request_id, log_id=a.log_id,
                                               seal_epoch=a.seal_epoch,
                                               epoch=a.epoch))
            elif t is StartDigest:
                self._requests[a.stream_id] = driver
                node.send_to_node(a.node, Start(
                    read_stream_id=a.stream_id, log_id=a.log_id, start_lsn=a.start_lsn,
                    until_lsn=a.until_lsn, window_high=a.until_lsn, flags=_DIGEST))
            elif t is StopDigest:
                self._requests.pop(a.stream_id, None)
                node.send_to_node(a.node, Stop(read_stream_id=a.stream_id))
            elif t is UpdateEpochStore:
                self._update_epoch_store(driver, a)
            elif t is Done:
                self._done(driver, a)
                return
        self._arm(driver)

    def _arm(self, driver: RecoveryDriver) -> None:
        deadline = driver.machine.next_deadline()
        if deadline is None:
            return
        if driver.timer is not None:
            if driver.timer[0] <= deadline:
                return
            driver.timer[1].cancel()
        driver.timer = (deadline, self.node.loop.call_at(deadline, self._on_timer, driver))

    def _on_timer(self, driver: RecoveryDriver) -> None:
        driver.timer = None
        if not driver.machine.done:
            self.run(driver, driver.machine.on_timer())

    def _update_epoch_store(self, driver: RecoveryDriver, a: UpdateEpochStore) -> None:
        role = self.role

        def work(store: EpochStore) -> None:
            store.set_last_clean_epoch(a.log_id, a.last_clean_epoch,
                                       TailRecord(a.tail_lsn, a.tail_timestamp), a.outcomes)

        def done(fut: asyncio.Future[None]) -> None:
            exc = fut.exception()
            if driver.machine.done:
                return
            if exc is None:
                self.run(driver, driver.machine.on_epoch_store_updated(E.OK))
            else:
                status = exc.status if isinstance(exc, LogDeviceError) else E.FAILED
                log.warning("log %d: recording the last clean epoch failed: %s", a.log_id,
                            exc)
                self.run(driver, driver.machine.on_epoch_store_updated(status, str(exc)))

        role.on_epoch_store(work).add_done_callback(done)

    def _done(self, driver: RecoveryDriver, done: Done) -> None:
        log_id = driver.log_id
        driver.ended = self.node.loop.time()
        self._history.append(driver.rows(driver.ended))
        if driver.timer is not None:
            driver.timer[1].cancel()
            driver.timer = None
        for e in driver.machine.epochs:
            if self._by_epoch.get((log_id, e)) is driver:
                del self._by_epoch[(log_id, e)]
        if self.by_log.get(log_id) is driver:
            del self.by_log[log_id]
        for key in [k for k, d in self._requests.items() if d is driver]:
            del self._requests[key]
        for rid in driver.rids:
            self.role.drop_payload(rid)
        driver.rids.clear()
        seq = driver.seq
        current = self.role.sequencers.get(log_id) is seq \
            and seq.state != SequencerState.DEACTIVATED
        if done.status == E.OK:
            self.completed += 1
            log.info("log %d: epochs %s recovered; released up to %s", log_id,
                     list(driver.machine.epochs), done.last_released)
            if current:
                self.role.recovered(seq, done.last_released, done.last_timestamp,
                                     done.nodes)
            return
        self.failed += 1
        if done.status in (E.CANCELLED, E.SHUTDOWN):
            return
        log.warning("log %d: recovery of epochs %s failed: %s %s", log_id,
                    list(driver.machine.epochs), done.status.name, done.message)
        if not current:
            return
        if done.status == E.PREEMPTED:
            self.role.deactivate(log_id, E.PREEMPTED)
            return
        self._retry(seq, driver.state, driver.statuses, driver.attempt)

    def _retry(self, seq: Sequencer, state: LogEpochState, statuses: dict[int, Any],
               attempt: int) -> None:
        delay = _RETRY_BACKOFF.delay(attempt)
        self._retries[seq.log_id] = self.node.loop.call_later(
            delay, self.start, seq, state, statuses, attempt + 1)
