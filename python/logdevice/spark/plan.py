"""The partition plan: which LSN slices of which logs each Spark task reads.

Sans-I/O: the driver gathers per log what the cluster says about it (trim point, tail,
estimated size, ``find_time`` answers; see ``source.plan_logs``) and this module cuts
that into ``Slice``s and packs them into ``LogPartition``s.  Nothing here reads a payload.

Cutting rules.  An LSN is ``epoch << 32 | esn`` and a sequencer hands out ESNs one by one,
so inside one epoch the number of LSNs in a range is an upper bound of its records
(BufferedWriter blobs make one LSN many rows; their bytes are counted by the size
estimate).  A range inside one epoch is cut by LSN arithmetic into equal slices; a range
over several epochs is cut at the LSNs ``find_time`` gives for evenly spaced times.
Small slices of different logs are packed into one partition, so reading a thousand tiny
logs does not make a thousand tasks.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ldcore import lsn as ldlsn

__all__ = ["Slice", "LogPartition", "LogExtent", "slice_count", "cut_lsn_range",
           "cuts_to_slices", "pack", "plan_extents", "LSN_FIRST", "MIN_SPLIT_BYTES"]

#: The lowest LSN a record can have (epoch 1, ESN 1): nothing is ever stored below it, so
#: ranges start there rather than in the LSN space of epoch 0, which no sequencer owns.
LSN_FIRST = ldlsn.compose(ldlsn.EPOCH_MIN, ldlsn.ESN_MIN)


@dataclass(frozen=True)
class Slice:
    """LSNs ``lo..hi`` (inclusive) of ``log_id``, with the plan's size estimates."""

    log_id: int
    lo: int
    hi: int
    est_records: int = 0
    est_bytes: int = 0


@dataclass(frozen=True)
class LogPartition:
    """What one Spark task reads: slices, in order (picklable: plain data only)."""

    slices: tuple[Slice, ...]

    @property
    def est_records(self) -> int:
        return sum(s.est_records for s in self.slices)


@dataclass
class LogExtent:
    """What the driver learnt about one log's range to read."""

    log_id: int
    lo: int
    hi: int
    est_bytes: int | None = None  # None: the size estimate failed
    time_cuts: list[int] = field(default_factory=list)  # find_time answers, for multi-epoch

    @property
    def one_epoch(self) -> bool:
        return ldlsn.epoch_of(self.lo) == ldlsn.epoch_of(self.hi)

    @property
    def est_records(self) -> int:
        """LSN count in one epoch; across epochs the ESNs of the last epoch (a floor)."""
        if self.lo > self.hi:
            return 0
        if self.one_epoch:
            return self.hi - self.lo + 1
        return int(ldlsn.esn_of(self.hi)) + 1


def slice_count(est_records: int, est_bytes: int | None, records_per_partition: int,
                bytes_per_partition: int) -> int:
    """How many slices a range of that size is cut into (at least 1)."""
    n = math.ceil(est_records / records_per_partition) if est_records else 1
    if est_bytes:
        n = max(n, math.ceil(est_bytes / bytes_per_partition))
    return max(1, n)


def cut_lsn_range(lo: int, hi: int, n: int) -> list[int]:
    """``n - 1`` cut points splitting ``lo..hi`` into ``n`` near-equal LSN ranges (each
    cut is the first LSN of the next slice)."""
    span = hi - lo + 1
    n = max(1, min(n, span))
    return [lo + (span * k) // n for k in range(1, n)]


def cuts_to_slices(log_id: int, lo: int, hi: int, cuts: Iterable[int], est_records: int,
                   est_bytes: int | None) -> list[Slice]:
    """Contiguous slices covering ``lo..hi`` exactly, cut before each LSN of ``cuts``
    (cuts outside ``(lo, hi]`` and duplicates are ignored); the estimates are spread
    evenly over the slices."""
    points = sorted({c for c in cuts if lo < c <= hi})
    bounds = [lo, *points, hi + 1]
    k = len(bounds) - 1
    recs, nbytes = est_records // k, (est_bytes or 0) // k
    return [Slice(log_id, a, b - 1, recs, nbytes)
            for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def pack(slices: Sequence[Slice], records_per_partition: int, bytes_per_partition: int
         ) -> list[LogPartition]:
    """Group consecutive slices into partitions that stay under both targets (a slice
    above a target gets a partition of its own)."""
    parts: list[LogPartition] = []
    cur: list[Slice] = []
    recs = nbytes = 0
    for s in slices:
        if cur and (recs + s.est_records > records_per_partition
                    or nbytes + s.est_bytes > bytes_per_partition):
            parts.append(LogPartition(tuple(cur)))
            cur, recs, nbytes = [], 0, 0
        cur.append(s)
        recs += s.est_records
        nbytes += s.est_bytes
    if cur:
        parts.append(LogPartition(tuple(cur)))
    return parts


#: The smallest slice ``min_partitions`` cuts a read into (Spark's file sources use a
#: similar floor: a task costs about as much as reading a few MB).
MIN_SPLIT_BYTES = 4 << 20


def plan_extents(extents: Sequence[LogExtent], records_per_partition: int,
                 bytes_per_partition: int, min_partitions: int = 1) -> list[LogPartition]:
    """The partitions of a batch read (an empty list if there is nothing to read): at
    most ``records_per_partition`` / ``bytes_per_partition`` each, and, as Spark's file
    sources do, at least ``min_partitions`` of them when the read holds more than
    ``MIN_SPLIT_BYTES`` each (the record estimate counts a BufferedWriter blob as one
    record, so without this a log of blobs would be read by one task, on one core)."""
    total = sum(e.est_bytes or 0 for e in extents if e.lo <= e.hi)
    if min_partitions > 1 and total:
        bytes_per_partition = min(bytes_per_partition,
                                  max(MIN_SPLIT_BYTES, math.ceil(total / min_partitions)))
    slices: list[Slice] = []
    for ext in extents:
        if ext.lo > ext.hi:
            continue
        n = slice_count(ext.est_records, ext.est_bytes, records_per_partition,
                        bytes_per_partition)
        cuts = cut_lsn_range(ext.lo, ext.hi, n) if ext.one_epoch else ext.time_cuts
        slices += cuts_to_slices(ext.log_id, ext.lo, ext.hi, cuts, ext.est_records,
                                 ext.est_bytes)
    return pack(slices, records_per_partition, bytes_per_partition)
