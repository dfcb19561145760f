"""Writes through the ``logdevice`` sink, read back with a plain Reader."""

from __future__ import annotations

import collections

import pytest
from pyspark.errors import PySparkException

from logdevice.spark.sink import WriteOptions, WrittenRanges, write_batches
from tests.spark.conftest import read_all

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def cluster(module_cluster):
    return module_cluster(nodes=3, replication=2, logs=range(1, 11))


def payloads(client, log_id: int) -> list[bytes]:
    return [r[3] for r in read_all(client, log_id, client.get_tail_lsn(log_id))]


def test_sink_writes_n_rows_that_a_reader_reads_back(spark, cluster):
    n = 5000
    df = spark.range(n).selectExpr("cast(concat('row-', id) as binary) as payload") \
        .repartition(3)
    (df.write.format("logdevice").option("config", str(cluster.config_path))
     .option("log", "7").mode("append").save())
    with cluster.client() as client:
        got = payloads(client, 7)
    assert len(got) == n
    assert collections.Counter(got) == collections.Counter(b"row-%d" % i for i in range(n))


def test_sink_routes_rows_by_log_id_column_with_string_payloads(spark, cluster):
    df = spark.range(300).selectExpr("cast(id as string) as payload",
                                     "cast(3 + id % 3 as bigint) as log_id")
    (df.write.format("logdevice").option("config", str(cluster.config_path))
     .mode("append").save())
    with cluster.client() as client:
        for k, log_id in enumerate((3, 4, 5)):
            want = sorted(b"%d" % i for i in range(300) if i % 3 == k)
            assert sorted(payloads(client, log_id)) == want


def test_sink_rejects_overwrite_and_a_missing_payload(spark, cluster):
    df = spark.range(3).selectExpr("cast(cast(id as string) as binary) as payload")
    with pytest.raises(PySparkException, match="append-only"):
        (df.write.format("logdevice").option("config", str(cluster.config_path))
         .option("log", "9").mode("overwrite").save())
    # A failing write job leaves what its tasks appended (at least once): log 9 only.
    nulls = spark.createDataFrame([(b"a",), (None,)], "payload binary")
    with pytest.raises(PySparkException, match="null payloads"):
        (nulls.write.format("logdevice").option("config", str(cluster.config_path))
         .option("log", "9").mode("append").save())
    with pytest.raises(PySparkException, match="payload"):
        (spark.range(3).write.format("logdevice")
         .option("config", str(cluster.config_path)).option("log", "9").mode("append").save())


def test_commit_message_carries_the_written_lsn_ranges(cluster):
    import pyarrow as pa

    opts = WriteOptions(config=str(cluster.config_path), log_id=None)
    rb = pa.record_batch({"payload": pa.array([b"a", b"b", b"c", b"d"]).slice(1),
                          "log_id": pa.array([1, 6, 6, 1]).slice(1)})
    msg = write_batches(opts, iter([rb]))
    assert isinstance(msg, WrittenRanges) and msg.rows == 3
    with cluster.client() as client:
        by_log = {log_id: (lo, hi, rows) for log_id, lo, hi, rows in msg.ranges}
        assert set(by_log) == {1, 6}
        for log_id, (lo, hi, rows) in by_log.items():
            recs = read_all(client, log_id, hi, lo)
            assert len(recs) == rows
        assert [r[3] for r in read_all(client, 6, by_log[6][1], by_log[6][0])] == [b"b", b"c"]
        assert [r[3] for r in read_all(client, 1, by_log[1][1], by_log[1][0])] == [b"d"]


def test_streaming_sink_copies_a_log(spark, cluster, tmp_path):
    with cluster.client() as client:
        for i in range(120):
            client.append(2, b"src-%d" % i)
    q = (spark.readStream.format("logdevice").option("config", str(cluster.config_path))
         .option("logs", "2").load().select("payload")
         .writeStream.format("logdevice").option("config", str(cluster.config_path))
         .option("log", "8").option("checkpointLocation", str(tmp_path / "ckpt"))
         .trigger(availableNow=True).start())
    assert q.awaitTermination(120)
    assert q.exception() is None
    with cluster.client() as client:
        assert sorted(payloads(client, 8)) == sorted(b"src-%d" % i for i in range(120))
