"""Record storage for a read stream: received batches, and the runs taken out of them
for delivery.

A RECORDS batch is kept whole, as its columns (``RecordColumns``: one payload buffer and
offsets), from the moment it arrives until every record of it that entered the window
buffer has been delivered or dropped.  The window buffer (``ldcore.window.Window``) holds
only int64 *handles*, ``batch_id << 32 | index``, so no per-record Python object exists
before delivery.

When a contiguous run of LSNs becomes deliverable, ``BatchStore.gather`` turns the
handles into one ``RecordColumns`` in LSN order.  A run taken from one batch is
zero-copy (views into the batch); any other run (several batches, maybe alternating
record by record: single copy delivery of records appended one at a time, consecutive
LSNs from different nodes) is copied out of them in one C pass.
``ReadBatch`` is what ``ReadStream.poll_batch`` returns to a columnar consumer.
"""

from __future__ import annotations

from typing import Self

import numpy as np

from ldcore.columns import split_handles
from logdevice.record_columns import RecordColumns
from logdevice.records import GapRecord

_INDEX_MASK = 0xFFFFFFFF
_EMPTY_U8 = np.zeros(0, dtype=np.uint8)


class ReadBatch(RecordColumns):
    """Deliverable records of log ``log_id`` as columns, plus the gaps delivered
    alongside them.

    ``batch_offsets`` is always an array here, and ``offsets`` start at 0.  Records and
    gaps never overlap and both are in LSN order, so the full sequence is recovered by
    merging on LSN: a gap ``[lo, hi]`` comes after every row with ``lsn < lo`` and before
    every row with ``lsn > hi``.
    """

    batch_offsets: np.ndarray  # never None here: plain records have 0

    def __init__(self, log_id: int, rows: RecordColumns,
                 gaps: list[GapRecord] | None = None) -> None:
        rows = rows.compact()
        super().__init__(rows.lsns, rows.timestamps, rows.flags, rows.payloads, rows.offsets,
                         rows.batch_offsets_or_zeros())
        self.log_id = log_id
        self.gaps = [] if gaps is None else gaps

    @classmethod
    def empty(cls, log_id: int = 0, gaps: list[GapRecord] | None = None) -> Self:
        """No rows (of log ``log_id``), only ``gaps``."""
        return cls(log_id, RecordColumns.empty(), gaps)


class _Batch:
    __slots__ = ("rows", "live")

    def __init__(self, rows: RecordColumns) -> None:
        self.rows = rows
        self.live = 0

class BatchStore:
    """Batches whose records sit in the window buffer, addressed by handle."""

    def __init__(self) -> None:
        self._batches: dict[int, _Batch] = {}
        self._next_id = 0

    def __len__(self) -> int:
        return len(self._batches)

    def new_batch(self, rows: RecordColumns) -> tuple[int, int]:
        """Register a batch (not kept until ``keep`` says some records went in).

        Returns its id and the handle of its first record (record i's is that plus i).
        """
        bid = self._next_id
        self._next_id = (bid + 1) & 0x7FFFFFFF
        self._pending = _Batch(rows)
        return bid, bid << 32

    def keep(self, bid: int, live: int) -> None:
        """``live`` records of the batch just registered entered the buffer."""
        if live > 0:
            b = self._pending
            b.live = live
            self._batches[bid] = b
        self._pending = None  # type: ignore[assignment]

    def flags_of(self, handle: int) -> int:
        """Record flags of a record that sits in the buffer."""
        return int(self._batches[handle >> 32].rows.flags[handle & _INDEX_MASK])

    def release(self, handles: np.ndarray) -> None:
        """Records dropped from the buffer without delivery: a batch is let go once none
        of its records is left."""
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

    def gather(self, handles: np.ndarray) -> RecordColumns:
        """The records behind ``handles`` (contiguous LSNs just popped) as one run of
        columns; their batches are released."""
        n = len(handles)
        batches = self._batches
        if n == 1:  # a tailing reader's record: no array arithmetic
            h = int(handles[0])
            b = batches[h >> 32]
            i0 = h & _INDEX_MASK
            one = b.rows
            b.live -= 1
            if b.live <= 0:
                del batches[h >> 32]
            return one if i0 == 0 and len(one) == 1 else one.slice(i0, i0 + 1)
        ids, part, rows, counts = split_handles(handles)
        parts = []
        for bid, cnt in zip(ids, counts, strict=True):
            b = batches[bid]
            parts.append(b.rows)
            b.live -= cnt
            if b.live <= 0:
                del batches[bid]
        r0 = int(rows[0])
        if len(parts) == 1 and int(rows[n - 1]) - r0 == n - 1:
            # One stretch of one batch (rows rise with LSN): a view into its buffer.
            return parts[0].slice(r0, r0 + n)
        return RecordColumns.interleave(parts, part, rows)


def as_u8(buf: object) -> np.ndarray:
    """A payload buffer (bytes, memoryview, numpy array) as a uint8 array, no copy."""
    if isinstance(buf, np.ndarray):
        return buf if buf.dtype == np.uint8 else buf.view(np.uint8).reshape(-1)
    if not buf:
        return _EMPTY_U8
    return np.frombuffer(buf, dtype=np.uint8)  # type: ignore[call-overload]
