"""Record storage for a read stream: received batches, and columnar chunks for delivery.

A RECORDS batch is kept whole, as its arrays (timestamps, flags, one payload buffer and
offsets), from the moment it arrives until every record of it that entered the window
buffer has been delivered or dropped.  The window buffer (``ldcore.window.Window``) holds
only int64 *handles*, ``batch_id << 32 | index``, so no per-record Python object exists
before delivery.

When a contiguous run of LSNs becomes deliverable, ``BatchStore.gather`` turns the
handles into one ``Chunk``: columnar arrays in LSN order.  A run taken from one batch is
zero-copy (views into the batch); runs spanning several batches are concatenated.
``ReadBatch`` is what ``ReadStream.poll_batch`` returns to a columnar consumer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from logdevice.records import GapRecord

_INDEX_MASK = 0xFFFFFFFF
_EMPTY_U8 = np.zeros(0, dtype=np.uint8)


class Chunk:
    """Deliverable data rows in LSN order, columnar.

    ``offsets`` has ``len + 1`` entries and indexes ``buffer`` absolutely (a chunk may be
    a view into a larger batch buffer, so ``offsets[0]`` need not be 0).
    ``batch_offsets`` is None when every row is a plain record (batch offset 0).
    """

    __slots__ = ("lsns", "timestamps", "flags", "batch_offsets", "buffer", "offsets")

    def __init__(self, lsns: np.ndarray, timestamps: np.ndarray, flags: np.ndarray,
                 buffer: np.ndarray, offsets: np.ndarray,
                 batch_offsets: np.ndarray | None = None) -> None:
        self.lsns = lsns
        self.timestamps = timestamps
        self.flags = flags
        self.buffer = buffer
        self.offsets = offsets
        self.batch_offsets = batch_offsets

    def __len__(self) -> int:
        return len(self.lsns)

    def slice(self, a: int, b: int) -> Chunk:
        """Rows ``[a, b)`` as views."""
        return Chunk(self.lsns[a:b], self.timestamps[a:b], self.flags[a:b], self.buffer,
                     self.offsets[a:b + 1],
                     None if self.batch_offsets is None else self.batch_offsets[a:b])

    def batch_offsets_array(self) -> np.ndarray:
        if self.batch_offsets is None:
            return np.zeros(len(self.lsns), dtype=np.uint32)
        return self.batch_offsets

    def payload_bytes(self, i: int) -> bytes:
        return self.buffer[int(self.offsets[i]):int(self.offsets[i + 1])].tobytes()


def concat_chunks(chunks: list[Chunk]) -> tuple[np.ndarray, ...]:
    """Rows of several chunks as (lsns, timestamps, flags, batch_offsets, buffer, offsets)
    with ``offsets`` starting at 0.  One chunk is returned without copying payloads."""
    if len(chunks) == 1:
        c = chunks[0]
        base = int(c.offsets[0])
        end = int(c.offsets[-1])
        offs = c.offsets.astype(np.uint64) - np.uint64(base)
        return (c.lsns, c.timestamps, c.flags, c.batch_offsets_array(),
                c.buffer[base:end], offs)
    if not chunks:
        z64 = np.zeros(0, dtype=np.uint64)
        return (z64, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.uint32),
                np.zeros(0, dtype=np.uint32), _EMPTY_U8, np.zeros(1, dtype=np.uint64))
    lsns = np.concatenate([c.lsns for c in chunks])
    ts = np.concatenate([c.timestamps for c in chunks])
    fl = np.concatenate([c.flags for c in chunks])
    bo = np.concatenate([c.batch_offsets_array() for c in chunks])
    bufs = [c.buffer[int(c.offsets[0]):int(c.offsets[-1])] for c in chunks]
    buffer = np.concatenate(bufs) if bufs else _EMPTY_U8
    offs = np.empty(len(lsns) + 1, dtype=np.uint64)
    offs[0] = 0
    pos = 0
    base = 0
    for c in chunks:
        n = len(c)
        rel = c.offsets[1:] - c.offsets[0]
        offs[pos + 1:pos + n + 1] = rel.astype(np.uint64) + np.uint64(base)
        base += int(c.offsets[-1] - c.offsets[0])
        pos += n
    return lsns, ts, fl, bo, buffer, offs


@dataclass(frozen=True, slots=True, eq=False)
class ReadBatch:
    """Deliverable records as columns, plus the gaps delivered alongside them.

    Row ``i``: ``lsns[i]``, ``timestamps[i]`` (ms), ``flags[i]``, ``batch_offsets[i]``
    (position inside a BufferedWriter blob; rows of one blob share an LSN) and payload
    ``buffer[offsets[i]:offsets[i + 1]]``.  Records and gaps never overlap and both are
    in LSN order, so the full sequence is recovered by merging on LSN: a gap
    ``[lo, hi]`` comes after every row with ``lsn < lo`` and before every row with
    ``lsn > hi``.
    """

    log_id: int
    lsns: np.ndarray
    timestamps: np.ndarray
    flags: np.ndarray
    batch_offsets: np.ndarray
    buffer: np.ndarray
    offsets: np.ndarray
    gaps: list[GapRecord] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.lsns)

    def payload(self, i: int) -> memoryview:
        return self.buffer[int(self.offsets[i]):int(self.offsets[i + 1])].data


class _Batch:
    __slots__ = ("timestamps", "flags", "buffer", "offsets", "live")

    def __init__(self, timestamps: np.ndarray, flags: np.ndarray, buffer: np.ndarray,
                 offsets: np.ndarray) -> None:
        self.timestamps = timestamps
        self.flags = flags
        self.buffer = buffer
        self.offsets = offsets
        self.live = 0


class BatchStore:
    """Batches whose records sit in the window buffer, addressed by handle."""

    def __init__(self) -> None:
        self._batches: dict[int, _Batch] = {}
        self._next_id = 0

    def __len__(self) -> int:
        return len(self._batches)

    def new_batch(self, n: int, timestamps: np.ndarray, flags: np.ndarray,
                  buffer: np.ndarray, offsets: np.ndarray) -> tuple[int, np.ndarray]:
        """Register a batch (not kept until ``keep`` says some records went in).

        Returns its id and the handles of its ``n`` records.
        """
        bid = self._next_id
        self._next_id = (bid + 1) & 0x7FFFFFFF
        self._pending = _Batch(timestamps, flags, buffer, offsets)
        handles = np.arange(n, dtype=np.int64)
        handles += np.int64(bid << 32)
        return bid, handles

    def keep(self, bid: int, live: int) -> None:
        """``live`` records of the batch just registered entered the buffer."""
        if live > 0:
            b = self._pending
            b.live = live
            self._batches[bid] = b
        self._pending = None  # type: ignore[assignment]

    def flags_of(self, handle: int) -> int:
        """Record flags of a record that sits in the buffer."""
        return int(self._batches[handle >> 32].flags[handle & _INDEX_MASK])

    def release(self, handles: np.ndarray) -> None:
        """Records dropped from the buffer without delivery."""
        if len(handles) == 0:
            return
        bids, counts = np.unique(handles >> 32, return_counts=True)
        for bid, cnt in zip(bids.tolist(), counts.tolist(), strict=True):
            b = self._batches.get(bid)
            if b is not None:
                b.live -= cnt
                if b.live <= 0:
                    del self._batches[bid]

    def clear(self) -> None:
        self._batches.clear()

    def gather(self, lsns: np.ndarray, handles: np.ndarray) -> Chunk:
        """The records behind ``handles`` (contiguous LSNs just popped) as one chunk;
        their batches are released."""
        n = len(handles)
        bids = handles >> 32
        idx = handles & _INDEX_MASK
        if n > 1:
            brk = np.flatnonzero((bids[1:] != bids[:-1]) | (idx[1:] != idx[:-1] + 1)) + 1
            bounds = [0, *brk.tolist(), n]
        else:
            bounds = [0, n]
        batches = self._batches
        runs = []
        for k in range(len(bounds) - 1):
            s, e = bounds[k], bounds[k + 1]
            bid = int(bids[s])
            i0 = int(idx[s])
            b = batches[bid]
            runs.append((b, i0, i0 + (e - s)))
            b.live -= e - s
            if b.live <= 0:
                del batches[bid]
        if len(runs) == 1:
            b, i0, i1 = runs[0]
            return Chunk(lsns, b.timestamps[i0:i1], b.flags[i0:i1], b.buffer,
                         b.offsets[i0:i1 + 1])
        ts = np.concatenate([b.timestamps[i0:i1] for b, i0, i1 in runs])
        fl = np.concatenate([b.flags[i0:i1] for b, i0, i1 in runs])
        parts = []
        offs = np.empty(n + 1, dtype=np.int64)
        offs[0] = 0
        pos = 0
        base = 0
        for b, i0, i1 in runs:
            o = b.offsets[i0:i1 + 1]
            lo, hi = int(o[0]), int(o[-1])
            parts.append(b.buffer[lo:hi])
            offs[pos + 1:pos + 1 + (i1 - i0)] = o[1:] - (lo - base)
            base += hi - lo
            pos += i1 - i0
        buffer = np.concatenate(parts) if parts else _EMPTY_U8
        return Chunk(lsns, ts, fl, buffer, offs)


def as_u8(buf: object) -> np.ndarray:
    """A payload buffer (bytes, memoryview, numpy array) as a uint8 array, no copy."""
    if isinstance(buf, np.ndarray):
        return buf if buf.dtype == np.uint8 else buf.view(np.uint8).reshape(-1)
    if not buf:
        return _EMPTY_U8
    return np.frombuffer(buf, dtype=np.uint8)  # type: ignore[call-overload]
