"""The data source on a Spark standalone cluster: executors are separate JVMs (with their
own Python workers) started by a worker process, the driver another process.  A batch
read, a batch write and an AvailableNow stream into Parquet run there, and the executors
that ran the tasks are the ones ``executor_pids`` finds under the worker."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.spark.conftest import read_all
from tests.spark.standalone import descendants

pytestmark = pytest.mark.cluster

DRIVER = Path(__file__).resolve().parent / "drivers" / "read_write_stream.py"


@pytest.fixture(scope="module")
def cluster(module_cluster):
    return module_cluster(nodes=2, replication=1, logs=range(1, 3))


def test_read_write_and_stream_on_a_standalone_cluster(spark_standalone, cluster, tmp_path):
    with cluster.client() as client:
        for i in range(100):
            client.append(1, b"in-%d" % i)
    driver = spark_standalone.start_driver(DRIVER, str(cluster.config_path), "1", "2", "70",
                                           str(tmp_path / "out"), "--hold")
    try:
        result = driver.result(timeout=240)
        # While the application lives, its executors are found under the worker.
        found = spark_standalone.executor_pids(result["app_id"])
        assert result["executor_pids"] and set(result["executor_pids"]) <= set(found)
        assert set(found) <= {p for w in spark_standalone.worker_pids for p in descendants(w)}
        driver.finish()
    finally:
        driver.kill()
    expected = sorted(f"in-{i}" for i in range(100))
    assert result["batch"] == expected
    assert result["streamed"] == expected
    with cluster.client() as client:
        written = read_all(client, 2, client.get_tail_lsn(2))
    assert sorted(r[3] for r in written) == sorted(b"sa-%d" % i for i in range(70))
