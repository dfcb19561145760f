"""Many logs in one round trip (sans-I/O): combining the storage nodes' answers per log.

``Client.log_summaries`` sends one GET_LOG_SUMMARIES naming every log to each storage
node and one GET_TAILS to each sequencer node for the logs it sequences;
``Client.record_rows`` sends one GET_RECORD_ROWS to each storage node.  Each node answers
a row per log; here the rows of one log are combined across the nodes with the rules of
the one-log calls (``combine``): a log's answer needs OK rows that form an f-majority of
its nodeset (failure domains, authoritative statuses), else that log fails with PARTIAL
or the most common failure, alone (the other logs are answered).

Rules per log
-------------
trim_point
    The highest reported (as ``get_head_attributes``).
last_released
    The highest release pointer reported, and the sequencer's tail when one was asked.
    A storage node takes a RELEASE only from a sequencer of an epoch the epoch store
    issued, after catching up with the recoveries before it, so any node's pointer is a
    released LSN: records up to it are final and readers do not wait for them.  It can
    be older than the sequencer's (RELEASEs travel after the acknowledgement, and a
    sequencer that died before its RELEASE left is only caught up by the next one's
    recovery), which is why planning asks the sequencers as well: their tail covers
    every acknowledged append, as ``get_tail_attributes`` does.
first_timestamp, last_timestamp
    The oldest and newest record timestamps of the nodes' partitions above the trim
    point (approximate: a partly trimmed partition counts whole; 0: none known).
est_bytes
    ``approximate_data_size``'s rule: the sum over the effective nodes divided by R,
    scaled up by ``effective / answered``.
find_time
    Per asked timestamp, ``find_time``'s rule over the rows.
record rows
    The union of the records the nodes list; complete below the lowest ``next_lsn``
    among the OK answers (an f-majority holds a copy of every record, and each node
    listed all of its records below its ``next_lsn``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from logdevice.client.combine import no_f_majority, refusal_messages
from logdevice.errors import E, LogDeviceError, error_for
from logdevice.readstream.fmajority import FailureDomainNodeSet, FMajorityResult
from logdevice.records import LSN_MAX, LSN_OLDEST

__all__ = ["LogSummary", "RecordRowsFound", "combine_summaries", "combine_record_rows",
           "with_tails"]


@dataclass(frozen=True, slots=True)
class LogSummary:
    """What the cluster says about one log (``Client.log_summaries``).

    Attributes
    ----------
    log_id : int
    trim_point : int
        Everything at or below it is trimmed (LSN_INVALID: nothing).
    last_released : int
        A released LSN (see the module rules): a read may go up to it.
    first_timestamp, last_timestamp : int
        Timestamps (ms) of the oldest and newest records above the trim point, roughly
        (0: unknown).
    est_bytes : int
        Estimated bytes stored in the asked size window (``approximate_data_size``).
    find_time : tuple of int
        ``find_time`` of each asked timestamp, in order.
    """

    log_id: int
    trim_point: int
    last_released: int
    first_timestamp: int
    last_timestamp: int
    est_bytes: int
    find_time: tuple[int, ...] = ()


@dataclass(frozen=True)
class RecordRowsFound:
    """The records of one log from the asked start up to ``next_lsn`` (exclusive), in
    LSN order, with their row counts (``Client.record_rows``)."""

    log_id: int
    lsns: np.ndarray = field(default_factory=lambda: np.empty(0, np.uint64))
    rows: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    next_lsn: int = 0


def _status_table(answers: Mapping[int, Any], n: int) -> tuple[list[int], np.ndarray]:
    """Nodes, and per node and log the status (uint16 ``E``) of its row."""
    nodes = sorted(answers)
    table = np.empty((len(nodes), n), np.int64)
    for r, node in enumerate(nodes):
        a = answers[node]
        if isinstance(a, LogDeviceError):
            table[r] = int(a.status)
        elif isinstance(a, BaseException):
            table[r] = int(E.FAILED)
        elif a.status != E.OK:
            table[r] = int(a.status)
        elif len(a.statuses) != n:  # a node that answered another question
            table[r] = int(E.PROTONOSUPPORT)
        else:
            table[r] = a.statuses
    return nodes, table


def _judge(what: str, nodes: list[int], column: np.ndarray,
           nodeset: FailureDomainNodeSet, said: Mapping[int, str]) -> LogDeviceError | None:
    """None if the OK rows of one log form an f-majority (as ``combine._require``),
    else the log's error."""
    ok = [nodes[r] for r in np.flatnonzero(column == int(E.OK)).tolist()]
    if ok and nodeset.check(ok) != FMajorityResult.NONE:
        return None
    failed = {nodes[r]: E(int(s)) for r, s in enumerate(column.tolist()) if s != int(E.OK)}
    return no_f_majority(what, ok, failed, len(nodeset.nodes), said)


