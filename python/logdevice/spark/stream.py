"""``spark.readStream.format("logdevice")``: the micro-batch stream reader.

Offsets and admission control are in ``offsets``; a micro-batch's records are read by
``read.read_slices`` exactly as a batch query's.  The reader asks the cluster (on the
driver) only for tails and trim points, all logs in one ``log_summaries``, and, with
``max_records_per_trigger``, the row counts of the records past each log's start
(``Client.record_rows``, see ``offsets.cap_rows``); partitions follow from the offsets
alone, so Spark re-planning a micro-batch after a restart gets the same partitions
(trimmed LSNs aside, which no read could deliver anyway).

Data loss.  A micro-batch whose start lies at or below a log's trim point (the query fell
behind retention, or restarts from a checkpoint older than a trim) fails in
``latestOffset`` with status DATALOSS naming the log and the trimmed range; with
``fail_on_data_loss=false`` the range is skipped and counted.  A trim that races the
read is seen by the executors as a TRIM gap and handled the same way (``read``).

Progress.  PySpark's Python stream reader has no custom-metrics hook
(``ReportsSourceMetrics`` is not offered to Python sources); what ``reportLatestOffset``
returns is shown as ``sources[i].latestOffset`` in ``query.lastProgress`` and used for
nothing else.  So that is where the reader reports, per log: ``latest`` (tail + 1, the
offset), ``lag`` (``offsets.lsn_lag`` from the planned end to the tail) and ``skipped``
(trimmed ranges skipped with ``fail_on_data_loss=false``, as counted on the driver).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from logdevice.errors import InvalidParamError, TimedOutError
from logdevice.spark.batch import SlicePartition
from logdevice.spark.loss import LossCounter, below_trim_point
from logdevice.spark.offsets import (
    KnownRows,
    Offsets,
    cap_rows,
    lsn_lag,
    parse_starting_offsets,
    rows_known,
)
from logdevice.spark.options import (
    DEFAULT_BATCH_RECORDS,
    DEFAULT_READ_TIMEOUT,
    DEFAULT_RECORDS_PER_PARTITION,
    STREAM_READ,
    ConfigRef,
    Credentials,
    connect,
    option_values,
    parse_bool,
    parse_config,
    parse_credentials,
    parse_float,
    parse_int,
    parse_logs,
    parse_time_ms,
    require,
)
from logdevice.spark.plan import LSN_FIRST, LogExtent, LogPartition, plan_extents
from logdevice.spark.read import read_slices

__all__ = ["StreamOptions", "LogDeviceStreamReader"]

log = logging.getLogger("logdevice.spark")


@dataclass(frozen=True)
class StreamOptions:
    config: ConfigRef
    logs: tuple[int, ...]
    starting_offsets: str = "earliest"
    starting_timestamp: int | None = None
    max_records_per_trigger: int | None = None
    fail_on_data_loss: bool = True
    records_per_partition: int = DEFAULT_RECORDS_PER_PARTITION
    batch_records: int = DEFAULT_BATCH_RECORDS
    read_timeout: float = DEFAULT_READ_TIMEOUT
    credentials: Credentials = ()

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> StreamOptions:
        opts = option_values(options, STREAM_READ)
        logs = tuple(parse_logs(require(opts, "logs")))
        starting = str(opts.get("starting_offsets", "earliest"))
        parse_starting_offsets(starting, logs)  # fail at once on a bad value
        starting_ts = parse_time_ms(opts, "starting_timestamp")
        if starting_ts is not None and starting.strip().lower() != "earliest":
            raise InvalidParamError(message="give option starting_offsets or "
                                            "starting_timestamp, not both")
        cap = parse_int(opts, "max_records_per_trigger", 0, minimum=1) \
            if "max_records_per_trigger" in opts else None
        return cls(config=parse_config(opts), logs=logs, starting_offsets=starting,
                   starting_timestamp=starting_ts, max_records_per_trigger=cap,
                   fail_on_data_loss=parse_bool(opts, "fail_on_data_loss", True),
                   records_per_partition=parse_int(opts, "records_per_partition",
                                                   DEFAULT_RECORDS_PER_PARTITION, minimum=1),
                   batch_records=parse_int(opts, "batch_records", DEFAULT_BATCH_RECORDS,
                                           minimum=1),
                   read_timeout=parse_float(opts, "read_timeout", DEFAULT_READ_TIMEOUT),
                   credentials=parse_credentials(opts))


class LogDeviceStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches of the logs' records, offsets ``{"<log>": next_lsn}``."""

    def __init__(self, options: StreamOptions) -> None:
        self.opts = options
        self._latest: Offsets | None = None  # tails + 1 at the last latestOffset
        self._lag: Offsets = {}  # per log: offsets.lsn_lag from the planned end to the tail
        self._target: Offsets | None = None  # Trigger.AvailableNow's end
        self._readable: Offsets = {}  # per log: first LSN past the trim point, last seen
        self._skipped: dict[str, LossCounter] = {}  # fail_on_data_loss=false, per log
        self._skipped_through: Offsets = {}  # per log: skipped LSNs below this are counted

    # ------------------------------------------------------------------ cluster calls

    def _positions(self) -> tuple[Offsets, Offsets]:
        """Per log: (first LSN past the trim point, tail + 1), all logs in one
        ``log_summaries``."""
        with connect(self.opts.config, self.opts.credentials) as client:
            found = client.log_summaries(self.opts.logs)
        return ({str(s.log_id): max(LSN_FIRST, s.trim_point + 1) for s in found},
                {str(s.log_id): max(LSN_FIRST, s.last_released + 1) for s in found})

    def _at_time(self, ms: int) -> Offsets:
        """Per log: the first LSN of a record at or after ``ms`` (``find_time``)."""
        with connect(self.opts.config, self.opts.credentials) as client:
            found = client.log_summaries(self.opts.logs, find_times=[ms], tails=False)
        return {str(s.log_id): s.find_time[0] for s in found}

    def _known_rows(self, start: Offsets, top: Offsets, max_rows: int
                    ) -> dict[str, KnownRows]:
        """Per log with something to read: its records from ``start`` with their rows,
        as far as ``cap_rows`` needs (``rows_known``), a request per storage node and
        round."""
        known = {k: KnownRows(v) for k, v in start.items() if v < top.get(k, v)}
        with connect(self.opts.config, self.opts.credentials) as client:
            deadline = time.monotonic() + client.timeout
            while True:
                ask = {int(k): (r.next_lsn, top[k] - 1) for k, r in known.items()
                       if not rows_known(r, top[k], max_rows)}
                if not ask:
                    return known
                if time.monotonic() > deadline:
                    raise TimedOutError(message=f"logs {sorted(ask)}: rows of the next "
                                                f"micro-batch not counted within "
                                                f"{client.timeout:g} s")
                for log_id, found in client.record_rows(ask, max_rows=max_rows).items():
                    known[str(log_id)].add(found.lsns.tolist(), found.rows.tolist(),
                                           found.next_lsn)

    # ------------------------------------------------------------------ Spark's calls

    def initialOffset(self) -> dict:
        earliest, latest = self._positions()
        if self.opts.starting_timestamp is not None:
            # Records older than the trim point are gone: start at the oldest one left.
            at = self._at_time(self.opts.starting_timestamp)
            return {k: min(max(at[k], earliest[k]), latest[k]) for k in earliest}
        wanted = parse_starting_offsets(self.opts.starting_offsets, self.opts.logs)
        out: Offsets = {}
        for log_id, pos in wanted.items():
            key = str(log_id)
            if pos == "earliest":
                out[key] = earliest[key]
            elif pos == "latest":
                out[key] = latest[key]
            else:
                out[key] = max(int(pos), LSN_FIRST)
        return out

    def getDefaultReadLimit(self) -> ReadLimit:
        cap = self.opts.max_records_per_trigger
        return ReadMaxRows(cap) if cap else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._positions()[1]

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        start = self._complete(start)
        earliest, tails = self._positions()
        self._readable = earliest
        self._check_trimmed(start, earliest)
        latest = self._target if self._target is not None else tails
        self._latest = tails
        # Never move backwards (a start past the tail: the log was read to a later tail
        # of an earlier sequencer); never go past what is released.
        top = {k: max(v, latest[k]) if k in latest else v for k, v in start.items()}
        end = top
        if isinstance(limit, ReadMaxRows):
            # Trimmed LSNs cost nothing to skip, so the cap counts from the readable ones.
            readable = {k: min(max(v, earliest.get(k, v)), top[k]) for k, v in start.items()}
            end = cap_rows(readable, top, limit.max_rows,
                           self._known_rows(readable, top, limit.max_rows))
        self._lag = {k: lsn_lag(end[k], tails[k]) for k in end if k in tails}
        return end

    def reportLatestOffset(self) -> dict | None:
        if self._latest is None:
            return None
        report: dict[str, Any] = {"latest": dict(self._latest), "lag": dict(self._lag)}
        if self._skipped:
            report["skipped"] = {k: vars(c) for k, c in sorted(self._skipped.items())}
        return report

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        start = self._complete(start)
        # LSNs known to be trimmed were handled by latestOffset: no task reads them.
        start = {k: max(v, min(self._readable.get(k, v), int(end.get(k, v))))
                 for k, v in start.items()}
        extents = [LogExtent(int(k), int(start[k]), int(v) - 1)
                   for k, v in sorted(end.items(), key=lambda kv: int(kv[0]))
                   if k in start and int(v) > int(start[k])]
        parts = plan_extents(extents, self.opts.records_per_partition, 1 << 62)
        return [SlicePartition(p) for p in parts]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        o = self.opts
        value: LogPartition = partition.value  # type: ignore[attr-defined]
        return read_slices(o.config, value.slices, fail_on_data_loss=o.fail_on_data_loss,
                           batch_records=o.batch_records, read_timeout=o.read_timeout,
                           credentials=o.credentials)

    def commit(self, end: dict) -> None:
        log.debug("logdevice stream: committed up to %s", end)

    # ------------------------------------------------------------------ helpers

    def _check_trimmed(self, start: Offsets, earliest: Offsets) -> None:
        """A start at or below a log's trim point is loss: raise, or count it once."""
        for k, pos in start.items():
            if k not in earliest:
                continue
            lo = max(pos, self._skipped_through.get(k, 0))
            lost = below_trim_point(int(k), lo, earliest[k] - 1, earliest[k] - 1)
            if lost is None:
                continue
            self._skipped.setdefault(k, LossCounter()).handle(lost,
                                                              self.opts.fail_on_data_loss)
            self._skipped_through[k] = lost.hi + 1

    def _complete(self, offsets: Mapping[str, Any]) -> Offsets:
        """``offsets`` with an entry for every log of the option (a log added to the
        option after the checkpoint was written starts from its trim point)."""
        if not isinstance(offsets, Mapping):
            raise InvalidParamError(message=f"bad logdevice offset {offsets!r}")
        # Nothing is stored below LSN_FIRST: offsets below it mean LSN_FIRST.
        out = {str(k): max(int(v), LSN_FIRST) for k, v in offsets.items()}
        missing = [str(log_id) for log_id in self.opts.logs if str(log_id) not in out]
        if missing:
            earliest = self._positions()[0]
            for k in missing:
                out[k] = earliest[k]
        return out
