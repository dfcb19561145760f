"""The sequencer role: APPEND -> LSN -> STOREs on R nodes -> APPENDED, per log.

Ownership (``sequencer.ownership``).  A log's sequencer runs on
``placement.sequencer_for(log_id, weights of the live sequencer nodes)``, with liveness
from the failure detector.  An APPEND (or
GET_TAIL) for a log another node owns is answered NOSEQUENCER with ``redirect_to`` the
owner; an unknown log NOTFOUND; a payload above ``settings.max_payload_size`` TOOBIG.
When the failure detector's view changes, sequencers of logs this node no longer owns are
deactivated: their appends not yet acknowledged are answered PREEMPTED with
``redirect_to`` the new owner (the record may or may not have been stored: the client may
retry there, at the price of a possible duplicate).

Takeovers.  A client that cannot reach the log's sequencer node while the cluster still
holds it alive (a partition between the two only) sends its APPEND (or GET_TAIL) to
another node flagged ``NO_REDIRECT``: that node serves the log itself, activating a
sequencer (a new epoch, whose recovery seals the old one) if it has none, and keeps it
across view changes until it is preempted in turn.  What keeps the log from flapping
between the two: the storage nodes name the node that sealed an epoch in their PREEMPTED
answers (``Stored.sealed_by``), so the old sequencer, once preempted, redirects the
log's requests to that node while the failure detector holds it alive instead of
reactivating on the next plain append; and clients send ``NO_REDIRECT`` only after they
failed to reach a node themselves.  (Two clients each cut off from a different one of
two nodes can still move the log back and forth, one epoch per move, as in LogDevice.)

Batches.  APPEND_BATCH carries several records of one log (a client's appends that queued
while earlier ones were in flight).  The sequencer takes them in one step, in order, so
the records it accepts get consecutive LSNs; each then runs as its own appender (a
turn's STOREs for one storage node leave in one frame, whatever their logs), and one
APPENDED_BATCH answers the batch when the last of its records has its outcome.
APPEND_LOGS carries a client's APPEND_BATCHes of several logs that leave in one loop turn:
each part is taken exactly as its APPEND_BATCH would be and answered as soon as it has
its outcome, the answers of a loop turn to one client together in an APPENDED_LOGS.

Activation.  The first APPEND or GET_TAIL of a log this node owns activates a
``Sequencer``: the epoch store hands out the next epoch (a blocking SQLite transaction,
run in a dedicated thread) together with the log's metadata (nodeset, replication).
Requests arriving meanwhile wait in a queue (bounded by the window size).

Epoch recovery.  Before a new epoch may release anything, the earlier epochs that are
not clean (the epoch store's last clean epoch is below the new epoch - 1: after every
failover or restart) are recovered: ``_recovery_needed`` says so, the
sequencer is built with ``needs_recovery=True`` (it stores and acks appends but releases
nothing) and ``recovery_driver.Recoveries`` runs an ``EpochRecovery`` (seal, digest,
re-replicate, hole plugs, bridge record, last clean epoch in the epoch store).  When it
is done the log is released up to the bridge record of the last recovered epoch and the
sequencer starts releasing (``_recovered``); a failed recovery is retried, a preempted
one deactivates the sequencer.  SEALED and the digest streams' STARTED / RECORDS / GAP
come back to this role; GET_RECOVERIES is answered with ``Recoveries.describe``.

Tails. GET_TAILS asks the tails of many logs in one request: each is answered as its
GET_TAIL would be, and one TAILS carries them all (``tail_batch``). GET_TAIL is answered
with the sequencer's release pointer, never before recovery settled the earlier epochs,
and never before a seal check (``seal_check``) sent after the request arrived said that
no newer epoch sealed ours: a sequencer that heard nothing of a takeover (cut off while
another node's recovery sealed its epoch, or storing nothing since) would otherwise
answer an older tail than the newer sequencer already did. A check that finds a seal
deactivates the sequencer and the request is redirected (to the sealing node while it is
alive); one that cannot decide in time is answered AGAIN.

Idle logs.  A node sequences many logs, most of them idle at any time.  A sequencer that
took no append for ``settings.sequencer_idle_ms`` and has nothing in flight is put to
sleep (``Sequencer.sleep``): it gives back its window and keeps only what resuming in the
same epoch needs, so the next append goes on at the next LSN without a new activation.
(Resuming is as safe as for a sequencer that stayed awake: if another node took the log
over meanwhile, the next STORE is answered PREEMPTED, as it would be anyway.)  Only
sequencers that took appends since the last sweep are looked at (``_awake``).  Logs with
the same nodeset and replication share one ``CopysetSelector``.

Driving the state machines.  Actions come back from every sequencer call: ``StoreWave``
and ``Release`` go to ``StoreSender`` (one STORE per node and log per loop turn, those of
one node in one STORE_LOGS frame where it understands them; one RELEASE per node; their
STOREDs may come back together in a STORED_LOGS), ``AckAppend`` / ``Reject`` become
APPENDED on the client's connection (or a record's outcome in its APPENDED_BATCH),
``Reactivate`` starts a new epoch.  Each sequencer has one deadline (its
``next_deadline()``) for store timeouts, all of them on one loop timer
(``DeadlineTimers``).  Storage-node health: a node is *down* for copyset selection while
the failure detector says so or while our link to it is broken (a broken link is noticed
at once; silence only after ``dead_timeout_ms``).
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import random
import weakref
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ldcore import codec
from ldcore import lsn as ldlsn
from ldcore.checksum import crc32c
from logdevice.config import Config, LogGroup
from logdevice.config.log_groups import affects_sequencer
from logdevice.epochstore import EpochMetadata, EpochStore
from logdevice.errors import E, LogDeviceError
from logdevice.node.roles.activations import ActivationBatcher
from logdevice.node.roles.failure_log import FailureLog
from logdevice.node.roles.recovery_driver import Recoveries, RecoveryDriver
from logdevice.node.roles.role import NodeServices, Peer, Role
from logdevice.node.roles.sequencer_replies import BatchReply, PartAnswers, PendingAppend
from logdevice.node.roles.stats import AppendStats
from logdevice.node.roles.store_sender import StoreSender
from logdevice.node.roles.tail_batch import TailBatch
from logdevice.node.roles.writer_recall import WriterRecallDriver
from logdevice.placement import score
from logdevice.protocol import (
    Append,
    AppendBatch,
    Appended,
    AppendedBatch,
    AppendFlag,
    AppendLogs,
    CheckSeal,
    Gap,
    GetRecoveries,
    GetTail,
    GetTails,
    Records,
    RecoveryList,
    Sealed,
    SealState,
    Started,
    Stored,
    StoredLogs,
    Tail,
    WriterBlobs,
    table_reply,
)
from logdevice.security.store import open_cluster_store
from logdevice.sequencer import (
    AckAppend,
    CopysetSelector,
    NodeHealth,
    Reactivate,
    Reject,
    Release,
    Replication,
    Sequencer,
    SequencerState,
    StoreWave,
)
from logdevice.sequencer.ownership import LogOwnership
from logdevice.sequencer.producers import (
    ADMIT_CONFLICT,
    ADMIT_NEW,
    ADMIT_WAIT,
    ProducerTable,
)
from logdevice.sequencer.seal_check import (
    Confirmed,
    Preempted,
    SealChecks,
    SendCheckSeal,
    Undecided,
)
from logdevice.timers import DeadlineTimers

log = logging.getLogger("logdevice.node.sequencer")

_APPEND_FLAGS = int(AppendFlag.CHECKSUM | AppendFlag.BUFFERED_WRITER_BLOB)
_CHECKSUM = int(AppendFlag.CHECKSUM)
_BLOB = int(AppendFlag.BUFFERED_WRITER_BLOB)
_NO_REDIRECT = int(AppendFlag.NO_REDIRECT)
#: Seconds between sweeps of unanswered STORE bookkeeping (and of idle sequencers, or
#: more often when ``sequencer_idle_ms`` is shorter than twice this).
SWEEP_INTERVAL = 5.0


class SequencerRole(Role):
    """Runs the sequencers of the logs this node owns."""

    name = "sequencer"

    def __init__(self, node: NodeServices, epoch_store: EpochStore | None = None) -> None:
        super().__init__(node)
        config = node.config
        self.settings = config.settings
        self.ownership = LogOwnership(node.index, node.role("failure_detector"))
        self.health = NodeHealth(graylist_seconds=self.settings.store_graylist_ms / 1000,
                                 blacklist_seconds=self.settings.store_blacklist_ms / 1000)
        self.rng = random.Random()
        self.sequencers: dict[int, Sequencer] = {}  # the active one per log
        self._built_from: dict[int, LogGroup] = {}  # log -> the group its sequencer follows
        self._live: dict[tuple[int, int], Sequencer] = {}  # (log, epoch) -> not deactivated
        self._activating: dict[int, list[tuple[Any, ...]]] = {}  # log -> queued requests
        self._tail_waiters: dict[int, list[tuple[Peer, int]]] = {}  # log -> GET_TAILs held
        # GET_TAILs wait for a seal check (see Tails); a cut-off sequencer gives up on
        # one after the failure detector's dead timeout.
        self.seal_checks = SealChecks(self.settings.dead_timeout_ms / 1000,
                                      clock=node.loop.time)
        self._seal_timer: tuple[float, asyncio.TimerHandle] | None = None
        self.producers = ProducerTable()
        self.writers = WriterRecallDriver(node, self.producers, self._take_held_blobs)
        self._held_blobs: dict[int, list[tuple[Peer, Append]]] = {}  # log -> see _on_append
        self._appends: dict[int, PendingAppend] = {}
        self._rids = itertools.count(1)
        self._timers: DeadlineTimers[Sequencer] = DeadlineTimers(node.loop, self._on_timer)
        self._part_answers = PartAnswers(node)  # of APPEND_LOGS parts
        self.sender = StoreSender(node, self._payload_of, self._sequencer_of)
        self._epoch_store = epoch_store
        self._epoch_exec = ThreadPoolExecutor(1, thread_name_prefix="epochstore")
        self._activation_failures = FailureLog(log, f"N{node.index}: sequencer activation")
        self._activations = ActivationBatcher(node.loop, self._epoch_exec, self._store,
                                              self._recovery_needed)
        self._fd_down: set[int] = set()
        self._link_down: set[int] = {n.index for n in config.nodes if n.index != node.index}
        for n in self._link_down:  # until their links come up
            self.health.mark_down(n)
        self._locations = {n.index: n.location for n in config.nodes}
        self._weights = {n.index: n.storage_weight for n in config.nodes if n.is_storage}
        self._sweeper: asyncio.TimerHandle | None = None
        idle_ms = self.settings.sequencer_idle_ms
        self._idle_after = idle_ms / 1000 if idle_ms > 0 else None  # None: never sleep
        self._sweep_every = SWEEP_INTERVAL if self._idle_after is None else \
            min(SWEEP_INTERVAL, self._idle_after / 2)
        self._awake: set[Sequencer] = set()  # took appends since they last slept
        # (nodeset, replication) -> the selector the sequencers of such logs share
        self._selectors: weakref.WeakValueDictionary[
            tuple[tuple[int, ...], Replication], CopysetSelector] = \
            weakref.WeakValueDictionary()
        self._stopping = False
        self.recoveries = Recoveries(self)
        self.append_stats = AppendStats()  # for metrics

    def handlers(self) -> Mapping[type, Any]:
        rec = self.recoveries
        return {Append: self._on_append, AppendBatch: self._on_append_batch,
                AppendLogs: self._on_append_logs,
                GetTail: self._on_get_tail, GetTails: self._on_get_tails,
                Stored: self._on_stored, StoredLogs: self._on_stored_logs,
                Sealed: rec.on_sealed, Started: rec.on_started, Records: rec.on_records,
                Gap: rec.on_gap, GetRecoveries: self._on_get_recoveries,
                SealState: self._on_seal_state, WriterBlobs: self.writers.on_reply}

    async def start(self) -> None:
        self._sweeper = self.node.loop.call_later(self._sweep_every, self._sweep)

    async def stop(self) -> None:
        self._stopping = True
        if self._sweeper is not None:
            self._sweeper.cancel()
        if self._seal_timer is not None:
            self._seal_timer[1].cancel()
        self.writers.stop()
        self.recoveries.stop()
        for log_id in list(self.sequencers):
            self.deactivate(log_id, E.SHUTDOWN)
        for log_id in list(self._activating):
            self._fail_queue(log_id, E.SHUTDOWN)
        self._timers.close()
        self.sender.flush()

    def close(self) -> None:
        self._epoch_exec.shutdown(wait=True)
        if self._epoch_store is not None:
            self._epoch_store.close()
            self._epoch_store = None

    # -- ownership --------------------------------------------------------------------------
    def owner(self, log_id: int) -> int | None:
        """The node that should sequence ``log_id`` in the current cluster view."""
        return self.ownership.owner(log_id)

    def on_cluster_change(self, down: Collection[int], up: Collection[int]) -> None:
        self.ownership.view_changed()
        for log_id in self.ownership.given_up(self.sequencers):
            log.info("log %d: sequencer moves to N%s", log_id, self.owner(log_id))
            self.deactivate(log_id, E.PREEMPTED)
        self._fd_down.difference_update(up)
        self._fd_down.update(down)
        for n in (*down, *up):
            self._health_changed(n)

    def sealed_here(self, log_id: int, seal_epoch: int, by: int) -> None:
        """This node's storage sealed ``log_id`` up to ``seal_epoch`` for node ``by``'s
        recovery: if that covers our sequencer's epoch, another node took the log over
        (it would otherwise learn so only from its next STORE, and answer tails and
        appends as if it still had the log)."""
        seq = self.sequencers.get(log_id)
        if seq is None or seq.epoch > seal_epoch or by == self.node.index:
            return
        log.warning("log %d epoch %d: preempted (N%d sealed it)", log_id, seq.epoch, by)
        self.deactivate(log_id, E.PREEMPTED, by=by)

    def set_refusing(self, nodes: frozenset[int]) -> None:
        """Storage nodes the event log says take no new copies (rebuilding, drained)."""
        self.health.set_refusing(nodes)

    def on_link_change(self, node: int, connected: bool) -> None:
        if connected:
            self._link_down.discard(node)
            # A fresh link: what the node failed with before (a restart faster than the
            # failure detector notices) is history.
            self.health.forgive(node)
            self._resend_releases(node)
        else:
            self._link_down.add(node)
            self.sender.forget_node(node)
        self._health_changed(node)

    def _health_changed(self, node: int) -> None:
        down = node in self._fd_down or node in self._link_down
        if down == (node in self.health.down):
            return
        for seq in list(self._live.values()):
            self._run(seq, seq.on_node_down(node) if down else seq.on_node_up(node))
        if down:  # also when no sequencer is active yet
            self.health.mark_down(node)
            self.recoveries.on_node_down(node)
        else:
            self.health.mark_up(node)

    def _resend_releases(self, node: int) -> None:
        """A storage node (re)connected: tell it where our logs are released up to."""
        for seq in self.sequencers.values():
            if node in seq.nodeset and seq.release_lsn:
                self.sender.release(seq.log_id, seq.release_lsn, (node,), seq.epoch)

    # -- requests ---------------------------------------------------------------------------
    def _on_get_recoveries(self, conn: Peer, msg: GetRecoveries) -> None:
        conn.send(table_reply(RecoveryList, msg.request_id, self.node.index,
                              self.recoveries.describe()))

    def _check(self, log_id: int, no_redirect: bool = False) -> tuple[E, int | None, str]:
        """(status, redirect, message) for a request on ``log_id``; OK if we serve it.
        ``no_redirect``: the request asks this node to serve the log (see Takeovers)."""
        if self._stopping:
            return E.SHUTDOWN, None, "the node is shutting down"
        if not self.node.config.has_log(log_id):
            return E.NOTFOUND, None, f"log {log_id} is not in the config"
        return self.ownership.check(log_id, log_id in self.sequencers, no_redirect)

    def _on_append(self, conn: Peer, msg: Append, refreshed: bool = False) -> None:
        log_id = msg.log_id
        status, redirect, why = self._check(log_id, bool(msg.flags & _NO_REDIRECT))
        if status == E.NOTFOUND and not refreshed and self.node.after_fresh_logs_config(
                lambda: self._on_append(conn, msg, refreshed=True)):
            return  # a log created a moment ago? asked again after a fresh read
        size = memoryview(msg.payload).nbytes
        if status == E.OK:
            status, why = self._payload_check(msg.payload, size, msg.flags & _CHECKSUM,
                                              msg.checksum)
        if status != E.OK:
            conn.send(Appended(request_id=msg.request_id, status=status, redirect_to=redirect,
                               message=why))
            return
        producer = self._producer_of(msg)
        if producer[0]:
            seq = self.sequencers.get(log_id)
            if seq is None or seq.needs_recovery or not self.writers.knows_writers(seq):
                # Until recovery settled the earlier epochs and the storage nodes said
                # which writers' blobs they hold, a retried blob cannot be told from a
                # new one: hold it.
                self._held_blobs.setdefault(log_id, []).append((conn, msg))
                if seq is None:
                    self._enqueue(log_id, ("noop",))
                elif not seq.needs_recovery:
                    self.writers.recall(seq)
                return
            crc = msg.checksum if msg.flags & _CHECKSUM else crc32c(msg.payload)
            verdict = self.producers.admit(log_id, *producer, (conn, msg.request_id), crc)
            if verdict is ADMIT_WAIT:
                return  # answered with the first attempt
            if verdict.verdict == ADMIT_CONFLICT:
                where = f" (at {ldlsn.to_string(verdict.lsn)})" if verdict.lsn else ""
                conn.send(Appended(
                    request_id=msg.request_id, status=E.INVALID_PARAM,
                    message=f"blob {producer[1]} of writer {producer[0]:#x} was appended "
                            f"before with another payload{where}: a writer id must not "
                            f"be reused for other data"))
                return
            if verdict is not ADMIT_NEW:  # done: the blob is stored already
                conn.send(Appended(request_id=msg.request_id, status=E.OK, lsn=verdict.lsn,
                                   timestamp=verdict.timestamp))
                return
        rid = next(self._rids)
        now = self.node.loop.time()
        self._appends[rid] = PendingAppend(conn, msg.request_id, log_id, msg.payload, msg.checksum,
                                     producer, now,
                                     now + msg.timeout_ms / 1000 if msg.timeout_ms > 0 else None)
        stats = self.append_stats
        stats.appends += 1
        stats.bytes += size
        flags = msg.flags & _APPEND_FLAGS
        seq = self.sequencers.get(log_id)
        if seq is None:
            self._enqueue(log_id, ("append", rid, size, flags))
        else:
            if seq.dormant:
                self._awake.add(seq)
            self._run(seq, seq.append(rid, size, flags))

    def _on_append_logs(self, conn: Peer, msg: AppendLogs) -> None:
        """Each part as the APPEND_BATCH it stands for, answered as soon as it can be."""
        answer = functools.partial(self._part_answers.send, conn)
        for part in msg.parts():
            self._on_append_batch(conn, part, answer=answer)

    def _on_append_batch(self, conn: Peer, msg: AppendBatch, refreshed: bool = False,
                         answer: Callable[[AppendedBatch], Any] | None = None) -> None:
        """Records of one log, taken in one step: those that pass the checks get
        consecutive LSNs (unless the window fills up part-way: the rest are refused
        SEQNOBUFS, before taking an LSN).  The APPENDED_BATCH goes to ``answer`` (None:
        the connection)."""
        log_id = msg.log_id
        send = conn.send if answer is None else answer
        status, redirect, why = self._check(log_id, bool(msg.flags & _NO_REDIRECT))
        if status == E.NOTFOUND and not refreshed and self.node.after_fresh_logs_config(
                lambda: self._on_append_batch(conn, msg, True, answer)):
            return
        if status == E.OK and msg.flags & _BLOB:
            status, why = E.INVALID_PARAM, "BufferedWriter blobs are appended one per APPEND"
        if status != E.OK:
            send(AppendedBatch(request_id=msg.request_id, status=status,
                               redirect_to=redirect, message=why))
            return
        offsets = msg.payload_offsets.tolist()
        n = len(offsets) - 1
        reply = BatchReply(send, msg.request_id, n)
        payloads = memoryview(msg.payloads)
        checked = msg.flags & _CHECKSUM
        checksums = msg.checksums.tolist() if checked else None
        now = self.node.loop.time()
        deadline = now + msg.timeout_ms / 1000 if msg.timeout_ms > 0 else None
        appends, rids, limit = self._appends, self._rids, self.settings.max_payload_size
        requests = []
        total = 0
        for i in range(n):
            lo, hi = offsets[i], offsets[i + 1]
            size = hi - lo
            data = payloads[lo:hi]
            checksum = checksums[i] if checksums is not None else 0
            if size > limit or (checked and crc32c(data) != checksum):
                status, why = self._payload_check(data, size, checked, checksum)
                reply.record(i, status, message=why)
            else:
                rid = next(rids)
                appends[rid] = PendingAppend(conn, 0, log_id, data, checksum, (0, 0), now, deadline,
                                       reply, i)
                requests.append((rid, size, checked))
                total += size
        stats = self.append_stats
        stats.appends += len(requests)
        stats.bytes += total
        seq = self.sequencers.get(log_id)
        if seq is not None:
            if seq.dormant:
                self._awake.add(seq)
            self._run(seq, seq.append_many(requests, now))
            return
        for rid, size, flags in requests:
            self._enqueue(log_id, ("append", rid, size, flags))

    def _payload_check(self, payload: Any, size: int, checked: int,
                       checksum: int) -> tuple[E, str]:
        """(OK, "") for a payload the sequencer takes, else TOOBIG or CHECKSUM_MISMATCH
        and why."""
        if size > self.settings.max_payload_size:
            return E.TOOBIG, (f"payload of {size} bytes is above the limit of "
                              f"{self.settings.max_payload_size}")
        if checked and crc32c(payload) != checksum:
            return E.CHECKSUM_MISMATCH, "payload does not match its checksum"
        return E.OK, ""

    @staticmethod
    def _producer_of(msg: Append) -> tuple[int, int]:
        """(writer id, blob sequence number) of an idempotent BufferedWriter blob, else
        (0, 0)."""
        if not msg.flags & _BLOB:
            return (0, 0)
        try:
            found = codec.producer_of(msg.payload)
        except codec.CodecError:
            return (0, 0)  # not ours to judge here: readers report a bad blob
        return found if found is not None else (0, 0)

    def _on_get_tail(self, conn: Peer, msg: GetTail, refreshed: bool = False) -> None:
        status, redirect, _ = self._check(msg.log_id, msg.no_redirect)
        if status == E.NOTFOUND and not refreshed and self.node.after_fresh_logs_config(
                lambda: self._on_get_tail(conn, msg, refreshed=True)):
            return
        if status != E.OK:
            conn.send(Tail(request_id=msg.request_id, status=status, log_id=msg.log_id,
                           redirect_to=redirect))
            return
        seq = self.sequencers.get(msg.log_id)
        if seq is None:
            self._enqueue(msg.log_id, ("tail", conn, msg.request_id))
        else:
            self._send_tail(seq, conn, msg.request_id)

    def _on_get_tails(self, conn: Peer, msg: GetTails) -> None:
        """Each log as GET_TAIL, answered together (``tail_batch``)."""
        batch = TailBatch(conn, msg)
        for i, log_id in enumerate(msg.log_ids.tolist()):
            self._on_get_tail(batch, GetTail(request_id=i, log_id=log_id))

    def _send_tail(self, seq: Sequencer, conn: Peer, request_id: int) -> None:
        if seq.needs_recovery:
            # Until recovery settles the earlier epochs this sequencer knows only the
            # epoch store's tail, which can be older than what readers were given: wait
            # (the client's timeout bounds it) rather than let the tail go back.
            self._tail_waiters.setdefault(seq.log_id, []).append((conn, request_id))
            return
        # Another node may have taken the log over without our hearing of it (we were
        # cut off, or stored nothing since): its storage nodes say (see seal_check).
        self._run_seal_checks(self.seal_checks.request(
            seq.log_id, seq.epoch, seq.nodeset, seq.replication.r, (conn, request_id)))

    def _answer_tail_waiters(self, log_id: int, seq: Sequencer | None) -> None:
        """Recovery finished (``seq``), or the sequencer went away (None: the clients
        ask the log's sequencer again)."""
        waiters = self._tail_waiters.pop(log_id, [])
        if seq is None:
            waiters += self.seal_checks.cancel(log_id)
        for conn, request_id in waiters:
            if seq is not None:
                self._send_tail(seq, conn, request_id)
            else:
                self._no_tail(log_id, conn, request_id)

    def _no_tail(self, log_id: int, conn: Peer, request_id: int) -> None:
        conn.send(Tail(request_id=request_id, status=E.NOSEQUENCER, log_id=log_id,
                       redirect_to=self.ownership.redirect_for(log_id)))

    def _on_seal_state(self, conn: Peer, msg: SealState) -> None:
        node = conn.peer_node if conn.peer_node is not None else msg.node_index
        self._run_seal_checks(self.seal_checks.on_reply(
            msg.request_id, node, msg.status, msg.seal_epoch, msg.sealed_by))

    def _run_seal_checks(self, actions: list) -> None:
        for a in actions:
            t = type(a)
            if t is SendCheckSeal:
                if not self.node.send_to_node(a.node, CheckSeal(
                        request_id=a.request_id, log_id=a.log_id, epoch=a.epoch)):
                    # No link: that node cannot vouch for us now.
                    self._run_seal_checks(self.seal_checks.on_reply(
                        a.request_id, a.node, E.CONNFAILED))
            elif t is Confirmed:
                seq = self.sequencers.get(a.log_id)
                for conn, request_id in a.waiters:
                    if seq is None or seq.epoch != a.epoch:
                        self._no_tail(a.log_id, conn, request_id)
                        continue
                    lsn, ts = seq.tail()
                    conn.send(Tail(request_id=request_id, status=E.OK, log_id=a.log_id,
                                   lsn=lsn, timestamp=ts))
            elif t is Preempted:
                seq = self.sequencers.get(a.log_id)
                if seq is not None and seq.epoch <= a.seal_epoch:
                    log.warning("log %d epoch %d: preempted (a storage node holds it "
                                "sealed up to epoch %d, by N%s)", a.log_id, seq.epoch,
                                a.seal_epoch, a.sealed_by)
                    self.deactivate(a.log_id, E.PREEMPTED, by=a.sealed_by)
                for conn, request_id in a.waiters:
                    self._no_tail(a.log_id, conn, request_id)
            elif t is Undecided:
                for conn, request_id in a.waiters:
                    # Cannot tell whether our tail is still the log's: the client
                    # tries again (nothing was changed).
                    conn.send(Tail(request_id=request_id, status=E.AGAIN, log_id=a.log_id))
        self._arm_seal_checks()

    def _arm_seal_checks(self) -> None:
        deadline = self.seal_checks.next_deadline()
        if deadline is None:
            return
        armed = self._seal_timer
        if armed is not None:
            if armed[0] <= deadline:
                return
            armed[1].cancel()
        self._seal_timer = (deadline, self.node.loop.call_at(deadline, self._on_seal_timer))

    def _on_seal_timer(self) -> None:
        self._seal_timer = None
        self._run_seal_checks(self.seal_checks.on_timer())

    def _on_stored(self, conn: Peer, msg: Stored) -> None:
        node = conn.peer_node if conn.peer_node is not None else msg.node_index
        seq, replies, preempted = self.sender.take_reply(msg, node)
        if seq is None:
            return
        if type(seq) is RecoveryDriver:
            seq.on_stored(replies)
            return
        if seq.state == SequencerState.DEACTIVATED:
            return
        self._run(seq, seq.on_stored_many(replies))
        if preempted and seq.state != SequencerState.DEACTIVATED:
            # A storage node says a newer epoch sealed ours: another sequencer took over.
            log.warning("log %d epoch %d: preempted (sealed on N%d)", seq.log_id, seq.epoch,
                        node)
            if self.sequencers.get(seq.log_id) is seq:
                self.deactivate(seq.log_id, E.PREEMPTED,
                                by=msg.sealed_by if msg.sealed_by >= 0 else None)

    def _on_stored_logs(self, conn: Peer, msg: StoredLogs) -> None:
        for part in msg.parts():
            self._on_stored(conn, part)

    # -- activation -------------------------------------------------------------------------
    def _enqueue(self, log_id: int, item: tuple[Any, ...]) -> None:
        queue = self._activating.get(log_id)
        if queue is None:
            queue = self._activating[log_id] = []
            self.node.loop.create_task(self._activate(log_id), name=f"activate-{log_id}")
        if item[0] == "append" and len(queue) >= self.node.config.log_group(
                log_id).max_writes_in_flight:
            self._answer(item[1], E.SEQNOBUFS, message="sequencer window is full (activating)")
            return
        queue.append(item)

    def _nodeset(self, log_id: int, group: LogGroup) -> tuple[int, ...]:
        """The storage nodes of the log: all writable ones, or the ``nodeset_size`` ones
        scoring highest for the log (rendezvous by storage weight), if that subset can
        satisfy the replication property."""
        config = self.node.config
        writable = [n.index for n in config.writable_storage_nodes()]
        size = config.nodeset_size(group)
        if size >= len(writable):
            return tuple(writable)
        ranked = sorted(writable, key=lambda n: -score(log_id, n, self._weights[n]))
        subset = tuple(sorted(ranked[:size]))
        try:
            if CopysetSelector(subset, group.replication, self._locations,
                               self._weights).can_satisfy():
                return subset
        except ValueError:
            pass
        return tuple(writable)

    def _store(self) -> EpochStore:
        """The epoch store, opened on first use (in the epoch-store thread)."""
        if self._epoch_store is None:
            self._epoch_store = open_cluster_store(self.node.config)
        return self._epoch_store

    async def _activate(self, log_id: int) -> None:
        loop = self.node.loop
        try:
            group = self.node.config.log_group(log_id)  # NOTFOUND: removed meanwhile
            metadata = EpochMetadata(0, self._nodeset(log_id, group),
                                     group.replication.to_dict(),
                                     sticky_copysets=group.sticky_copysets)
            epoch, state, statuses = await self._activations.activate(log_id, metadata)
        except Exception as exc:
            status = exc.status if isinstance(exc, LogDeviceError) else E.FAILED
            if status == E.TIMEDOUT:  # the store is away: said once, not per append
                self._activation_failures.failed(f"log {log_id}: {exc}")
            else:
                log.error("log %d: activation failed: %s", log_id, exc,
                          exc_info=not isinstance(exc, LogDeviceError))
            self.ownership.release(log_id)
            self._fail_queue(log_id, status, f"sequencer activation failed: {exc}")
            return
        self._activation_failures.succeeded()
        status, redirect, why = self._check(log_id)
        if status != E.OK:  # the view changed while we waited; the epoch is just skipped
            self._fail_queue(log_id, status, why, redirect)
            return
        if affects_sequencer(group, self.node.config.log_group(log_id)):
            # The group changed while the store was activating: this epoch's metadata is
            # already stale, take another one with the new group (the queue waits).
            self.node.loop.create_task(self._activate(log_id), name=f"activate-{log_id}")
            return
        md = state.metadata
        assert md is not None  # an activation always leaves the epoch's metadata
        tail = state.tail
        recover = self._recovery_needed(state)
        try:
            seq = Sequencer(
                log_id, epoch, md.nodeset, group.replication, self._locations, self._weights,
                clock=loop.time, rng=self.rng, max_in_flight=group.max_writes_in_flight,
                store_timeout=(group.store_timeout_ms[0] / 1000,
                               group.store_timeout_ms[1] / 1000),
                sticky=((group.sticky_block_bytes, float(group.sticky_block_ms))
                        if group.sticky_copysets else None),
                max_payload_size=self.settings.max_payload_size, health=self.health,
                last_released=tail.lsn if tail is not None else 0,
                last_timestamp=tail.timestamp if tail is not None else 0,
                needs_recovery=recover, store_waves=True,
                selector=self._selector(md.nodeset, group.replication))
        except LogDeviceError as exc:
            log.error("log %d: cannot start a sequencer: %s", log_id, exc)
            self.ownership.release(log_id)
            self._fail_queue(log_id, exc.status, str(exc))
            return
        log.info("log %d: sequencer active in epoch %d on nodeset %s", log_id, epoch,
                 list(md.nodeset))
        self.sequencers[log_id] = seq
        self._live[(log_id, epoch)] = seq
        self.ownership.activated(log_id)
        self._built_from[log_id] = group
        if recover:
            self.recoveries.start(seq, state, statuses)
        else:
            self._take_held_blobs(log_id)
        queue = self._activating.pop(log_id, [])
        now = self.node.loop.time()
        for item in queue:
            if item[0] == "append":
                a = self._appends.get(item[1])
                if a is not None and a.deadline is not None and now >= a.deadline:
                    # The client stopped waiting while the sequencer activated: writing the
                    # record now would only make a duplicate of its retry.
                    self._answer(item[1], E.TIMEDOUT, message="the append waited past its "
                                 "timeout for the sequencer to activate; not written")
                    continue
                if seq.dormant:
                    self._awake.add(seq)
                self._run(seq, seq.append(item[1], item[2], item[3]))
            elif item[0] == "tail":
                self._send_tail(seq, item[1], item[2])

    def _selector(self, nodeset: Collection[int], replication: Any) -> CopysetSelector | None:
        """The copyset selector of sequencers with this nodeset and replication, shared;
        None when it cannot be built (the sequencer then says why)."""
        key = (tuple(nodeset), Replication(replication))
        selector = self._selectors.get(key)
        if selector is None:
            try:
                selector = CopysetSelector(nodeset, replication, self._locations, self._weights)
            except ValueError:
                return None
            self._selectors[key] = selector
        return selector

    @staticmethod
    def _recovery_needed(state: Any) -> bool:
        """Whether epochs before the log's current one are not clean yet."""
        return bool(state.last_clean_epoch < state.epoch - 1)

    def recovered(self, seq: Sequencer, last_released: int, last_timestamp: int,
                   nodes: Collection[int]) -> None:
        """Recovery finished: release the recovered epochs (their nodesets may differ from
        the current one) and let the sequencer release its own records."""
        self.sender.release(seq.log_id, last_released, set(nodes) | set(seq.nodeset),
                            seq.epoch)
        self._run(seq, seq.on_recovery_done(last_released, last_timestamp))
        self._answer_tail_waiters(seq.log_id, seq)
        self._take_held_blobs(seq.log_id)

    def _take_held_blobs(self, log_id: int) -> None:
        """The log's sequencer settled its earlier epochs, or recalled its writers: serve
        the held idempotent blobs (after recalling the writers, if not done yet)."""
        if log_id not in self._held_blobs:
            return
        seq = self.sequencers.get(log_id)
        if seq is not None and not self.writers.knows_writers(seq):
            self.writers.recall(seq)
            return
        for conn, msg in self._held_blobs.pop(log_id, []):
            self._on_append(conn, msg)

    def _refuse_held_blobs(self, log_id: int, status: E, redirect: int | None) -> None:
        for conn, msg in self._held_blobs.pop(log_id, []):
            conn.send(Appended(request_id=msg.request_id, status=status, redirect_to=redirect))

    # -- what epoch recovery uses (recovery_driver.RecoveryHost) -------------------------------
    def keep_payload(self, rid: Any, log_id: int, payload: Any, checksum: int) -> None:
        """A recovery STORE's payload, for ``_payload_of`` (no client to answer)."""
        self._appends[rid] = PendingAppend(None, 0, log_id, payload, checksum)  # type: ignore[arg-type]

    def drop_payload(self, rid: Any) -> None:
        self._appends.pop(rid, None)

    def live_sequencer(self, log_id: int, epoch: int) -> Sequencer | None:
        """The sequencer of ``epoch`` while it is not deactivated (it may be draining)."""
        return self._live.get((log_id, epoch))

    def hand_over(self, log_id: int, epoch: int, keep: Sequencer) -> None:
        """Recovery takes over ``epoch``'s STOREs from its drained sequencer (unless that
        is ``keep``, the sequencer recovering)."""
        drained = self._live.get((log_id, epoch))
        if drained is not None and drained is not keep:
            del self._live[(log_id, epoch)]

    def placement(self) -> tuple[dict[int, Any], dict[int, float]]:
        """Node locations and storage weights, as the config has them now."""
        return self._locations, self._weights

    def on_epoch_store(self, fn: Callable[[EpochStore], Any]) -> asyncio.Future[Any]:
        """Run ``fn(epoch_store)`` in the role's epoch-store thread."""
        return self.node.loop.run_in_executor(self._epoch_exec, lambda: fn(self._store()))

    def _fail_queue(self, log_id: int, status: E, message: str = "",
                    redirect: int | None = None) -> None:
        self._refuse_held_blobs(log_id, status, redirect)
        for item in self._activating.pop(log_id, []):
            if item[0] == "append":
                self._answer(item[1], status, redirect, message)
            elif item[0] == "tail":
                item[1].send(Tail(request_id=item[2], status=status, log_id=log_id,
                                  redirect_to=redirect))

    def on_config_change(self, old: Config, new: Config) -> None:
        """Runtime log groups or the node list changed.  A log whose group changed what a
        sequencer is built from (replication, nodeset size, ...), or whose nodeset would
        now be chosen differently, gets a new epoch with the new metadata, as LogDevice
        re-provisions it: the current epoch takes no more appends and finishes its window,
        the next append activates the new one.  Earlier epochs keep the metadata they were
        written with.  A removed log's sequencer stops: appends in flight and new ones get
        NOTFOUND (storage nodes refuse its STOREs)."""
        members_changed = old.nodes != new.nodes
        if members_changed:
            self._follow_membership(old, new)
        for log_id, seq in list(self.sequencers.items()):
            built = self._built_from.get(log_id)
            if not new.has_log(log_id):
                # Storage nodes refuse its STOREs now: what is in flight cannot complete.
                log.info("log %d: its log group was removed; epoch %d ends", log_id, seq.epoch)
                self.deactivate(log_id, E.NOTFOUND)
            elif built is not None and affects_sequencer(built, new.log_group(log_id)):
                log.info("log %d: log group %r changed; epoch %d ends, the next append "
                         "starts a new one", log_id, built.name, seq.epoch)
                self._retire(seq)
            elif members_changed and set(self._nodeset(log_id, new.log_group(log_id))) \
                    != set(seq.nodeset):
                # LogDevice re-provisions nodesets when membership changes: new epochs
                # place records on the nodes the log would get now.
                log.info("log %d: storage nodes changed; epoch %d (nodeset %s) ends",
                         log_id, seq.epoch, list(seq.nodeset))
                self._retire(seq)

    def _follow_membership(self, old: Config, new: Config) -> None:
        """Locations and weights of the new node list; added nodes count as down until
        our link to them is up."""
        me = self.node.index
        self._locations = {n.index: n.location for n in new.nodes}
        self._weights = {n.index: n.storage_weight for n in new.nodes if n.is_storage}
        self._selectors.clear()  # built with the old locations and weights
        known = {n.index for n in old.nodes}
        for n in new.nodes:
            if n.index != me and n.index not in known:
                self._link_down.add(n.index)
                self.health.mark_down(n.index)
        self.ownership.view_changed()

    def _retire(self, seq: Sequencer) -> None:
        """``seq`` takes no new appends and finishes its window; the log's next request
        activates a new epoch."""
        self.sequencers.pop(seq.log_id, None)
        self._built_from.pop(seq.log_id, None)
        self._answer_tail_waiters(seq.log_id, None)
        self._run(seq, seq.retire())

    def deactivate(self, log_id: int, status: E, by: int | None = None) -> None:
        """Stop the log's sequencer (``status`` answers what it still holds); ``by``:
        the node whose newer epoch preempted it, if known (requests go there next)."""
        seq = self.sequencers.pop(log_id, None)
        if seq is None:
            return
        self.ownership.release(log_id)
        if by is not None and by != self.node.index and self.node.config.has_node(by):
            self.ownership.preempted(log_id, by)
        redirect = self.ownership.redirect_for(log_id) if status == E.PREEMPTED else None
        self.recoveries.abort(log_id)
        self.writers.forget(log_id)
        self._answer_tail_waiters(log_id, None)
        self._refuse_held_blobs(log_id, E.NOSEQUENCER, self.ownership.redirect_for(log_id))
        actions = seq.deactivate(status)
        self._live.pop((log_id, seq.epoch), None)
        self._built_from.pop(log_id, None)
        self._timers.cancel(seq)
        for a in actions:
            if type(a) is Reject:
                self._answer(a.request_id, a.status, redirect,
                             "the sequencer stopped before the record was fully stored; "
                             "it may be stored", lsn=a.lsn)

    # -- actions ----------------------------------------------------------------------------
    def _payload_of(self, rid: Any) -> tuple[Any, int] | None:
        a = self._appends.get(rid)
        return None if a is None else (a.payload, a.checksum)

    def _sequencer_of(self, log_id: int, epoch: int) -> Any:
        return self._live.get((log_id, epoch)) or self.recoveries.store_owner(log_id, epoch)

    def _answer(self, rid: Any, status: E, redirect: int | None = None, message: str = "",
                lsn: int = 0, timestamp: int = 0) -> None:
        a = self._appends.pop(rid, None)
        if a is None:
            return
        if status == E.OK:
            self.append_stats.latency.add(self.node.loop.time() - a.t0)
        else:
            self.append_stats.failed += 1
        if a.batch is not None:
            a.batch.record(a.index, status, lsn, timestamp, redirect, message)
            return
        if not a.producer[0]:
            a.conn.send(Appended(request_id=a.request_id, status=status, lsn=lsn,
                                 timestamp=timestamp, redirect_to=redirect, message=message))
            return
        for conn, request_id in self.producers.finish(a.log_id, *a.producer, status, lsn,
                                                      timestamp):
            conn.send(Appended(request_id=request_id, status=status, lsn=lsn,
                               timestamp=timestamp, redirect_to=redirect, message=message))

    def _run(self, seq: Sequencer, actions: list) -> None:
        """Carry out a sequencer's actions, then re-arm its timer."""
        sender = self.sender
        stores = []
        for a in actions:
            t = type(a)
            if t is StoreWave:
                stores.append(a)
            elif t is AckAppend:
                self._answer(a.request_id, E.OK, lsn=a.lsn, timestamp=a.timestamp)
            elif t is Release:
                sender.release(a.log_id, a.lsn, a.nodes, seq.epoch)
            elif t is Reject:
                self._answer(a.request_id, a.status, lsn=a.lsn)
            elif t is Reactivate:
                self._reactivate(seq)
        sender.store_many(stores)
        self._arm(seq)
        if seq.state == SequencerState.EXHAUSTED and not seq.in_flight \
                and self.sequencers.get(seq.log_id) is not seq:
            self._forget(seq)

    def _forget(self, seq: Sequencer) -> None:
        """A sequencer that finished its window and is no longer the log's."""
        self._live.pop((seq.log_id, seq.epoch), None)

    def _reactivate(self, seq: Sequencer) -> None:
        """The epoch ran out of ESNs: the exhausted sequencer finishes its window (it stays
        in ``_live``) while a new epoch is activated for new appends."""
        if self.sequencers.get(seq.log_id) is seq:
            del self.sequencers[seq.log_id]
            self._enqueue(seq.log_id, ("noop",))

    def _arm(self, seq: Sequencer) -> None:
        deadline = seq.next_deadline()
        if deadline is not None:
            self._timers.arm(seq, deadline)

    def _on_timer(self, seq: Sequencer) -> None:
        if seq.state == SequencerState.DEACTIVATED:
            return
        self._run(seq, seq.on_timer())
        if seq.state == SequencerState.EXHAUSTED and not seq.in_flight:
            self._forget(seq)

    def _sweep(self) -> None:
        now = self.node.loop.time()
        self.sender.forget_old(now)
        if self._idle_after is not None:
            self._put_idle_to_sleep(now - self._idle_after)
        self._sweeper = self.node.loop.call_later(self._sweep_every, self._sweep)

    def awake_sequencers(self) -> int:
        """How many of the node's sequencers hold a window now (see Idle logs)."""
        return sum(1 for seq in self._awake if not seq.dormant)

    def _put_idle_to_sleep(self, cutoff: float) -> None:
        """Sequencers whose last append is older than ``cutoff`` and that have nothing in
        flight give back their windows (see Idle logs)."""
        asleep = [seq for seq in self._awake
                  if seq.last_active <= cutoff and seq.sleep()]
        if asleep:  # a new set: one emptied in place keeps the table of its largest size
            self._awake = self._awake.difference(asleep)
