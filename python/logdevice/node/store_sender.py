"""From the sequencers' ``SendStore`` / ``Release`` actions to STORE and RELEASE frames.

Sequencers emit one ``SendStore`` per record and copyset member.  ``StoreSender`` queues
them during a loop turn and, at the end of the turn, sends one STORE frame per storage
node, log and epoch: columns as numpy arrays, payloads back to back in one
buffer.  It remembers what each STORE carried (``outstanding``: the sequencer, LSNs and
waves, keyed by node and request id) because STORED only echoes the request id and the
statuses; ``take_reply`` turns a STORED back into ``(node, lsn, wave, status)`` tuples for
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

from logdevice.errors import E
from logdevice.protocol import RecordFlag, Release, ReleaseBatch, Store, Stored
from logdevice.sequencer import SendStore

if TYPE_CHECKING:
    from logdevice.node.server import Node
    from logdevice.sequencer import Sequencer

log = logging.getLogger("logdevice.node.store_sender")

#: Seconds after which an unanswered STORE is forgotten (its wave timed out long ago).
FORGET_AFTER = 120.0
#: Seconds before re-sending the RELEASEs a backlogged (but connected) link dropped.
RELEASE_RETRY = 0.5
_CHECKSUM = int(RecordFlag.CHECKSUM)
_NO_CHECKSUMS = np.empty(0, np.uint32)
_NO_CHECKSUMS.flags.writeable = False


class Outstanding(NamedTuple):
    seq: Sequencer
    lsns: np.ndarray
    waves: np.ndarray
    sent_at: float


class StoreSender:
    """Batches STOREs and RELEASEs per loop turn.

    Parameters
    ----------
    node : Node
    payload_of : callable(request_id) -> (payload, checksum) or None
        The payload (and client crc32c) kept for an append; None once it was answered.
    sequencer_of : callable(log_id, epoch) -> Sequencer or None
        Whose STOREs these are; epoch recovery's driver stands in for the sequencer of
        an epoch it repairs (its ``recovery_epoch`` then goes into the STORE).
    """

    def __init__(self, node: Node, payload_of: Callable[[Any], tuple[Any, int] | None],
                 sequencer_of: Callable[[int, int], Sequencer | None]) -> None:
        self.node = node
        self.payload_of = payload_of
        self.sequencer_of = sequencer_of
        self._stores: list[SendStore] = []
        self._releases: dict[int, dict[int, tuple[int, int]]] = {}  # node -> log -> (lsn, epoch)
        self._scheduled = False
        self._retry: asyncio.TimerHandle | None = None  # re-sends dropped RELEASEs
        self._next_id = 1
        self.outstanding: OrderedDict[tuple[int, int], Outstanding] = OrderedDict()
        # Figures.
        self.frames = 0
        self.records = 0

    # -- queueing ---------------------------------------------------------------------------
    def store(self, action: SendStore) -> None:
        self._stores.append(action)
        self._schedule()

    def store_many(self, actions: list[SendStore]) -> None:
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
            now = self.node.loop.time()
            groups: dict[tuple[int, int, int], list[SendStore]] = {}  # (node, log, epoch)
            for a in stores:
                key = (a.node, a.log_id, a.lsn >> 32)
                group = groups.get(key)
                if group is None:
                    groups[key] = [a]
                else:
                    group.append(a)
            for (node, log_id, epoch), group in groups.items():
                self._send_store(node, log_id, epoch, group, now)
            # The STOREs are on the appends' critical path: they leave now, not a turn later.
            self.node.flush_nodes({node for node, _, _ in groups})
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

    def _send_store(self, node: int, log_id: int, epoch: int, actions: list[SendStore],
                    now: float) -> None:
        seq = self.sequencer_of(log_id, epoch)
        if seq is None:
            return
        payload_of = self.payload_of
        entries = [payload_of(a.request_id) for a in actions]
        if None in entries:  # answered meanwhile (the sequencer was deactivated)
            kept = [(a, e) for a, e in zip(actions, entries, strict=True) if e is not None]
            if not kept:
                return
            actions = [a for a, _ in kept]
            entries = [e for _, e in kept]
        if len(actions) == 1:
            self._send_one(node, log_id, epoch, seq, actions[0], entries[0], now)  # type: ignore[arg-type]
            return
        # SendStore fields: node, log_id, lsn, wave, copyset, timestamp, flags, lng, rid
        cols = list(zip(*actions, strict=True))
        lsns = np.array(cols[2], np.uint64)
        n = len(lsns)
        order = None
        if n > 1 and bool(np.any(lsns[1:] <= lsns[:-1])):
            # Retries interleaved with new records: sort; a later wave of an LSN wins.
            latest = {lsn: i for i, lsn in enumerate(cols[2])}
            order = np.array([latest[k] for k in sorted(latest)], np.intp)
            lsns = lsns[order]
        waves = np.array(cols[3], np.uint32)
        try:
            copysets = np.array(cols[4], np.int16)
            if copysets.ndim != 2:
                raise ValueError("ragged")
        except ValueError:  # copysets of different sizes: pad with -1
            width = max(map(len, cols[4]))
            copysets = np.full((n, width), -1, np.int16)
            for i, cs in enumerate(cols[4]):
                copysets[i, : len(cs)] = cs
        timestamps = np.array(cols[5], np.int64)
        flags = np.array(cols[6], np.uint32)
        payloads = [e[0] for e in entries]  # type: ignore[index]  # None filtered out
        checksums = np.array([e[1] for e in entries], np.uint32)  # type: ignore[index]
        if order is not None:
            waves, copysets, timestamps, flags, checksums = (
                waves[order], copysets[order], timestamps[order], flags[order],
                checksums[order])
            payloads = [payloads[i] for i in order.tolist()]
            n = len(lsns)
        offsets = np.zeros(n + 1, np.uint64)
        np.cumsum(np.fromiter(map(len, payloads), np.uint64, n), out=offsets[1:])
        if not (flags & np.uint32(_CHECKSUM)).any():
            checksums = np.empty(0, np.uint32)
        rid = self._next_id
        self._next_id += 1
        msg = Store(
            request_id=rid, log_id=log_id, epoch=epoch, last_known_good=max(cols[7]),
            recovery_epoch=getattr(seq, "recovery_epoch", 0),
            lsns=lsns, timestamps=timestamps, flags=flags,
            waves=waves, copysets=copysets, payload_offsets=offsets,
            payloads=b"".join(payloads), checksums=checksums)
        if self.node.send_to_node(node, msg):
            self.outstanding[(node, rid)] = Outstanding(seq, lsns, waves, now)
            self.frames += 1
            self.records += n
        # Not sent (link down): the wave times out or is moved by on_node_down.

    def _send_one(self, node: int, log_id: int, epoch: int, seq: Sequencer, a: SendStore,
                  entry: tuple[Any, int], now: float) -> None:
        """``_send_store`` of a single record (the common case below a few thousand
        appends/s): the same frame, from a handful of one-element arrays, and the payload
        as it came (not copied)."""
        payload, checksum = entry
        lsns = np.array((a.lsn,), np.uint64)
        waves = np.array((a.wave,), np.uint32)
        flags = np.array((a.flags,), np.uint32)
        rid = self._next_id
        self._next_id += 1
        msg = Store(
            request_id=rid, log_id=log_id, epoch=epoch, last_known_good=a.lng,
            recovery_epoch=getattr(seq, "recovery_epoch", 0),
            lsns=lsns, timestamps=np.array((a.timestamp,), np.int64), flags=flags,
            waves=waves, copysets=np.array((a.copyset,), np.int16),
            payload_offsets=np.array((0, memoryview(payload).nbytes), np.uint64),
            payloads=payload,
            checksums=(np.array((checksum,), np.uint32) if a.flags & _CHECKSUM
                       else _NO_CHECKSUMS))
        if self.node.send_to_node(node, msg):
            self.outstanding[(node, rid)] = Outstanding(seq, lsns, waves, now)
            self.frames += 1
            self.records += 1

    # -- replies ----------------------------------------------------------------------------
    def take_reply(self, msg: Stored, node: int) -> tuple[Sequencer | None, list[tuple]]:
        """The sequencer and ``(node, lsn, wave, status)`` tuples a STORED answers."""
        entry = self.outstanding.pop((node, msg.request_id), None)
        if entry is None:
            return None, []
        lsns, waves = entry.lsns.tolist(), entry.waves.tolist()
        if len(msg.statuses):
            if len(msg.lsns) == len(lsns) and np.array_equal(msg.lsns, entry.lsns):
                statuses = msg.statuses.tolist()
            else:  # answered in another order or a subset: match by LSN
                by_lsn = dict(zip(msg.lsns.tolist(), msg.statuses.tolist(), strict=True))
                statuses = [by_lsn.get(x, int(E.FAILED)) for x in lsns]
            return entry.seq, [(node, x, w, s)
                               for x, w, s in zip(lsns, waves, statuses, strict=True)]
        status = msg.status
        return entry.seq, [(node, x, w, status) for x, w in zip(lsns, waves, strict=True)]

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
