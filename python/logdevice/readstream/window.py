"""The window part of a read stream: the records buffered ahead of the read pointer, and
flow control.

``RecordWindow`` holds ``[head, head + size)`` as an ``ldcore.window.Window`` of int64
record handles (see ``batches``) and the batches behind them (``BatchStore``), so no
per-record Python object exists before delivery.  It de-duplicates copies (first copy
wins, except that a copy written by epoch recovery replaces a sequencer's copy), cuts
what a node sent past ``until_lsn`` or past the buffer, and hands out the contiguous run
at its head as one ``RecordColumns`` (``pop_run``).

Flow control: the nodes may send up to ``high``.  Once the application has consumed past
``flow_control_threshold`` of the window (``slide_due``), ``slide`` moves ``high`` on and
the stream tells the nodes (WINDOW, or START when it rewinds at the same time).

The window is counted in LSNs, so the same size that keeps large records to a few
megabytes leaves small ones a round trip to the nodes every few hundred records (512
LSNs of 100-byte records read at about 0.2 M records/s, 8,192 at 1 M/s).  With
``window_bytes``, each slide sizes the window to hold about that many payload bytes at
the bytes per LSN delivered so far, between ``size`` and ``WINDOW_GROWTH`` times it.
"""

from __future__ import annotations

import numpy as np

from ldcore.lsn import compose
from ldcore.window import Window
from logdevice.readstream.actions import FLAG_WRITTEN_BY_RECOVERY
from logdevice.readstream.batches import BatchStore
from logdevice.record_columns import RecordColumns

#: How far past its size a window may grow for small records.
WINDOW_GROWTH = 32
#: Bytes counted per record on top of its payload (its columns, its share of a frame), so
#: that empty payloads do not make a window of any length look free.
_RECORD_COST = 32
_PAST_END = 1 << 64  # Window.head once the window passed LSN_MAX
_EPOCH_ONE = compose(1, 1)  # the first LSN a record can have: epoch 0 holds none


