"""The driver side of ``standalone``: what a driver script in ``tests/spark/drivers/`` uses
to reach the standalone master it was started against and to hand back its result.

    spark = session("my-test")      # the master from LD_SPARK_MASTER, logdevice registered
    ... jobs ...
    emit({"rows": n})               # one JSON line the test reads
    hold()                          # optional: keep the application until the test says
    spark.stop()
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from tests.spark.standalone import EXECUTOR_CLASS, RESULT_MARKER, ppid

__all__ = ["session", "emit", "hold", "executor_pid"]


def session(app_name: str, settings: dict[str, str] | None = None) -> Any:
    """A ``SparkSession`` on the standalone master (one executor with two cores unless
    ``settings`` say otherwise), loopback only, with the ``logdevice`` data source
    registered."""
    from pyspark.sql import SparkSession

    import logdevice.spark

    conf = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.executor.memory": "512m",
        "spark.executor.cores": "2",
        "spark.cores.max": "2",
        "spark.sql.shuffle.partitions": "2",
        "spark.sql.session.timeZone": "UTC",
        "spark.pyspark.python": sys.executable,
        "spark.executorEnv.PYTHONPATH": os.environ.get("PYTHONPATH", ""),
        **(settings or {}),
    }
    builder = SparkSession.builder.master(os.environ["LD_SPARK_MASTER"]).appName(app_name)
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    logdevice.spark.register(spark)
    return spark


def emit(result: Any) -> None:
    """Hand ``result`` (JSON-able) to the test."""
    print(RESULT_MARKER + json.dumps(result), flush=True)


def hold() -> None:
    """Wait until the test lets the driver go on (closes its stdin)."""
    sys.stdin.read()


def executor_pid() -> int:
    """Inside a task: the PID of the executor JVM running it (the Python worker's nearest
    ancestor running the executor class; pyspark's daemon, if used, is in between)."""
    pid = os.getpid()
    while True:
        parent = ppid(pid)
        if parent is None or parent <= 1:
            break
        pid = parent
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if EXECUTOR_CLASS.encode() in f.read():
                return pid
    raise RuntimeError("this process does not run under a Spark executor")
