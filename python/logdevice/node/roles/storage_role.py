"""The storage role: STORE into LogsDB, RELEASE, and the per-node admin answers.

- STORE -> ``GroupCommitter`` (one RocksDB write per batch of concurrent STOREs, in the
  writer thread) -> STORED on the connection the STORE came on, with a status for the
  whole STORE or one per record: OK; ACCESS (not sent by a node); NOTFOUND (log not in
  the config); DISABLED (this node has no storage role); PREEMPTED (the STORE's epoch is
  at or below the log's seal: a newer sequencer sealed it — LogDevice answers a sealed
  STORE with PREEMPTED too); NOSPC (disk full); CHECKSUM_MISMATCH (a record's payload
  does not match its crc32c); SHUTDOWN (the node is stopping).
- STORE_LOGS (the STOREs of several logs in one frame): each part is taken exactly as
  the STORE it stands for; from then on the connection understands STORED_LOGS, and the
  STOREDs one group commit produces for it leave in one STORED_LOGS frame.
- RELEASE / RELEASE_BATCH: the last released LSN per log is kept in memory, persisted to
  LogsDB lazily (every ``PERSIST_INTERVAL`` in one batch, and on shutdown), and every role
  hears about it through ``Node.notify_release`` (read streams wake their tailing
  readers).  ``last_released(log_id)`` is the read side's view.  A release from a
  sequencer whose earlier epochs this node has not caught up with waits for purging
  (``purging.Purger``): the node deletes the copies recovery overruled first.  STOREs of
  epochs the node knows clean get PREEMPTED.
- Durability: STORED goes out once the group commit wrote the records at the configured
  ``append_store_durability`` (memtable only, WAL, or fsynced WAL).
- Retention: every ``retention_interval_ms`` the node drops the partitions that every log
  is done with (trimmed, or older than its backlog retention).
- TRIM, GET_HEAD, FIND_TIME, DATA_SIZE: this node's answer only; the client combines the
  answers of the nodeset.  GET_LOG_SUMMARIES (trim point, release pointer, local tail,
  time span, byte estimate and find-time answers of many logs) and GET_RECORD_ROWS (the
  records of LSN ranges with their row counts) answer many logs in one reply
  (``storage.summaries``).
- Epochs are bounded by what the epoch store issued (``epoch_bound``): a STORE whose
  epoch (or a record's) or a SEAL whose epoch the store has not handed out is refused
  with INVALID_PARAM, after one fresh read of the store; AGAIN if the store cannot be
  read.  STOREs waiting for that read are answered in arrival order once it is back,
  checked against the seal again then (a SEAL answered meanwhile did not wait for them).
- SEAL (epoch recovery, from a node): persist the seal in LogsDB (from then on STOREs of
  sealed epochs get PREEMPTED, held ones included), let the STOREs handed to the group
  committer before it reach the disk, then
  answer SEALED with what the node knows of the epoch in recovery: its last known good
  LSN (the highest LNG its STOREs carried, or its release pointer when that lies in the
  epoch) and the highest LSN it stores there.  A seal already higher: PREEMPTED.  The
  node remembers (in memory only) which node sealed each log last and names it in the
  STORED(PREEMPTED) answers of that log (``sealed_by``), so a preempted sequencer knows
  where the log went; this node's own sequencer of the log hears of the seal at once.
- CHECK_SEAL (from a node's sequencer, before it answers a tail): SEAL_STATE with how far
  the log is sealed here (a closed epoch counts) and by whom, if known.
- GET_WRITER_BLOBS (from a node's sequencer, before it takes retried BufferedWriter
  blobs): WRITER_BLOBS naming the idempotent writers' blobs held here in a time window
  (``storage.producers``); AGAIN while a purge runs, REBUILDING while being rebuilt.

Back-pressure: when STOREs waiting for the writer exceed ``MAX_QUEUED_BYTES`` the role
stops reading from the connections that send them until the queue drains.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np

from ldcore.logtable import LogTable
from ldcore.lsn import ESN_MAX, LSN_MAX, compose, epoch_of
from logdevice.epochstore import EpochStore
from logdevice.errors import E, LogDeviceError
from logdevice.node.roles.epoch_bound import EpochBound
from logdevice.node.roles.group_commit import GroupCommitter, StoreJob
from logdevice.node.roles.known_good import KnownGood
from logdevice.node.roles.purging import Purger
from logdevice.node.roles.role import NodeServices, Peer, Role
from logdevice.node.shard_check import mark_damaged, mark_if_data_lost
from logdevice.protocol import (
    CheckSeal,
    DataSize,
    DataSizeReply,
    FindTime,
    FindTimeReply,
    GetHead,
    GetLogSummaries,
    GetRecordRows,
    GetWriterBlobs,
    Head,
    LogSummaries,
    RecordRows,
    Release,
    ReleaseBatch,
    Seal,
    Sealed,
    SealState,
    Store,
    Stored,
    StoredLogs,
    StoreLogs,
    Trim,
    Trimmed,
    WriterBlobs,
)
from logdevice.security.store import open_cluster_store
from logdevice.storage import summaries
from logdevice.storage.logsdb import LogsDB

if TYPE_CHECKING:
    from logdevice.config import Config

log = logging.getLogger("logdevice.node.storage")

#: ``conn.attrs`` key: the peer sent STORE_LOGS, so it takes STORED_LOGS.
_STORED_LOGS = "stored_logs"
#: Seconds between lazy writes of last-released pointers.
PERSIST_INTERVAL = 0.1
#: Seconds a trim past this node's release pointer waits for a RELEASE to catch up.
TRIM_RELEASE_WAIT = 2.0
#: Stop reading STOREs while this many payload bytes wait for the writer.
MAX_QUEUED_BYTES = 64 << 20
RESUME_QUEUED_BYTES = 16 << 20


def open_logsdb(node: NodeServices) -> tuple[LogsDB, str | None]:
    """The node's LogsDB in its data directory (created when missing), and what damage
    opening it found (None: none).

    The write-ahead log is replayed in RocksDB's "absolute consistency" mode: any damaged
    entry fails the open.  RocksDB's default ("point in time") would stop replaying at
    the first damaged entry and drop every later write without a word, and this node
    would go on answering for copies it no longer has.  A crash cannot damage an
    acknowledged write (STORED is answered after the write returned), but a damaged entry
    cannot be told from one torn by a crash, so on any damage the store is opened again
    in point-in-time mode (the consistent prefix) and the damage reported: the node is
    then rebuilt as one whose data is partly gone (``shard_check.mark_damaged``).
    """
    path = node.config.node_data_dir(node.index)
    path.mkdir(parents=True, exist_ok=True)
    s = node.config.settings

    def open_db(wal_recovery: str) -> LogsDB:
        return LogsDB(path / "logsdb", max_payload=s.max_payload_size,
                      partition_duration_ms=s.partition_duration_ms,
                      partition_size_limit=s.partition_size_limit_bytes,
                      wal_recovery=wal_recovery, record_cache_bytes=s.record_cache_bytes)

    try:
        return open_db("absolute"), None
    except LogDeviceError as exc:
        if exc.status != E.CHECKSUM_MISMATCH:
            raise
        log.error("N%d: the store's write-ahead log is damaged: %s", node.index, exc)
        return open_db("point_in_time"), f"write-ahead log: {exc.message or exc}"


def apply_retention(db: LogsDB, config: Any) -> list[int]:
    """Drop the partitions every log is done with (trimmed, or older than the log's
    backlog retention), then flush, so the write-ahead log that still holds their
    records can go too.  Blocking; the dropped partition ids."""
    backlog = {}
    for log_id in db.logs():
        if config.has_log(log_id):
            backlog[log_id] = config.log_group(log_id).backlog_retention_ms
    dropped = db.apply_retention(int(time.time() * 1000), backlog)
    if dropped:
        db.flush()
    return dropped


def _any_sticky(config: Config) -> bool:
    """Whether any log group of ``config`` has sticky copysets."""
    return any(group.sticky_copysets for group in config.logs)


class StorageRole(Role):
    """Stores records and answers per-node queries.  ``db`` is None on a node without
    the storage role (every STORE gets DISABLED)."""

    name = "storage"

    def __init__(self, node: NodeServices, db: LogsDB | None = None) -> None:
        super().__init__(node)
        self.enabled = node.me.is_storage
        self.db = db
        self.committer: GroupCommitter | None = None
        self._released = LogTable(1)  # log -> last released LSN known here
        self._dirty: dict[int, int] = {}
        self._persist_handle: asyncio.TimerHandle | None = None
        self._persisting: asyncio.Future[Any] | None = None
        self._meta_exec = ThreadPoolExecutor(1, thread_name_prefix="logsdb-meta")
        self._read_exec = ThreadPoolExecutor(2, thread_name_prefix="logsdb-read")
        self._paused: set[Any] = set()
        self._stopping = False
        self._sticky: dict[int, bool] = {}  # only while some log group is sticky
        self._any_sticky = _any_sticky(node.config)
        self._lng = KnownGood()  # (log, epoch) -> highest LNG in STOREs
        self._sealers: dict[int, tuple[int, int]] = {}  # log -> (seal epoch, sealing node)
        self.purger: Purger | None = None
        self._held: dict[int, tuple[int, int]] = {}  # log -> (lsn, epoch) waiting for a purge
        # log -> [(lsn, future)]: trims waiting for the release pointer to reach lsn
        self._release_waiters: dict[int, list[tuple[int, asyncio.Future[None]]]] = {}
        self._epoch_store: EpochStore | None = None
        self._retention_handle: asyncio.TimerHandle | None = None
        self._rebuilding: Any = None  # the rebuilding role: says when to refuse STOREs
        self._bound_store: EpochStore | None = None  # used by the epoch bound's thread only
        self.epochs = EpochBound(node.loop, self._issued_epochs)
        self._parked: dict[int, list[tuple[Peer, Store]]] = {}  # log -> STOREs awaiting it
        #: Whether the store holds every copy this node acknowledged: False when it was
        #: created empty at this start or reported damage (``report_damage``).
        self.intact = False
        self._damage_reported: asyncio.Future[Any] | None = None

    def handlers(self) -> Mapping[type, Any]:
        return {Store: self._on_store, StoreLogs: self._on_store_logs,
                Release: self._on_release,
                ReleaseBatch: self._on_release_batch, Trim: self._on_trim,
                GetHead: self._on_get_head, FindTime: self._on_find_time,
                DataSize: self._on_data_size, Seal: self._on_seal,
                CheckSeal: self._on_check_seal, GetWriterBlobs: self._on_get_writer_blobs,
                GetLogSummaries: self._on_get_log_summaries,
                GetRecordRows: self._on_get_record_rows}

    async def start(self) -> None:
        if self.node.has_role("rebuilding"):
            self._rebuilding = self.node.role("rebuilding")
        if self.enabled and self.db is None:
            loop = self.node.loop
            fresh = not (self.node.config.node_data_dir(self.node.index) / "logsdb").exists()
            self.db, damage = await loop.run_in_executor(self._meta_exec, open_logsdb,
                                                         self.node)
            self.intact = not fresh
            if fresh:  # wiped after holding data? then readers must not trust its silence
                await loop.run_in_executor(self._meta_exec, mark_if_data_lost,
                                           self.node.config, self.node.index)
            elif damage is not None:
                self.report_damage(damage)
        if self.db is not None:
            self.committer = GroupCommitter(
                self.node.loop, self.db, self._on_written,
                durability=self.node.config.settings.append_store_durability)
            self.purger = Purger(self.node.loop, self.db, self._meta_exec, self._open_store,
                                 self.committer.flush, self._on_purged)
            self._schedule_retention()

    def report_damage(self, damage: str) -> None:
        """The store reported damage (a corrupt write-ahead log, a block or record failing
        its checksum): this node no longer counts as holding every copy it acknowledged
        and marks itself for rebuilding (once per run of the node)."""
        self.intact = False
        if self._damage_reported is None:
            self._damage_reported = self.node.loop.run_in_executor(
                self._meta_exec, mark_damaged, self.node.config, self.node.index, damage)

    def _schedule_retention(self) -> None:
        interval = self.node.config.settings.retention_interval_ms / 1000
        self._retention_handle = self.node.loop.call_later(interval, self._run_retention)

    def _run_retention(self) -> None:
        if self._stopping or self.db is None:
            return
        db, config = self.db, self.node.config

        def done(fut: asyncio.Future[list[int]]) -> None:
            exc = fut.exception()
            if exc is not None:
                log.error("retention failed: %s", exc)
            elif fut.result():
                log.info("retention dropped partitions %s", fut.result())
            if not self._stopping:
                self._schedule_retention()

        fut = self.node.loop.run_in_executor(self._meta_exec, apply_retention, db, config)
        fut.add_done_callback(done)

    def _open_store(self) -> EpochStore:
        if self._epoch_store is None:
            self._epoch_store = open_cluster_store(self.node.config)
        return self._epoch_store

    async def stop(self) -> None:
        self._stopping = True
        if self._retention_handle is not None:
            self._retention_handle.cancel()
        if self.committer is not None:
            await self.committer.flush()
        if self.purger is not None:
            await self.purger.drain(timeout=5.0)
        if self._persist_handle is not None:
            self._persist_handle.cancel()
            self._persist_handle = None
        if self._persisting is not None:
            await self._persisting
        await self._persist_now()

    def close(self) -> None:
        self.epochs.close()
        if self._bound_store is not None:
            self._bound_store.close()
            self._bound_store = None
        if self.committer is not None:
            self.committer.close()
        self._meta_exec.shutdown(wait=True)
        self._read_exec.shutdown(wait=True)
        if self._epoch_store is not None:
            self._epoch_store.close()
            self._epoch_store = None
        if self.db is not None:
            self.db.close()
            self.db = None

    # -- epochs the store issued ------------------------------------------------------------
    def _issued_epochs(self, log_ids: list[int]) -> dict[int, int]:
        """The logs' current epochs in the epoch store (a log unknown there is left out).
        Blocking."""
        if self._bound_store is None:
            self._bound_store = open_cluster_store(self.node.config)
        return self._bound_store.epochs(log_ids)

    @staticmethod
    def _store_epoch(msg: Store) -> int:
        """The highest epoch a STORE writes in: its own, its recovery's, its records'."""
        lsns = msg.lsns
        n = len(lsns)
        # One record: no numpy reduction (a call costs more than the rest of the check).
        top = epoch_of(int(lsns[0]) if n == 1 else int(lsns.max()) if n else 0)
        return max(msg.epoch, msg.recovery_epoch, top)

    def _park(self, conn: Peer, msg: Store) -> None:
        """Hold a STORE of an epoch this node has not seen issued until the store says."""
        parked = self._parked.setdefault(msg.log_id, [])
        parked.append((conn, msg))
        if len(parked) == 1:
            self.node.loop.create_task(self._unpark(msg.log_id))

    async def _unpark(self, log_id: int) -> None:
        """Decide the parked STOREs of ``log_id`` in arrival order, each by a read of the
        epoch store that started after it arrived (an earlier read may predate its
        epoch); STOREs parked meanwhile wait for the next read."""
        parked = self._parked[log_id]
        while parked:
            arrived = len(parked)
            try:
                await self.epochs.fresh(log_id)
                unreadable = False
            except LogDeviceError as exc:
                log.warning("log %d: cannot read the epoch store to check a STORE's epoch: "
                            "%s", log_id, exc)
                unreadable = True
            decided = parked[:arrived]
            del parked[:arrived]
            for conn, msg in decided:
                if conn.closed:
                    continue
                if not unreadable and self.epochs.admits(log_id, self._store_epoch(msg)):
                    # Checked against the seal again: one answered while this STORE was
                    # held came with the sealer's read of our records, without it.
                    status = self._store_status(conn, msg)
                    if status == E.OK:
                        self._write(conn, msg)
                    else:
                        conn.send(self._refusal(msg, status))
                    continue
                if not unreadable:
                    log.warning("refusing a STORE of log %d epoch %d from %r: the epoch "
                                "store has not issued it", log_id, self._store_epoch(msg), conn)
                conn.send(self._refusal(msg, E.AGAIN if unreadable else E.INVALID_PARAM))
        del self._parked[log_id]

    # -- STORE ------------------------------------------------------------------------------
    def on_config_change(self, old: Config, new: Config) -> None:
        self._sticky.clear()  # a runtime group's sticky_copysets may have changed
        self._any_sticky = _any_sticky(new)

    def _on_store(self, conn: Peer, msg: Store, refreshed: bool = False) -> None:
        status = self._store_status(conn, msg)
        if status == E.NOTFOUND and not refreshed:
            def again() -> None:
                if not conn.closed:
                    self._on_store(conn, msg, refreshed=True)

            if self.node.after_fresh_logs_config(again):
                return  # the sequencer knows a log created a moment ago: read it too
        if status != E.OK:
            conn.send(Stored(request_id=msg.request_id, log_id=msg.log_id,
                             node_index=self.node.index, status=status))
            return
        if msg.log_id in self._parked or not self.epochs.admits(msg.log_id,
                                                                self._store_epoch(msg)):
            self._park(conn, msg)  # behind the others held for this log: order kept
            return
        self._write(conn, msg)

    def _on_store_logs(self, conn: Peer, msg: StoreLogs) -> None:
        conn.attrs[_STORED_LOGS] = True  # its sender takes the answers in one frame
        for part in msg.parts():
            self._on_store(conn, part)

    def _write(self, conn: Peer, msg: Store) -> None:
        """Hand an accepted STORE to the group committer."""
        if msg.last_known_good and not msg.recovery_epoch:
            key = (msg.log_id, msg.epoch)
            if msg.last_known_good > self._lng.get(key, 0):
                self._lng[key] = msg.last_known_good
        committer = self.committer
        assert committer is not None
        nbytes = memoryview(msg.payloads).nbytes
        committer.submit(StoreJob(conn, msg, self._is_sticky(msg.log_id), nbytes))
        if committer.pending_bytes > MAX_QUEUED_BYTES and conn not in self._paused:
            conn.pause_reading("storage")
            self._paused.add(conn)

    def node_request_status(self, conn: Peer, log_id: int) -> E:
        """Whether this node takes a request that writes to ``log_id`` from ``conn``
        (STORE, SEAL, a rebuilt copy): only from nodes, while running, with a store,
        for a log of the config."""
        if conn.peer_role != "node":
            return E.ACCESS
        if self._stopping:
            return E.SHUTDOWN
        if not self.enabled or self.db is None:
            return E.DISABLED
        if not self.node.config.has_log(log_id):
            return E.NOTFOUND
        return E.OK

    def _store_status(self, conn: Peer, msg: Store) -> E:
        status = self.node_request_status(conn, msg.log_id)
        if status != E.OK:
            return status
        if not msg.recovery_epoch and self._rebuilding is not None \
                and self._rebuilding.refuses_stores():
            return E.REBUILDING  # rebuilt, drained, or being rebuilt: copies go elsewhere
        if not msg.recovery_epoch and self.purger is not None \
                and msg.epoch <= self.purger.clean_epoch(msg.log_id):
            return E.PREEMPTED  # a closed epoch: recovery decided its content already
        assert self.db is not None  # node_request_status said DISABLED otherwise
        sealed = self.db.sealed_epoch(msg.log_id)
        if sealed:
            epoch = msg.recovery_epoch or msg.epoch
            if (epoch < sealed) if msg.recovery_epoch else (epoch <= sealed):
                return E.PREEMPTED
        return E.OK

    def _is_sticky(self, log_id: int) -> bool:
        if not self._any_sticky:  # the common case: no per-log answer to keep
            return False
        sticky = self._sticky.get(log_id)
        if sticky is None:
            sticky = self._sticky[log_id] = self.node.config.log_group(log_id).sticky_copysets
        return sticky

    def _on_written(self, batch: list[StoreJob]) -> None:
        me = self.node.index
        together: dict[Any, list[Stored]] = {}  # conn -> STOREDs for one STORED_LOGS
        for job in batch:
            msg = job.msg
            if job.status == E.OK and job.statuses is not None:
                reply = Stored(request_id=msg.request_id, log_id=msg.log_id, node_index=me,
                               status=E.OK, lsns=msg.lsns, statuses=job.statuses)
            else:
                reply = self._refusal(msg, job.status)
            conn = job.conn
            if conn.attrs.get(_STORED_LOGS):
                together.setdefault(conn, []).append(reply)
            else:
                conn.send(reply)
        for conn, replies in together.items():
            conn.send(replies[0] if len(replies) == 1 else StoredLogs.of(me, replies))
        self.node.flush_pending()  # STORED is on the append's critical path: no turn later
        if self._paused and self.committer is not None \
                and self.committer.pending_bytes < RESUME_QUEUED_BYTES:
            for conn in self._paused:
                conn.resume_reading("storage")
            self._paused.clear()

    def _refusal(self, msg: Store, status: E) -> Stored:
        """The STORED of a STORE not written (or failed) with ``status``; PREEMPTED names
        the sealer when this node knows it."""
        return Stored(request_id=msg.request_id, log_id=msg.log_id, node_index=self.node.index,
                      status=status, sealed_by=self._sealer_of(msg.log_id, msg.epoch)
                      if status == E.PREEMPTED else -1)

    def _sealer_of(self, log_id: int, epoch: int) -> int:
        """The node whose seal covers ``epoch`` of ``log_id``, if this node saw it (-1)."""
        sealer = self._sealers.get(log_id)
        return sealer[1] if sealer is not None and sealer[0] >= epoch else -1

    def on_connection_closed(self, conn: Peer) -> None:
        self._paused.discard(conn)

    # -- RELEASE ----------------------------------------------------------------------------
    def last_released(self, log_id: int) -> int:
        """The last released LSN of ``log_id`` this node knows of (0 if none)."""
        lsn = self._released.get(log_id)
        if lsn is None:
            lsn = self.db.last_released(log_id) if self.db is not None else 0
            self._released.set(log_id, 0, lsn)
        return lsn

    def _on_release(self, conn: Peer, msg: Release) -> None:
        self._check_node(conn)
        self._release(msg.log_id, msg.lsn, msg.epoch)

    def _on_release_batch(self, conn: Peer, msg: ReleaseBatch) -> None:
        self._check_node(conn)
        for log_id, lsn, epoch in zip(msg.log_ids.tolist(), msg.lsns.tolist(),
                                      msg.epochs.tolist(), strict=True):
            self._release(log_id, lsn, epoch)

    @staticmethod
    def _check_node(conn: Peer) -> None:
        if conn.peer_role != "node":
            raise LogDeviceError(E.ACCESS, "only nodes may release records")

    def _release(self, log_id: int, lsn: int, epoch: int) -> None:
        if not self.node.config.has_log(log_id) or lsn <= self.last_released(log_id):
            return
        if epoch_of(lsn) > epoch:  # a sequencer releases records of its epoch, or older
            log.warning("log %d: dropping a RELEASE of %#x from the sequencer of epoch %d",
                        log_id, lsn, epoch)
            return
        if not self.epochs.admits(log_id, epoch):
            self.node.loop.create_task(self._release_if_issued(log_id, lsn, epoch))
            return
        if self.purger is not None and self.purger.must_wait(log_id, epoch):
            held = self._held.get(log_id)
            if held is None or held < (lsn, epoch):
                self._held[log_id] = (lsn, epoch)
            return
        self._released.set(log_id, 0, lsn)
        if self.db is not None:
            self._dirty[log_id] = lsn
            if self._persist_handle is None and not self._stopping:
                self._persist_handle = self.node.loop.call_later(PERSIST_INTERVAL,
                                                                 self._persist_soon)
        waiters = self._release_waiters.get(log_id)
        if waiters:
            for want, fut in waiters:
                if want <= lsn and not fut.done():
                    fut.set_result(None)
        self.node.notify_release(log_id, lsn)

    async def _released_up_to(self, log_id: int, lsn: int, timeout: float) -> bool:
        """Whether the release pointer of ``log_id`` reaches ``lsn`` within ``timeout``."""
        if self.last_released(log_id) >= lsn:
            return True
        fut = self.node.loop.create_future()
        entry = (lsn, fut)
        self._release_waiters.setdefault(log_id, []).append(entry)
        try:
            await asyncio.wait_for(fut, timeout)
            return True
        except TimeoutError:
            return False
        finally:
            waiters = self._release_waiters.get(log_id)
            if waiters is not None and entry in waiters:
                waiters.remove(entry)
            if not waiters:
                self._release_waiters.pop(log_id, None)

    async def _release_if_issued(self, log_id: int, lsn: int, epoch: int) -> None:
        """A RELEASE from an epoch newer than the store had issued when last read: read
        it again (a sequencer may have just activated), and drop the RELEASE if the store
        has not issued that epoch (a peer made it up)."""
        try:
            await self.epochs.fresh(log_id)
        except LogDeviceError as exc:
            log.warning("log %d: cannot check a RELEASE's epoch %d: %s", log_id, epoch, exc)
            return
        if self.epochs.admits(log_id, epoch):
            self._release(log_id, lsn, epoch)
        else:
            log.warning("log %d: dropping a RELEASE of epoch %d: the epoch store has not "
                        "issued it", log_id, epoch)

    def _on_purged(self, log_id: int) -> None:
        held = self._held.pop(log_id, None)
        if held is not None:
            self._release(log_id, *held)

    def _persist_soon(self) -> None:
        self._persist_handle = None
        if self._persisting is None:
            self._persisting = asyncio.ensure_future(self._persist_now())

    async def _persist_now(self) -> None:
        try:
            while self._dirty and self.db is not None:
                dirty, self._dirty = self._dirty, {}
                await self.node.loop.run_in_executor(self._meta_exec, self._persist, dirty)
        except LogDeviceError as exc:
            log.error("persisting last-released pointers failed: %s", exc)
        finally:
            self._persisting = None

    def _persist(self, dirty: dict[int, int]) -> None:
        assert self.db is not None
        self.db.set_last_released_many(dirty)

    # -- SEAL -------------------------------------------------------------------------------
    def _on_seal(self, conn: Peer, msg: Seal) -> None:
        status = self.node_request_status(conn, msg.log_id)
        if status != E.OK:
            conn.send(self._sealed(msg, status))
            return
        self.node.loop.create_task(self._seal(conn, msg))

    def _sealed(self, msg: Seal, status: E, **kw: int) -> Sealed:
        kw.setdefault("seal_epoch", msg.seal_epoch)
        return Sealed(request_id=msg.request_id, status=status, log_id=msg.log_id,
                      node_index=self.node.index, epoch=msg.epoch or msg.seal_epoch, **kw)

    async def _seal(self, conn: Peer, msg: Seal) -> None:
        db = self.db
        try:
            if not await self.epochs.admits_fresh(msg.log_id, max(msg.seal_epoch, msg.epoch)):
                log.warning("refusing a SEAL of log %d epoch %d from %r: the epoch store has "
                            "not issued it", msg.log_id, msg.seal_epoch, conn)
                conn.send(self._sealed(msg, E.INVALID_PARAM))
                return
        except LogDeviceError as exc:
            log.warning("log %d: cannot read the epoch store to check a SEAL: %s",
                        msg.log_id, exc)
            conn.send(self._sealed(msg, E.AGAIN))
            return
        try:
            assert db is not None
            sealed = await self.node.loop.run_in_executor(self._meta_exec, db.seal,
                                                          msg.log_id, msg.seal_epoch)
            if sealed > msg.seal_epoch:
                conn.send(self._sealed(msg, E.PREEMPTED, seal_epoch=sealed))
                return
            known = self._sealers.get(msg.log_id)
            if conn.peer_node is not None and (known is None or known[0] <= msg.seal_epoch):
                self._sealers[msg.log_id] = (msg.seal_epoch, conn.peer_node)
                if self.node.has_role("sequencer"):  # our own sequencer may be the one sealed
                    self.node.role("sequencer").sealed_here(msg.log_id, msg.seal_epoch,
                                                            conn.peer_node)
            if self.committer is not None:
                await self.committer.flush()  # STOREs accepted before the seal are on disk
            epoch = msg.epoch or msg.seal_epoch
            lng = self._lng.get((msg.log_id, epoch), 0)
            released = self.last_released(msg.log_id)
            if epoch_of(released) >= epoch:
                lng = max(lng, released)
            tail = db.tail(msg.log_id)
            if epoch_of(tail) > epoch:
                max_seen = compose(epoch, ESN_MAX)  # unknown: something may be there
            else:
                max_seen = tail if epoch_of(tail) == epoch else 0
        except LogDeviceError as exc:
            conn.send(self._sealed(msg, exc.status))
            return
        conn.send(self._sealed(msg, E.OK, last_known_good=lng, max_seen_lsn=max_seen))

    def _on_check_seal(self, conn: Peer, msg: CheckSeal) -> None:
        """How far the log is sealed here: a sequencer checks it was not preempted
        before it answers a tail.  A closed epoch (recovery decided it) counts as
        sealed, as it does for STOREs."""
        status = self.node_request_status(conn, msg.log_id)
        if status != E.OK:
            conn.send(SealState(request_id=msg.request_id, status=status, log_id=msg.log_id,
                                node_index=self.node.index))
            return
        assert self.db is not None  # node_request_status said DISABLED otherwise
        sealed = self.db.sealed_epoch(msg.log_id)
        if self.purger is not None:
            sealed = max(sealed, self.purger.clean_epoch(msg.log_id))
        conn.send(SealState(request_id=msg.request_id, status=E.OK, log_id=msg.log_id,
                            node_index=self.node.index, seal_epoch=sealed,
                            sealed_by=self._sealer_of(msg.log_id, sealed) if sealed else -1))

    def _on_get_writer_blobs(self, conn: Peer, msg: GetWriterBlobs) -> None:
        """The blobs of idempotent writers held here since ``since_ms``: a new sequencer
        learns which retried blobs are stored already.  Served once this node caught up
        with the recoveries before the sequencer's epoch (as a release would wait), so no
        overruled copy is named; never from copies being rebuilt."""
        def refuse(status: E) -> None:
            conn.send(WriterBlobs(request_id=msg.request_id, status=status,
                                  log_id=msg.log_id, node_index=self.node.index))

        status = self.node_request_status(conn, msg.log_id)
        if status == E.OK and self._rebuilding is not None \
                and self._rebuilding.refuses_stores():
            status = E.REBUILDING
        if status == E.OK and self.purger is not None \
                and self.purger.must_wait(msg.log_id, msg.epoch):
            status = E.AGAIN
        if status != E.OK:
            refuse(status)
            return
        self._run_query(
            conn, msg, self._read_exec,
            lambda db: db.writer_blobs(msg.log_id, msg.since_ms),
            lambda r, st: WriterBlobs(
                request_id=msg.request_id, status=st, log_id=msg.log_id,
                node_index=self.node.index, lsns=r.lsns, producers=r.producers,
                seqs=r.seqs, timestamps=r.timestamps, checksums=r.checksums)
            if r is not None else
            WriterBlobs(request_id=msg.request_id, status=st, log_id=msg.log_id,
                        node_index=self.node.index))

    # -- admin queries ----------------------------------------------------------------------
    def _check_query(self, log_id: int) -> E:
        if not self.node.config.has_log(log_id):
            return E.NOTFOUND
        if not self.enabled or self.db is None:
            return E.DISABLED
        return E.OK

    def _run_query(self, conn: Peer, request: Any, executor: ThreadPoolExecutor,
                   work: Any, reply: Any, refreshed: bool = False) -> None:
        """Run ``work(db)`` in ``executor``; send ``reply(result)`` or an error reply."""
        status = self._check_query(request.log_id)
        if status == E.NOTFOUND and not refreshed:
            def again() -> None:
                if not conn.closed:
                    self._run_query(conn, request, executor, work, reply, refreshed=True)

            if self.node.after_fresh_logs_config(again):
                return  # a log created a moment ago? decided after a fresh read
        if status != E.OK:
            conn.send(reply(None, status))
            return
        db = self.db

        def done(fut: asyncio.Future[Any]) -> None:
            exc = fut.exception()
            if exc is None:
                conn.send(reply(fut.result(), E.OK))
            else:
                if not isinstance(exc, LogDeviceError):
                    log.error("%s failed", type(request).__name__, exc_info=exc)
                conn.send(reply(None, getattr(exc, "status", E.FAILED)))

        self.node.loop.run_in_executor(executor, work, db).add_done_callback(done)

    def _on_trim(self, conn: Peer, msg: Trim) -> None:
        released = self.last_released(msg.log_id)
        # 0: this node holds none of the log's records (not in its nodeset): nothing to
        # protect here.
        if msg.force or released == 0 or msg.lsn <= released:
            self._trim(conn, msg)
            return
        self.node.loop.create_task(self._trim_after_release(conn, msg))

    async def _trim_after_release(self, conn: Peer, msg: Trim) -> None:
        """A trim past the release pointer this node knows: the client checked the tail,
        so a RELEASE may still be on its way; past ``TRIM_RELEASE_WAIT`` it is a trim
        past the tail, refused (an admin may force it)."""
        if await self._released_up_to(msg.log_id, msg.lsn, TRIM_RELEASE_WAIT):
            self._trim(conn, msg)
            return
        log.warning("refusing a trim of log %d up to %#x, past its tail %#x, from %r",
                    msg.log_id, msg.lsn, self.last_released(msg.log_id), conn)
        conn.send(Trimmed(request_id=msg.request_id, status=E.TOOBIG, log_id=msg.log_id))

    def _trim(self, conn: Peer, msg: Trim) -> None:
        self._run_query(
            conn, msg, self._meta_exec, lambda db: db.trim(msg.log_id, msg.lsn),
            lambda r, st: Trimmed(request_id=msg.request_id, status=st, log_id=msg.log_id,
                                  trim_point=r or 0))

    def _on_get_head(self, conn: Peer, msg: GetHead) -> None:
        def work(db: LogsDB) -> tuple[int, int]:
            trim = db.trim_point(msg.log_id)
            first = db.read_records(msg.log_id, trim + 1, max_records=1, max_bytes=1)
            ts = int(first.timestamps[0]) if len(first) else 0
            return trim, ts

        self._run_query(
            conn, msg, self._read_exec, work,
            lambda r, st: Head(request_id=msg.request_id, status=st, log_id=msg.log_id,
                               trim_point=r[0] if r else 0, timestamp=r[1] if r else 0))

    def _on_find_time(self, conn: Peer, msg: FindTime) -> None:
        def work(db: LogsDB) -> tuple[int, int]:
            hi = db.find_time(msg.log_id, msg.timestamp)
            tail = max(db.tail(msg.log_id), db.trim_point(msg.log_id))
            if hi > tail:  # nothing here at or after the time
                return tail, LSN_MAX
            return hi - 1, hi

        self._run_query(
            conn, msg, self._read_exec, work,
            lambda r, st: FindTimeReply(request_id=msg.request_id, status=st,
                                        log_id=msg.log_id, lo=r[0] if r else 0,
                                        hi=r[1] if r else 0))

    def _on_data_size(self, conn: Peer, msg: DataSize) -> None:
        self._run_query(
            conn, msg, self._read_exec,
            lambda db: db.data_size(msg.log_id, msg.start_ms, msg.end_ms),
            lambda r, st: DataSizeReply(request_id=msg.request_id, status=st,
                                        log_id=msg.log_id, size=r or 0))

    # -- many logs at once -----------------------------------------------------------------
    def _many_logs_status(self) -> E:
        if self._stopping:
            return E.SHUTDOWN
        if not self.enabled or self.db is None:
            return E.DISABLED
        return E.OK

    def _answer_in_executor(self, conn: Peer, request: Any, work: Any, reply: Any) -> None:
        """Run ``work(db)`` in the read executor; send ``reply(result)``, or the failure's
        status for the whole request."""
        status = self._many_logs_status()
        if status != E.OK:
            conn.send(reply(None, status))
            return

        def done(fut: asyncio.Future[Any]) -> None:
            exc = fut.exception()
            if exc is None:
                conn.send(reply(fut.result(), E.OK))
                return
            if not isinstance(exc, LogDeviceError):
                log.error("%s failed", type(request).__name__, exc_info=exc)
            conn.send(reply(None, getattr(exc, "status", E.FAILED)))

        self.node.loop.run_in_executor(self._read_exec, work, self.db).add_done_callback(done)

    def _on_get_log_summaries(self, conn: Peer, msg: GetLogSummaries) -> None:
        log_ids = msg.log_ids.tolist()
        has_log = self.node.config.has_log
        # Release pointers live on this loop; read them here, not in the executor.
        released = np.array([self.last_released(x) if has_log(x) else 0 for x in log_ids],
                            np.uint64)
        times = msg.find_times.tolist()

        def reply(r: summaries.Summaries | None, status: E) -> LogSummaries:
            if r is None:
                return LogSummaries(request_id=msg.request_id, status=status,
                                    node_index=self.node.index)
            return LogSummaries(
                request_id=msg.request_id, status=status, node_index=self.node.index,
                log_ids=msg.log_ids, statuses=np.where(r.ok, int(E.OK), int(E.NOTFOUND)),
                trim_points=r.trim_points, last_released=np.where(r.ok, released, 0),
                local_tails=r.local_tails, min_timestamps=r.min_timestamps,
                max_timestamps=r.max_timestamps, nbytes=r.nbytes, find_lo=r.find_lo,
                find_hi=r.find_hi)

        self._answer_in_executor(conn, msg, lambda db: summaries.log_summaries(
            db, log_ids, has_log, times, msg.size_from_ms, msg.size_to_ms), reply)

    def _on_get_record_rows(self, conn: Peer, msg: GetRecordRows) -> None:
        log_ids = msg.log_ids.tolist()
        has_log = self.node.config.has_log
        known = np.array([has_log(x) for x in log_ids], bool)
        # A log not in the config is listed as empty; its status says so.
        his = np.where(known, msg.his, 0).astype(np.uint64)
        los = np.where(known, msg.los, 1).astype(np.uint64)

        def reply(r: summaries.RowsFound | None, status: E) -> RecordRows:
            if r is None:
                return RecordRows(request_id=msg.request_id, status=status,
                                  node_index=self.node.index)
            return RecordRows(
                request_id=msg.request_id, status=status, node_index=self.node.index,
                log_ids=msg.log_ids, statuses=np.where(known, int(E.OK), int(E.NOTFOUND)),
                next_lsns=r.next_lsns, record_logs=r.record_logs, lsns=r.lsns, rows=r.rows)

        self._answer_in_executor(conn, msg, lambda db: summaries.record_rows(
            db, log_ids, los.tolist(), his.tolist(), msg.max_rows, msg.max_records), reply)
