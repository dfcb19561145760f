"""The delivery part of a read stream: what leaves the window buffer, and how it is
handed to the application.

``Delivery`` owns the delivery queue.  Contiguous records popped from the buffer
(``add_run``) sit in it as ``RecordColumns``, gaps (``add_gap``) ``GapRecord``s.
Pseudo-records are turned into gaps on the way: a hole plug is a HOLE gap, a bridge
record ends its epoch with a BRIDGE gap (``add_run`` then tells the stream where its read
pointer skips to).  BufferedWriter blobs are unpacked here, one row per payload with its
batch offset; work is per run, on columns, never per record until ``take``.

``take`` (behind ``ReadStream.poll``) hands the queue out as ``DataRecord``/``GapRecord``
objects, ``take_batch`` (behind ``poll_batch``) as one ``ReadBatch`` of columns.  The
consumed pointer (the first LSN not yet handed out) drives flow control: the stream
slides its window once it passes the threshold.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from ldcore import codec
from ldcore.lsn import ESN_MAX, compose, epoch_of
from logdevice.readstream.actions import (
    FLAG_BRIDGE,
    FLAG_BUFFERED_WRITER_BLOB,
    FLAG_HOLE,
)
from logdevice.readstream.batches import ReadBatch
from logdevice.record_columns import RecordColumns
from logdevice.records import DataRecord, GapRecord, GapType

_SPECIAL = FLAG_HOLE | FLAG_BRIDGE | FLAG_BUFFERED_WRITER_BLOB


class Delivery:
    """The delivery queue of one read stream over ``[start, until]`` and the consumed
    pointer (the first LSN not yet handed to the application)."""

    def __init__(self, log_id: int, start_lsn: int, until_lsn: int) -> None:
        self._log_id = log_id
        self._until = until_lsn
        self._queue: deque[RecordColumns | GapRecord] = deque()
        self._consumed = start_lsn

    @property
    def consumed(self) -> int:
        """First LSN not yet handed out by ``take``/``take_batch``."""
        return self._consumed

    @property
    def pending(self) -> bool:
        """Whether anything waits to be handed out."""
        return bool(self._queue)

    # ------------------------------------------------------------------- input

    def add_gap(self, gtype: GapType, lo: int, hi: int) -> None:
        self._queue.append(GapRecord(self._log_id, gtype, lo, hi))

    def add_run(self, chunk: RecordColumns) -> int | None:
        """Queue the records of ``chunk`` (contiguous, just popped from the buffer).

        Returns None, or the LSN the read pointer must skip to when a bridge record ended
        its epoch (the rows after it are covered by the BRIDGE gap queued here)."""
        lsns = chunk.lsns
        flags = chunk.flags
        if len(flags) == 1 and not int(flags[0]) & _SPECIAL:  # a tailing reader's record
            self._queue.append(chunk)
            return None
        special = (flags & _SPECIAL).nonzero()[0]
        if len(special) == 0:
            self._queue.append(chunk)
            return None
        pos = 0
        for i in special.tolist():
            if pos < i:
                self._queue.append(chunk.slice(pos, i))
            pos = i + 1
            f = int(flags[i])
            lsn = int(lsns[i])
            if f & FLAG_BRIDGE:
                # Nothing but hole plugs can follow a bridge record in its epoch: skip to
                # the next epoch (anything popped after it is covered by the gap).
                hi = min(self._until, compose(epoch_of(lsn), ESN_MAX))
                self.add_gap(GapType.BRIDGE, lsn, hi)
                return hi + 1
            if f & FLAG_HOLE:
                self.add_gap(GapType.HOLE, lsn, lsn)
            else:
                self._unpack_blob(chunk, i)
        if pos < len(chunk):
            self._queue.append(chunk.slice(pos, len(chunk)))
        return None

    def _unpack_blob(self, chunk: RecordColumns, i: int) -> None:
        lsn = int(chunk.lsns[i])
        blob = chunk.payloads[int(chunk.offsets[i]):int(chunk.offsets[i + 1])]
        try:
            buf, offs = codec.decode(blob)
        except ValueError:
            # A blob that passed its record checksum but does not decode: its payloads
            # are gone for every reader alike.
            self.add_gap(GapType.DATALOSS, lsn, lsn)
            return
        n = len(offs) - 1
        if n <= 0:
            return
        self._queue.append(RecordColumns(
            np.full(n, lsn, dtype=np.uint64),
            np.full(n, chunk.timestamps[i], dtype=np.int64),
            np.full(n, int(chunk.flags[i]) & ~FLAG_BUFFERED_WRITER_BLOB, dtype=np.uint32),
            buf, offs.astype(np.int64, copy=False),
            np.arange(n, dtype=np.uint32)))

    # ------------------------------------------------------------------ output

    def take(self, max_items: int | None = None) -> list[DataRecord | GapRecord]:
        """Hand out queued records and gaps, in LSN order (at most ``max_items``), as
        ``DataRecord``/``GapRecord`` objects."""
        out: list[DataRecord | GapRecord] = []
        queue = self._queue
        log_id = self._log_id
        while queue and (max_items is None or len(out) < max_items):
            item = queue[0]
            if isinstance(item, GapRecord):
                out.append(item)
                queue.popleft()
                self._consumed = item.hi + 1
                continue
            n = len(item)
            k = n if max_items is None else min(n, max_items - len(out))
            out.extend(item.data_records(log_id, 0, k))
            if k < n:
                queue[0] = item.slice(k, n)
            else:
                queue.popleft()
            self._consumed = int(item.lsns[k - 1]) + 1
        return out

    def take_batch(self, max_records: int | None = None) -> ReadBatch:
        """Hand out queued records as columns (at most ``max_records`` rows) plus the
        gaps among them."""
        chunks: list[RecordColumns] = []
        gaps: list[GapRecord] = []
        rows = 0
        queue = self._queue
        while queue and (max_records is None or rows < max_records):
            item = queue[0]
            if isinstance(item, GapRecord):
                gaps.append(item)
                queue.popleft()
                self._consumed = item.hi + 1
                continue
            n = len(item)
            k = n if max_records is None else min(n, max_records - rows)
            if k < n:
                chunks.append(item.slice(0, k))
                queue[0] = item.slice(k, n)
            else:
                chunks.append(item)
                queue.popleft()
            rows += k
            self._consumed = int(item.lsns[k - 1]) + 1
        return ReadBatch(self._log_id, RecordColumns.concat(chunks), gaps)
