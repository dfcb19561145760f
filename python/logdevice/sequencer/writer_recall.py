"""Writer recall: a new sequencer learns which idempotent writers' blobs its log holds.

A sequencer remembers, per writer, which blob sequence numbers it stored and where
(``producers.ProducerTable``), so a retried blob is answered with its first LSN.  That
memory dies with the sequencer; its successor (another node, or this one in a new
epoch) would store a retry again if the first attempt's acknowledgement was lost, and
after two failovers the epoch recovery in between no longer looks at the first epoch at
all.  So before a sequencer takes an idempotent blob, it asks the storage nodes which
writers' blobs they hold with a timestamp inside the idempotence window
(GET_WRITER_BLOBS; every STORE of such a blob also wrote a small index entry, see
``storage.producers``) and remembers them all: whatever epochs the blobs were stored in
and however many sequencers came and went, the log's own copies say.

Enough answers: every stored blob has R copies, so once all but R - 1 of the storage
nodes answered, each blob was named by at least one of them.  The machine waits for that
many (nodes being rebuilt, or without a store, do not count; other refusals and silence
are asked again after ``retry_delay`` / ``ask_timeout``), then a little longer
(``grace``) for the rest, and hands back the union (``Recalled``).  It never gives up:
the sequencer holds idempotent blobs meanwhile (the writers' timeouts bound their wait,
and their retries are recognised once the recall is done).

Sans-I/O: calls return actions; time comes from an injected clock::

    recalls = WriterRecalls(clock=loop.time)
    recalls.start(log_id, epoch, nodes, replication, since_ms)  # -> [SendGetWriterBlobs]
    recalls.on_reply(request_id, node, status, lsns, producers, seqs, timestamps)
    recalls.on_timer()  when  recalls.next_deadline() has passed
    recalls.cancel(log_id)  # the sequencer went away
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable
from typing import NamedTuple

from logdevice.errors import E

__all__ = ["WriterRecalls", "SendGetWriterBlobs", "Recalled"]

#: Refusals that do not change by asking again soon: the node's answer cannot count.
_SETTLED = frozenset({E.REBUILDING, E.DISABLED})


class SendGetWriterBlobs(NamedTuple):
    """Ask ``node`` for the writers' blobs of ``log_id`` since ``since_ms``."""

    node: int
    log_id: int
    epoch: int
    since_ms: int
    request_id: int


class Recalled(NamedTuple):
    """The recall of ``log_id`` for ``epoch`` is done: ``blobs`` are (producer, blob
    sequence number, lsn, timestamp, crc32c of the payload)."""

    log_id: int
    epoch: int
    blobs: list[tuple[int, int, int, int, int]]


class _Recall:
    __slots__ = ("log_id", "epoch", "since_ms", "nodes", "needed", "answered", "settled",
                 "asked", "retry_at", "enough_at", "found")

    def __init__(self, log_id: int, epoch: int, since_ms: int, nodes: tuple[int, ...],
                 needed: int) -> None:
        self.log_id = log_id
        self.epoch = epoch
        self.since_ms = since_ms
        self.nodes = nodes
        self.needed = needed
        self.answered: set[int] = set()
        self.settled: set[int] = set()  # refused for good (rebuilding, no store)
        self.asked: dict[int, tuple[int, float]] = {}  # node -> (request id, deadline)
        self.retry_at: dict[int, float] = {}  # node -> when to ask again
        self.enough_at: float | None = None  # when ``needed`` nodes had answered
        self.found: dict[int, tuple[int, int, int, int]] = {}  # lsn -> blob, see Recalled


class WriterRecalls:
    """The writer recalls of one node's sequencers (see the module docstring)."""

    def __init__(self, *, ask_timeout: float = 2.0, retry_delay: float = 0.2,
                 grace: float = 0.1, clock: Callable[[], float] = time.monotonic) -> None:
        self.ask_timeout = ask_timeout
        self.retry_delay = retry_delay
        self.grace = grace
        self._clock = clock
        self._logs: dict[int, _Recall] = {}
        self._by_request: dict[int, tuple[_Recall, int]] = {}
        self._ids = itertools.count(1)

    def running(self, log_id: int, epoch: int) -> bool:
        r = self._logs.get(log_id)
        return r is not None and r.epoch == epoch

    def start(self, log_id: int, epoch: int, nodes: Iterable[int], replication: int,
              since_ms: int) -> list:
        """Recall the writers of ``log_id`` for its sequencer of ``epoch`` (a no-op while
        one for that epoch runs; one for an older epoch is dropped)."""
        if self.running(log_id, epoch):
            return []
        self.cancel(log_id)
        asked = tuple(dict.fromkeys(int(n) for n in nodes))
        r = self._logs[log_id] = _Recall(log_id, epoch, since_ms, asked,
                                         max(1, len(asked) - (max(1, replication) - 1)))
        now = self._clock()
        return [self._ask(r, n, now) for n in asked]

    def cancel(self, log_id: int) -> None:
        r = self._logs.pop(log_id, None)
        if r is not None:
            for request_id, _ in r.asked.values():
                self._by_request.pop(request_id, None)

    def _ask(self, r: _Recall, node: int, now: float) -> SendGetWriterBlobs:
        request_id = next(self._ids)
        r.asked[node] = (request_id, now + self.ask_timeout)
        r.retry_at.pop(node, None)
        self._by_request[request_id] = (r, node)
        return SendGetWriterBlobs(node, r.log_id, r.epoch, r.since_ms, request_id)

    def on_reply(self, request_id: int, node: int, status: E, lsns: Iterable[int] = (),
                 producers: Iterable[int] = (), seqs: Iterable[int] = (),
                 timestamps: Iterable[int] = (), checksums: Iterable[int] = ()) -> list:
        entry = self._by_request.pop(request_id, None)
        if entry is None or entry[1] != node:
            return []
        r = entry[0]
        r.asked.pop(node, None)
        now = self._clock()
        if status == E.OK:
            r.answered.add(node)
            for lsn, producer, seq, ts, crc in zip(lsns, producers, seqs, timestamps,
                                                   checksums, strict=True):
                r.found[int(lsn)] = (int(producer), int(seq), int(ts), int(crc))
            if r.enough_at is None and len(r.answered) >= r.needed:
                r.enough_at = now
        elif status in _SETTLED:
            r.settled.add(node)
        else:
            r.retry_at[node] = now + self.retry_delay
        return self._check(r, now)

    def _check(self, r: _Recall, now: float) -> list:
        if r.enough_at is None:
            return []
        if len(r.answered) + len(r.settled) < len(r.nodes) and now < r.enough_at + self.grace:
            return []
        self.cancel(r.log_id)
        blobs = [(p, s, lsn, ts, crc) for lsn, (p, s, ts, crc) in sorted(r.found.items())]
        return [Recalled(r.log_id, r.epoch, blobs)]

    def next_deadline(self) -> float | None:
        times = [t for r in self._logs.values()
                 for t in itertools.chain((d for _, d in r.asked.values()),
                                          r.retry_at.values(),
                                          () if r.enough_at is None
                                          else (r.enough_at + self.grace,))]
        return min(times) if times else None

    def on_timer(self) -> list:
        now = self._clock()
        out: list = []
        for r in list(self._logs.values()):
            for node, (request_id, deadline) in list(r.asked.items()):
                if deadline <= now:  # silent: ask again
                    self._by_request.pop(request_id, None)
                    out.append(self._ask(r, node, now))
            for node, at in list(r.retry_at.items()):
                if at <= now:
                    out.append(self._ask(r, node, now))
            out += self._check(r, now)
        return out
