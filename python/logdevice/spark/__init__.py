"""Spark for logdevice: logs as DataFrames (batch and streaming) and DataFrames into logs.

    import logdevice.spark
    logdevice.spark.register(spark)
    df = (spark.read.format("logdevice").option("config", "/path/cluster.json")
          .option("logs", "1,2,10-20").load())
    df.write.format("logdevice").option("config", path).option("log", "7").save()

Rows: ``log_id bigint, lsn bigint, batch_offset int, timestamp timestamp, payload binary``
(``SPARK_SCHEMA``); records of a BufferedWriter blob share an LSN and differ in
``batch_offset``.

Options are strings, as Spark passes them; keys are matched without case and without
underscores (``from_lsn``, ``fromLsn`` and ``FROM_LSN`` are one option), and a key that is
no option of that kind of query fails it at planning time with ``InvalidParamError``
naming the valid ones (the names: ``options.OPTIONS``; types, defaults and meanings: the
README's Spark section).

Every query
    ``config`` (a path, read once on the driver) or ``config_json`` (the document itself):
    the cluster config, shipped to the executors inside the query, so they need no config
    file.  ``token`` or ``token_file`` (read on the driver), ``tls_cert``/``tls_key``: the
    principal the query acts as; ``tls_ca``: the CA file to trust instead of the config's
    ``security.tls.ca`` (certificate, key and CA paths must exist on every executor).

Read options
    ``logs`` (required): ``"1,2,10-20"``.  ``from_lsn``/``until_lsn``
    (inclusive; default oldest .. the tail at planning time), ``from_time``/``until_time``
    (ms since the epoch or ISO 8601; from inclusive, until exclusive; turned into LSNs with
    ``find_time``).  ``fail_on_data_loss`` (default ``true``): records the query asked
    for but cannot get fail it (status DATALOSS) naming the log and the LSN range: a
    DATALOSS gap, an explicit ``from_lsn`` (or a stream's checkpointed offset) at or
    below the trim point, a trim that races the read; ``false`` skips them with a
    warning and counts them (see ``loss``).  The default start is the trim point, not
    loss.  BRIDGE and HOLE gaps hold no records and are skipped.
    ``records_per_partition``, ``bytes_per_partition``: how much one task reads (the plan
    uses trim points, tails, storage size estimates and ``find_time``; it reads no payload).
    ``batch_records``: rows per Arrow batch.  ``read_timeout``: seconds without progress
    before a task fails.  ``filter_pushdown`` (default ``false``; needs the session
    setting ``spark.sql.python.filterPushdown.enabled=true``): ``lsn``, ``log_id`` and
    ``timestamp`` conditions of the query narrow the plan (see ``pushdown``).

Streaming read options
    ``logs``, ``fail_on_data_loss``, ``records_per_partition``, ``batch_records``,
    ``read_timeout`` as above; ``starting_offsets``: ``earliest`` (default), ``latest`` or JSON
    ``{"<log>": lsn}``, or ``starting_timestamp`` (ms or ISO 8601: per log the first
    record at or after it, by ``find_time``; not with ``starting_offsets``), both used
    only without a checkpoint; ``max_records_per_trigger``: admission control (records,
    a blob counting as all it holds; whole blobs only).  Offsets are
    ``{"<log>": next_lsn}``.  ``query.lastProgress``'s ``sources[i].latestOffset`` shows
    per log ``latest`` (tail + 1), ``lag`` (LSNs left behind the tail after the
    micro-batch) and ``skipped`` (trimmed ranges skipped with
    ``fail_on_data_loss=false``).  Every micro-batch reads LSN ranges that were released when
    it was planned, and released records never change, so a query restarted from its
    checkpoint re-reads exactly the same ranges: with an idempotent sink (Spark's file
    sink) every record lands exactly once.

Write options
    ``log``: the log to write every row to, or else a ``log_id`` column routes each row.
    The DataFrame needs a ``payload`` column (binary or string).  ``size_trigger``,
    ``time_trigger``, ``compression``: the BufferedWriter's; ``write_timeout``: seconds a
    task waits for its appends; ``exactly_once`` (default true).
    Delivery is **exactly once per task**: a task's writer id comes from the write job
    (streaming: the query id and micro-batch) and its partition, and its blobs are cut
    at row positions only, so a rerun or speculative attempt of the task is answered
    with the first attempt's LSNs instead of writing its rows again (see ``sink``).
    Failed jobs log what their successful tasks wrote on the driver.  With
    ``exactly_once=false``: at least once.

``read_ranges(df, config)`` reads ranges a pipeline computed itself: one row per
``(log_id, from_lsn, until_lsn)`` in, the records of those ranges out (it takes
``config_json`` and the security options as keyword arguments).
"""

from __future__ import annotations

from typing import Any

from logdevice.spark.arrow import SPARK_SCHEMA, arrow_schema
from logdevice.spark.options import parse_config, parse_credentials, ship_config
from logdevice.spark.ranges import ranges_reader

__all__ = ["SPARK_SCHEMA", "arrow_schema", "register", "read_ranges"]


def register(spark: Any) -> None:
    """Register the ``logdevice`` data source on a ``SparkSession``."""
    # source needs pyspark (optional): logdevice.spark imports without it
    from logdevice.spark.source import LogDeviceDataSource

    spark.dataSource.register(LogDeviceDataSource)


def read_ranges(df: Any, config: str | None = None, *, config_json: str | None = None,
                fail_on_data_loss: bool = True, batch_records: int = 65_536,
                read_timeout: float = 120.0, tls_cert: str | None = None,
                tls_key: str | None = None, tls_ca: str | None = None,
                token: str | None = None, token_file: str | None = None) -> Any:
    """The records of the LSN ranges listed in ``df``, through ``mapInArrow``.

    Parameters
    ----------
    df : pyspark.sql.DataFrame
        Columns ``log_id``, ``from_lsn``, ``until_lsn`` (integers; inclusive ranges).
        Each row is read by the task that holds it, so repartition ``df`` to spread them.
    config, config_json : str
        The cluster config: its path (read here, on the driver) or the document itself;
        exactly one.  Executors get the document, not the path.
    fail_on_data_loss, batch_records, read_timeout, tls_cert, tls_key, tls_ca, token, token_file
        As the data source's options of the same names.

    Returns
    -------
    pyspark.sql.DataFrame
        ``SPARK_SCHEMA`` rows, range by range.
    """
    given = {"config": config, "config_json": config_json, "tls_cert": tls_cert,
             "tls_key": tls_key, "tls_ca": tls_ca, "token": token, "token_file": token_file}
    opts = {k: v for k, v in given.items() if v is not None}
    return df.select("log_id", "from_lsn", "until_lsn").mapInArrow(
        ranges_reader(ship_config(parse_config(opts)), fail_on_data_loss, batch_records,
                      read_timeout, parse_credentials(opts)),
        SPARK_SCHEMA)
