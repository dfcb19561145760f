"""Idempotent appends: a retried APPEND is recognised and not stored twice.

A BufferedWriter names itself with a random 64-bit producer id and numbers its blobs
(1, 2, ...), both in each blob's header (``ldcore.codec``); a retry of a blob is the same
blob, so it carries the same (producer, sequence number).  The
sequencer remembers, per log and producer, the outcome of the last ``window`` sequence
numbers (Kafka's idempotent producer keeps five batches; a BufferedWriter may have more
blobs in flight, so the window is larger):

- a sequence number seen and acknowledged: answer with the same LSN, store nothing;
- one still in flight: the retry waits for the first attempt and gets its answer;
- one that failed before it was stored (no LSN taken): forgotten, so the retry goes on
  as a new append;
- one whose payload differs from the first attempt's (crc32c): refused (CONFLICT).  A
  writer id given to two writers with different data (a rerun of a task whose input
  changed) must fail loudly, not have its blobs answered with another blob's LSN.

The table lives in the sequencer node, in memory.  A sequencer that takes a log over
fills it from the log's own copies before it takes idempotent appends
(``writer_recall``: the storage nodes name the writers' blobs of the idempotence window,
whatever epoch they are in), so a blob whose first attempt landed before any number of
failovers is not appended again.  The least recently used producers are forgotten beyond
``max_producers``.  Sans-I/O: ``admit`` says what to do with an APPEND, ``finish`` who to
answer once it is done.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, NamedTuple

from logdevice.errors import E

__all__ = ["ProducerTable", "Admit", "ADMIT_NEW", "ADMIT_WAIT"]

#: Sequence numbers remembered per (log, producer).
DEFAULT_WINDOW = 1024
#: (log, producer) pairs remembered.
DEFAULT_MAX_PRODUCERS = 10_000


class Admit(NamedTuple):
    """``admit``'s verdict: NEW (append it), WAIT (answered with the first attempt),
    DONE (answer now with ``lsn``/``timestamp``) or CONFLICT (the first attempt, at
    ``lsn`` if stored, had another payload: refuse)."""

    verdict: str
    lsn: int = 0
    timestamp: int = 0


ADMIT_NEW = Admit("new")
ADMIT_WAIT = Admit("wait")
ADMIT_CONFLICT = "conflict"


class _Entry:
    __slots__ = ("lsn", "timestamp", "checksum", "waiters")

    def __init__(self, checksum: int) -> None:
        self.lsn = 0  # 0 while in flight
        self.timestamp = 0
        self.checksum = checksum  # crc32c of the blob
        self.waiters: list[Any] = []  # opaque to the table: whoever answers an APPEND


class ProducerTable:
    """Outcomes of recent (producer, sequence number) appends of one sequencer's logs."""

    def __init__(self, window: int = DEFAULT_WINDOW,
                 max_producers: int = DEFAULT_MAX_PRODUCERS) -> None:
        self.window = window
        self.max_producers = max_producers
        self._seen: OrderedDict[tuple[int, int], OrderedDict[int, _Entry]] = OrderedDict()
        self.duplicates = 0  # retries answered without storing anything
        self.conflicts = 0  # "retries" with another payload, refused

    def admit(self, log_id: int, producer: int, seq: int, waiter: Any,
              checksum: int) -> Admit:
        """An APPEND of blob ``seq`` from ``producer`` arrived (``waiter`` answers it;
        ``checksum``: the blob's crc32c)."""
        key = (log_id, producer)
        recent = self._seen.get(key)
        if recent is None:
            recent = self._seen[key] = OrderedDict()
            if len(self._seen) > self.max_producers:
                self._seen.popitem(last=False)
        else:
            self._seen.move_to_end(key)
        entry = recent.get(seq)
        if entry is None:
            entry = recent[seq] = _Entry(checksum)
            entry.waiters.append(waiter)
            while len(recent) > self.window:
                recent.popitem(last=False)
            return ADMIT_NEW
        if entry.checksum != checksum:
            self.conflicts += 1
            return Admit(ADMIT_CONFLICT, entry.lsn, entry.timestamp)
        self.duplicates += 1
        if entry.lsn:
            return Admit("done", entry.lsn, entry.timestamp)
        entry.waiters.append(waiter)
        return ADMIT_WAIT

    def remember(self, log_id: int, producer: int, seq: int, lsn: int, timestamp: int,
                 checksum: int) -> None:
        """Blob ``seq`` of ``producer`` (crc32c ``checksum``) is stored at ``lsn`` (the
        storage nodes say so: a retry of it must not be appended again)."""
        verdict = self.admit(log_id, producer, seq, None, checksum)
        if verdict is ADMIT_NEW:
            self.finish(log_id, producer, seq, E.OK, lsn, timestamp)
        elif verdict.verdict == ADMIT_CONFLICT:
            self.conflicts -= 1  # the table's entry stays: it is what this node stored
        else:
            self.duplicates -= 1  # not a retry, just known twice

    def finish(self, log_id: int, producer: int, seq: int, status: E, lsn: int = 0,
               timestamp: int = 0) -> list[Any]:
        """The append of ``seq`` ended: the waiters to answer (the first attempt's first),
        all with this outcome.  A failure forgets the sequence number: nothing was
        acknowledged, so the writer's next retry is appended as new."""
        recent = self._seen.get((log_id, producer))
        if recent is None or (entry := recent.get(seq)) is None:
            return []
        waiters, entry.waiters = entry.waiters, []
        if status == E.OK:
            entry.lsn, entry.timestamp = lsn, timestamp
        else:
            del recent[seq]
        return waiters
