"""The rows the data source gives Spark, as Arrow: the schema and the conversion.

Spark checks a Python data source's Arrow batches against the declared schema exactly, so
``ReaderBatch.to_arrow()`` (uint64 ids, millisecond timestamps, its own column order) is
reshaped here: the integer buffers are reinterpreted in place (ids stay below 2**63, batch
offsets below 2**31), timestamps become microseconds in one vectorized cast, and the
payload column is passed through untouched.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from logdevice.client.read.batch import ReaderBatch

__all__ = ["SPARK_SCHEMA", "arrow_schema", "to_spark_batch", "empty_spark_batch"]

#: The DDL of the rows, in Spark's words.
SPARK_SCHEMA = "log_id bigint, lsn bigint, batch_offset int, timestamp timestamp, payload binary"


def arrow_schema() -> Any:
    """``SPARK_SCHEMA`` as a ``pyarrow.Schema`` (what Spark accepts for it)."""
    import pyarrow as pa  # optional: logdevice.spark imports without it

    return pa.schema([("log_id", pa.int64()), ("lsn", pa.int64()),
                      ("batch_offset", pa.int32()),
                      ("timestamp", pa.timestamp("us", tz="UTC")),
                      ("payload", pa.binary())])


def _reinterpret(col: Any, typ: Any) -> Any:
    import pyarrow as pa  # optional: logdevice.spark imports without it

    return pa.Array.from_buffers(typ, len(col), [None, col.buffers()[1]], offset=col.offset)


def to_spark_batch(batch: ReaderBatch) -> Any:
    """The rows of ``batch`` as a ``pyarrow.RecordBatch`` with ``arrow_schema()``."""
    import pyarrow as pa  # optional: logdevice.spark imports without it

    a = batch.to_arrow(large_binary=False)
    return pa.RecordBatch.from_arrays(
        [_reinterpret(a.column(0), pa.int64()), _reinterpret(a.column(1), pa.int64()),
         _reinterpret(a.column(3), pa.int32()),
         a.column(2).cast(pa.timestamp("us", tz="UTC")), a.column(4)],
        schema=arrow_schema())


def empty_spark_batch() -> Any:
    import pyarrow as pa  # optional: logdevice.spark imports without it

    return pa.RecordBatch.from_pylist([], schema=arrow_schema())
