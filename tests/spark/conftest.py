"""Fixtures for the Spark tests: one real local-mode SparkSession for the whole run, a
real Spark standalone cluster for the tests that need executors in other processes, and
real LocalClusters (the cluster tests' factories).

Starting a session costs ~10-15 s, so every test of tests/spark shares ``spark``; tests
must not change its settings.  Python workers run this interpreter (``PYSPARK_PYTHON``)
and Spark binds to loopback only.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.cluster.conftest import (  # noqa: F401  (fixtures and the report hook)
    local_cluster,
    module_cluster,
    pytest_runtest_makereport,
)
from tests.spark.standalone import StandaloneSpark


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import logdevice.spark

    session = (SparkSession.builder.master("local[2]").appName("logdevice-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    logdevice.spark.register(session)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def spark_standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneSpark]:
    """A Spark standalone master and two workers (2 cores, 1 GiB each) on 127.0.0.1 and
    127.0.0.2 (two hosts, so speculative attempts can run), for the whole run (started
    when a test first asks; ~10 s), killed with their process groups.

    Not a ``SparkSession``: this process holds the local-mode session of ``spark``, and a
    process can hold one ``SparkContext``.  Tests run driver programs against the master
    instead (``run_driver`` / ``start_driver``, scripts in ``tests/spark/drivers/`` using
    ``standalone_app``), which read their JSON result; that is how jobs run on a real
    cluster, and it keeps ``spark`` intact.  ``executor_pids(app_id)`` names the executor
    JVMs (to kill one mid-task, say); logs are under the fixture's directory and quoted
    in every failure.
    """
    cluster = StandaloneSpark(tmp_path_factory.mktemp("spark-standalone"),
                              workers=("127.0.0.1", "127.0.0.2")).start()
    try:
        yield cluster
    finally:
        cluster.close()


def read_all(client: Any, log_id: int, until: int, lo: int = 1) -> list[tuple]:
    """Every record of ``log_id`` in ``lo..until`` through a plain Reader:
    ``(log_id, lsn, batch_offset, payload)`` tuples."""
    out: list[tuple] = []
    if until < lo:
        return out
    deadline = time.monotonic() + 60
    with client.create_reader() as r:
        r.start_reading(log_id, lo, until)
        while True:
            assert time.monotonic() < deadline, f"log {log_id} not read to {until}"
            done = not r.is_reading(log_id)
            b = r.read_batch(10_000, timeout=0 if done else 1.0)
            out += [(x.log_id, x.lsn, x.batch_offset, bytes(x.payload)) for x in b.records()]
            if done and not len(b):
                return out


def rows_of(df: Any) -> list[tuple]:
    """``(log_id, lsn, batch_offset, payload)`` of a DataFrame, in order."""
    return sorted((r.log_id, r.lsn, r.batch_offset, bytes(r.payload))
                  for r in df.select("log_id", "lsn", "batch_offset", "payload").collect())
