"""``RecordColumns``: records as columns, the one shape they keep from a LogsDB read,
through a read stream, to what a reader hands out.

Every column is a numpy array and every payload sits in one buffer, found by ``n + 1``
offsets, so records are sliced, gathered, concatenated and turned into Arrow without a
Python object per record.  Offsets may index a larger buffer (a slice of a received batch
is a view of it); ``compact`` rebases them to 0.

The types built on it (a LogsDB read's ``RecordBatch``, a read stream's ``ReadBatch``, a
reader's ``ReaderBatch``) add their own per-row columns (``ROW_COLUMNS``), which slicing,
``take`` and ``concat`` carry along, and attributes of the whole batch (its log, its
gaps), which they copy from the first part.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any, ClassVar, Self

import numpy as np

from ldcore.columns import concat_columns, gather_payloads, take_columns
from logdevice.records import DataRecord

__all__ = ["RecordColumns", "ARROW_SCHEMA_FIELDS"]

#: Column names and Arrow types of ``to_arrow`` (``log_id`` only when given; payload:
#: binary, or large_binary past 2 GiB).
ARROW_SCHEMA_FIELDS = (("log_id", "uint64"), ("lsn", "uint64"),
                       ("timestamp", "timestamp[ms, tz=UTC]"), ("batch_offset", "uint32"),
                       ("payload", "binary"))
_INT32_MAX = 2**31 - 1


def _gather(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray]:
    """``buf[starts[i]:ends[i]]`` for all i, back to back: (bytes, n + 1 offsets from 0)."""
    starts = np.ascontiguousarray(starts, np.uint64)
    ends = np.ascontiguousarray(ends, np.uint64)
    offsets = np.zeros(len(starts) + 1, np.uint64)
    (ends - starts).cumsum(out=offsets[1:])  # (the method: np.cumsum's wrapper costs more)
    out = np.empty(int(offsets[-1]), np.uint8)
    gather_payloads(np.ascontiguousarray(buf, np.uint8), starts, ends, out, offsets[:-1])
    return out, offsets


class RecordColumns:
    """Records in order, as columns.

    Record ``i``: ``lsns[i]`` (uint64), ``timestamps[i]`` (int64, ms), ``flags[i]``
    (uint32), ``batch_offsets[i]`` (uint32: position inside a BufferedWriter blob, rows of
    one blob share an LSN) and payload ``payloads[offsets[i]:offsets[i + 1]]``.
    ``payloads`` is a uint8 array; ``offsets`` has ``len + 1`` entries and need not start
    at 0.  ``batch_offsets`` is None when every row is a plain record (offset 0).

    The operations return new objects and never write into the arrays they were given;
    slices are views.
    """

    #: Per-row columns a subclass adds (arrays indexed by row, like ``lsns``).
    ROW_COLUMNS: ClassVar[tuple[str, ...]] = ()

    def __init__(self, lsns: np.ndarray, timestamps: np.ndarray, flags: np.ndarray,
                 payloads: np.ndarray, offsets: np.ndarray,
                 batch_offsets: np.ndarray | None = None) -> None:
        self.lsns = lsns
        self.timestamps = timestamps
        self.flags = flags
        self.payloads = payloads
        self.offsets = offsets
        self.batch_offsets = batch_offsets

    def __len__(self) -> int:
        return len(self.lsns)

    @property
    def nbytes(self) -> int:
        """Payload bytes of the rows."""
        return int(self.offsets[-1]) - int(self.offsets[0]) if len(self.offsets) else 0

    def payload(self, i: int) -> memoryview:
        """Row ``i``'s payload (a view into the buffer)."""
        return self.payloads[int(self.offsets[i]):int(self.offsets[i + 1])].data

    def batch_offsets_or_zeros(self) -> np.ndarray:
        if self.batch_offsets is None:
            return np.zeros(len(self), np.uint32)
        return self.batch_offsets

    def data_records(self, log_ids: int | np.ndarray, a: int = 0, b: int | None = None
                     ) -> list[DataRecord]:
        """Rows ``[a, b)`` as ``DataRecord`` objects, of log ``log_ids`` (one id, or one
        per row): for callers that want objects, one per row."""
        b = len(self) if b is None else b
        offs = self.offsets[a:b + 1].tolist()
        mv = self.payloads.data
        ids = [log_ids] * (b - a) if isinstance(log_ids, int) else log_ids[a:b].tolist()
        bos = [0] * (b - a) if self.batch_offsets is None else \
            self.batch_offsets[a:b].tolist()
        return [DataRecord(log, lsn, ts, bytes(mv[offs[j]:offs[j + 1]]), bo)
                for j, (log, lsn, ts, bo) in enumerate(zip(
                    ids, self.lsns[a:b].tolist(), self.timestamps[a:b].tolist(), bos,
                    strict=True))]

    # ------------------------------------------------------------- new objects

    def replace(self, **columns: Any) -> Self:
        """A shallow copy with the attributes named in ``columns`` replaced."""
        # (Attributes in a __dict__, not __slots__: a copy is two dict updates, where
        # slots took a getattr and a setattr per attribute, and reads make several
        # copies of small batches per record.)
        out = object.__new__(type(self))
        attrs = out.__dict__
        attrs.update(self.__dict__)
        attrs.update(columns)
        return out

    def slice(self, a: int, b: int) -> Self:
        """Rows ``[a, b)`` as views (offsets keep indexing the same buffer)."""
        b = max(a, b)
        out = object.__new__(type(self))
        attrs = out.__dict__
        attrs.update(self.__dict__)
        attrs["lsns"] = self.lsns[a:b]
        attrs["timestamps"] = self.timestamps[a:b]
        attrs["flags"] = self.flags[a:b]
        attrs["offsets"] = self.offsets[a:b + 1]
        bo = self.batch_offsets
        if bo is not None:
            attrs["batch_offsets"] = bo[a:b]
        for name in self.ROW_COLUMNS:
            attrs[name] = attrs[name][a:b]
        return out

    def take(self, index: np.ndarray | builtins.slice) -> Self:
        """The rows at ``index``: a slice of step 1 is ``slice`` (views); an int array
        gathers the rows' payloads into a buffer of their own."""
        if isinstance(index, builtins.slice):
            start, stop, step = index.indices(len(self))
            if step == 1:
                return self.slice(start, stop)
            index = np.arange(start, stop, step)
        index = np.asarray(index, dtype=np.int64)
        payloads, offsets = _gather(self.payloads, self.offsets[:-1][index],
                                    self.offsets[1:][index])
        bo = self.batch_offsets
        return self.replace(
            lsns=self.lsns[index], timestamps=self.timestamps[index],
            flags=self.flags[index], payloads=payloads, offsets=offsets,
            batch_offsets=None if bo is None else bo[index],
            **{name: getattr(self, name)[index] for name in self.ROW_COLUMNS})

    def compact(self) -> Self:
        """The same rows with offsets from 0 and ``payloads`` exactly their bytes (a view
        of them: nothing is copied)."""
        o0 = int(self.offsets[0])
        if o0 == 0 and len(self.payloads) == int(self.offsets[-1]):
            return self
        return self.replace(payloads=self.payloads[o0:int(self.offsets[-1])],
                             offsets=self.offsets.astype(np.uint64) - np.uint64(o0))

    @classmethod
    def concat_row_column(cls, name: str, arrays: list[np.ndarray]) -> np.ndarray:
        """Per-row column ``name`` of several parts as one (``concat``); a subclass whose
        column's rows can differ in shape overrides it."""
        return np.concatenate(arrays)

    @classmethod
    def concat(cls, parts: Sequence[Self]) -> Self:
        """The rows of ``parts`` in order, offsets from 0 (the attributes of the whole
        batch come from the first part holding rows).  A single part holding rows is
        ``compact``: its payloads are not copied."""
        parts = [p for p in parts if len(p)]
        if not parts:
            return cls.empty()
        if len(parts) == 1:
            return parts[0].compact()
        # One C pass for all parts: a reader's batch joins thousands of one-record parts
        # (one per log), and a read stream's run two or three (one per node).
        lsns, timestamps, flags, payloads, offsets, batch_offsets = concat_columns(parts)
        kind = type(parts[0])
        return parts[0].replace(
            lsns=lsns, timestamps=timestamps, flags=flags, payloads=payloads,
            offsets=offsets, batch_offsets=batch_offsets,
            # The parts' own per-row columns (``cls`` may be a base class of theirs).
            **{name: kind.concat_row_column(name, [getattr(p, name) for p in parts])
               for name in kind.ROW_COLUMNS})

    @staticmethod
    def interleave(parts: Sequence[RecordColumns], part: np.ndarray,
                   row: np.ndarray) -> RecordColumns:
        """Row ``row[i]`` of ``parts[part[i]]`` for every i, as one ``RecordColumns``
        (offsets from 0; the parts' own per-row columns are not carried), in one C pass
        whatever the order: a run a read stream delivers may alternate between the
        batches of several nodes record by record."""
        return RecordColumns(*take_columns(list(parts), np.ascontiguousarray(part, np.int64),
                                           np.ascontiguousarray(row, np.int64)))

    @classmethod
    def empty(cls) -> Self:
        """No rows."""
        return cls(np.zeros(0, np.uint64), np.zeros(0, np.int64), np.zeros(0, np.uint32),
                   np.zeros(0, np.uint8), np.zeros(1, np.uint64))

    # ------------------------------------------------------------------- Arrow

    def to_arrow(self, *, log_id: int | np.ndarray | None = None,
                 large_binary: bool | None = None) -> Any:
        """The rows as a ``pyarrow.RecordBatch`` (columns ``ARROW_SCHEMA_FIELDS``; the
        ``log_id`` column only when ``log_id`` is given: one id for every row, or one per
        row).

        Payload bytes and the numeric columns are shared with these columns, not copied
        (only the payload offsets are rebased to 0, and narrowed to int32 for ``binary``).

        Parameters
        ----------
        log_id : int or numpy.ndarray of uint64, optional
        large_binary : bool, optional
            Payload column as ``large_binary`` (int64 offsets).  Default: only when the
            payloads pass 2 GiB, else ``binary`` (what Spark expects).

        Raises
        ------
        ImportError
            pyarrow is not installed.
        """
        try:
            import pyarrow as pa  # optional ("arrow" extra): only to_arrow needs it
        except ImportError:
            raise ImportError("to_arrow needs pyarrow (pip install pyarrow)") from None
        n = len(self)
        c = self.compact()

        def col(arr: np.ndarray, typ: Any) -> Any:
            a = np.ascontiguousarray(arr)
            return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(a)])

        data = pa.py_buffer(np.ascontiguousarray(c.payloads))
        total = c.nbytes
        large = total > _INT32_MAX if large_binary is None else large_binary
        if large:
            offs = pa.py_buffer(np.ascontiguousarray(c.offsets.astype(np.int64, copy=False)))
            payload = pa.Array.from_buffers(pa.large_binary(), n, [None, offs, data])
        else:
            if total > _INT32_MAX:
                raise ValueError(f"{total} payload bytes do not fit a binary column; "
                                 "use large_binary=True")
            offs = pa.py_buffer(c.offsets.astype(np.int32))
            payload = pa.Array.from_buffers(pa.binary(), n, [None, offs, data])
        arrays = [col(c.lsns, pa.uint64()),
                  col(c.timestamps.view(np.int64), pa.timestamp("ms", tz="UTC")),
                  col(c.batch_offsets_or_zeros(), pa.uint32()), payload]
        names = [name for name, _ in ARROW_SCHEMA_FIELDS]
        if log_id is None:
            return pa.RecordBatch.from_arrays(arrays, names=names[1:])
        ids = np.full(n, log_id, np.uint64) if isinstance(log_id, int) else log_id
        return pa.RecordBatch.from_arrays([col(ids, pa.uint64()), *arrays], names=names)
