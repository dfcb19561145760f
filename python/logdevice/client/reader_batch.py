"""``ReaderBatch``: what ``Reader.read_batch`` returns, records as columns.

Rows may come from several logs (``log_ids``); within one log they are in LSN order.
Payloads are one buffer plus ``offsets`` (row ``i`` is
``payloads[offsets[i]:offsets[i + 1]]``), so the batch converts to an Arrow RecordBatch
without copying payload bytes (``to_arrow``; pyarrow is optional).  Gaps are listed
apart: a gap ``[lo, hi]`` of a log comes after that log's rows with ``lsn < lo`` and
before those with ``lsn > hi``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from logdevice.records import DataRecord, GapRecord

__all__ = ["ReaderBatch", "ARROW_SCHEMA_FIELDS", "empty_batch", "concat_batches"]

#: Column names and Arrow types of ``ReaderBatch.to_arrow`` (payload: binary, or
#: large_binary past 2 GiB).
ARROW_SCHEMA_FIELDS = (("log_id", "uint64"), ("lsn", "uint64"),
                       ("timestamp", "timestamp[ms, tz=UTC]"), ("batch_offset", "uint32"),
                       ("payload", "binary"))
_INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True, eq=False)
class ReaderBatch:
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
    gaps : list of GapRecord
    """

    log_ids: np.ndarray
    lsns: np.ndarray
    timestamps: np.ndarray
    batch_offsets: np.ndarray
    payloads: np.ndarray
    offsets: np.ndarray
    gaps: list[GapRecord] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.lsns)

    def __repr__(self) -> str:
        logs = sorted(set(self.log_ids.tolist())) if len(self) < 100_000 else "..."
        return (f"<ReaderBatch {len(self)} records, {self.payloads.nbytes} payload bytes, "
                f"{len(self.gaps)} gaps, logs {logs}>")

    @property
    def nbytes(self) -> int:
        """Payload bytes."""
        return int(self.payloads.nbytes)

    def payload(self, i: int) -> memoryview:
        """Row ``i``'s payload (a view into the batch's buffer)."""
        return self.payloads[int(self.offsets[i]):int(self.offsets[i + 1])].data

    def records(self) -> list[DataRecord]:
        """The rows as ``DataRecord`` objects (convenience; one Python object per row)."""
        buf = self.payloads.tobytes()
        offs = self.offsets.tolist()
        return [DataRecord(log, lsn, ts, buf[offs[i]:offs[i + 1]], bo)
                for i, (log, lsn, ts, bo) in enumerate(zip(
                    self.log_ids.tolist(), self.lsns.tolist(), self.timestamps.tolist(),
                    self.batch_offsets.tolist(), strict=True))]

    def __iter__(self) -> Iterator[DataRecord]:
        return iter(self.records())

    def to_arrow(self, *, large_binary: bool | None = None) -> Any:
        """The rows as a ``pyarrow.RecordBatch`` (columns ``ARROW_SCHEMA_FIELDS``).

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
        try:
            import pyarrow as pa  # optional ("arrow" extra): only to_arrow needs it
        except ImportError:
            raise ImportError("ReaderBatch.to_arrow needs pyarrow (pip install pyarrow)"
                              ) from None
        n = len(self)

        def col(arr: np.ndarray, typ: Any) -> Any:
            a = np.ascontiguousarray(arr)
            return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(a)])

        data = pa.py_buffer(np.ascontiguousarray(self.payloads))
        total = int(self.offsets[-1]) if n else 0
        large = total > _INT32_MAX if large_binary is None else large_binary
        if large:
            offs = pa.py_buffer(np.ascontiguousarray(self.offsets).view(np.int64))
            payload = pa.Array.from_buffers(pa.large_binary(), n, [None, offs, data])
        else:
            if total > _INT32_MAX:
                raise ValueError(f"{total} payload bytes do not fit a binary column; "
                                 "use large_binary=True")
            offs = pa.py_buffer(self.offsets.astype(np.int32))
            payload = pa.Array.from_buffers(pa.binary(), n, [None, offs, data])
        return pa.RecordBatch.from_arrays(
            [col(self.log_ids, pa.uint64()), col(self.lsns, pa.uint64()),
             col(self.timestamps.view(np.int64), pa.timestamp("ms", tz="UTC")),
             col(self.batch_offsets, pa.uint32()), payload],
            names=[name for name, _ in ARROW_SCHEMA_FIELDS])


def empty_batch(gaps: list[GapRecord] | None = None) -> ReaderBatch:
    z = np.zeros(0, dtype=np.uint64)
    return ReaderBatch(z, z, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.uint32),
                       np.zeros(0, dtype=np.uint8), np.zeros(1, dtype=np.uint64),
                       gaps if gaps is not None else [])


def concat_batches(parts: list[ReaderBatch]) -> ReaderBatch:
    """One batch of the rows and gaps of ``parts``, in order (one part: itself)."""
    parts = [b for b in parts if len(b) or b.gaps] or parts[:1]
    if not parts:
        return empty_batch()
    if len(parts) == 1:
        return parts[0]
    offsets = np.zeros(sum(len(b) for b in parts) + 1, dtype=np.uint64)
    pos = 0
    base = 0
    for b in parts:
        n = len(b)
        offsets[pos + 1:pos + n + 1] = b.offsets[1:] + np.uint64(base)
        base += int(b.offsets[-1])
        pos += n
    return ReaderBatch(np.concatenate([b.log_ids for b in parts]),
                       np.concatenate([b.lsns for b in parts]),
                       np.concatenate([b.timestamps for b in parts]),
                       np.concatenate([b.batch_offsets for b in parts]),
                       np.concatenate([b.payloads for b in parts]), offsets,
                       [g for b in parts for g in b.gaps])
