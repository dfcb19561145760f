"""The storage node's side of the cluster checker: GET_RECORD_AVAILABILITY.

For a log and an LSN range the node answers which records it holds, as BP-34's condensed
availability (``ldcore.availability.encode``) plus their copysets as runs
(``logdevice.checker.runs``), both packed for the wire unless asked not to
(``logdevice.checker.wire``).  Everything comes from the copyset index: no payload is
read, so a check costs a few bytes of I/O per record.  Drained copies (``FLAG_DRAINED``:
moved to another node, kept here with their old copyset) are not listed: the node no
longer holds them for anyone, and their old copyset must not stand for the record's.

The role also answers GET_PARTITIONS (the LogsDB partition directory, for ldshell).

Checks must never starve appends or reads, so the role spends at most
``checker_records_per_second`` (a setting) on them: a token bucket (``RecordBudget``)
is charged the records each reply lists, and a reply that overdraws it is held back
until the budget has refilled.  Reads run on one thread of their own, one page at a
time (at most ``MAX_PAGE`` records).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np

from ldcore import availability
from ldcore.lsn import LSN_MAX
from logdevice.checker.runs import to_runs
from logdevice.checker.wire import pack_availability, pack_runs
from logdevice.errors import E, LogDeviceError
from logdevice.node.roles.role import NodeServices, Peer, Role
from logdevice.protocol import (
    GetPartitions,
    GetRecordAvailability,
    PartitionList,
    RecordAvailability,
)
from logdevice.storage.flags import FLAG_DRAINED

if TYPE_CHECKING:
    from logdevice.storage.logsdb import LogsDB

log = logging.getLogger("logdevice.node.availability")

__all__ = ["AvailabilityRole", "RecordBudget", "DEFAULT_PAGE", "MAX_PAGE"]

#: Records per reply when the request does not say, and the most a reply lists.
DEFAULT_PAGE = 1 << 16
MAX_PAGE = 1 << 20


class RecordBudget:
    """A token bucket of records per second (sans-I/O: the caller passes the time).

    Parameters
    ----------
    rate : float
        Records per second refilled.
    burst : float, optional
        Most records saved up while idle (default: a quarter second of ``rate``).
    """

    def __init__(self, rate: float, burst: float | None = None) -> None:
        if rate <= 0:
            raise ValueError("rate must be > 0")
        self.rate = float(rate)
        self.burst = float(burst if burst is not None else rate / 4)
        self.tokens = self.burst
        self._t: float | None = None

    def charge(self, records: int, now: float) -> float:
        """Spend ``records``; returns how many seconds to wait before answering (0 when
        the budget covered them)."""
        if self._t is not None:
            self.tokens = min(self.burst, self.tokens + (now - self._t) * self.rate)
        self._t = now
        self.tokens -= records
        return 0.0 if self.tokens >= 0 else -self.tokens / self.rate


def availability_page(db: LogsDB, log_id: int, lo: int, hi: int, max_records: int,
                      compress: bool = True) -> dict[str, Any]:
    """The fields of a RECORD_AVAILABILITY for ``[lo, hi]`` from ``db`` (one page)."""
    csi = db.read_csi(log_id, lo, hi, max_entries=max_records)
    held = (np.asarray(csi.flags, np.uint32) & np.uint32(FLAG_DRAINED)) == 0
    lsns, copysets = csi.lsns, csi.copysets
    if not held.all():
        lsns, copysets = lsns[held], copysets[held]
    lengths, index, distinct = to_runs(copysets)
    bp34 = availability.encode(np.asarray(lsns, dtype=np.uint64))
    fields: dict[str, Any] = {
        "next_lsn": int(csi.next_lsn), "done": bool(csi.next_lsn > hi),
        "trim_point": db.trim_point(log_id), "copysets": distinct, "records": len(csi),
    }
    if compress and len(lengths):
        packed, width = pack_runs(lengths, index, len(distinct))
        fields.update(availability_packed=pack_availability(bp34), runs_zstd=packed,
                      n_runs=len(lengths), index_width=width)
    else:
        fields.update(availability=bp34, run_lengths=lengths, run_copysets=index)
    return fields


class AvailabilityRole(Role):
    """Answers GET_RECORD_AVAILABILITY from the storage role's LogsDB."""

    name = "availability"

    def __init__(self, node: NodeServices) -> None:
        super().__init__(node)
        self.budget = RecordBudget(node.config.settings.checker_records_per_second)
        self._exec = ThreadPoolExecutor(1, thread_name_prefix="checker-read")
        self.requests = 0  # answered, for metrics and tests
        self.records = 0

    def handlers(self) -> Mapping[type, Any]:
        return {GetRecordAvailability: self._on_get, GetPartitions: self._on_partitions}

    def close(self) -> None:
        self._exec.shutdown(wait=True)

    def _reply(self, msg: GetRecordAvailability, status: E, **kw: Any) -> RecordAvailability:
        return RecordAvailability(request_id=msg.request_id, status=status, log_id=msg.log_id,
                                  node_index=self.node.index, lo=msg.lo, **kw)

    def _on_partitions(self, conn: Peer, msg: GetPartitions) -> None:
        """GET_PARTITIONS: the LogsDB partition directory (in memory: no I/O)."""
        storage = self.node.role("storage") if self.node.has_role("storage") else None
        db = storage.db if storage is not None else None
        if db is None:
            conn.send(PartitionList(request_id=msg.request_id, status=E.DISABLED,
                                    node_index=self.node.index))
            return
        parts = db.partitions()

        def col(name: str) -> np.ndarray:
            return np.array([getattr(p, name) for p in parts], np.int64)

        conn.send(PartitionList(request_id=msg.request_id, status=E.OK,
                                node_index=self.node.index, ids=col("id"),
                                start_ms=col("start_ms"), min_ts=col("min_ts"),
                                max_ts=col("max_ts"), records=col("records"),
                                nbytes=col("nbytes")))

    def _on_get(self, conn: Peer, msg: GetRecordAvailability) -> None:
        storage = self.node.role("storage") if self.node.has_role("storage") else None
        db = storage.db if storage is not None else None
        if not self.node.config.has_log(msg.log_id):
            conn.send(self._reply(msg, E.NOTFOUND))
            return
        if storage is None or db is None:
            conn.send(self._reply(msg, E.DISABLED))
            return
        if not 0 < msg.lo <= msg.hi < LSN_MAX or msg.max_records < 0:
            raise LogDeviceError(E.INVALID_PARAM, f"bad range [{msg.lo}, {msg.hi}] or page "
                                                  f"size {msg.max_records}")
        page = min(msg.max_records or DEFAULT_PAGE, MAX_PAGE)
        released = storage.last_released(msg.log_id)
        loop = self.node.loop

        def send(fields: dict[str, Any]) -> None:
            fields.pop("records")
            conn.send(self._reply(msg, E.OK, last_released=released, **fields))

        def done(fut: Any) -> None:
            exc = fut.exception()
            if exc is not None:
                if not isinstance(exc, LogDeviceError):
                    log.error("GET_RECORD_AVAILABILITY failed", exc_info=exc)
                conn.send(self._reply(msg, getattr(exc, "status", E.FAILED)))
                return
            fields = fut.result()
            self.requests += 1
            self.records += fields["records"]
            delay = self.budget.charge(fields["records"], loop.time())
            if delay > 0:
                loop.call_later(delay, send, fields)
            else:
                send(fields)

        loop.run_in_executor(self._exec, availability_page, db, msg.log_id, msg.lo, msg.hi,
                             page, msg.compress).add_done_callback(done)
