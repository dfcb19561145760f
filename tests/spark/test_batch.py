"""Batch reads through the ``logdevice`` data source against a real cluster."""

from __future__ import annotations

import datetime as dt
import time

import pyarrow as pa
import pytest
from pyspark.errors import PySparkException

import logdevice as ld
import logdevice.spark
from logdevice.spark.plan import Slice
from logdevice.spark.read import ReadStats, read_slices
from tests.spark.conftest import read_all, rows_of

pytestmark = pytest.mark.cluster

PLAIN, BLOBS, EMPTY, TIMED, TRIMMED = 1, 2, 3, 4, 5


@pytest.fixture(scope="module")
def logs(module_cluster):
    """A cluster with plain appends in log 1, BufferedWriter blobs in log 2 (rows share
    LSNs), nothing in log 3, and two timed bursts in log 4."""
    cluster = module_cluster(nodes=3, replication=2, logs=range(1, 9))
    client = cluster.client()
    # One at a time, so the records spread over time: the plan estimates a range's size
    # from the timestamps at its ends (a burst in one millisecond would look as big as
    # the whole log to any range inside it).
    for i in range(300):
        client.append(PLAIN, b"plain-%d" % i)
    with client.create_buffered_writer(size_trigger=2000) as w:
        w.append_many(BLOBS, [b"blob-%04d" % i for i in range(1000)]).result(30)
    first = [client.append(TIMED, b"early-%d" % i) for i in range(20)]
    time.sleep(0.05)  # a gap in time between the bursts, for find_time
    split_ms = int(time.time() * 1000)
    time.sleep(0.05)
    second = [client.append(TIMED, b"late-%d" % i) for i in range(30)]
    trimmed = [client.append(TRIMMED, b"t-%d" % i) for i in range(40)]
    client.trim(TRIMMED, trimmed[14])
    yield cluster, client, {"split_ms": split_ms, "first": first, "second": second,
                            "trimmed": trimmed}
    client.close()


def load(spark, cluster, logs_spec: str, **options):
    r = (spark.read.format("logdevice").option("config", str(cluster.config_path))
         .option("logs", logs_spec))
    for k, v in options.items():
        r = r.option(k, str(v))
    return r.load()


def test_schema_is_exact(spark, logs):
    cluster, _, _ = logs
    df = load(spark, cluster, "1")
    assert df.schema.simpleString() == ("struct<log_id:bigint,lsn:bigint,batch_offset:int,"
                                        "timestamp:timestamp,payload:binary>")
    assert logdevice.spark.arrow_schema() == pa.schema(
        [("log_id", pa.int64()), ("lsn", pa.int64()), ("batch_offset", pa.int32()),
         ("timestamp", pa.timestamp("us", tz="UTC")), ("payload", pa.binary())])


def test_read_slices_yields_the_spark_arrow_schema(logs):
    cluster, client, _ = logs
    tail = client.get_tail_lsn(BLOBS)
    batches = list(read_slices(str(cluster.config_path), [Slice(BLOBS, 1, tail)],
                               batch_records=300))
    assert batches and all(b.schema == logdevice.spark.arrow_schema() for b in batches)
    assert sum(b.num_rows for b in batches) == 1000


def test_batch_read_equals_reader_output(spark, logs):
    cluster, client, _ = logs
    expected = []
    for log_id in (PLAIN, BLOBS, EMPTY, TIMED):
        expected += read_all(client, log_id, client.get_tail_lsn(log_id))
    assert len(expected) == 300 + 1000 + 50
    # Small partitions: the plan cuts the logs into several slices.
    df = load(spark, cluster, "1-4", records_per_partition=64)
    assert df.rdd.getNumPartitions() > 4
    assert rows_of(df) == sorted(expected)


def test_timestamps_are_the_records(spark, logs):
    cluster, client, _ = logs
    want = {(x.lsn, x.timestamp) for x in read_all_items(client, TIMED)}
    got = {(r.lsn, int(r.timestamp.timestamp() * 1000))
           for r in load(spark, cluster, str(TIMED)).collect()}
    assert got == want


def read_all_items(client, log_id):
    with client.create_reader() as r:
        r.start_reading(log_id, 1, client.get_tail_lsn(log_id))
        return [x for x in r if isinstance(x, ld.DataRecord)]


def test_lsn_and_time_ranges(spark, logs):
    cluster, _, info = logs
    first, second = info["first"], info["second"]
    df = load(spark, cluster, str(TIMED), from_lsn=first[5], until_lsn=second[3])
    assert sorted(r.lsn for r in df.collect()) == first[5:] + second[:4]
    df = load(spark, cluster, str(TIMED), from_time=info["split_ms"])
    assert sorted(r.lsn for r in df.collect()) == second
    df = load(spark, cluster, str(TIMED), until_time=info["split_ms"])
    assert sorted(r.lsn for r in df.collect()) == first


def test_empty_log_and_empty_range(spark, logs):
    cluster, _, _ = logs
    assert load(spark, cluster, str(EMPTY)).count() == 0
    assert load(spark, cluster, str(PLAIN), from_lsn=ld.LSN_MAX - 5).count() == 0


