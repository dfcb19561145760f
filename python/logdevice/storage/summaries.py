"""A shard's answers about many logs at once: what planning and stream admission ask.

``log_summaries`` answers GET_LOG_SUMMARIES: per log the trim point, the highest stored
LSN, the time span and byte estimate of the partition directory (no I/O but one seek for
the first record past the trim point of a trimmed log, where the span and the estimate
start) and, for each asked timestamp, FIND_TIME's ``(lo, hi)``. ``record_rows`` answers
GET_RECORD_ROWS: the records held in an LSN range with their row counts (a
BufferedWriter blob's count comes from its header; hole plugs and bridges hold none).
Both are blocking (RocksDB) and run in a storage node's read executor. """

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ldcore import codec
from logdevice.protocol.flags import FLAG_BUFFERED_WRITER_BLOB
from logdevice.records import LSN_MAX
from logdevice.storage.flags import FLAG_BRIDGE, FLAG_HOLE

if TYPE_CHECKING:
    from logdevice.storage.logsdb import LogsDB

__all__ = ["Summaries", "log_summaries", "RowsFound", "record_rows", "rows_of",
           "RECORDS_PER_ANSWER"]

#: Records a GET_RECORD_ROWS answer lists at most when the request names no limit.
RECORDS_PER_ANSWER = 65_536
#: Payload bytes read per page of a row count (blobs are read whole to see their header).
_PAGE_BYTES = 8 << 20


class Summaries(NamedTuple):
    """Per asked log (parallel arrays); ``find_lo``/``find_hi`` row-major per log."""

    ok: np.ndarray  # bool: the log is in the config
    trim_points: np.ndarray
    local_tails: np.ndarray
    min_timestamps: np.ndarray
    max_timestamps: np.ndarray
    nbytes: np.ndarray
    find_lo: np.ndarray
    find_hi: np.ndarray


def log_summaries(db: LogsDB, log_ids: Sequence[int], known: Callable[[int], bool],
                  find_times: Sequence[int], size_from_ms: int, size_to_ms: int
                  ) -> Summaries:
    """What ``db`` holds of each log (``known``: whether a log is in the config; the
    others get zeros and ``ok`` False)."""
    n, k = len(log_ids), len(find_times)
    ok = np.zeros(n, bool)
    trims, tails, nbytes = (np.zeros(n, np.uint64) for _ in range(3))
    t_min, t_max = np.zeros(n, np.int64), np.zeros(n, np.int64)
    lo, hi = np.zeros(n * k, np.uint64), np.zeros(n * k, np.uint64)
    for i, log_id in enumerate(log_ids):
        if not known(log_id):
            continue
        ok[i] = True
        trim = db.trim_point(log_id)
        tail = db.tail(log_id)
        trims[i], tails[i] = trim, tail
        t_min[i], t_max[i] = db.time_span(log_id)
        if trim:  # a partly trimmed partition: start at the first record left (one seek)
            left = db.read_records(log_id, trim + 1, max_records=1, payloads=False)
            if len(left):
                t_min[i] = int(left.timestamps[0])
        nbytes[i] = db.data_size(log_id, max(size_from_ms, int(t_min[i])), size_to_ms)
        for j, ms in enumerate(find_times):
            first = db.find_time(log_id, ms)
            top = max(tail, trim)
            # as FIND_TIME answers: nothing here at or after the time -> (top, LSN_MAX)
            lo[i * k + j], hi[i * k + j] = (top, LSN_MAX) if first > top else (first - 1, first)
    return Summaries(ok, trims, tails, t_min, t_max, nbytes, lo, hi)


class RowsFound(NamedTuple):
    """Per asked log ``next_lsns`` (where its listing stopped); the records listed, in
    LSN order per log: ``record_logs`` (index of the asked log), ``lsns``, ``rows``."""

    next_lsns: np.ndarray
    record_logs: np.ndarray
    lsns: np.ndarray
    rows: np.ndarray


def rows_of(flags: np.ndarray, payloads: Sequence[Any]) -> np.ndarray:
    """Rows of each record: a blob's payload count, 1 for a plain record, 0 for hole
    plugs and bridges.  A blob whose header cannot be parsed counts 1 (its reader will
    report it)."""
    rows = np.ones(len(flags), np.uint32)
    rows[(flags & np.uint32(FLAG_HOLE | FLAG_BRIDGE)) != 0] = 0
    for i in np.flatnonzero(flags & np.uint32(FLAG_BUFFERED_WRITER_BLOB)).tolist():
        if rows[i]:
            try:
                rows[i] = codec.decode_count(payloads[i])
            except codec.CodecError:
                rows[i] = 1
    return rows


def record_rows(db: LogsDB, log_ids: Sequence[int], los: Sequence[int], his: Sequence[int],
                max_rows: int, max_records: int) -> RowsFound:
    """The records ``db`` holds in ``[los[i], his[i]]`` of each log with their rows; a log
    stops once its rows exceed ``max_rows`` (0: no limit), the answer once
    ``max_records`` records are listed (the later logs then stop at their start)."""
    budget = max_records or RECORDS_PER_ANSWER
    nexts = np.asarray(los, np.uint64).copy()
    logs: list[np.ndarray] = []
    lsns: list[np.ndarray] = []
    rows: list[np.ndarray] = []
    for i, (log_id, lo, hi) in enumerate(zip(log_ids, los, his, strict=True)):
        pos, counted = int(lo), 0
        while budget > 0 and pos <= hi and not (max_rows and counted > max_rows):
            rb = db.read_records(log_id, pos, hi, max_records=min(budget, 4096),
                                 max_bytes=_PAGE_BYTES)
            n = len(rb)
            if not n:
                pos = int(rb.next_lsn) if rb.next_lsn > pos else int(hi) + 1
                continue
            offs = rb.offsets
            buf = rb.payloads
            r = rows_of(rb.flags, [buf[int(offs[j]):int(offs[j + 1])] for j in range(n)])
            take = n
            if max_rows:  # stop at the record whose rows pass the limit
                over = np.flatnonzero(counted + np.cumsum(r, dtype=np.int64) > max_rows)
                if len(over):
                    take = int(over[0]) + 1
            logs.append(np.full(take, i, np.uint32))
            lsns.append(rb.lsns[:take].astype(np.uint64))
            rows.append(r[:take])
            counted += int(r[:take].sum())
            budget -= take
            pos = int(rb.lsns[take - 1]) + 1 if take < n else int(rb.next_lsn)
        nexts[i] = min(pos, int(hi) + 1) if pos <= LSN_MAX else LSN_MAX
    if not lsns:
        return RowsFound(nexts, np.empty(0, np.uint32), np.empty(0, np.uint64),
                         np.empty(0, np.uint32))
    return RowsFound(nexts, np.concatenate(logs), np.concatenate(lsns), np.concatenate(rows))
