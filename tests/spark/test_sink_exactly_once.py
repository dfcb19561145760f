"""The sink's exactly-once writes: a rerun of a task (same writer id, same rows) is
answered with the first attempt's LSNs, whether the first attempt stopped part-way or
runs at the same time (a speculative copy); a rerun with other rows fails loudly.

These drive the executor-side ``write_batches`` directly, as two attempts of one task
would; the Spark scheduler's own reruns are covered on a standalone cluster."""

from __future__ import annotations

import collections
import threading
import time

import pyarrow as pa
import pytest

from logdevice.errors import InvalidParamError, LogDeviceError
from logdevice.spark import sink
from logdevice.spark.sink import WriteOptions, write_batches
from tests.spark.conftest import read_all

pytestmark = pytest.mark.cluster

ROWS_PER_BATCH = 2_000


@pytest.fixture(scope="module")
def cluster(module_cluster):
    return module_cluster(nodes=3, replication=2, logs=range(1, 11))


def _batches(n_batches: int, tag: str = "row"):
    for b in range(n_batches):
        lo = b * ROWS_PER_BATCH
        yield pa.record_batch({"payload": pa.array(
            [b"%s-%07d" % (tag.encode(), i) + b"x" * 200
             for i in range(lo, lo + ROWS_PER_BATCH)])})


def _stopping_after(batches, n: int, cluster, log_id: int):
    """The first ``n`` batches, then the attempt dies (its executor was lost) once some
    of its blobs are stored."""
    for i, rb in enumerate(batches):
        if i == n:
            with cluster.client() as client:
                deadline = time.monotonic() + 30
                while client.get_tail_lsn(log_id) == 0:
                    assert time.monotonic() < deadline, "nothing was stored"
                    time.sleep(0.01)  # polls a condition; bounded
            raise ConnectionResetError("the executor went away")
        yield rb


def _log_payloads(cluster, log_id: int) -> list[bytes]:
    with cluster.client() as client:
        return [r[3] for r in read_all(client, log_id, client.get_tail_lsn(log_id))]


@pytest.fixture
def small_flushes(monkeypatch):
    # A flush (a cut at a row position) every few batches, as a big task has.
    monkeypatch.setattr(sink, "FLUSH_BYTES", 3 * ROWS_PER_BATCH * 200)


def test_a_rerun_after_a_partial_attempt_stores_every_row_once(cluster, small_flushes):
    opts = WriteOptions(config=str(cluster.config_path), log_id=1,
                        writer_options=(("size_trigger", 150_000),))
    with pytest.raises(ConnectionResetError):
        write_batches(opts, _stopping_after(_batches(10), 5, cluster, 1), writer_id=0xC0FFEE)
    stored_by_first = len(_log_payloads(cluster, 1))
    assert 0 < stored_by_first < 10 * ROWS_PER_BATCH
    rerun = write_batches(opts, _batches(10), writer_id=0xC0FFEE)
    assert rerun.rows == 10 * ROWS_PER_BATCH
    got = _log_payloads(cluster, 1)
    assert len(got) == 10 * ROWS_PER_BATCH, (len(got), stored_by_first)
    assert collections.Counter(got) == collections.Counter(
        b"row-%07d" % i + b"x" * 200 for i in range(10 * ROWS_PER_BATCH))


def test_speculative_attempts_at_the_same_time_store_every_row_once(cluster, small_flushes):
    opts = WriteOptions(config=str(cluster.config_path), log_id=2,
                        writer_options=(("size_trigger", 150_000),))
    results: list = [None, None]

    def attempt(i: int) -> None:
        results[i] = write_batches(opts, _batches(8), writer_id=0xBEEF)

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert all(r is not None for r in results)
    assert results[0].ranges == results[1].ranges  # the same LSNs for both attempts
    got = _log_payloads(cluster, 2)
    assert len(got) == 8 * ROWS_PER_BATCH
    assert len(set(got)) == len(got)


def test_without_exactly_once_a_rerun_writes_again(cluster):
    opts = WriteOptions(config=str(cluster.config_path), log_id=3, exactly_once=False)
    write_batches(opts, _batches(2))
    write_batches(opts, _batches(2))
    assert len(_log_payloads(cluster, 3)) == 4 * ROWS_PER_BATCH


def test_a_rerun_with_other_rows_fails_instead_of_dropping_them(cluster):
    opts = WriteOptions(config=str(cluster.config_path), log_id=4,
                        writer_options=(("size_trigger", 150_000),))
    write_batches(opts, _batches(2), writer_id=0xD00D)
    with pytest.raises(LogDeviceError) as err:
        write_batches(opts, _batches(2, tag="changed"), writer_id=0xD00D)
    assert "another payload" in str(err.value)
    assert sorted(_log_payloads(cluster, 4)) == sorted(
        b"row-%07d" % i + b"x" * 200 for i in range(2 * ROWS_PER_BATCH))


def test_time_trigger_needs_at_least_once():
    from pyspark.sql.types import BinaryType, StructField, StructType

    schema = StructType([StructField("payload", BinaryType())])
    with pytest.raises(InvalidParamError, match="exactly_once=false"):
        WriteOptions.parse({"config": "x", "log": "1", "time_trigger": "0.5"}, schema)
    assert not WriteOptions.parse({"config": "x", "log": "1", "time_trigger": "0.5",
                                   "exactly_once": "false"}, schema).exactly_once
