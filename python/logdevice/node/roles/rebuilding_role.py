"""The rebuilding role: every storage node donates its share and takes copies.

Each node reads the event log every ``rebuilding_poll_ms`` (``EpochStore.shard_view``)
and acts on what it says of the rebuilding set and of itself:

- **Refusing STOREs.**  A node in the rebuilding set, or rebuilt and not yet
  acknowledged, or drained, answers sequencer STOREs with REBUILDING: no record
  acknowledged after the set formed can name it.  Recovery's copies are still taken.
  Every node's sequencers leave such nodes out of new copysets (``set_refusing``).
- **Donating.**  A node that is a donor of the current set (not lost itself, not yet
  reported) walks every log it holds: it reads the copyset index in batches, keeps the
  records it donates (``rebuilding.plan.donor_mask``), reads them, picks their amended
  copysets (``plan.amend_copysets``) and sends REBUILD_STORE, payloads included, to the
  nodes that get a new copy; then (all stored) REBUILD_AMEND, copysets only, to the
  surviving members, which amend the copies they hold (``LogsDB.amend_records``: the
  payload is neither sent nor written again; a member that lacks the copy or holds an
  older one asks for it in full), and last it amends its own copy (or, on a drained
  node, flags it DRAINED).  So a copyset never names a node that lacks the record, and a
  donor that dies mid-way finds the record again on restart (its own copy is unchanged).
  It first waits until the log is released up to the tail it is about to scan (the
  records are final then), paces itself to ``rebuilding_rate_bytes_per_s`` and saves its place
  after each batch (``rebuilding.progress``).  When every log is done it appends
  SHARD_IS_REBUILT for the set; once every donor has, the set's nodes are
  AUTHORITATIVE_EMPTY.
- **Acknowledging.**  A node that was rebuilt (not drained) and is running appends
  SHARD_ACK_REBUILT: it is FULLY_AUTHORITATIVE again and takes new records.
- **Aborting.**  A node being rebuilt while down (UNAVAILABLE: the cluster started it
  after the node stayed dead for the grace period) that comes back with its store
  intact appends SHARD_ABORT_REBUILD: it is FULLY_AUTHORITATIVE again, the donors stop,
  and the copies they made meanwhile are extra copies.  One whose store is new or
  damaged has marked itself unrecoverable first (``node.shard_check``), so it never
  aborts.
- **Taking copies.**  REBUILD_STORE from a donor is written as given, replacing a copy
  already held unless that one is newer (a later wave, or written by recovery: the
  donor's was stale), and answered with REBUILD_STORED.  REBUILD_AMEND amends only the
  copies held of the donor's very version (same wave, recovery's or not alike); a newer
  copy is left as it is, and the LSNs not held or held older go back in the answer's
  ``need_copies``.

- **Yielding to appends.**  While appends come in (the node's group committer wrote
  STOREs lately), donors read and send and nodes write copies in small slices, a
  rebuilding write waits for the STOREs queued before it, and after each slice of work
  rebuilding pauses so that it takes at most ``rebuilding_append_share`` of the node's
  time (``rebuilding.throttle.AppendYield``); with appends idle it runs at full speed.

A change of the set (a second node lost mid-way) gives it a new version: a donor drops
its pass and starts one for the new set.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ldcore.lsn import epoch_of
from logdevice.epochstore import (
    SHARD_ABORT_REBUILD,
    SHARD_ACK_REBUILT,
    SHARD_IS_REBUILT,
    AuthoritativeStatus,
    EpochStore,
    RebuildingSet,
)
from logdevice.epochstore.events import ShardView
from logdevice.errors import E, LogDeviceError
from logdevice.node.roles.failure_log import FailureLog
from logdevice.node.roles.role import NodeServices, Peer, Role
from logdevice.protocol import RebuildAmend, RebuildStore, RebuildStored
from logdevice.rebuilding.copies import amend_copies, amend_held, write_copies
from logdevice.rebuilding.plan import (
    EpochPlacement,
    amend_copysets,
    destinations,
    donor_mask,
)
from logdevice.rebuilding.progress import DonorProgress
from logdevice.rebuilding.throttle import AppendYield, ByteRate
from logdevice.security.store import open_cluster_store
from logdevice.storage.batch import RecordBatch
from logdevice.storage.flags import FLAG_DRAINED

if TYPE_CHECKING:
    from logdevice.storage.logsdb import LogsDB

log = logging.getLogger("logdevice.node.rebuilding")

__all__ = ["RebuildingRole"]

#: Seconds a donor waits for a REBUILD_STORED before it sends the batch again.
COPY_TIMEOUT = 30.0
#: Seconds between attempts when copies cannot be placed or sent.
RETRY_DELAY = 1.0
#: Seconds a donor waits for a log's release pointer to reach the tail it scans.
RELEASE_WAIT = 30.0
#: Payload bytes per REBUILD_STORE (well under the frame limit).
MESSAGE_BYTES = 4 << 20
#: Records per REBUILD_AMEND (a few bytes each: flags, wave, copyset).
AMEND_RECORDS = 65536
#: About this many payload bytes per donor batch (fewer records when they are large).
BATCH_BYTES = 16 << 20
#: Batches of one log a donor moves at once.
PIPELINE = 2
#: Seconds a rebuilding write waits, at most, for the STOREs queued before it.
STORE_WAIT = 0.05
PROGRESS_FILE = "rebuilding.json"
EMPTY_LSNS = np.empty(0, np.uint64)


class RebuildingRole(Role):
    """Donates, takes copies, refuses STOREs while rebuilt; see the module docstring."""

    name = "rebuilding"

    def __init__(self, node: NodeServices) -> None:
        super().__init__(node)
        settings = node.config.settings
        self.poll_interval = settings.rebuilding_poll_ms / 1000
        self.batch_records = settings.rebuilding_batch_records
        self.view = ShardView(RebuildingSet(), AuthoritativeStatus.FULLY_AUTHORITATIVE, False)
        self.progress: DonorProgress | None = None
        self.logs_total = 0
        self.copies_taken = 0  # records written for other donors
        self.copies_amended = 0  # copies held here whose copyset other donors amended
        self._rate = ByteRate(settings.rebuilding_rate_bytes_per_s, time.monotonic())
        self._yield = AppendYield(settings.rebuilding_append_share, time.monotonic())
        self._taking: set[asyncio.Task[None]] = set()  # copies being written here
        self._store: EpochStore | None = None
        self._poll_failures = FailureLog(log, f"N{node.index}: reading the event log")
        self._exec = ThreadPoolExecutor(1, thread_name_prefix="rebuild")
        self._write_exec = ThreadPoolExecutor(1, thread_name_prefix="rebuild-write")
        self._poller: asyncio.Task[None] | None = None
        self._donor: asyncio.Task[None] | None = None
        self._donor_version = 0
        self._requests: dict[int, asyncio.Future[RebuildStored]] = {}
        self._ids = itertools.count(1)
        self._stopping = False

    def handlers(self) -> Mapping[type, Any]:
        return {RebuildStore: self._on_rebuild_store, RebuildAmend: self._on_rebuild_amend,
                RebuildStored: self._on_rebuild_stored}

    # -- life cycle -----------------------------------------------------------------------
    async def start(self) -> None:
        await self._poll()  # before the node listens: refuse STOREs from the first one
        self._poller = self.node.loop.create_task(self._poll_loop())

    async def stop(self) -> None:
        self._stopping = True
        for task in (self._poller, self._donor, *self._taking):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        for fut in self._requests.values():
            fut.cancel()

    def close(self) -> None:
        self._exec.shutdown(wait=True)
        self._write_exec.shutdown(wait=True)
        if self._store is not None:
            self._store.close()
            self._store = None

    # -- what the event log says ----------------------------------------------------------
    def refuses_stores(self) -> bool:
        """Whether sequencer STOREs get REBUILDING here now."""
        return self.node.index in self.view.refusing

    def _open_store(self) -> EpochStore:
        if self._store is None:
            self._store = open_cluster_store(self.node.config)
        return self._store

    def _read_view(self) -> ShardView:
        return self._open_store().shard_view(self.node.index)

    async def _poll_loop(self) -> None:
        while True:
            await asyncio.sleep(self.poll_interval)
            try:
                await self._poll()
            except Exception:  # keep following the event log whatever one poll met
                log.exception("N%d: rebuilding poll failed", self.node.index)

    async def _poll(self) -> None:
        try:
            view = await self.node.loop.run_in_executor(self._exec, self._read_view)
        except LogDeviceError as exc:
            self._poll_failures.failed(exc)
            return
        self._poll_failures.succeeded()
        self.view = view
        if self.node.has_role("sequencer"):
            self.node.role("sequencer").set_refusing(view.refusing)
        if not self.node.me.is_storage:
            return
        me, rset = self.node.index, view.rebuilding
        if view.status == AuthoritativeStatus.AUTHORITATIVE_EMPTY and not view.drained:
            await self._append_own(SHARD_ACK_REBUILT, "rebuilt and acknowledged: taking "
                                   "new records again")
        elif view.status == AuthoritativeStatus.UNAVAILABLE and self.node.role("storage").intact:
            await self._append_own(SHARD_ABORT_REBUILD, "came back with its data before "
                                   "its rebuilding finished: rebuilding aborted")
        donor = (rset and me not in rset.lost and me not in rset.done
                 and (rset.donors is None or me in rset.donors))
        if donor and self._donor_version != rset.version:
            await self._cancel_donor()
            self._donor_version = rset.version
            self._donor = self.node.loop.create_task(self._donate(rset))
        elif not donor and self._donor is not None and not self._donor.done():
            await self._cancel_donor()

    async def _cancel_donor(self) -> None:
        task, self._donor = self._donor, None
        self._donor_version = 0
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _append_own(self, kind: str, reason: str) -> None:
        """Append ``kind`` (SHARD_ACK_REBUILT, SHARD_ABORT_REBUILD) for this node."""
        def append() -> int:
            return self._open_store().append_event({"type": kind, "node": self.node.index,
                                                    "reason": reason})
        try:
            await self.node.loop.run_in_executor(self._exec, append)
        except LogDeviceError as exc:
            log.warning("N%d: appending %s: %s", self.node.index, kind, exc)
            return
        log.info("N%d: %s", self.node.index, reason)

    # -- donating -------------------------------------------------------------------------
    def _db(self) -> LogsDB:
        db = self.node.role("storage").db
        if db is None:
            raise LogDeviceError(E.DISABLED, "no local store")
        return db

    async def _run(self, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        return await self.node.loop.run_in_executor(self._exec, lambda: fn(*args, **kw))

    async def _donate(self, rset: RebuildingSet) -> None:
        me = self.node.index
        storage = self.node.role("storage")
        try:
            if storage.committer is not None:
                await storage.committer.flush()  # STOREs taken before refusing are in
            db = self._db()
            path = self.node.config.node_data_dir(me) / PROGRESS_FILE
            progress = await self._run(DonorProgress.load, path, rset.version)
            self.progress = progress
            logs = [x for x in await self._run(db.logs) if self.node.config.has_log(x)]
            self.logs_total = len(logs)
            log.info("N%d: donating for rebuilding set v%d (lost %s, draining %s): %d logs",
                     me, rset.version, sorted(rset.lost), sorted(rset.draining), len(logs))
            for log_id in logs:
                if log_id not in progress.finished_logs:
                    await self._donate_log(db, log_id, rset, progress, path)
                    progress.finished_logs.add(log_id)
                    await self._run(progress.save, path)
            await self._run(self._report_done, rset)
            log.info("N%d: done donating for set v%d: %d records, %d bytes in %.1f s", me,
                     rset.version, progress.records, progress.bytes,
                     time.time() - progress.started)
        except LogDeviceError as exc:
            log.error("N%d: rebuilding set v%d: %s (will retry)", me, rset.version, exc)
            self._donor_version = 0  # the next poll starts over from the saved progress
        except Exception:
            log.exception("N%d: rebuilding set v%d failed (will retry)", me, rset.version)
            self._donor_version = 0

    def _report_done(self, rset: RebuildingSet) -> None:
        """SHARD_IS_REBUILT from this donor, for each node of the set."""
        store = self._open_store()
        for node in sorted(rset.nodes):
            store.append_event({"type": SHARD_IS_REBUILT, "node": node,
                                "donor": self.node.index, "set_version": rset.version})

    async def _wait_released(self, log_id: int, lsn: int) -> None:
        """Until ``log_id`` is released up to ``lsn`` here and the STOREs that came before
        that release are written: the copies up to ``lsn`` are final then (a donor that
        rewrote a copy a later wave was about to replace would undo that wave).  A node
        left out of the log's current nodeset hears no releases: after ``RELEASE_WAIT``
        it goes on with what it has."""
        storage = self.node.role("storage")
        deadline = self.node.loop.time() + RELEASE_WAIT
        while storage.last_released(log_id) < lsn:
            if self.node.loop.time() > deadline:
                log.warning("N%d: log %d is released only up to %#x of %#x here; "
                            "rebuilding its copies as they are", self.node.index, log_id,
                            storage.last_released(log_id), lsn)
                break
            await asyncio.sleep(0.05)
        if storage.committer is not None:
            await storage.committer.flush()

    async def _donate_log(self, db: LogsDB, log_id: int, rset: RebuildingSet,
                          progress: DonorProgress, path: Any) -> None:
        me = self.node.index
        hi = await self._run(db.tail, log_id)
        await self._wait_released(log_id, hi)
        lo = progress.done_lsn.get(log_id, 0) + 1
        size = max(await self._run(db.average_record_size, log_id), 1.0)
        # Up to PIPELINE batches move at once (one is read while another's copies are on
        # the wire); progress advances only past batches that are done, in order.
        moving: collections.deque[tuple[asyncio.Task[None] | None, int]] = \
            collections.deque()
        try:
            while lo <= hi or moving:
                if lo <= hi and len(moving) < PIPELINE:
                    # Smaller batches while appends come in: a read is one unit of work.
                    per_batch = max(16, min(self.batch_records,
                                            int(self._slice_bytes(BATCH_BYTES) / size)))
                    started = time.monotonic()
                    csi = await self._run(db.read_csi, log_id, lo, hi,
                                          max_entries=per_batch)
                    mask = donor_mask(csi.copysets, csi.flags, me, rset)
                    task = None
                    if mask.any():
                        rb = await self._run(db.read_records_at, log_id, csi.lsns[mask])
                        task = self.node.loop.create_task(self._move(db, rb, rset, progress))
                    await self._yield_after(time.monotonic() - started)
                    lo = int(csi.next_lsn) if len(csi) else max(int(csi.next_lsn), lo + 1)
                    moving.append((task, min(lo - 1, hi)))
                    if lo <= hi and (task is None or not task.done()) \
                            and len(moving) < PIPELINE:
                        continue
                first, reached = moving.popleft()
                if first is not None:
                    await first
                progress.done_lsn[log_id] = reached
                await self._run(progress.save, path)
        finally:
            for task, _ in moving:
                if task is not None:
                    task.cancel()

    def _placement(self, log_id: int, rset: RebuildingSet) -> Callable[[int], EpochPlacement]:
        """Where records of each epoch of ``log_id`` may get a new copy now."""
        config = self.node.config
        live = self.node.role("failure_detector").live
        excluded = frozenset(n.index for n in config.nodes
                             if n.storage_weight <= 0 or n.index not in live) | rset.nodes
        locations = {n.index: n.location for n in config.nodes}
        group = config.log_group(log_id)
        cache: dict[int, EpochPlacement] = {}

        def placement(epoch: int) -> EpochPlacement:  # runs in the role's thread
            got = cache.get(epoch)
            if got is None:
                try:
                    meta = self._open_store().metadata_for_epoch(log_id, epoch)
                except LogDeviceError:  # a log the store does not know (yet)
                    meta = None
                if meta is None:
                    nodeset = tuple(n.index for n in config.storage_nodes())
                    replication: Any = group.replication.to_dict()
                else:
                    nodeset, replication = meta.nodeset, dict(meta.replication)
                got = cache[epoch] = EpochPlacement(nodeset, replication, locations,
                                                    excluded)
            return got

        return placement

    async def _move(self, db: LogsDB, rb: RecordBatch, rset: RebuildingSet,
                    progress: DonorProgress) -> None:
        """Copy the records of ``rb`` to the nodes their amended copysets add, then amend
        the surviving copies (no payloads), our own last."""
        me, log_id = self.node.index, rb.log_id
        while True:
            placement = self._placement(log_id, rset)
            new_cs, placed = await self._run(amend_copysets, rb.lsns, rb.copysets, rset,
                                             placement)
            copies, amends = destinations(new_cs, rb.copysets, me)
            if not placed.all():
                log.warning("N%d: log %d: %d records have no eligible node for a new copy "
                            "now; retrying", me, log_id, int((~placed).sum()))
            elif (await self._send(rb, new_cs, copies, rset.version)
                  and await self._send_amends(rb, new_cs, amends, rset.version)):
                break
            await asyncio.sleep(RETRY_DELAY)
        mine = (new_cs == me).any(axis=1)
        flags = rb.flags.copy()
        flags[~mine] |= np.uint32(FLAG_DRAINED)  # a drained node's copy: moved away
        own = np.where(mine[:, None], new_cs, rb.copysets)
        amended = await self._run(amend_copies, db, log_id, rb.lsns, flags, rb.waves, own)
        if not amended.all():  # rewritten since we read it: that newer copy stays as is
            log.info("N%d: log %d: %d of our copies changed while donating; left as they "
                     "are", me, log_id, int((~amended).sum()))
        progress.records += len(rb)
        progress.bytes += rb.nbytes

    async def _send(self, rb: RecordBatch, copysets: np.ndarray,
                    targets: Mapping[int, np.ndarray], set_version: int) -> bool:
        """Send records (rows of ``rb``) with their amended copysets to each target node;
        True when every target stored them."""
        sent = []
        for node, rows in targets.items():
            for part in _chunks(rb, rows, self._slice_bytes(MESSAGE_BYTES)):
                started = time.monotonic()
                sub = rb.take(part)
                delay = self._rate.take(sub.nbytes, time.monotonic())
                if delay > 0:
                    await asyncio.sleep(delay)
                    started = time.monotonic()
                sent.append(self._request(
                    node, RebuildStore, log_id=rb.log_id, set_version=set_version,
                    lsns=sub.lsns, timestamps=sub.timestamps, flags=sub.flags,
                    waves=sub.waves, copysets=copysets[part], payload_offsets=sub.offsets,
                    payloads=sub.payloads.data))
                await self._yield_after(time.monotonic() - started)
        replies = await self._replies(sent)
        return self._all_ok(rb.log_id, "copy", replies)

    async def _send_amends(self, rb: RecordBatch, copysets: np.ndarray,
                           targets: Mapping[int, np.ndarray], set_version: int) -> bool:
        """Amend the copies the target nodes hold (rows of ``rb``) to their new copysets;
        a target that lacks a copy or holds an older one gets the full copy.  True when
        every target amended or stored them."""
        sent = []
        for node, rows in targets.items():
            for part in np.array_split(rows, -(-len(rows) // AMEND_RECORDS)):
                sent.append(self._request(
                    node, RebuildAmend, log_id=rb.log_id, set_version=set_version,
                    lsns=rb.lsns[part], flags=rb.flags[part], waves=rb.waves[part],
                    copysets=copysets[part]))
        replies = await self._replies(sent)
        if not self._all_ok(rb.log_id, "amendment", replies):
            return False
        need: dict[int, list[np.ndarray]] = {}
        for x, reply in zip(sent, replies, strict=True):
            if reply is not None and len(reply.need_copies):
                need.setdefault(x.node, []).append(np.asarray(reply.need_copies, np.uint64))
        if not need:
            return True
        full = {node: np.searchsorted(rb.lsns, np.concatenate(lsns))
                for node, lsns in need.items()}
        log.info("N%d: log %d: %d surviving copies were missing or older; sent in full",
                 self.node.index, rb.log_id, sum(len(x) for x in full.values()))
        return await self._send(rb, copysets, full, set_version)

    def _request(self, node: int, kind: type[RebuildStore | RebuildAmend],
                 **fields: Any) -> _Sent:
        """Send a ``kind`` request with ``fields`` to ``node``; its REBUILD_STORED will
        resolve the future (CONNFAILED at once when it cannot be sent)."""
        rid = next(self._ids)
        fut: asyncio.Future[RebuildStored] = self.node.loop.create_future()
        self._requests[rid] = fut
        if not self.node.send_to_node(node, kind(request_id=rid, **fields)):
            fut.set_result(RebuildStored(request_id=rid, status=E.CONNFAILED,
                                         node_index=node))
        return _Sent(node, rid, fut)

    async def _replies(self, sent: list[_Sent]) -> list[RebuildStored | None]:
        """The answers to requests sent, in order; None where none came in time."""
        if not sent:
            return []
        try:
            await asyncio.wait([x.reply for x in sent], timeout=COPY_TIMEOUT)
        finally:
            for x in sent:
                self._requests.pop(x.request_id, None)
        return [x.reply.result() if x.reply.done() and not x.reply.cancelled() else None
                for x in sent]

    def _all_ok(self, log_id: int, what: str, replies: list[RebuildStored | None]) -> bool:
        statuses = [E.TIMEDOUT if r is None else E(r.status) for r in replies]
        bad = [s for s in statuses if s != E.OK]
        if bad:
            log.warning("N%d: log %d: %d of %d %s batches failed (%s); retrying",
                        self.node.index, log_id, len(bad), len(statuses), what, bad[0].name)
        return not bad

    def _on_rebuild_stored(self, conn: Peer, msg: RebuildStored) -> None:
        fut = self._requests.pop(msg.request_id, None)
        if fut is not None and not fut.done():
            fut.set_result(msg)

    # -- taking copies --------------------------------------------------------------------
    def _copy_status(self, conn: Peer, log_id: int) -> E:
        """Whether this node takes rebuilt copies or amendments of ``log_id`` now."""
        status = self.node.role("storage").node_request_status(conn, log_id)
        if status == E.OK and self._stopping:
            status = E.SHUTDOWN
        elif status == E.OK and self.node.index in self.view.rebuilding.lost:
            status = E.REBUILDING
        return status

    def _on_rebuild_store(self, conn: Peer, msg: RebuildStore) -> None:
        storage = self.node.role("storage")
        status = self._copy_status(conn, msg.log_id)
        if status != E.OK:
            conn.send(RebuildStored(request_id=msg.request_id, status=status,
                                    node_index=self.node.index))
            return
        top = epoch_of(int(msg.lsns.max())) if len(msg.lsns) else 0
        if storage.epochs.admits(msg.log_id, top):
            self._take_copies(conn, msg)
        else:
            self.node.loop.create_task(self._take_copies_if_issued(conn, msg, top))

    async def _take_copies_if_issued(self, conn: Peer, msg: RebuildStore, epoch: int) -> None:
        """Copies of an epoch newer than the store had issued when last read: read it
        again; copies of an epoch it never issued are refused (a peer made them up)."""
        try:
            issued = await self.node.role("storage").epochs.admits_fresh(msg.log_id, epoch)
        except LogDeviceError:
            conn.send(RebuildStored(request_id=msg.request_id, status=E.AGAIN,
                                    node_index=self.node.index))
            return
        if issued:
            self._take_copies(conn, msg)
            return
        log.warning("N%d: refusing rebuilt copies of log %d in epoch %d: the epoch store "
                    "has not issued it", self.node.index, msg.log_id, epoch)
        conn.send(RebuildStored(request_id=msg.request_id, status=E.INVALID_PARAM,
                                node_index=self.node.index))

    def _take_copies(self, conn: Peer, msg: RebuildStore) -> None:
        rb = RecordBatch(msg.log_id, msg.lsns, msg.timestamps, msg.flags, msg.waves,
                         msg.copysets, np.zeros(len(msg.lsns), np.uint32),
                         np.frombuffer(msg.payloads, np.uint8), msg.payload_offsets, 0)
        self._spawn(self._answer(conn, msg, self._write_in_slices(rb)))

    def _on_rebuild_amend(self, conn: Peer, msg: RebuildAmend) -> None:
        status = self._copy_status(conn, msg.log_id)
        if status != E.OK:
            conn.send(RebuildStored(request_id=msg.request_id, status=status,
                                    node_index=self.node.index))
            return
        self._spawn(self._answer(conn, msg, self._run_write(
            amend_held, self._db(), msg.log_id, msg.lsns, msg.flags, msg.waves,
            msg.copysets, sync=self._sync_writes())))

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = self.node.loop.create_task(work)
        self._taking.add(task)
        task.add_done_callback(self._taking.discard)

    def _sync_writes(self) -> bool:
        return self.node.config.settings.append_store_durability == "sync_write"

    async def _run_write(self, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        return await self.node.loop.run_in_executor(self._write_exec,
                                                    lambda: fn(*args, **kw))

    async def _write_in_slices(self, rb: RecordBatch) -> np.ndarray:
        """Write rebuilt copies (``copies.write_copies``); while appends come in, a slice
        at a time, each after the STOREs waiting here are written, with pauses that
        leave appends their share."""
        db, sync = self._db(), self._sync_writes()
        ends = np.cumsum((rb.offsets[1:] - rb.offsets[:-1]).astype(np.int64))
        a = 0
        while a < len(rb):
            limit = self._slice_bytes(MESSAGE_BYTES)
            done = int(ends[a - 1]) if a else 0
            b = max(a + 1, int(np.searchsorted(ends, done + limit, "right")))
            if b < len(rb) or a:
                await self._stores_first()
            started = time.monotonic()
            await self._run_write(write_copies, db, rb.slice(a, b), sync=sync)
            await self._yield_after(time.monotonic() - started)
            a = b
        return EMPTY_LSNS

    async def _answer(self, conn: Peer, msg: RebuildStore | RebuildAmend,
                      work: Awaitable[np.ndarray]) -> None:
        """Do ``work`` (the LSNs it returns need full copies) and answer REBUILD_STORED."""
        need = EMPTY_LSNS
        try:
            need = await work
        except Exception as exc:
            status = getattr(exc, "status", E.FAILED)
            log.error("N%d: writing %d rebuilt copies or amendments of log %d: %s",
                      self.node.index, len(msg.lsns), msg.log_id, exc)
        else:
            status = E.OK
            if isinstance(msg, RebuildStore):
                self.copies_taken += len(msg.lsns)
            else:
                self.copies_amended += len(msg.lsns) - len(need)
        conn.send(RebuildStored(request_id=msg.request_id, status=status,
                                node_index=self.node.index, need_copies=need))

    # -- yielding to appends --------------------------------------------------------------
    def _appends_active(self) -> bool:
        """Are appends coming in here now (rebuilding yields to them)?"""
        now = time.monotonic()
        committer = self.node.role("storage").committer
        if committer is not None:
            self._yield.saw(committer.records, now)
        return self._yield.active(now)

    def _slice_bytes(self, default: int) -> int:
        """Bytes of one unit of rebuilding work now."""
        self._appends_active()
        return self._yield.slice_bytes(default, time.monotonic())

    async def _yield_after(self, worked: float) -> None:
        """Leave appends their share after ``worked`` seconds of rebuilding work."""
        self._appends_active()
        pause = self._yield.pause(worked, time.monotonic())
        if pause > 0:
            await asyncio.sleep(pause)

    async def _stores_first(self) -> None:
        """While appends come in: until the STOREs waiting here are written (at most
        ``STORE_WAIT`` s), so a rebuilding write does not hold them up."""
        committer = self.node.role("storage").committer
        if committer is None or not self._appends_active():
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(committer.flush(), STORE_WAIT)

    # -- progress -------------------------------------------------------------------------
    def metrics_snapshot(self) -> dict[str, Any]:
        """Where this node's donation stands (zeros when it is not donating)."""
        p = self.progress
        rset = self.view.rebuilding
        active = bool(rset) and p is not None and p.set_version == rset.version
        done_logs = len(p.finished_logs) if active and p is not None else 0
        out = {"set_version": rset.version, "rebuilding_nodes": len(rset.nodes),
               "records": p.records if p else 0, "bytes": p.bytes if p else 0,
               "logs_done": done_logs, "logs_total": self.logs_total if active else 0,
               "copies_taken": self.copies_taken, "copies_amended": self.copies_amended,
               "eta_seconds": 0.0,
               "started_seconds": p.started if active and p is not None else 0.0,
               "refusing_stores": int(self.refuses_stores()),
               "refusing_nodes": len(self.view.refusing),
               "log_lsn": dict(p.done_lsn) if active and p is not None else {}}
        if active and p is not None and 0 < done_logs < self.logs_total:
            elapsed = time.time() - p.started
            out["eta_seconds"] = elapsed * (self.logs_total - done_logs) / done_logs
        return out


class _Sent(NamedTuple):
    """A request a donor sent, and the future its REBUILD_STORED resolves."""

    node: int
    request_id: int
    reply: asyncio.Future[RebuildStored]


def _chunks(rb: RecordBatch, rows: np.ndarray, limit: int) -> list[np.ndarray]:
    """``rows`` cut into runs of at most ``limit`` payload bytes each."""
    sizes = (rb.offsets[1:] - rb.offsets[:-1])[rows].astype(np.int64)
    cuts = np.searchsorted(np.cumsum(sizes), np.arange(limit, int(sizes.sum()), limit),
                           "right")
    return [part for part in np.split(rows, cuts) if len(part)]
