"""The cluster config reaches the tasks inside the pickled options: the driver reads the
file of option ``config`` once, or takes ``config_json`` as it is, and tasks never open a
config file.  And option keys: Spark's lower-cased spellings of the documented names work,
an unknown key fails the query at planning time naming the valid ones."""

from __future__ import annotations

import json
import pickle
import shutil

import pytest
from pyspark.errors import PySparkException
from pyspark.sql.types import BinaryType, StructField, StructType

from logdevice.spark.source import LogDeviceDataSource
from tests.spark.conftest import read_all

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def cluster(module_cluster):
    return module_cluster(nodes=2, replication=1, logs=range(1, 5))


def test_tasks_read_and_write_after_the_config_file_is_gone(cluster, tmp_path):
    import pyarrow as pa

    with cluster.client() as client:
        for i in range(50):
            client.append(1, b"r-%d" % i)
    copy = tmp_path / "cluster.json"
    shutil.copy(cluster.config_path, copy)
    source = LogDeviceDataSource({"config": str(copy), "logs": "1",
                                  "recordsPerPartition": "20"})
    reader = source.reader(source.schema())
    parts = reader.partitions()  # the driver plans: it has the file
    sink = LogDeviceDataSource({"config": str(copy), "log": "2"})
    writer = sink.writer(StructType([StructField("payload", BinaryType())]), False)
    copy.unlink()
    # what a task gets: the pickled reader and writer, on a machine without the file
    task_reader = pickle.loads(pickle.dumps(reader))
    task_writer = pickle.loads(pickle.dumps(writer))
    assert len(parts) > 1
    got = [p for part in pickle.loads(pickle.dumps(parts))
           for b in task_reader.read(part) for p in b.column("payload").to_pylist()]
    assert sorted(got) == sorted(b"r-%d" % i for i in range(50))
    msg = task_writer.write(iter([pa.record_batch({"payload": [b"w-%d" % i
                                                               for i in range(30)]})]))
    assert msg.rows == 30
    with cluster.client() as client:
        assert [r[3] for r in read_all(client, 2, client.get_tail_lsn(2))] == [
            b"w-%d" % i for i in range(30)]


def test_config_json_reads_and_writes_without_any_file(spark, cluster):
    doc = json.dumps(cluster.config.to_dict())
    df = spark.range(80).selectExpr("cast(concat('c-', id) as binary) as payload")
    df.write.format("logdevice").option("config_json", doc).option("log", "3") \
        .mode("append").save()
    rows = (spark.read.format("logdevice").option("configJson", doc).option("logs", "3")
            .option("failOnDataLoss", "true").load().collect())
    assert sorted(bytes(r.payload) for r in rows) == sorted(b"c-%d" % i for i in range(80))


def test_camel_case_options_work_and_unknown_ones_fail_at_planning(spark, cluster):
    with cluster.client() as client:
        lsns = [client.append(4, b"k-%d" % i) for i in range(10)]
    cfg = str(cluster.config_path)
    rows = (spark.read.format("logdevice").option("config", cfg).option("logs", "4")
            .option("fromLsn", str(lsns[7])).load().collect())
    assert sorted(bytes(r.payload) for r in rows) == [b"k-7", b"k-8", b"k-9"]
    with pytest.raises(PySparkException, match=r"unknown option 'fromlsm' for a logdevice "
                                               r"batch read \(did you mean 'from_lsn'\?\)"
                                               r".*Valid options.*until_lsn"):
        (spark.read.format("logdevice").option("config", cfg).option("logs", "4")
         .option("fromLsm", "3").load().collect())
    df = spark.range(2).selectExpr("cast(cast(id as string) as binary) as payload")
    with pytest.raises(PySparkException, match=r"'logs' is not used by a write"):
        (df.write.format("logdevice").option("config", cfg).option("log", "4")
         .option("logs", "4").mode("append").save())
