"""``ReaderBatch``: what ``Reader.read_batch`` returns, records as columns.

Rows may come from several logs (``log_ids``); within one log they are in LSN order.
Payloads are one buffer plus ``offsets`` (row ``i`` is
``payloads[offsets[i]:offsets[i + 1]]``), so the batch converts to an Arrow RecordBatch
without copying payload bytes (``to_arrow``; pyarrow is optional).  Gaps are listed
apart: a gap ``[lo, hi]`` of a log comes after that log's rows with ``lsn < lo`` and
before those with ``lsn > hi``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Self

import numpy as np

from logdevice.record_columns import ARROW_SCHEMA_FIELDS, RecordColumns
from logdevice.records import DataRecord, GapRecord

__all__ = ["ReaderBatch", "ARROW_SCHEMA_FIELDS"]


class ReaderBatch(RecordColumns):
    """Records as columns, plus the gaps delivered with them.

    Attributes
    ----------
    log_ids, lsns : numpy.ndarray of uint64
    timestamps : numpy.ndarray of int64
        Milliseconds since the Unix epoch (the sequencer's stamp).
    batch_offsets : numpy.ndarray of uint32
        Position of the row inside its BufferedWriter blob (rows of one blob share an LSN);
        0 for plain appends.
    payloads : numpy.ndarray of uint8
        Every payload, back to back.
    offsets : numpy.ndarray of uint64, ``len + 1`` entries, starting at 0
    flags : numpy.ndarray of uint32
        The records' flags as stored.
    gaps : list of GapRecord
    """

    batch_offsets: np.ndarray  # never None here: plain records have 0
    ROW_COLUMNS = ("log_ids",)

    def __init__(self, log_ids: np.ndarray, lsns: np.ndarray, timestamps: np.ndarray,
                 batch_offsets: np.ndarray, payloads: np.ndarray, offsets: np.ndarray,
                 gaps: list[GapRecord] | None = None, flags: np.ndarray | None = None
                 ) -> None:
        super().__init__(lsns, timestamps,
                         np.zeros(len(lsns), np.uint32) if flags is None else flags,
                         payloads, offsets, batch_offsets)
        self.log_ids = log_ids
        self.gaps = [] if gaps is None else gaps

    @classmethod
    def of(cls, log_ids: np.ndarray, columns: RecordColumns,
           gaps: list[GapRecord] | None = None) -> ReaderBatch:
        """``columns`` (compacted: offsets from 0) as rows of ``log_ids``."""
        c = columns.compact()
        return cls(log_ids, c.lsns, c.timestamps, c.batch_offsets_or_zeros(), c.payloads,
                   c.offsets, gaps, c.flags)

    @classmethod
    def empty(cls, gaps: list[GapRecord] | None = None) -> Self:
        z = np.zeros(0, np.uint64)
        return cls(z, z, np.zeros(0, np.int64), np.zeros(0, np.uint32),
                   np.zeros(0, np.uint8), np.zeros(1, np.uint64), gaps)

    @classmethod
    def concat(cls, parts: Sequence[Self]) -> Self:
        """One batch of the rows and gaps of ``parts``, in order."""
        out = super().concat(parts)
        gaps = [g for b in parts for g in b.gaps]
        return out if gaps == out.gaps else out.replace(gaps=gaps)

    def __repr__(self) -> str:
        logs = sorted(set(self.log_ids.tolist())) if len(self) < 100_000 else "..."
        return (f"<ReaderBatch {len(self)} records, {self.nbytes} payload bytes, "
                f"{len(self.gaps)} gaps, logs {logs}>")

    def records(self) -> list[DataRecord]:
        """The rows as ``DataRecord`` objects (convenience; one Python object per row)."""
        return self.data_records(self.log_ids)

    def __iter__(self) -> Iterator[DataRecord]:
        return iter(self.records())

    def to_arrow(self, *, log_id: int | np.ndarray | None = None,
                 large_binary: bool | None = None) -> Any:
        """The rows as a ``pyarrow.RecordBatch`` with columns ``ARROW_SCHEMA_FIELDS``
        (``log_id``: this batch's ``log_ids`` unless given).

        Payload bytes and the numeric columns are shared with this batch, not copied
        (only the payload offsets are narrowed to int32 for ``binary``).

        Parameters
        ----------
        large_binary : bool, optional
            Payload column as ``large_binary`` (int64 offsets, zero copy).  Default: only
            when the payloads pass 2 GiB, else ``binary`` (what Spark expects).

        Raises
        ------
        ImportError
            pyarrow is not installed.
        """
        return super().to_arrow(log_id=self.log_ids if log_id is None else log_id,
                                large_binary=large_binary)
