"""The sink writes exactly once when Spark reruns tasks, on a standalone cluster: an
executor JVM killed while its tasks append (Spark reruns them on a new executor), and a
speculative second attempt racing a slow first one.  Every row lands exactly once."""

from __future__ import annotations

import collections
import os
import signal
import time
from pathlib import Path

import pytest

from tests.spark.conftest import read_all

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(420)]

DRIVER = Path(__file__).resolve().parent / "drivers" / "exactly_once_write.py"


@pytest.fixture(scope="module")
def cluster(module_cluster):
    return module_cluster(nodes=3, replication=2, logs=range(1, 5))


def _rows_in(cluster, log_id: int) -> list[bytes]:
    with cluster.client() as client:
        return [r[3] for r in read_all(client, log_id, client.get_tail_lsn(log_id))]


def _assert_exactly_once(cluster, log_id: int, rows: int) -> None:
    got = collections.Counter(_rows_in(cluster, log_id))
    want = collections.Counter(b"row-%08d" % i + b"." * 100 for i in range(rows))
    twice = [p[:12] for p, n in got.items() if n > 1]
    assert not twice, f"{len(twice)} rows stored more than once, e.g. {twice[:3]}"
    assert got == want, f"{sum(got.values())} rows of {rows}"


def _attempts(marks: Path) -> dict[int, set[int]]:
    out: dict[int, set[int]] = {}
    for f in marks.iterdir():
        part, attempt = f.name[1:].split("-a")
        out.setdefault(int(part), set()).add(int(attempt))
    return out


def test_an_executor_killed_mid_write_leaves_every_row_once(spark_standalone, cluster,
                                                            tmp_path):
    log_id, rows = 1, 40_000
    marks = tmp_path / "marks"
    marks.mkdir()
    driver = spark_standalone.start_driver(DRIVER, str(cluster.config_path), str(log_id),
                                           str(rows), "2", str(marks), "slow")
    try:
        with cluster.client() as client:
            deadline = time.monotonic() + 180
            while client.get_tail_lsn(log_id) == 0 or not spark_standalone.executor_pids():
                assert time.monotonic() < deadline, "the tasks never appended"
                assert driver.proc.poll() is None, "the driver ended before the kill"
                time.sleep(0.05)  # polls a condition; bounded
        stored_before = len(_rows_in(cluster, log_id))
        for pid in spark_standalone.executor_pids():
            os.kill(pid, signal.SIGKILL)
        driver.result(timeout=300)
        driver.finish()
    finally:
        driver.kill()
    assert 0 < stored_before < rows
    reran = {p for p, attempts in _attempts(marks).items() if len(attempts) > 1}
    assert reran, f"no task was run again: {_attempts(marks)}"
    _assert_exactly_once(cluster, log_id, rows)


def test_a_speculative_attempt_racing_a_slow_one_leaves_every_row_once(spark_standalone,
                                                                       cluster, tmp_path):
    log_id, rows = 2, 20_000
    marks = tmp_path / "marks"
    marks.mkdir()
    spark_standalone.run_driver(DRIVER, str(cluster.config_path), str(log_id), str(rows),
                                "2", str(marks), "speculate", timeout=300)
    assert _attempts(marks).get(0, set()) >= {0, 1}, \
        f"no speculative attempt of the slow task: {_attempts(marks)}"
    _assert_exactly_once(cluster, log_id, rows)
