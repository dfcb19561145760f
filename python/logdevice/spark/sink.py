"""``df.write.format("logdevice")`` and ``writeStream``: DataFrames into logs.

Each Spark task opens a ``Client`` and a ``BufferedWriter``, appends the ``payload``
column of each Arrow batch with one ``append_many`` per log (rows routed by the ``log``
option or a ``log_id`` column, grouped with numpy, not row by row), flushes, waits for
every append and returns the LSN ranges it wrote as its commit message.

Delivery is at least once.  A task reports success only after every one of its appends
was acknowledged, but its appends are not undone when it or the job fails: a retried or
speculative task appends its rows again, and a failed job leaves the rows of its finished
tasks (the driver logs them on abort) and possibly part of the failed task's.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from logdevice.errors import InvalidParamError
from logdevice.spark.options import (
    WRITE,
    ConfigRef,
    Credentials,
    connect,
    option_values,
    parse_config,
    parse_credentials,
    parse_float,
    parse_int,
)

__all__ = ["WriteOptions", "WrittenRanges", "LogDeviceWriter", "LogDeviceStreamWriter",
           "write_batches"]

log = logging.getLogger("logdevice.spark")

_INT_TYPES = ("LongType", "IntegerType", "ShortType", "ByteType")


@dataclass(frozen=True)
class WriteOptions:
    config: ConfigRef
    log_id: int | None  # None: the log_id column routes rows
    writer_options: tuple[tuple[str, Any], ...] = ()
    timeout: float = 120.0
    credentials: Credentials = ()

    @classmethod
    def parse(cls, options: Mapping[str, str], schema: Any) -> WriteOptions:
        opts = option_values(options, WRITE)
        names = {f.name: type(f.dataType).__name__ for f in schema.fields}
        if names.get("payload") not in ("BinaryType", "StringType"):
            raise InvalidParamError(message="the logdevice sink needs a binary or string "
                                            f"column 'payload' (columns: {names})")
        log_id = parse_int(opts, "log", 0, minimum=1) if "log" in opts else None
        if log_id is None and names.get("log_id") not in _INT_TYPES:
            raise InvalidParamError(message="the logdevice sink needs option 'log' or an "
                                            "integer column 'log_id'")
        bw: list[tuple[str, Any]] = []
        if "size_trigger" in opts:
            bw.append(("size_trigger", parse_int(opts, "size_trigger", 0, minimum=1)))
        if "time_trigger" in opts:
            bw.append(("time_trigger", parse_float(opts, "time_trigger", 1.0)))
        if "compression" in opts:
            bw.append(("compression", str(opts["compression"]).lower()))
        return cls(config=parse_config(opts), log_id=log_id, writer_options=tuple(bw),
                   timeout=parse_float(opts, "write_timeout", 120.0),
                   credentials=parse_credentials(opts))


@dataclass
class WrittenRanges(WriterCommitMessage):
    """A task's commit message: per log ``(log_id, first_lsn, last_lsn, rows)``."""

    ranges: tuple[tuple[int, int, int, int], ...]

    @property
    def rows(self) -> int:
        return sum(r[3] for r in self.ranges)


def _payload_parts(col: Any) -> tuple[Any, np.ndarray]:
    """An Arrow binary/string column as ``(buffer, offsets from 0)`` for append_many."""
    import pyarrow as pa  # optional: loaded on the workers that write

    if col.null_count:
        raise InvalidParamError(message=f"the logdevice sink cannot write {col.null_count} "
                                        "null payloads")
    large = pa.types.is_large_binary(col.type) or pa.types.is_large_string(col.type)
    width: Any = np.int64 if large else np.int32
    bufs = col.buffers()
    n = len(col)
    offs = np.frombuffer(bufs[1], dtype=width)[col.offset:col.offset + n + 1].astype(np.int64)
    base, end = int(offs[0]), int(offs[-1])
    data = memoryview(bufs[2])[base:end] if bufs[2] is not None else memoryview(b"")
    return data, offs - base


def write_batches(opts: WriteOptions, batches: Iterator[Any]) -> WrittenRanges:
    """Append every row of ``batches`` and wait for all of it; the LSN ranges written."""
    # pyarrow (optional): loaded on the workers that write, not by register()
    import pyarrow as pa
    import pyarrow.compute as pc

    pending: list[tuple[int, Any]] = []
    with connect(opts.config, opts.credentials) as client, \
            client.create_buffered_writer(**dict(opts.writer_options)) as writer:
        for rb in batches:
            if rb.num_rows == 0:
                continue
            payload = rb.column(rb.schema.get_field_index("payload"))
            if opts.log_id is not None:
                pending.append((opts.log_id, writer.append_many(
                    opts.log_id, _payload_parts(payload))))
                continue
            ids_col = rb.column(rb.schema.get_field_index("log_id"))
            if ids_col.null_count:
                raise InvalidParamError(message="the logdevice sink cannot route rows "
                                                "with a null log_id")
            ids = ids_col.to_numpy(zero_copy_only=False).astype(np.int64)
            for log_id in np.unique(ids).tolist():
                rows = np.flatnonzero(ids == log_id)
                part = payload if len(rows) == len(ids) else pc.take(payload, pa.array(rows))
                pending.append((int(log_id), writer.append_many(int(log_id),
                                                                _payload_parts(part))))
        writer.flush()
        done: dict[int, list[np.ndarray]] = {}
        for log_id, fut in pending:
            done.setdefault(log_id, []).append(np.asarray(fut.result(opts.timeout)))
    ranges = []
    for log_id, arrays in sorted(done.items()):
        lsns = np.concatenate(arrays)
        ranges.append((log_id, int(lsns.min()), int(lsns.max()), len(lsns)))
    return WrittenRanges(tuple(ranges))


def _describe(messages: Sequence[WriterCommitMessage | None]) -> tuple[int, int, str]:
    done = [m for m in messages if isinstance(m, WrittenRanges)]
    failed = len(messages) - len(done)
    ranges = ", ".join(f"log {r[0]} [{r[1]}, {r[2]}] ({r[3]} rows)"
                       for m in done for r in m.ranges)
    return sum(m.rows for m in done), failed, ranges or "nothing"


class LogDeviceWriter(DataSourceArrowWriter):
    """Batch writes (``df.write.format("logdevice")``), at least once."""

    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return write_batches(self.opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:  # type: ignore[override]
        rows, _, ranges = _describe(messages)
        log.info("logdevice sink: wrote %d rows: %s", rows, ranges)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:  # type: ignore[override]
        rows, failed, ranges = _describe(messages)
        log.warning("logdevice sink: write job aborted; %d tasks failed (what they "
                    "appended before failing stays in the logs); finished tasks wrote "
                    "%d rows that stay in the logs: %s", failed, rows, ranges)


class LogDeviceStreamWriter(DataSourceStreamArrowWriter):
    """Streaming writes (``writeStream.format("logdevice")``), at least once."""

    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return write_batches(self.opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None],  # type: ignore[override]
               batchId: int) -> None:
        rows, _, ranges = _describe(messages)
        log.info("logdevice sink: micro-batch %d wrote %d rows: %s", batchId, rows, ranges)

    def abort(self, messages: list[WriterCommitMessage | None],  # type: ignore[override]
              batchId: int) -> None:
        rows, failed, ranges = _describe(messages)
        log.warning("logdevice sink: micro-batch %d aborted; %d tasks failed (what they "
                    "appended before failing stays in the logs); finished tasks wrote %d "
                    "rows that stay in the logs (written again if the batch is retried): "
                    "%s", batchId, failed, rows, ranges)
