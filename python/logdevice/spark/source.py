"""The ``logdevice`` data source: the class Spark instantiates.

``LogDeviceDataSource`` hands Spark a batch reader (``batch``, or ``pushdown``'s when
``filter_pushdown`` is on), a stream reader (``stream``) and batch and stream writers
(``sink``).  Spark pickles these objects to its Python workers, so they hold only the
parsed options, with the cluster config read here, on the driver
(``options.with_shipped_config``); clients are opened inside the calls that need them.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader

from logdevice.errors import InvalidParamError
from logdevice.spark.arrow import SPARK_SCHEMA
from logdevice.spark.batch import LogDeviceBatchReader
from logdevice.spark.options import ReadOptions, with_shipped_config
from logdevice.spark.pushdown import LogDeviceFilteringReader
from logdevice.spark.sink import LogDeviceStreamWriter, LogDeviceWriter, WriteOptions
from logdevice.spark.stream import LogDeviceStreamReader, StreamOptions

__all__ = ["LogDeviceDataSource"]


class LogDeviceDataSource(DataSource):
    """Spark data source ``logdevice``: batch and streaming reads, batch and streaming
    writes.  Options (strings): see ``logdevice.spark``."""

    @classmethod
    def name(cls) -> str:
        return "logdevice"

    def schema(self) -> str:
        return SPARK_SCHEMA

    def reader(self, schema: Any) -> DataSourceReader:
        opts = with_shipped_config(ReadOptions.parse(self.options))
        if opts.filter_pushdown:
            return LogDeviceFilteringReader(opts)
        return LogDeviceBatchReader(opts)

    def streamReader(self, schema: Any) -> Any:
        return LogDeviceStreamReader(with_shipped_config(StreamOptions.parse(self.options)))

    def writer(self, schema: Any, overwrite: bool) -> Any:
        _append_only(overwrite)
        return LogDeviceWriter(with_shipped_config(WriteOptions.parse(self.options, schema)))

    def streamWriter(self, schema: Any, overwrite: bool) -> Any:
        _append_only(overwrite)
        return LogDeviceStreamWriter(
            with_shipped_config(WriteOptions.parse(self.options, schema)))


def _append_only(overwrite: bool) -> None:
    if overwrite:
        raise InvalidParamError(message="logs are append-only: write with mode "
                                        "'append', not 'overwrite'")