def _verdicts(what: str, log_ids: Sequence[int], nodes: list[int], table: np.ndarray,
              nodesets: Sequence[FailureDomainNodeSet], said: Mapping[int, str]
              ) -> list[LogDeviceError | None]:
    """Per log: None (an f-majority answered OK) or its error; each distinct pattern of
    answers is judged once per nodeset (many logs share one)."""
    seen: dict[tuple[int, bytes], LogDeviceError | None] = {}
    out: list[LogDeviceError | None] = []
    for i, log_id in enumerate(log_ids):
        col = table[:, i]
        key = (id(nodesets[i]), col.tobytes())
        if key not in seen:
            seen[key] = _judge(what, nodes, col, nodesets[i], said)
        err = seen[key]
        out.append(None if err is None else error_for(err.status,
                                                       f"log {log_id}: {err.message}"))
    return out


def combine_summaries(log_ids: Sequence[int], answers: Mapping[int, Any],
                      nodesets: Sequence[FailureDomainNodeSet], n_times: int = 0
                      ) -> list[LogSummary | LogDeviceError]:
    """Per log (in order) its ``LogSummary`` from the nodes' LOG_SUMMARIES ``answers``
    (node -> reply or exception), or its error; ``nodesets[i]``: log i's nodeset;
    ``n_times``: the find times asked."""
    n = len(log_ids)
    nodes, table = _status_table(answers, n)
    verdicts = _verdicts("log summary", log_ids, nodes, table, nodesets, refusal_messages(answers))
    if not nodes:
        return [v if v is not None else LogDeviceError(E.TIMEDOUT, "no answers")
                for v in verdicts]

    def col(name: str, dtype: Any, width: int = 1) -> np.ndarray:
        m = np.zeros((len(nodes), n * width), dtype)
        for r, node in enumerate(nodes):
            if (table[r] == int(E.OK)).any():
                m[r] = getattr(answers[node], name)
        return m

    ok = table == int(E.OK)
    trims = np.where(ok, col("trim_points", np.uint64), 0).max(axis=0)
    released = np.where(ok, col("last_released", np.uint64), 0).max(axis=0)
    t_min = col("min_timestamps", np.int64)
    t_min = np.where(ok & (t_min > 0), t_min, np.iinfo(np.int64).max).min(axis=0)
    t_max = np.where(ok, col("max_timestamps", np.int64), 0).max(axis=0)
    nbytes = col("nbytes", np.uint64).astype(np.float64)
    find_lo = find_hi = None
    if n_times:
        find_lo = col("find_lo", np.uint64, n_times).reshape(len(nodes), n, n_times)
        find_hi = col("find_hi", np.uint64, n_times).reshape(len(nodes), n, n_times)
    out: list[LogSummary | LogDeviceError] = []
    for i, log_id in enumerate(log_ids):
        if verdicts[i] is not None:
            out.append(verdicts[i])  # type: ignore[arg-type]
            continue
        nodeset = nodesets[i]
        effective = set(nodeset.effective)
        rows = [r for r in np.flatnonzero(ok[:, i]).tolist() if nodes[r] in effective]
        scale = len(effective) / max(1, len(rows))
        est = round(float(nbytes[rows, i].sum()) / max(1, nodeset.replication_factor)
                    * scale)
        times: tuple[int, ...] = ()
        if find_lo is not None and find_hi is not None:
            okr = np.flatnonzero(ok[:, i])
            times = tuple(_find_time(find_lo[okr, i, k], find_hi[okr, i, k])
                          for k in range(n_times))
        first = int(t_min[i])
        out.append(LogSummary(log_id, int(trims[i]), int(released[i]),
                              first if first != np.iinfo(np.int64).max else 0,
                              int(t_max[i]), est, times))
    return out