def test_bad_options_fail_with_the_option_named(spark, logs):
    cluster, _, _ = logs
    with pytest.raises(PySparkException, match="logs"):
        spark.read.format("logdevice").option("config", str(cluster.config_path)).load() \
            .collect()
    with pytest.raises(PySparkException, match="fail_on_data_loss"):
        load(spark, cluster, "1", fail_on_data_loss="maybe").collect()


def test_read_ranges_fans_out_over_a_dataframe(spark, logs):
    cluster, client, _ = logs
    tail = client.get_tail_lsn(PLAIN)
    want = read_all(client, PLAIN, tail)
    cut = want[100][1]
    ranges = spark.createDataFrame([(PLAIN, 1, cut - 1), (PLAIN, cut, tail)],
                                   "log_id bigint, from_lsn bigint, until_lsn bigint")
    out = logdevice.spark.read_ranges(ranges.repartition(2), str(cluster.config_path))
    assert out.schema == load(spark, cluster, "1").schema
    assert rows_of(out) == sorted(want)


def test_filter_pushdown_narrows_the_plan(spark, logs):
    cluster, _, info = logs
    first, second = info["first"], info["second"]
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    try:
        df = load(spark, cluster, "1-4", filter_pushdown="true")
        q = df.where((df.lsn >= first[3]) & (df.lsn < second[2]) & (df.log_id == TIMED))
        assert sorted(r.lsn for r in q.collect()) == first[3:] + second[:2]
        # Only log 4 and only that LSN range were planned.
        assert q.rdd.getNumPartitions() == 1
        split = dt.datetime.fromtimestamp(info["split_ms"] / 1000, dt.UTC)
        late = df.where((df.timestamp >= split) & (df.log_id == TIMED))
        assert sorted(r.lsn for r in late.collect()) == second
    finally:
        spark.conf.unset("spark.sql.python.filterPushdown.enabled")


def test_trimmed_ranges_are_loss_unless_skipped(spark, logs):
    cluster, _, info = logs
    trimmed = info["trimmed"]
    kept = trimmed[15:]
    # The default start is the trim point: no loss.
    assert sorted(r.lsn for r in load(spark, cluster, str(TRIMMED)).collect()) == kept
    # A slice that starts below the trim point reads a TRIM gap: loss.
    with pytest.raises(ld.LogDeviceError, match=r"log 5: LSN range \[\d+, \d+\] was "
                                                r"trimmed.*fail_on_data_loss=false") as info_:
        list(read_slices(str(cluster.config_path), [Slice(TRIMMED, 1, kept[-1])]))
    assert info_.value.status == ld.E.DATALOSS
    stats = ReadStats()
    rows = [x for b in read_slices(str(cluster.config_path), [Slice(TRIMMED, 1, kept[-1])],
                                   fail_on_data_loss=False, stats=stats)
            for x in b.column("lsn").to_pylist()]
    assert rows == kept
    assert stats.trimmed_ranges == 1 and stats.trimmed_lsns >= 15


def test_partitions_follow_the_range_size_not_the_log_size(spark, logs):
    cluster, client, _ = logs
    lsns = [r[1] for r in read_all(client, PLAIN, client.get_tail_lsn(PLAIN))]
    whole = load(spark, cluster, str(PLAIN), bytes_per_partition=2000)
    assert whole.rdd.getNumPartitions() > 1  # the storage nodes' size estimate splits it
    part = load(spark, cluster, str(PLAIN), bytes_per_partition=2000,
                from_lsn=lsns[100], until_lsn=lsns[109])
    assert part.rdd.getNumPartitions() == 1
    assert sorted(r.lsn for r in part.collect()) == lsns[100:110]


def test_planning_many_logs_costs_requests_per_node_not_per_log(logs):
    """The extents come from one ``log_summaries`` (a request per node) and equal what
    the per-log calls say, for every kind of log and range option."""
    from logdevice.spark.extents import client_extents, log_extent
    from logdevice.spark.options import ReadOptions

    cluster, client, info = logs
    nodes = len(cluster.config.nodes)
    spec = {"config": str(cluster.config_path), "logs": "1-8"}
    for extra in ({}, {"from_time": str(info["split_ms"])},
                  {"until_time": str(info["split_ms"]), "fail_on_data_loss": "false"}):
        opts = ReadOptions.parse({**spec, **extra})
        before = client.stats
        found = client_extents(client, opts.logs, opts)
        after = client.stats
        sent = sum(after[k] - before[k] for k in ("storage_requests", "sequencer_requests"))
        assert sent <= 3 * nodes < 8 * nodes, extra  # a handful per node, not per log
        per_log = [log_extent(client, log_id, opts) for log_id in opts.logs]
        assert [(e.log_id, e.lo, e.hi) for e in found] == \
            [(e.log_id, e.lo, e.hi) for e in per_log], extra
        for a, b in zip(found, per_log, strict=True):
            if b.lo <= b.hi and b.est_bytes:
                # Both interpolate the partitions' statistics over the window; the
                # summary starts a trimmed log's window at its first record left, the
                # per-log calls at the asked time, so on a log of a few records that
                # straddle the window's start they may differ by a factor of 2 or so.
                assert 0.25 <= a.est_bytes / b.est_bytes <= 4, (extra, a, b)
