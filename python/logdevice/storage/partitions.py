"""LogsDB's partition directory: which time partitions exist and what each log has in them.

Kept in memory, persisted in the metadata column family (formats in :mod:`.keys`) in the
same write batch as the records that change it, so a reopened store finds exactly what was
committed.  A partition is a column family ``p<id>``; ids grow, start times do not go back.

``Usage`` (what one log has in one partition) is compiled (``ldcore.usage``): a node
keeps one per log and partition, six C integers instead of a dataclass of Python ints.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ldcore.usage import Usage
from logdevice.storage import keys as K

__all__ = ["Directory", "Partition", "Usage", "TS_NONE_MIN", "TS_NONE_MAX"]

TS_NONE_MIN = 2**63 - 1
TS_NONE_MAX = -(2**63)


@dataclass(slots=True)
class Partition:
    """One time partition: when it started and what it holds (records, stored bytes)."""

    id: int
    start_ms: int
    min_ts: int = TS_NONE_MIN
    max_ts: int = TS_NONE_MAX
    records: int = 0
    nbytes: int = 0

    @property
    def name(self) -> str:
        return f"p{self.id}"

    def encode(self) -> bytes:
        return K.PARTITION_VALUE.pack(self.start_ms, self.min_ts, self.max_ts, self.records,
                                      self.nbytes)

    @classmethod
    def decode(cls, pid: int, value: bytes) -> Partition:
        return cls(pid, *K.PARTITION_VALUE.unpack(value))

    def copy(self) -> Partition:
        return Partition(self.id, self.start_ms, self.min_ts, self.max_ts, self.records,
                         self.nbytes)

    def add(self, d: Usage) -> None:
        self.min_ts = min(self.min_ts, d.min_ts)
        self.max_ts = max(self.max_ts, d.max_ts)
        self.records += d.records
        self.nbytes += d.nbytes


class Directory:
    """Partitions (``parts``, by id) and per-log usage (``logs[log_id][pid]``)."""

    def __init__(self) -> None:
        self.parts: dict[int, Partition] = {}
        self.logs: dict[int, dict[int, Usage]] = {}
        self._index: tuple[np.ndarray, np.ndarray] | None = None

    # ---- loading

    def load_partition(self, pid: int, value: bytes | None) -> None:
        if value is None:
            # The column family exists but its first write never committed.
            prev = max((p.start_ms for p in self.parts.values() if p.id < pid), default=0)
            self.parts[pid] = Partition(pid, prev)
        else:
            self.parts[pid] = Partition.decode(pid, value)
        self._index = None

    def load_usage(self, pid: int, log_id: int, value: bytes) -> None:
        self.logs.setdefault(log_id, {})[pid] = Usage.decode(value)

    # ---- partitions

    def add_partition(self, part: Partition) -> None:
        self.parts[part.id] = part
        self._index = None

    def remove_partition(self, pid: int) -> list[int]:
        """Forget partition ``pid``; returns the logs that had records in it."""
        self.parts.pop(pid, None)
        self._index = None
        logs = []
        for log_id, usage in list(self.logs.items()):
            if usage.pop(pid, None) is not None:
                logs.append(log_id)
            if not usage:
                del self.logs[log_id]
        return logs

    def latest(self) -> Partition | None:
        return self.parts[max(self.parts)] if self.parts else None

    def index(self) -> tuple[np.ndarray, np.ndarray]:
        """(ids, start times) of the partitions in id order, for ``searchsorted``."""
        if self._index is None:
            ids = np.array(sorted(self.parts), dtype=np.int64)
            starts = np.array([self.parts[i].start_ms for i in ids], dtype=np.int64)
            # Starts never go back; keep it so even if a clock did.
            self._index = (ids, np.maximum.accumulate(starts) if len(starts) else starts)
        return self._index

    def place(self, timestamps: np.ndarray) -> np.ndarray:
        """Partition id for each timestamp: the last partition started at or before it
        (the oldest partition for anything older)."""
        ids, starts = self.index()
        at = np.searchsorted(starts, timestamps, side="right") - 1
        return ids[np.maximum(at, 0)]

    # ---- per-log usage

    def ranges(self, log_id: int, lo: int, hi: int) -> list[tuple[int, Usage]]:
        """(pid, usage) of partitions whose LSN range for ``log_id`` meets ``[lo, hi]``,
        by smallest LSN."""
        out = [
            (pid, u) for pid, u in list(self.logs.get(log_id, {}).items())
            if u.max_lsn >= lo and u.min_lsn <= hi
        ]
        out.sort(key=lambda e: (e[1].min_lsn, e[0]))
        return out

    def groups(self, log_id: int, lo: int, hi: int) -> list[list[tuple[int, Usage]]]:
        """:meth:`ranges` clustered into groups whose LSN ranges overlap (usually one each)."""
        groups: list[list[tuple[int, Usage]]] = []
        end = -1
        for pid, u in self.ranges(log_id, lo, hi):
            if groups and u.min_lsn <= end:
                groups[-1].append((pid, u))
                end = max(end, u.max_lsn)
            else:
                groups.append([(pid, u)])
                end = u.max_lsn
        return groups

    def tail(self, log_id: int) -> int:
        return max((u.max_lsn for u in list(self.logs.get(log_id, {}).values())), default=0)
