"""From the sequencers' ``StoreWave`` / ``SendStore`` / ``Release`` actions to STORE and
RELEASE frames.

The role's sequencers emit one ``StoreWave`` per record and wave (epoch recovery one
``SendStore`` per copy).  ``StoreSender`` queues them during a loop turn and, at the end
of the turn, makes one STORE per storage node, log and epoch: columns as numpy
arrays, payloads back to back in one buffer, assembled by ``ldcore.storecols`` (a record
alone in its STORE sends the same columns to every member of its copyset).  A node gets
its STOREs of the turn in one STORE_LOGS frame when there are several and its
HELLO_REPLY said it understands them (``PeerFeature.STORE_LOGS``; an older node gets one
frame per STORE): each keeps its own request id, so the bookkeeping below is per STORE
either way.  It remembers
what each STORE carried (``outstanding``: the sequencer, LSNs and waves, keyed by node
and request id) because STORED only echoes the request id and the statuses;
``take_reply`` turns a STORED back into ``(node, lsn, wave, status)`` tuples for
``Sequencer.on_stored_many``.  Entries of STOREs that are never answered (the node died;
its link dropped them) are forgotten when the link goes down or after ``FORGET_AFTER``.

``Release`` actions are merged per node (the highest LSN per log wins) and leave once per
turn as a RELEASE (one log) or a RELEASE_BATCH (several).  An idle log gets no later
release to make up for a lost one, so none is given up: a RELEASE the link refused while
up (its write buffer was full) is tried again ``RELEASE_RETRY`` later, and one refused
because the link was down is re-sent by the sequencer role when the link comes back.
(Holding RELEASEs back a couple of milliseconds to ride with the next STORE frame saved no
measurable append latency or CPU at 1,000 appends/s, and cost tailing readers as much:
they are not held.)
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ldcore.lsn import epoch_of
from ldcore.storecols import store_columns, store_logs_columns, stored_replies
from logdevice.errors import E
from logdevice.protocol import (
    PeerFeature,
    RecordFlag,
    Release,
    ReleaseBatch,
    Store,
    Stored,
    StoreLogs,
)
from logdevice.sequencer import SendStore, Sequencer, StoreWave

if TYPE_CHECKING:
    from logdevice.node.roles.role import NodeServices

log = logging.getLogger("logdevice.node.roles.store_sender")

#: Seconds after which an unanswered STORE is forgotten (its wave timed out long ago).
FORGET_AFTER = 120.0
#: Seconds before re-sending the RELEASEs a backlogged (but connected) link dropped.
RELEASE_RETRY = 0.5
_CHECKSUM = int(RecordFlag.CHECKSUM)
_PREEMPTED = int(E.PREEMPTED)


class Outstanding(NamedTuple):
    seq: Sequencer
    lsns: np.ndarray
    waves: np.ndarray
    sent_at: float


class StoreSender:
    """Batches STOREs and RELEASEs per loop turn.

    Parameters
    ----------
    node : NodeServices
    payload_of : callable(request_id) -> (payload, checksum) or None
        The payload (and client crc32c) kept for an append; None once it was answered.
    sequencer_of : callable(log_id, epoch) -> Sequencer or None
        Whose STOREs these are; epoch recovery's driver stands in for the sequencer of
        an epoch it repairs (its ``recovery_epoch`` then goes into the STORE).
    """

    def __init__(self, node: NodeServices, payload_of: Callable[[Any], tuple[Any, int] | None],
                 sequencer_of: Callable[[int, int], Sequencer | None]) -> None:
        self.node = node
        self.payload_of = payload_of
        self.sequencer_of = sequencer_of
        self._stores: list[SendStore | StoreWave] = []
        self._releases: dict[int, dict[int, tuple[int, int]]] = {}  # node -> log -> (lsn, epoch)
        self._scheduled = False
        self._retry: asyncio.TimerHandle | None = None  # re-sends dropped RELEASEs
        self._next_id = 1
        self.outstanding: OrderedDict[tuple[int, int], Outstanding] = OrderedDict()
        # Figures.
        self.frames = 0  # STORE and STORE_LOGS frames sent
        self.stores = 0  # STOREs sent (one per node, log and epoch per turn)
        self.records = 0

    # -- queueing ---------------------------------------------------------------------------
    def store(self, action: SendStore) -> None:
        self._stores.append(action)
        self._schedule()

    def store_many(self, actions: list[SendStore | StoreWave]) -> None:
        """Queue ``SendStore``s (one member each) and ``StoreWave``s (every member of the
        copyset), in order."""
        if actions:
            self._stores += actions
            self._schedule()

    def release(self, log_id: int, lsn: int, nodes: Iterable[int], epoch: int) -> None:
        """RELEASE up to ``lsn`` from the sequencer of ``epoch`` to ``nodes``."""
        for n in nodes:
            self._merge_release(n, log_id, lsn, epoch)
        self._schedule()

    def _merge_release(self, node: int, log_id: int, lsn: int, epoch: int) -> None:
        per_node = self._releases.setdefault(node, {})
        old = per_node.get(log_id)
        if old is None or old[0] < lsn:
            per_node[log_id] = (lsn, max(epoch, old[1] if old else 0))

    def _schedule(self) -> None:
        if not self._scheduled:
            self._scheduled = True
            self.node.loop.call_soon(self.flush)

    # -- sending ----------------------------------------------------------------------------
    def flush(self) -> None:
        """Send everything queued, now."""
        self._scheduled = False
        stores, self._stores = self._stores, []
        if stores:
            # (node, log, epoch) -> the waves that node gets, as StoreWave-shaped tuples
            groups: dict[tuple[int, int, int], list[tuple]] = {}
            for a in stores:
                if type(a) is StoreWave:
                    wave: tuple = a
                    members = a.copyset
                else:  # a SendStore: one member
                    wave = a[1:]
                    members = (a[0],)
                log_id, epoch = wave[0], epoch_of(wave[1])
                for node in members:
                    key = (node, log_id, epoch)
                    group = groups.get(key)
                    if group is None:
                        groups[key] = [wave]
                    else:
                        group.append(wave)
            now = self.node.loop.time()
            shared: dict[int, tuple] = {}
            owners: dict[tuple[int, int], Any] = {}
            per_node: dict[int, list[tuple[int, int, list[tuple]]]] = {}
            for (node, log_id, epoch), group in groups.items():
                per_node.setdefault(node, []).append((log_id, epoch, group))
            for node, node_groups in per_node.items():
                if len(node_groups) > 1 and all(len(g) == 1 for _, _, g in node_groups) \
                        and self._takes_store_logs(node):
                    self._send_one_record_stores(node, node_groups, owners, now)
                    continue
                built_stores = []
                for log_id, epoch, group in node_groups:
                    built = self._build_store(log_id, epoch, group, shared, owners)
                    if built is not None:
                        built_stores.append(built)
                self._send_stores(node, built_stores, now)
            # The STOREs are on the appends' critical path: they leave now, not a turn later.
            self.node.flush_nodes(per_node)
        releases, self._releases = self._releases, {}
        for node, logs in releases.items():
            if len(logs) == 1:
                ((log_id, (lsn, epoch)),) = logs.items()
                msg: Any = Release(log_id=log_id, lsn=lsn, epoch=epoch)
            else:
                n = len(logs)
                msg = ReleaseBatch(log_ids=np.fromiter(logs.keys(), np.uint64, n),
                                   lsns=np.fromiter((v[0] for v in logs.values()), np.uint64, n),
                                   epochs=np.fromiter((v[1] for v in logs.values()),
                                                      np.uint64, n))
            if not self.node.send_to_node(node, msg):
                self._retry_later(node, logs)

    def _retry_later(self, node: int, logs: dict[int, tuple[int, int]]) -> None:
        link = self.node.link(node)
        if link is None or not link.connected:
            return  # down: the sequencer role re-sends its releases when it comes back
        for log_id, (lsn, epoch) in logs.items():
            self._merge_release(node, log_id, lsn, epoch)
        if self._retry is None:
            self._retry = self.node.loop.call_later(RELEASE_RETRY, self._retry_now)

    def _retry_now(self) -> None:
        self._retry = None
        self.flush()

    def _owner(self, log_id: int, epoch: int, owners: dict[tuple[int, int], Any]
               ) -> tuple[Any, int]:
        """Whose STOREs of ``log_id`` and ``epoch`` these are (None: nobody's any more),
        and its recovery epoch; ``owners`` caches them for the turn."""
        owner = owners.get((log_id, epoch))
        if owner is None:
            seq = self.sequencer_of(log_id, epoch)
            # Only epoch recovery's driver has a recovery epoch.
            owner = owners[(log_id, epoch)] = (
                seq, 0 if seq is None or type(seq) is Sequencer
                else seq.recovery_epoch)  # type: ignore[attr-defined]
        return owner

    def _takes_store_logs(self, node: int) -> bool:
        link = self.node.link(node)
        return link is not None and bool(link.features & PeerFeature.STORE_LOGS)

    def _send_one_record_stores(self, node: int, groups: list[tuple[int, int, list[tuple]]],
                                owners: dict[tuple[int, int], Any], now: float) -> None:
        """A turn's STOREs for ``node`` when each is of one record (a load spread over
        many logs): one STORE_LOGS frame whose columns one kernel call makes, with no
        STORE message per part."""
        waves, entries, seqs, recovery = [], [], [], []
        for log_id, epoch, (wave,) in groups:
            seq, recovery_epoch = self._owner(log_id, epoch, owners)
            entry = None if seq is None else self.payload_of(wave[7])
            if entry is not None:  # (None: answered meanwhile, the sequencer deactivated)
                waves.append(wave)
                entries.append(entry)
                seqs.append(seq)
                recovery.append(recovery_epoch)
        if not waves:
            return
        m = len(waves)
        lsns, stamps, flags, wave_nos, copysets, offsets, payloads, checksums, log_ids, lngs \
            = store_logs_columns(waves, entries, _CHECKSUM)
        rid = self._next_id
        self._next_id += m
        msg = StoreLogs(
            request_ids=np.arange(rid, rid + m, dtype=np.uint64), log_ids=log_ids,
            epochs=lsns >> np.uint64(32), last_known_good=lngs,
            recovery_epochs=np.array(recovery, np.uint64),
            part_ends=np.arange(1, m + 1, dtype=np.uint32), lsns=lsns, timestamps=stamps,
            flags=flags, waves=wave_nos, copysets=copysets, payload_offsets=offsets,
            payloads=payloads, checksums=checksums)
        if not self.node.send_to_node(node, msg):
            return  # (link down: the waves time out or move on_node_down)
        outstanding = self.outstanding
        for i, seq in enumerate(seqs):
            outstanding[(node, rid + i)] = Outstanding(seq, lsns[i:i + 1],
                                                       wave_nos[i:i + 1], now)
        self.frames += 1
        self.stores += m
        self.records += m

    def _build_store(self, log_id: int, epoch: int, group: list[tuple],
                     shared: dict[int, tuple], owners: dict[tuple[int, int], Any]
                     ) -> tuple[Store, Any] | None:
        """The STORE of ``group`` (StoreWave-shaped tuples of one log and epoch) for one
        node, and whose it is (None: nothing left to send).  A wave alone in its frame
        gets the same columns in every member's frame (``shared``, by wave); ``owners``
        caches the sequencer (and recovery epoch) per log and epoch for the turn."""
        seq, recovery_epoch = self._owner(log_id, epoch, owners)
        if seq is None:
            return None
        payload_of = self.payload_of
        if len(group) == 1:
            wave = group[0]
            cols = shared.get(id(wave))
            if cols is None:
                entry = payload_of(wave[7])
                if entry is None:  # answered meanwhile (the sequencer was deactivated)
                    return None
                cols = shared[id(wave)] = store_columns(group, [entry], _CHECKSUM)
        else:
            entries = [payload_of(w[7]) for w in group]
            if None in entries:  # answered meanwhile (the sequencer was deactivated)
                kept = [(w, e) for w, e in zip(group, entries, strict=True) if e is not None]
                if not kept:
                    return None
                group = [w for w, _ in kept]
                entries = [e for _, e in kept]
            cols = store_columns(group, entries, _CHECKSUM)  # type: ignore[arg-type]
        lsns, stamps, flags, waves, copysets, offsets, payloads, checksums, lng = cols
        rid = self._next_id
        self._next_id += 1
        return Store(
            request_id=rid, log_id=log_id, epoch=epoch, last_known_good=lng,
            recovery_epoch=recovery_epoch, lsns=lsns, timestamps=stamps, flags=flags,
            waves=waves, copysets=copysets, payload_offsets=offsets, payloads=payloads,
            checksums=checksums), seq

    def _send_stores(self, node: int, built: list[tuple[Store, Any]], now: float) -> None:
        """Send a turn's STOREs for ``node``: in one STORE_LOGS frame when there are
        several and the node understands it, else one STORE each."""
        if len(built) > 1 and self._takes_store_logs(node):
            if self.node.send_to_node(node, StoreLogs.of([m for m, _ in built])):
                for msg, seq in built:
                    self._sent(node, msg, seq, now)
                self.frames += 1
            return  # not sent (link down): the waves time out or move on_node_down
        for msg, seq in built:
            if self.node.send_to_node(node, msg):
                self._sent(node, msg, seq, now)
                self.frames += 1
        # Not sent (link down): the wave times out or is moved by on_node_down.

    def _sent(self, node: int, msg: Store, seq: Any, now: float) -> None:
        self.outstanding[(node, msg.request_id)] = Outstanding(seq, msg.lsns, msg.waves, now)
        self.stores += 1
        self.records += len(msg.lsns)

    # -- replies ----------------------------------------------------------------------------
    def take_reply(self, msg: Stored, node: int) -> tuple[Sequencer | None, list[tuple], bool]:
        """The sequencer and ``(node, lsn, wave, status)`` tuples a STORED answers, and
        whether any of them is PREEMPTED."""
        entry = self.outstanding.pop((node, msg.request_id), None)
        if entry is None:
            return None, [], False
        replies, preempted = stored_replies(node, entry.lsns, entry.waves, msg.lsns,
                                            msg.statuses, msg.status, _PREEMPTED)
        return entry.seq, replies, preempted

    def forget_node(self, node: int) -> None:
        """The link to ``node`` broke: its STOREs will never be answered."""
        for key in [k for k in self.outstanding if k[0] == node]:
            del self.outstanding[key]

    def forget_old(self, now: float) -> None:
        out = self.outstanding
        while out:
            key, entry = next(iter(out.items()))
            if now - entry.sent_at < FORGET_AFTER:
                break
            del out[key]