class RecordWindow:
    """Buffer and flow-control window of one read stream over ``[start, until]``."""

    def __init__(self, start_lsn: int, until_lsn: int, size: int, threshold: float, *,
                 window_bytes: int = 0) -> None:
        self._until = until_lsn
        self._size = self._min_size = size
        self._threshold = threshold
        self._window_bytes = window_bytes
        base = self._base(start_lsn)
        grown = min(size * WINDOW_GROWTH, until_lsn - base + 1) if window_bytes else size
        self._max_size = max(size, grown)
        self._bytes_per_lsn = 0.0  # of what was delivered lately (0: nothing yet)
        self._buf = Window(base, self._max_size)
        self._batches = BatchStore()
        self._high = min(until_lsn, base + size - 1)
        self._next_slide = base + int(threshold * (size - 1))

    def _base(self, lsn: int) -> int:
        """Where a buffer for a read from ``lsn`` starts.  Epoch 0 holds no record (a
        log's first epoch is 1), so a read from it buffers from epoch 1 on: the nodes may
        send a new log's first records with the first START, not after a slide past the
        empty epoch."""
        return _EPOCH_ONE if lsn < _EPOCH_ONE <= self._until else lsn

    @property
    def size(self) -> int:
        """Window size in LSNs (as of the last slide)."""
        return self._size

    @property
    def head(self) -> int:
        """The first LSN the buffer holds (the read pointer, or later while it is in
        epoch 0): a run is popped only once the read pointer reaches it."""
        return self._buf.head

    @property
    def high(self) -> int:
        """What the nodes were last told they may send up to."""
        return self._high

    @property
    def held_batches(self) -> int:
        """RECORDS batches kept because some of their records sit in the buffer."""
        return len(self._batches)

    # ------------------------------------------------------------------- input

    def insert(self, lsns: np.ndarray, ts: np.ndarray, fl: np.ndarray, buf: np.ndarray,
               offs: np.ndarray) -> int:
        """Buffer a batch of records (LSN order, all at or past the head).

        Returns how many of them, from the first, the buffer took in: records past
        ``until_lsn`` or past the buffer's end are cut off (a node ignoring flow
        control), duplicates count as taken."""
        n = len(lsns)
        if int(lsns[-1]) > self._until:
            n = int(np.searchsorted(lsns, np.uint64(self._until), side="right"))
            if n == 0:
                return 0
            lsns = lsns[:n]
        if n == 1:
            return self._insert_one(lsns, ts, fl, buf, offs)
        batches = self._batches
        bid, first = batches.new_batch(RecordColumns(lsns, ts, fl, buf, offs))
        n, live, better = self._buf.insert_run(lsns, first, fl, FLAG_WRITTEN_BY_RECOVERY)
        if better:
            live += self._prefer_recovery_copies(lsns[better],
                                                 np.array(better, np.int64) + first)
        batches.keep(bid, live)
        return n

    def _insert_one(self, lsns: np.ndarray, ts: np.ndarray, fl: np.ndarray, buf: np.ndarray,
                    offs: np.ndarray) -> int:
        """``insert`` of one record (what a tailing reader mostly gets), in scalars."""
        batches = self._batches
        bid, handle = batches.new_batch(RecordColumns(lsns, ts, fl, buf, offs))
        lsn = int(lsns[0])
        code = self._buf.insert(lsn, handle)
        if code == -2:  # past the buffer: the node ignored flow control
            batches.keep(bid, 0)
            return 0
        live = 1 if code == 1 else 0
        if code == 0 and int(fl[0]) & FLAG_WRITTEN_BY_RECOVERY:
            live += self._prefer_recovery_copies(lsns, np.array([handle], np.int64))
        batches.keep(bid, live)
        return 1

    def _prefer_recovery_copies(self, lsns: np.ndarray, handles: np.ndarray) -> int:
        """Copies written by epoch recovery of LSNs already buffered: they replace a
        sequencer's copy there (recovery's decision is the one every reader must see, as
        in recovery's own digest).  Returns how many went in."""
        replaced = []
        batches, window = self._batches, self._buf
        for lsn, h in zip(lsns.tolist(), handles.tolist(), strict=True):
            old = window.get(lsn)
            if old >= 0 and not batches.flags_of(old) & FLAG_WRITTEN_BY_RECOVERY:
                window.replace(lsn, h)
                replaced.append(old)
        batches.release(np.array(replaced, dtype=np.int64))
        return len(replaced)

    # ------------------------------------------------------------------ output

    def pop_run(self) -> RecordColumns | None:
        """The contiguous records at the head, removed from the buffer as one run of
        columns (None if the head slot is empty)."""
        buf = self._buf
        head = buf.head
        if head < _PAST_END and buf.get(head) < 0:  # nothing at the head: no arrays
            return None
        lsns, handles = buf.pop_ready()
        if len(lsns) == 0:
            return None
        run = self._batches.gather(handles)
        if self._window_bytes:
            per_lsn = (run.nbytes + _RECORD_COST * len(run)) / (int(lsns[-1]) - int(lsns[0]) + 1)
            # Larger records count at once (the window shrinks at the next slide), smaller
            # ones a quarter at a time (it grows back over a few slides).
            self._bytes_per_lsn = max(per_lsn, 0.75 * self._bytes_per_lsn + 0.25 * per_lsn)
        return run

    def holds(self, lsn: int) -> bool:
        """Whether a record at ``lsn`` is buffered."""
        return self._buf.get(lsn) >= 0

    def first_filled(self) -> int:
        """The lowest buffered LSN, 0 if the buffer is empty."""
        return self._buf.first_filled()

    def skip_to(self, lsn: int) -> None:
        """Move the head forward to ``lsn``, dropping what is buffered below it."""
        buf = self._buf
        if buf.head < lsn <= self._until:
            _, dropped = buf.advance(lsn)
            self._batches.release(dropped)

    def clear(self, lsn: int) -> None:
        """Drop everything buffered and restart the buffer at ``lsn`` (a rewind)."""
        self._buf.clear(self._base(lsn))
        self._batches.clear()

    # ------------------------------------------------------------ flow control

    def slide_due(self, consumed: int) -> bool:
        """Whether the application, having consumed below ``consumed``, passed the
        threshold while there is more to allow."""
        return consumed > self._next_slide and self._until > self._high

    def slide(self, consumed: int) -> None:
        """Let the nodes send up to ``size`` LSNs past ``consumed`` (``size`` first
        adapted to the records' bytes per LSN, when the window may grow)."""
        if self._bytes_per_lsn:
            fits = int(self._window_bytes / self._bytes_per_lsn)
            self._size = max(self._min_size, min(self._max_size, fits))
        size = self._size
        self._high = min(self._until, consumed + size - 1)
        self._next_slide = consumed + int(self._threshold * (size - 1))
