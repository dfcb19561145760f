"""``df.write.format("logdevice")`` and ``writeStream``: DataFrames into logs.

Each Spark task opens a ``Client`` and a ``BufferedWriter``, appends the ``payload``
column of each Arrow batch with one ``append_many`` per log (rows routed by the ``log``
option or a ``log_id`` column, grouped with numpy, not row by row), waits for every
append and returns the LSN ranges it wrote as its commit message.

Exactly once (the default, ``exactly_once=true``).  A task's writer takes an id derived
from the write job (batch writes: a token the driver draws once per job; streaming: the
query's id, stable across restarts from the checkpoint, and the micro-batch id) and the
task's partition, and cuts its blobs only by size and at row positions, never by time.
A retried or speculative attempt of the same task therefore sends the same blobs under
the same id and blob numbers, and the sequencer answers each blob the first attempt
stored with that attempt's LSN instead of storing it again (also after sequencer
failovers, within the cluster's ``idempotence_window_ms``).  An attempt that fails, or
whose executor JVM is killed under it (its rows then just stop coming), never sends its
last, partial blob: the rerun cuts that one fuller.  What this needs from Spark:
a task's rerun sees the same rows in the same order (true for deterministic plans; a
rerun whose rows differ has its changed blobs refused with INVALID_PARAM and fails
rather than dropping rows).  Limits: a rerun must come within the idempotence window
(15 minutes by default), and a task writes at most ``producers.DEFAULT_WINDOW`` (1,024)
blobs per log for all of them to be recognised.  A failed job still leaves the rows of
its finished tasks in the logs (logs are append-only; the driver logs what on abort).

``exactly_once=false`` gives each attempt a random writer id and lets ``time_trigger``
cut blobs: at least once (a rerun appends its rows again).
"""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
import signal
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from logdevice.errors import E, InvalidParamError, LogDeviceError
from logdevice.spark.options import (
    WRITE,
    ConfigRef,
    Credentials,
    connect,
    option_values,
    parse_bool,
    parse_config,
    parse_credentials,
    parse_float,
    parse_int,
)

__all__ = ["WriteOptions", "WrittenRanges", "LogDeviceWriter", "LogDeviceStreamWriter",
           "write_batches"]

log = logging.getLogger("logdevice.spark")

_INT_TYPES = ("LongType", "IntegerType", "ShortType", "ByteType")
#: Exactly once: the writer flushes after this many payload bytes (a cut that depends on
#: the rows only) and keeps at most two such windows in flight.
FLUSH_BYTES = 64 << 20


@dataclass(frozen=True)
class WriteOptions:
    config: ConfigRef
    log_id: int | None  # None: the log_id column routes rows
    writer_options: tuple[tuple[str, Any], ...] = ()
    timeout: float = 120.0
    credentials: Credentials = ()
    exactly_once: bool = True

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
        exactly_once = parse_bool(opts, "exactly_once", True)
        if "time_trigger" in opts:
            if exactly_once:
                raise InvalidParamError(message="option time_trigger cuts blobs by time, "
                                                "so a rerun of a task would cut them "
                                                "differently: it needs exactly_once=false")
            bw.append(("time_trigger", parse_float(opts, "time_trigger", 1.0)))
        if "compression" in opts:
            bw.append(("compression", str(opts["compression"]).lower()))
        return cls(config=parse_config(opts), log_id=log_id, writer_options=tuple(bw),
                   timeout=parse_float(opts, "write_timeout", 120.0),
                   credentials=parse_credentials(opts), exactly_once=exactly_once)


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


def task_writer_id(job: str) -> int:
    """The writer id of this Spark task of write job ``job``: the same for every attempt
    of the task (and, streaming, for a rerun of the micro-batch after a restart)."""
    from pyspark import TaskContext  # pyspark (optional): only on the workers that write

    ctx = TaskContext.get()
    if ctx is None:  # called outside a Spark task: nothing will rerun it
        return secrets.randbits(64) | 1
    query = ctx.getLocalProperty("sql.streaming.queryId")
    batch = ctx.getLocalProperty("streaming.sql.batchId")
    key = f"{query or job}/{batch or ''}/{ctx.partitionId()}"
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big") | 1


