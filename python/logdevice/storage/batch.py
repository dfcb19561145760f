"""Columnar results of LogsDB reads: :class:`RecordBatch` and :class:`CsiBatch`.

Every column is a numpy array; payloads are one contiguous buffer plus n + 1 offsets, so a
batch goes onto the wire (or into Arrow) without a per-record Python object.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ldcore.checksum import crc32c_many


def _pad_copysets(parts: Sequence[np.ndarray]) -> np.ndarray:
    width = max((p.shape[1] for p in parts), default=0)
    return np.concatenate(
        [np.pad(p, ((0, 0), (0, width - p.shape[1])), constant_values=-1) for p in parts]
    ) if parts else np.empty((0, 0), np.int16)


def gather_slices(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray):
    """Concatenate ``buf[starts[i]:ends[i]]`` for all i; returns (bytes array, n + 1 offsets)."""
    lengths = (ends - starts).astype(np.int64)
    offsets = np.zeros(len(lengths) + 1, np.uint64)
    np.cumsum(lengths, out=offsets[1:])
    total = int(offsets[-1])
    if total == 0:
        return np.empty(0, np.uint8), offsets
    src = np.repeat(starts.astype(np.int64) - offsets[:-1].astype(np.int64), lengths)
    src += np.arange(total, dtype=np.int64)
    return buf[src], offsets


@dataclass(eq=False)
class RecordBatch:
    """Records of one log in LSN order.

    Record i: ``lsns[i]``, ``timestamps[i]`` (ms), ``flags[i]``, ``waves[i]``,
    ``copysets[i]`` (int16, padded with -1), ``checksums[i]`` (crc32c of the payload as
    stored) and payload ``payloads[offsets[i]:offsets[i+1]]``.  ``next_lsn`` is where the
    read stopped: the next LSN to ask for.
    """

    log_id: int
    lsns: np.ndarray
    timestamps: np.ndarray
    flags: np.ndarray
    waves: np.ndarray
    copysets: np.ndarray
    checksums: np.ndarray
    payloads: np.ndarray
    offsets: np.ndarray
    next_lsn: int

    def __len__(self) -> int:
        return len(self.lsns)

    @property
    def nbytes(self) -> int:
        """Payload bytes."""
        return int(self.offsets[-1] - self.offsets[0]) if len(self.offsets) else 0

    def payload(self, i: int) -> memoryview:
        view = memoryview(self.payloads)  # type: ignore[arg-type]
        return view[int(self.offsets[i]) : int(self.offsets[i + 1])]

    def checksum_ok(self) -> np.ndarray:
        """Bool per record: does the payload still match its stored crc32c?"""
        if not len(self):
            return np.zeros(0, bool)
        return crc32c_many(self.payloads, self.offsets) == self.checksums

    @classmethod
    def empty(cls, log_id: int, next_lsn: int) -> RecordBatch:
        return cls(
            log_id, np.empty(0, np.uint64), np.empty(0, np.int64), np.empty(0, np.uint32),
            np.empty(0, np.uint32), np.empty((0, 0), np.int16), np.empty(0, np.uint32),
            np.empty(0, np.uint8), np.zeros(1, np.uint64), next_lsn,
        )

    def take(self, index: np.ndarray | slice, next_lsn: int | None = None) -> RecordBatch:
        """The records at ``index`` (an int array or a slice), payloads gathered."""
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step == 1:
                offsets = self.offsets[start : stop + 1] if stop > start else self.offsets[:1]
                return RecordBatch(
                    self.log_id, self.lsns[index], self.timestamps[index], self.flags[index],
                    self.waves[index], self.copysets[index], self.checksums[index],
                    self.payloads, offsets,
                    self.next_lsn if next_lsn is None else next_lsn,
                )
            index = np.arange(start, stop, step)
        index = np.asarray(index, dtype=np.int64)
        payloads, offsets = gather_slices(
            self.payloads, self.offsets[:-1][index], self.offsets[1:][index]
        )
        return RecordBatch(
            self.log_id, self.lsns[index], self.timestamps[index], self.flags[index],
            self.waves[index], self.copysets[index], self.checksums[index], payloads, offsets,
            self.next_lsn if next_lsn is None else next_lsn,
        )

    def compact(self) -> RecordBatch:
        """The same records with payloads starting at offset 0 of a buffer of their own."""
        if len(self.offsets) and self.offsets[0] == 0 and len(self.payloads) == self.nbytes:
            return self
        return self.take(np.arange(len(self)))

    @classmethod
    def concat(cls, log_id: int, parts: Sequence[RecordBatch], next_lsn: int) -> RecordBatch:
        parts = [p for p in parts if len(p)]
        if not parts:
            return cls.empty(log_id, next_lsn)
        if len(parts) == 1:
            p = parts[0]
            p.next_lsn = next_lsn
            return p
        bufs, offs, base = [], [np.zeros(1, np.uint64)], 0
        for p in parts:
            o0, o1 = int(p.offsets[0]), int(p.offsets[-1])
            bufs.append(p.payloads[o0:o1])
            offs.append(p.offsets[1:] - np.uint64(o0) + np.uint64(base))
            base += o1 - o0
        return cls(
            log_id,
            np.concatenate([p.lsns for p in parts]),
            np.concatenate([p.timestamps for p in parts]),
            np.concatenate([p.flags for p in parts]),
            np.concatenate([p.waves for p in parts]),
            _pad_copysets([p.copysets for p in parts]),
            np.concatenate([p.checksums for p in parts]),
            np.concatenate(bufs),
            np.concatenate(offs),
            next_lsn,
        )


@dataclass(eq=False)
class CsiBatch:
    """Copyset index entries of one log, one row per LSN, in LSN order.

    Enough for the single-copy-delivery decision without reading payloads: ``lsns``,
    ``flags`` and ``copysets`` (int16, padded with -1).  ``next_lsn`` is where to go on.
    """

    log_id: int
    lsns: np.ndarray
    flags: np.ndarray
    copysets: np.ndarray
    next_lsn: int

    def __len__(self) -> int:
        return len(self.lsns)
