"""LogsDB's partition directory: which time partitions exist and what each log has in them.

Kept in memory, persisted in the metadata column family (formats in :mod:`.keys`) in the
same write batch as the records that change it, so a reopened store finds exactly what was
committed.  A partition is a column family ``p<id>``; ids grow, start times do not go back.

``Usage`` (what one log has in one partition) is compiled (``ldcore.usage``): a node
keeps one per log and partition, six C integers instead of a dataclass of Python ints.
A log's usages are kept as one flat tuple ``(pid, usage, pid, usage, ...)`` (56 bytes for
the usual one partition, where a dict took 224): a node holds one per log it stores.
The tuple is replaced, never changed, so a reader in another thread sees the log's usage
before or after a commit, never half of it.
"""

from __future__ import annotations

from collections.abc import Iterator
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


_NO_USAGE: tuple[int | Usage, ...] = ()


class Directory:
    """Partitions (``parts``, by id) and per-log usage (``usage(log_id)``: pid -> Usage)."""

    def __init__(self) -> None:
        self.parts: dict[int, Partition] = {}
        self._logs: dict[int, tuple[int | Usage, ...]] = {}  # log -> (pid, usage, ...)
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
        self.set_usage(log_id, pid, Usage.decode(value))

    # ---- partitions

    def add_partition(self, part: Partition) -> None:
        self.parts[part.id] = part
        self._index = None

    def remove_partition(self, pid: int) -> list[int]:
        """Forget partition ``pid``; returns the logs that had records in it."""
        self.parts.pop(pid, None)
        self._index = None
        logs = []
        for log_id in list(self._logs):
            if pid in self.partitions_of(log_id):
                logs.append(log_id)
                rest = self.usage(log_id)
                del rest[pid]
                self._put(log_id, rest)
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

    def log_ids(self) -> list[int]:
        """The logs with records in some partition."""
        return list(self._logs)

    def _pairs(self, log_id: int) -> Iterator[tuple[int, Usage]]:
        flat = self._logs.get(log_id, _NO_USAGE)
        return zip(flat[::2], flat[1::2], strict=True)  # type: ignore[arg-type]

    def usage(self, log_id: int) -> dict[int, Usage]:
        """What ``log_id`` has in each partition (pid -> Usage; a new dict, empty if
        nothing)."""
        return dict(self._pairs(log_id))

    def usage_in(self, log_id: int, pid: int) -> Usage | None:
        """What ``log_id`` has in partition ``pid`` (None: nothing)."""
        for p, u in self._pairs(log_id):
            if p == pid:
                return u
        return None

    def partitions_of(self, log_id: int) -> tuple[int, ...]:
        """The partitions holding records of ``log_id``."""
        return self._logs.get(log_id, _NO_USAGE)[::2]  # type: ignore[return-value]

    def usages(self, log_id: int) -> list[Usage]:
        """What ``log_id`` has in each partition, in no particular order."""
        return list(self._logs.get(log_id, _NO_USAGE)[1::2])  # type: ignore[arg-type]

    def set_usage(self, log_id: int, pid: int, u: Usage) -> None:
        """``log_id`` has ``u`` in partition ``pid`` (replacing what it had there)."""
        flat = self._logs.get(log_id, _NO_USAGE)
        if not flat or (len(flat) == 2 and flat[0] == pid):
            self._logs[log_id] = (pid, u)
            return
        usage = self.usage(log_id)
        usage[pid] = u
        self._put(log_id, usage)

    def _put(self, log_id: int, usage: dict[int, Usage]) -> None:
        if usage:
            self._logs[log_id] = tuple(x for pair in usage.items() for x in pair)
        else:
            self._logs.pop(log_id, None)

    def ranges(self, log_id: int, lo: int, hi: int) -> list[tuple[int, Usage]]:
        """(pid, usage) of partitions whose LSN range for ``log_id`` meets ``[lo, hi]``,
        by smallest LSN."""
        out = [(pid, u) for pid, u in self._pairs(log_id)
               if u.max_lsn >= lo and u.min_lsn <= hi]
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

    def records_within(self, log_id: int, lo: int, hi: int) -> int:
        """Records of ``log_id`` in the partitions whose LSN range for it meets
        ``[lo, hi]``: at most this many lie in ``[lo, hi]``."""
        return sum(u.records for u in self.usages(log_id)
                   if u.max_lsn >= lo and u.min_lsn <= hi)

    def tail(self, log_id: int) -> int:
        return max((u.max_lsn for u in self.usages(log_id)), default=0)
