"""Executor side of every read: LSN slices in, Spark-shaped Arrow batches out.

Batch partitions, streaming micro-batches and ``read_ranges`` all end here.  A call opens
its own ``Client`` from the config the driver shipped (nothing is shared with the driver
but that config and plain numbers), reads each slice with one ``Reader`` and closes both,
also when Spark stops consuming early.

Gaps: BRIDGE and HOLE carry no records and are skipped.  DATALOSS gaps, and TRIM gaps
(every slice was planned above the trim point or asked for explicitly, so a TRIM gap
means records the query should have read were trimmed first), are loss, handled as
``loss`` says: by default the task fails with ``LogDeviceError`` (status DATALOSS) naming
the log and the LSN range; with ``fail_on_data_loss=False`` the range is skipped, counted
in ``ReadStats`` and logged as a warning.  ACCESS and NOTINCONFIG gaps fail the task
always: skipping them would drop records silently.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from logdevice.errors import E, TimedOutError, error_for
from logdevice.records import GapType
from logdevice.spark.arrow import to_spark_batch
from logdevice.spark.loss import LossCounter, LostRange
from logdevice.spark.options import ConfigRef, Credentials, connect
from logdevice.spark.plan import LSN_FIRST, Slice

__all__ = ["ReadStats", "read_slices", "DEFAULT_POLL"]


#: Longest single wait for a batch; the read's own timeout is checked between waits.
DEFAULT_POLL = 1.0


@dataclass
class ReadStats(LossCounter):
    """What a read delivered, and the ranges it skipped (``LossCounter``)."""

    records: int = 0
    batches: int = 0


_LOSS_CAUSE = {GapType.DATALOSS: "lost", GapType.TRIM: "trimmed"}
_REFUSED = {GapType.ACCESS: E.ACCESS, GapType.NOTINCONFIG: E.NOTINSERVERCONFIG}


def _check_gaps(gaps: Iterable[Any], fail_on_data_loss: bool, stats: ReadStats) -> None:
    for g in gaps:
        status = _REFUSED.get(g.type)
        if status is not None:
            raise error_for(status, f"log {g.log_id}: LSNs [{g.lo}, {g.hi}] not delivered "
                                    f"({g.type.name} gap)")
        cause = _LOSS_CAUSE.get(g.type)
        if cause is not None:
            stats.handle(LostRange(g.log_id, g.lo, g.hi, cause), fail_on_data_loss)


def read_slices(config: ConfigRef, slices: Iterable[Slice], *, fail_on_data_loss: bool = True,
                batch_records: int = 65_536, read_timeout: float = 120.0,
                stats: ReadStats | None = None, credentials: Credentials = ()
                ) -> Iterator[Any]:
    """Yield ``pyarrow.RecordBatch``es (``arrow.arrow_schema()``) of every record of
    ``slices``, in slice order and LSN order within a slice.

    Parameters
    ----------
    config : ConfigRef
        The cluster config: shipped by the driver (``options.ShippedConfig``) or a path
        (as the executors see it).
    slices : iterable of Slice
    fail_on_data_loss : bool
        Raise on a DATALOSS or TRIM gap (default) or skip it (see ``loss``).
    batch_records : int
        Most rows per yielded batch.
    read_timeout : float
        Seconds a slice may go without any progress before ``TimedOutError``.
    stats : ReadStats, optional
        Filled in as the read goes.
    credentials : Credentials
        What the client presents to the nodes (``options.parse_credentials``).
    """
    stats = stats if stats is not None else ReadStats()
    # Below LSN_FIRST no record exists; starting there keeps readers out of epoch 0.
    pending = [replace(s, lo=max(s.lo, LSN_FIRST)) for s in slices]
    pending = [s for s in pending if s.lo <= s.hi]
    if not pending:
        return
    with connect(config, credentials) as client:
        for s in pending:
            with client.create_reader() as reader:
                reader.start_reading(s.log_id, s.lo, s.hi)
                yield from _drain(reader, s, fail_on_data_loss, batch_records,
                                  read_timeout, stats)


def _drain(reader: Any, s: Slice, fail_on_data_loss: bool, batch_records: int,
           read_timeout: float, stats: ReadStats) -> Iterator[Any]:
    deadline = time.monotonic() + read_timeout
    while True:
        # Looked at before the read: the queue gets a log's last rows before the log is
        # marked done, so "done, then an empty read" means nothing is left.
        done = not reader.is_reading(s.log_id)
        batch = reader.read_batch(batch_records, timeout=0 if done else DEFAULT_POLL)
        _check_gaps(batch.gaps, fail_on_data_loss, stats)
        if len(batch):
            stats.records += len(batch)
            stats.batches += 1
            yield to_spark_batch(batch)
        if len(batch) or batch.gaps:
            deadline = time.monotonic() + read_timeout
        elif done:
            return
        elif time.monotonic() > deadline:
            raise TimedOutError(message=f"log {s.log_id}: no progress reading LSNs "
                                        f"[{s.lo}, {s.hi}] for {read_timeout:g} s")