def _find_time(lo: np.ndarray, hi: np.ndarray) -> int:
    """``combine.combine_find_time`` over the OK rows' ``lo`` and ``hi``."""
    first = int(hi.min())
    if first != LSN_MAX:
        return first
    last = int(lo.max())
    return last + 1 if last else LSN_OLDEST


def with_tails(summaries: Sequence[LogSummary | LogDeviceError],
               tails: Mapping[int, Any]) -> list[LogSummary | LogDeviceError]:
    """``summaries`` with each log's ``last_released`` raised to its sequencer's tail
    (``tails``: log -> ``TailAttributes`` or the error its tail failed with; a log
    whose tail failed fails with it)."""
    out: list[LogSummary | LogDeviceError] = []
    for s in summaries:
        if isinstance(s, LogDeviceError):
            out.append(s)
            continue
        t = tails.get(s.log_id)
        if isinstance(t, LogDeviceError):
            out.append(t)
        elif t is None:
            out.append(s)
        else:
            lsn = max(s.last_released, int(t.last_released_real_lsn))
            out.append(LogSummary(s.log_id, s.trim_point, lsn, s.first_timestamp,
                                  max(s.last_timestamp, int(t.last_timestamp)),
                                  s.est_bytes, s.find_time))
    return out


def combine_record_rows(log_ids: Sequence[int], his: Sequence[int],
                        answers: Mapping[int, Any],
                        nodesets: Sequence[FailureDomainNodeSet]
                        ) -> list[RecordRowsFound | LogDeviceError]:
    """Per log (in order) the union of the records the nodes' RECORD_ROWS ``answers``
    list, complete below ``next_lsn`` (see the module rules), or its error; ``his``: the
    asked range ends."""
    n = len(log_ids)
    nodes, table = _status_table(answers, n)
    verdicts = _verdicts("record rows", log_ids, nodes, table, nodesets, refusal_messages(answers))
    per_log: list[list[tuple[np.ndarray, np.ndarray]]] = [[] for _ in range(n)]
    nexts = np.full(n, LSN_MAX, np.uint64)
    for r, node in enumerate(nodes):
        ok = table[r] == int(E.OK)
        if not ok.any():
            continue
        a = answers[node]
        nexts = np.where(ok, np.minimum(nexts, a.next_lsns), nexts)
        if not len(a.lsns):
            continue
        order = np.argsort(a.record_logs, kind="stable")
        logs = a.record_logs[order]
        bounds = np.searchsorted(logs, np.arange(n + 1))
        for i in np.flatnonzero(ok).tolist():
            lo, hi = bounds[i], bounds[i + 1]
            if hi > lo:
                per_log[i].append((a.lsns[order[lo:hi]], a.rows[order[lo:hi]]))
    out: list[RecordRowsFound | LogDeviceError] = []
    for i, log_id in enumerate(log_ids):
        if verdicts[i] is not None:
            out.append(verdicts[i])  # type: ignore[arg-type]
            continue
        end = min(int(nexts[i]), int(his[i]) + 1)
        if not per_log[i]:
            out.append(RecordRowsFound(log_id, next_lsn=end))
            continue
        lsns = np.concatenate([p[0] for p in per_log[i]]).astype(np.uint64)
        rows = np.concatenate([p[1] for p in per_log[i]]).astype(np.int64)
        keep = lsns < np.uint64(end)
        lsns, rows = lsns[keep], rows[keep]
        # Copies of one record on several nodes: one entry (the highest count, should
        # two copies ever disagree).
        order = np.lexsort((-rows, lsns))
        lsns, rows = lsns[order], rows[order]
        first = np.ones(len(lsns), bool)
        first[1:] = lsns[1:] != lsns[:-1]
        out.append(RecordRowsFound(log_id, lsns[first], rows[first], end))
    return out
