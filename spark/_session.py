"""What the jobs in this folder share: the command-line options every job takes and the
SparkSession they run on.

``--master`` defaults to ``local[*]`` (every core of this machine); give a cluster's
master URL, or run the job with ``spark-submit`` (which sets the master itself), for a
real cluster.  The logdevice config path must be readable at the same path on the driver
and on every executor.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any


def add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True,
                        help="logdevice cluster config path (same path on every executor)")
    parser.add_argument("--master", default=None,
                        help="Spark master URL (default: local[*], or what spark-submit set)")
    parser.add_argument("--app-name", default=None, help="Spark application name")


def session(args: argparse.Namespace, app_name: str) -> Any:
    """A SparkSession for ``args`` with the logdevice data source registered."""
    from pyspark.sql import SparkSession

    import logdevice.spark

    # Local mode: Python workers run this interpreter, and Spark binds to loopback.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # Dates derived from record timestamps (partition columns) are UTC dates.
    builder = (SparkSession.builder.appName(args.app_name or app_name)
               .config("spark.sql.session.timeZone", "UTC"))
    # Under spark-submit the JVM started this process (and says so in
    # PYSPARK_GATEWAY_PORT): keep the master it was given unless --master overrides it.
    if args.master or "PYSPARK_GATEWAY_PORT" not in os.environ:
        master = args.master or "local[*]"
        builder = builder.master(master)
        if master.startswith("local"):
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
            builder = builder.config("spark.ui.enabled", "false")
    spark = builder.getOrCreate()
    logdevice.spark.register(spark)
    return spark


def run_job(parser: argparse.ArgumentParser, argv: list[str] | None, app_name: str,
            job: Callable[[argparse.Namespace, Any], str]) -> int:
    """Parse ``argv``, run ``job(args, spark)`` on a session, print the line it returns,
    stop the session."""
    args = parser.parse_args(argv)
    spark = session(args, app_name)
    try:
        print(job(args, spark))
    finally:
        spark.stop()
    return 0
