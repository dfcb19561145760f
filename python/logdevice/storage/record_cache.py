"""The record cache: the records a LogsDB stored a moment ago, per log, in memory.

A tailing reader asks a storage node for the record it stored a millisecond ago; reading
it back from RocksDB costs far more than keeping it.  LogsDB (``record_cache_bytes``)
keeps a ``RecordCache`` and tells it every change it makes; read streams ask the cache
first and read LogsDB only when the cache cannot say.

What the cache knows, per log: a start LSN ``lo`` and the records held above it, as the
columns of the writes that stored them, each write's packed in one buffer (no object per
record or column).  The invariant: **for every LSN >= lo, the cache holds a record
exactly when a LogsDB read would return one there, with the same columns** (LSN,
timestamp, flags, wave, copyset, payload and its crc32c).  A read of ``[lo', hi]`` with
``lo' >= lo`` is then answered from memory for any ``hi``; a read starting below ``lo``
goes to LogsDB.

Why every change keeps the invariant (LogsDB calls the cache under the lock every change
of the store takes, after the change is written, so the cache sees changes in the order
the store made them, and a read sees the cache before or after each one, never half):

- A write (a group commit of STOREs, a recovery rewrite or hole plug, a rebuilt copy):
  if every LSN of it lies above everything the cache holds of the log and it meets no
  LSN range the log had (``fresh``), LogsDB now holds exactly the old records plus these
  above ``lo``: the chunk is appended.  A write reaching into ``[lo, ...)`` otherwise
  (rewrites by recovery, hole plugs over old LSNs, out-of-order STOREs) forgets the log.
  A write wholly below ``lo`` changes nothing the cache speaks for.  A log not cached
  starts at a fresh write that is the log's new tail: nothing above its first LSN but
  its own records.
- Amendments (rebuilding's new flags and copysets) and deletes (purging of unclean
  epochs) reaching ``[lo, ...)`` forget the log.
- Trims (a TRIM, or retention moving a trim point past records it drops): records at or
  below the trim point go and ``lo`` moves past it; LogsDB reads skip them the same way.
  Retention drops only partitions whose records of every log are at or below its trim
  point, once that trim point is written, so it never removes a record the cache holds.
- A store reopened (after damage or a restart) is a new LogsDB with an empty cache;
  ``LogsDB.close`` empties this one.
- A failed write changes nothing and tells nothing.

A record held in memory is the copy that was written, so a read from the cache never
fails a checksum where the disk copy may have rotted: the reader gets the intact copy.

Bounded by ``capacity`` bytes of memory: each write is charged its packed columns and
payloads plus what its objects cost, each log its entry, so that many quiet logs of a
record or two each stay within the bound too.  Past it, the oldest writes of the least
recently written log go first (``lo`` moves past them).  Thread-safe: reads may run in
a read stream's thread while writes land.
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from collections import OrderedDict
from operator import attrgetter

import numpy as np

from ldcore.columns import (
    pack_written,
    pack_written_runs,
    read_packed,
    unpack_written,
)
from logdevice.storage.batch import RecordBatch

__all__ = ["RecordCache", "DEFAULT_RECORD_CACHE_BYTES"]

#: LogsDB's default bound on the cache (a storage node's setting ``record_cache_bytes``).
DEFAULT_RECORD_CACHE_BYTES = 32 << 20
#: Memory a write held costs besides its packed columns (its objects and allocation),
#: and a log held besides its writes (its entry and list); measured with tracemalloc.
CHUNK_CHARGE = 320
LOG_CHARGE = 400


class _Chunk:
    """The records of one write, in LSN order: their columns packed in one buffer
    (``pack_written``); ``batch`` gives them as a ``RecordBatch`` (offsets from 0)."""

    __slots__ = ("first", "last", "n", "width", "buf", "cost")

    def __init__(self, packed: tuple[np.ndarray, int], n: int, first: int,
                 last: int) -> None:
        self.buf, self.width = packed
        self.n = n
        self.first = first
        self.last = last
        self.cost = self.buf.nbytes + CHUNK_CHARGE

    @classmethod
    def of(cls, lsns: np.ndarray, timestamps: np.ndarray, flags: np.ndarray,
           waves: np.ndarray | None, copysets: np.ndarray, payloads,
           offsets: np.ndarray) -> _Chunk:
        """The chunk of these columns (at least one record)."""
        return cls(pack_written(lsns, timestamps, flags, waves, copysets, payloads, offsets),
                   len(lsns), int(lsns[0]), int(lsns[-1]))

    def batch(self, log_id: int, next_lsn: int = 0) -> RecordBatch:
        return _unpacked(log_id, self.buf, self.n, self.width, next_lsn)


def _unpacked(log_id: int, buf: np.ndarray, n: int, width: int,
              next_lsn: int = 0) -> RecordBatch:
    ls, ts, fl, wv, cs, crc, body, offs = unpack_written(buf, n, width)
    return RecordBatch(log_id, ls, ts, fl, wv, cs, crc, body, offs, next_lsn)


_first = attrgetter("first")


class _LogRecords:
    """What the cache knows of one log: nothing but ``chunks`` at or above ``lo``."""

    __slots__ = ("lo", "chunks", "nbytes")

    def __init__(self, lo: int) -> None:
        self.lo = lo
        self.chunks: list[_Chunk] = []
        self.nbytes = LOG_CHARGE

    @property
    def last(self) -> int:
        return self.chunks[-1].last if self.chunks else self.lo - 1


class RecordCache:
    """Recently written records per log, exact above a per-log start LSN.

    LogsDB calls ``written``, ``changed``, ``trimmed`` and ``clear`` (the changes);
    read streams call ``read`` and ``next_lsn``.
    """

    def __init__(self, capacity: int = DEFAULT_RECORD_CACHE_BYTES) -> None:
        self.capacity = max(int(capacity), 0)
        self._logs: OrderedDict[int, _LogRecords] = OrderedDict()
        self._lock = threading.Lock()
        self.nbytes = 0
        self.hits = 0  # reads answered from memory
        self.misses = 0  # reads the cache could not answer

    def __len__(self) -> int:
        """Logs the cache speaks for."""
        return len(self._logs)

    def start(self, log_id: int) -> int | None:
        """The LSN from which the cache knows ``log_id`` exactly (None: not at all)."""
        lr = self._logs.get(log_id)
        return None if lr is None else lr.lo

    # ------------------------------------------------------------------ changes

    def holds(self, log_id: int) -> bool:
        return log_id in self._logs

    def written(self, log_id: int, lsns: np.ndarray, timestamps: np.ndarray,
                flags: np.ndarray, waves: np.ndarray | None, copysets: np.ndarray,
                payloads, offsets: np.ndarray, *, fresh: bool, trim_point: int,
                tail: int | None) -> None:
        """LogsDB wrote these records of ``log_id`` (checked, LSNs strictly increasing).

        ``fresh``: the log had no record anywhere in the write's LSN range before;
        ``tail``: the log's highest stored LSN now (needed only for a log not cached:
        None there means unknown, and the cache does not start the log).
        """
        n = len(lsns)
        if n == 0:
            return
        first, last = int(lsns[0]), int(lsns[-1])
        with self._lock:
            if not self._takes(log_id, first, last, fresh, trim_point, tail):
                return
            buf = payloads.reshape(-1).view(np.uint8) if isinstance(payloads, np.ndarray) \
                else payloads
            self._add(log_id, _Chunk.of(lsns, timestamps, flags, waves, copysets, buf,
                                        offsets))
            self._evict()

    def written_logs(self, log_ids: list[int], ends: np.ndarray, lsns: np.ndarray,
                     timestamps: np.ndarray, flags: np.ndarray, waves: np.ndarray | None,
                     copysets: np.ndarray, payloads, offsets: np.ndarray, *,
                     trim_points: list[int], tails: list[int | None]) -> None:
        """``written`` of the fresh writes of several logs at once: log ``log_ids[j]``'s
        records are rows ``ends[j - 1]`` (0 for the first) to ``ends[j]`` of the columns
        (``trim_points[j]`` and ``tails[j]`` as ``written`` takes them).  The kept
        writes are packed by one call, not one per log."""
        if not len(lsns):
            return
        ends_l = ends.tolist()
        starts = [0, *ends_l[:-1]]
        firsts = lsns[starts].tolist()
        lasts = lsns[[e - 1 for e in ends_l]].tolist()
        with self._lock:
            keep = [j for j, log_id in enumerate(log_ids)
                    if self._takes(log_id, firsts[j], lasts[j], True, trim_points[j],
                                   tails[j])]
            if not keep:
                return
            packed = pack_written_runs(ends.astype(np.uint64), lsns, timestamps, flags,
                                       waves, copysets, payloads, offsets, keep)
            for j, p in zip(keep, packed, strict=True):
                self._add(log_ids[j], _Chunk(p, ends_l[j] - starts[j], firsts[j], lasts[j]))
            self._evict()

    def _takes(self, log_id: int, first: int, last: int, fresh: bool, trim_point: int,
               tail: int | None) -> bool:
        """Whether a write of ``[first, last]`` of ``log_id`` is kept (see ``written``); a
        write that reaches into what the cache holds of the log otherwise forgets it."""
        lr = self._logs.get(log_id)
        if lr is not None:
            if last < lr.lo:
                return False  # below what the cache speaks for
            if not fresh or first <= lr.last:
                self._forget(log_id)
                return False
            return True
        return fresh and tail == last and first > trim_point and self.capacity > 0

    def _add(self, log_id: int, chunk: _Chunk) -> None:
        """Append ``chunk`` to what the cache holds of ``log_id`` (starting the log at
        it when the cache held nothing)."""
        lr = self._logs.get(log_id)
        if lr is None:
            lr = self._logs[log_id] = _LogRecords(chunk.first)
            self.nbytes += lr.nbytes
        else:
            self._logs.move_to_end(log_id)
        lr.chunks.append(chunk)
        lr.nbytes += chunk.cost
        self.nbytes += chunk.cost

    def changed(self, log_id: int, lo: int, hi: int) -> None:
        """Records of ``log_id`` in ``[lo, hi]`` were deleted or amended: forget the log
        if that reaches what the cache speaks for."""
        with self._lock:
            lr = self._logs.get(log_id)
            if lr is not None and hi >= lr.lo:
                self._forget(log_id)

    def trimmed(self, log_id: int, trim_point: int) -> None:
        """The trim point of ``log_id`` moved to ``trim_point``."""
        with self._lock:
            lr = self._logs.get(log_id)
            if lr is None or trim_point < lr.lo:
                return
            while lr.chunks and lr.chunks[0].last <= trim_point:
                self._pop_oldest(lr)
            if lr.chunks and lr.chunks[0].first <= trim_point:
                old = lr.chunks[0]
                rb = old.batch(log_id)
                cut = int(np.searchsorted(rb.lsns, np.uint64(trim_point), "right"))
                rb = rb.slice(cut, len(rb)).compact()
                rest = _Chunk.of(rb.lsns, rb.timestamps, rb.flags, rb.waves, rb.copysets,
                              rb.payloads, rb.offsets)
                lr.chunks[0] = rest
                lr.nbytes += rest.cost - old.cost
                self.nbytes += rest.cost - old.cost
            lr.lo = trim_point + 1

    def clear(self) -> None:
        with self._lock:
            self._logs.clear()
            self.nbytes = 0

    def _forget(self, log_id: int) -> None:
        lr = self._logs.pop(log_id)
        self.nbytes -= lr.nbytes

    def _pop_oldest(self, lr: _LogRecords) -> None:
        chunk = lr.chunks.pop(0)
        lr.nbytes -= chunk.cost
        self.nbytes -= chunk.cost
        lr.lo = chunk.last + 1

    def _evict(self) -> None:
        while self.nbytes > self.capacity and self._logs:
            log_id, lr = next(iter(self._logs.items()))
            if lr.chunks:
                self._pop_oldest(lr)
            if not lr.chunks:
                self._forget(log_id)

    # ------------------------------------------------------------------ reads

    def _chunks(self, log_id: int, lo: int, hi: int) -> list[_Chunk] | None:
        """The chunks meeting ``[lo, hi]`` (None: the cache cannot say)."""
        with self._lock:
            lr = self._logs.get(log_id)
            if lr is None or lo < lr.lo:
                self.misses += 1
                return None
            self.hits += 1
            chunks = lr.chunks
            if not chunks or chunks[-1].last < lo:
                return []  # the common tail case: nothing newer
            i = max(bisect_right(chunks, lo, key=_first) - 1, 0)
            if chunks[i].last < lo:
                i += 1
            j = bisect_right(chunks, hi, i, key=_first)
            return chunks[i:j]

    def read(self, log_id: int, lo: int, hi: int, *, max_records: int = 4096,
             max_bytes: int = 8 << 20, payloads: bool = True) -> RecordBatch | None:
        """What ``LogsDB.read_records`` returns for these arguments (the same records;
        ``next_lsn`` past ``hi`` when the range is done), or None when the cache does
        not know the whole range."""
        if max_records <= 0 or lo > hi:
            return None
        chunks = self._chunks(log_id, lo, hi)
        if chunks is None:
            return None
        if not chunks:
            return RecordBatch.empty(log_id, hi + 1)
        limit = max_bytes if payloads else 0
        c0 = chunks[0]
        if (len(chunks) == 1 and c0.first >= lo and c0.last <= hi and c0.n <= max_records
                and (not limit or c0.n == 1 or int(c0.buf.nbytes) < limit)):
            # The whole write, within the limits: its columns as they are (no copy).  (A
            # write's bytes bound its payload bytes: under the limit, no cut.)
            rb = c0.batch(log_id, hi + 1)
        else:
            buf, n, width, cut = read_packed([c.buf for c in chunks], [c.n for c in chunks],
                                             [c.width for c in chunks], lo, hi, max_records,
                                             limit)
            rb = _unpacked(log_id, buf, n, width, 0)
            rb.next_lsn = int(rb.lsns[-1]) + 1 if cut else hi + 1
        if not payloads:
            rb.payloads = _NO_BYTES
            rb.offsets = np.zeros(len(rb) + 1, np.uint64)
        return rb

    def next_lsn(self, log_id: int, lo: int, hi: int) -> int | None:
        """The first LSN in ``[lo, hi]`` holding a record (``hi + 1``: none), or None
        when the cache cannot say."""
        chunks = self._chunks(log_id, lo, hi)
        if chunks is None:
            return None
        for c in chunks:
            if c.last >= lo:
                lsns = c.batch(log_id).lsns
                first = int(lsns[int(np.searchsorted(lsns, np.uint64(lo), "left"))])
                return first if first <= hi else hi + 1
        return hi + 1


_NO_BYTES = np.empty(0, np.uint8)