def _jvm_ancestor() -> int | None:
    """The PID of the JVM this Python worker runs under (its nearest ``java`` ancestor),
    or None if it cannot be told (no ``/proc``, or no JVM above us)."""
    pid = os.getpid()
    for _ in range(16):
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
            pid = int(stat[stat.rindex(")") + 2:].split()[1])  # the parent
            if pid <= 1:
                return None
            if os.path.basename(os.readlink(f"/proc/{pid}/exe")).startswith("java"):
                return pid
        except (OSError, ValueError):
            return None
    return None


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs and is not being killed.  A SIGKILLed process closes its
    sockets while it exits, before it is a zombie; the signal stays in its shared pending
    set (``ShdPnd``) from the kill until it is reaped, so that is what tells."""
    try:
        with open(f"/proc/{pid}/status") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
    except OSError:
        return False
    if fields.get("State", "").strip()[:1] in ("Z", "X"):
        return False
    sigkill = 1 << (signal.SIGKILL - 1)
    return not int(fields.get("ShdPnd", "0").strip() or "0", 16) & sigkill


def write_batches(opts: WriteOptions, batches: Iterator[Any],
                  writer_id: int | None = None) -> WrittenRanges:
    """Append every row of ``batches`` and wait for all of it; the LSN ranges written.
    ``writer_id``: write exactly once under this id (see the module docstring)."""
    # pyarrow (optional): loaded on the workers that write, not by register()
    import pyarrow as pa
    import pyarrow.compute as pc

    options = dict(opts.writer_options)
    if writer_id is not None:
        # Blobs cut by size and at row positions only; memory bounded by waiting below.
        options.update(writer_id=writer_id, time_trigger=None, memory_limit_bytes=None)
    jvm = _jvm_ancestor() if writer_id is not None else None
    done: dict[int, list[np.ndarray]] = {}
    pending: deque[tuple[int, int, Any]] = deque()  # (flush number, log, future)
    flushes = unflushed = 0
    # The writer is not a context manager here: closing it flushes, and a task that
    # fails part-way must not send its last, partial blob (a rerun cuts that blob
    # fuller, and the sequencer would refuse it as another payload under the same
    # number).  Closing the client instead fails what is buffered without sending it.
    with connect(opts.config, opts.credentials) as client:
        writer = client.create_buffered_writer(**options)

        def append(log_id: int, col: Any) -> None:
            nonlocal unflushed
            data, offsets = _payload_parts(col)
            pending.append((flushes, log_id, writer.append_many(log_id, (data, offsets))))
            unflushed += int(offsets[-1])

        def collect(upto: int) -> None:
            while pending and pending[0][0] < upto:
                _, log_id, fut = pending.popleft()
                done.setdefault(log_id, []).append(np.asarray(fut.result(opts.timeout)))

        for rb in batches:
            if rb.num_rows == 0:
                continue
            payload = rb.column(rb.schema.get_field_index("payload"))
            if opts.log_id is not None:
                append(opts.log_id, payload)
            else:
                ids_col = rb.column(rb.schema.get_field_index("log_id"))
                if ids_col.null_count:
                    raise InvalidParamError(message="the logdevice sink cannot route rows "
                                                    "with a null log_id")
                ids = ids_col.to_numpy(zero_copy_only=False).astype(np.int64)
                for log_id in np.unique(ids).tolist():
                    rows = np.flatnonzero(ids == log_id)
                    append(int(log_id), payload if len(rows) == len(ids)
                           else pc.take(payload, pa.array(rows)))
            if writer_id is not None and unflushed >= FLUSH_BYTES:
                writer.flush()  # every blob so far is cut: its future can be waited for
                flushes += 1
                unflushed = 0
                collect(flushes - 1)  # at most two windows in flight
        if writer_id is not None and jvm is not None and not _alive(jvm):
            # The executor died: the rows stopped coming without an error (the Arrow
            # stream just ends), so the last blob would be cut short; Spark reruns the
            # task, which cuts it full.
            raise LogDeviceError(E.SHUTDOWN, "the executor running this task is gone: "
                                             "its last, partial blob is not sent")
        writer.flush()
        collect(flushes + 1)
        writer.close()
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
    """Batch writes (``df.write.format("logdevice")``), exactly once unless
    ``exactly_once=false``."""

    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts
        self.job = secrets.token_hex(16)  # drawn once per write job, on the driver

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return write_batches(self.opts, iterator, task_writer_id(self.job)
                             if self.opts.exactly_once else None)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:  # type: ignore[override]
        rows, _, ranges = _describe(messages)
        log.info("logdevice sink: wrote %d rows: %s", rows, ranges)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:  # type: ignore[override]
        rows, failed, ranges = _describe(messages)
        log.warning("logdevice sink: write job aborted; %d tasks failed (what they "
                    "appended before failing stays in the logs); finished tasks wrote "
                    "%d rows that stay in the logs: %s", failed, rows, ranges)


class LogDeviceStreamWriter(DataSourceStreamArrowWriter):
    """Streaming writes (``writeStream.format("logdevice")``), exactly once unless
    ``exactly_once=false``."""

    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts
        self.job = secrets.token_hex(16)  # if the query's id cannot be read in a task

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return write_batches(self.opts, iterator, task_writer_id(self.job)
                             if self.opts.exactly_once else None)

    def commit(self, messages: list[WriterCommitMessage | None],  # type: ignore[override]
               batchId: int) -> None:
        rows, _, ranges = _describe(messages)
        log.info("logdevice sink: micro-batch %d wrote %d rows: %s", batchId, rows, ranges)

    def abort(self, messages: list[WriterCommitMessage | None],  # type: ignore[override]
              batchId: int) -> None:
        rows, failed, ranges = _describe(messages)
        log.warning("logdevice sink: micro-batch %d aborted; %d tasks failed (what they "
                    "appended before failing stays in the logs); finished tasks wrote %d "
                    "rows that stay in the logs (a rerun of the batch is answered with "
                    "them, not written again, with exactly_once): "
                    "%s", batchId, failed, rows, ranges)
