"""Columnar results of LogsDB reads: :class:`RecordBatch` (``RecordColumns`` of one log,
with what storage keeps beside each record) and :class:`CsiBatch`.

Every column is a numpy array; payloads are one contiguous buffer plus n + 1 offsets, so a
batch goes onto the wire (or into Arrow) without a per-record Python object.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Self

import numpy as np

from ldcore.checksum import crc32c_many
from logdevice.record_columns import RecordColumns


class RecordBatch(RecordColumns):
    """Records of one log in LSN order.

    Record i: ``lsns[i]``, ``timestamps[i]`` (ms), ``flags[i]``, ``waves[i]``,
    ``copysets[i]`` (int16, padded with -1), ``checksums[i]`` (crc32c of the payload as
    stored) and payload ``payloads[offsets[i]:offsets[i+1]]``.  ``next_lsn`` is where the
    read stopped: the next LSN to ask for.
    """

    ROW_COLUMNS = ("waves", "copysets", "checksums")

    def __init__(self, log_id: int, lsns: np.ndarray, timestamps: np.ndarray,
                 flags: np.ndarray, waves: np.ndarray, copysets: np.ndarray,
                 checksums: np.ndarray, payloads: np.ndarray, offsets: np.ndarray,
                 next_lsn: int) -> None:
        super().__init__(lsns, timestamps, flags, payloads, offsets)
        self.log_id = log_id
        self.waves = waves
        self.copysets = copysets
        self.checksums = checksums
        self.next_lsn = next_lsn

    def checksum_ok(self) -> np.ndarray:
        """Bool per record: does the payload still match its stored crc32c?"""
        if not len(self):
            return np.zeros(0, bool)
        return crc32c_many(self.payloads, self.offsets) == self.checksums

    @classmethod
    def empty(cls, log_id: int = 0, next_lsn: int = 0) -> Self:
        return cls(
            log_id, np.empty(0, np.uint64), np.empty(0, np.int64), np.empty(0, np.uint32),
            np.empty(0, np.uint32), np.empty((0, 0), np.int16), np.empty(0, np.uint32),
            np.empty(0, np.uint8), np.zeros(1, np.uint64), next_lsn,
        )

    @classmethod
    def concat_row_column(cls, name: str, arrays: list[np.ndarray]) -> np.ndarray:
        if name != "copysets":
            return np.concatenate(arrays)
        # Copysets of different widths: the narrower ones padded with -1 (no node).  (Not
        # np.pad: it costs tens of microseconds a call, and reads concatenate many parts.)
        width = max(a.shape[1] for a in arrays)
        if all(a.shape[1] == width for a in arrays):
            return np.concatenate(arrays)
        out = np.full((sum(len(a) for a in arrays), width), -1, arrays[0].dtype)
        row = 0
        for a in arrays:
            out[row:row + len(a), :a.shape[1]] = a
            row += len(a)
        return out

    @classmethod
    def concat_reads(cls, log_id: int, parts: Sequence[RecordBatch], next_lsn: int
                     ) -> RecordBatch:
        """The records of reads of ``log_id`` in order (``concat``), the read having
        stopped before ``next_lsn``."""
        if not any(len(p) for p in parts):
            return cls.empty(log_id, next_lsn)
        return cls.concat(parts).replace(next_lsn=next_lsn)


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
