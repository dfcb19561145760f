"""Data loss: the query fails naming the log and LSN range, or skips it with
``fail_on_data_loss=false``.

DATALOSS gaps: records are lost for real: two of four storage nodes (R=2) are stopped,
their data directories wiped and restarted, so records whose copysets were exactly those
two nodes are gone and readers get DATALOSS gaps for them.  Trims (``client.trim``):
ranges that start below the trim point when planned (an explicit ``from_lsn``, a
stream's checkpoint older than a trim) and trims that race a planned read.
"""

from __future__ import annotations

import json
import re
import shutil

import pytest
from pyspark.errors import PySparkException

import logdevice as ld
from logdevice.spark.extents import log_extents
from logdevice.spark.loss import LossCounter
from logdevice.spark.options import ReadOptions
from logdevice.spark.plan import plan_extents
from logdevice.spark.read import ReadStats, read_slices
from tests.cluster.conftest import RawClient
from tests.spark.conftest import read_all, rows_of

pytestmark = pytest.mark.cluster

LOG = 1


def test_dataloss_fails_the_query_or_is_skipped(spark, local_cluster):
    # Rebuilding held off (nodes read the event log once an hour): the lost records stay
    # lost and the reader must say so.
    cluster = local_cluster(nodes=4, replication=2, logs=range(1, 3),
                            rebuilding_poll_ms=3_600_000)
    with ld.Client(cluster.config_path, timeout=20.0) as client:
        futs = [client.append_async(LOG, b"p-%d" % i) for i in range(600)]
        lsns = [f.result(30) for f in futs]
        with RawClient(cluster) as raw:
            owner = raw.owner(LOG)
        wiped = [n for n in range(cluster.n) if n != owner][:2]
        for n in wiped:
            cluster.stop(n)
        for n in wiped:
            shutil.rmtree(cluster.node_data_dir(n))
            cluster.start(n)
        kept = read_all(client, LOG, max(lsns))
        assert 0 < len(kept) < len(lsns)  # some copysets were exactly the wiped nodes

        def load(**options):
            r = (spark.read.format("logdevice").option("config", str(cluster.config_path))
                 .option("logs", str(LOG)))
            for k, v in options.items():
                r = r.option(k, v)
            return r.load()

        with pytest.raises(PySparkException) as info:
            load().collect()
        text = str(info.value)
        m = re.search(r"log 1: records lost in LSN range \[(\d+), (\d+)\]", text)
        assert m, text
        lo, hi = int(m.group(1)), int(m.group(2))
        kept_lsns = {r[1] for r in kept}
        assert lo <= hi and not any(lo <= x <= hi for x in kept_lsns)
        assert any(lo <= x <= hi for x in lsns)  # the range holds an acknowledged record

        assert rows_of(load(fail_on_data_loss="false")) == sorted(kept)


def test_trimmed_start_fails_the_batch_or_is_skipped_and_counted(spark, local_cluster):
    cluster = local_cluster(nodes=3, replication=2, logs=range(1, 3))
    cfg = str(cluster.config_path)
    with ld.Client(cluster.config_path, timeout=20.0) as client:
        lsns = [client.append(LOG, b"r-%d" % i) for i in range(50)]
        client.trim(LOG, lsns[19])

        def load(**options):
            r = spark.read.format("logdevice").option("config", cfg).option("logs", "1")
            for k, v in options.items():
                r = r.option(k, str(v))
            return r.load()

        # The default start means "from the trim point": nothing is lost.
        assert sorted(r.lsn for r in load().collect()) == lsns[20:]
        # An explicit start below the trim point asks for trimmed records.
        with pytest.raises(PySparkException) as info:
            load(from_lsn=lsns[5]).collect()
        assert f"log 1: LSN range [{lsns[5]}, {lsns[19]}] was trimmed" in str(info.value)
        assert "DATALOSS" in str(info.value)
        assert "fail_on_data_loss=false" in str(info.value)
        assert sorted(r.lsn for r in load(from_lsn=lsns[5], fail_on_data_loss="false")
                      .collect()) == lsns[20:]
        skipped = LossCounter()
        opts = ReadOptions.parse({"config": cfg, "logs": "1", "from_lsn": str(lsns[5]),
                                  "fail_on_data_loss": "false"})
        [ext] = log_extents(cfg, [LOG], opts, skipped)
        assert (ext.lo, skipped.trimmed_ranges) == (lsns[20], 1)
        assert skipped.trimmed_lsns == lsns[19] - lsns[5] + 1


def test_a_trim_racing_the_read_is_loss_on_the_executor(local_cluster):
    cluster = local_cluster(nodes=3, replication=2, logs=range(1, 3))
    cfg = str(cluster.config_path)
    with ld.Client(cluster.config_path, timeout=20.0) as client:
        lsns = [client.append(LOG, b"r-%d" % i) for i in range(50)]
        client.trim(LOG, lsns[9])
        opts = ReadOptions.parse({"config": cfg, "logs": "1"})
        # Planned above the trim point, then the log is trimmed before the task reads.
        parts = plan_extents(log_extents(cfg, [LOG], opts), 10**6, 1 << 40)
        [part] = parts
        assert part.slices[0].lo == lsns[10]
        client.trim(LOG, lsns[29])
        with pytest.raises(ld.LogDeviceError) as info:
            list(read_slices(cfg, part.slices))
        assert info.value.status == ld.E.DATALOSS
        m = re.search(r"log 1: LSN range \[(\d+), (\d+)\] was trimmed", str(info.value))
        assert m and int(m.group(1)) == lsns[10] and int(m.group(2)) >= lsns[29], info.value
        stats = ReadStats()
        got = [x for b in read_slices(cfg, part.slices, fail_on_data_loss=False, stats=stats)
               for x in b.column("lsn").to_pylist()]
        assert got == lsns[30:]
        assert stats.trimmed_ranges == 1 and stats.records == 20


def _stream(spark, cfg, out, ckpt, **options):
    r = spark.readStream.format("logdevice").option("config", cfg).option("logs", "1")
    for k, v in options.items():
        r = r.option(k, str(v))
    return (r.load().writeStream.format("parquet").option("path", str(out))
            .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start())


def _reports(q) -> list[dict]:
    out = []
    for p in q.recentProgress:
        latest = p["sources"][0].get("latestOffset")
        out.append(json.loads(latest) if isinstance(latest, str) else latest)
    return [r for r in out if r]


def test_stream_restarted_past_a_trim_fails_or_skips_and_reports(spark, local_cluster,
                                                                 tmp_path):
    cluster = local_cluster(nodes=3, replication=2, logs=range(1, 3))
    cfg = str(cluster.config_path)
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    with ld.Client(cluster.config_path, timeout=20.0) as client:
        first = [client.append(LOG, b"a-%d" % i) for i in range(30)]
        q = _stream(spark, cfg, out, ckpt)
        assert q.awaitTermination(120) and q.exception() is None
        # While the query is stopped: more records, and a trim past its committed offset.
        second = [client.append(LOG, b"b-%d" % i) for i in range(30)]
        client.trim(LOG, second[9])
    # A second copy of the query's state, to restart it the other way.
    shutil.copytree(ckpt, tmp_path / "ckpt2")
    shutil.copytree(out, tmp_path / "out2")

    q = _stream(spark, cfg, out, ckpt)
    with pytest.raises(Exception):  # noqa: B017  (StreamingQueryException; text below)
        q.awaitTermination(120)
    text = str(q.exception())
    assert f"log 1: LSN range [{first[-1] + 1}, {second[9]}] was trimmed" in text, text
    assert "fail_on_data_loss=false" in text

    q = _stream(spark, cfg, tmp_path / "out2", tmp_path / "ckpt2", fail_on_data_loss="false")
    assert q.awaitTermination(120) and q.exception() is None
    files = [str(f) for f in (tmp_path / "out2").glob("*.parquet")]  # the copy's own
    got = sorted(r.lsn for r in spark.read.parquet(*files).collect())
    assert got == first + second[10:]
    skipped = [r["skipped"]["1"] for r in _reports(q) if "skipped" in r]
    assert skipped and skipped[-1]["trimmed_ranges"] == 1
    assert skipped[-1]["trimmed_lsns"] == second[9] - first[-1]


def test_unreachable_metadata_is_never_reported_as_loss(spark, zookeeper_factory,
                                                        local_cluster):
    """A wiped node in the rebuilding set (its "nothing here" must not count) and the
    epoch store (ZooKeeper) stopped: executors cannot learn the log's placement, so a
    read either delivers every record or fails saying so, never with DATALOSS.  With
    ZooKeeper back the same read delivers every record."""
    from logdevice.shards import AuthoritativeStatus
    from tests.cluster.test_reader_failures import HOLD_OFF_REBUILDING, wipe_and_start, write

    zk = zookeeper_factory()
    cluster = local_cluster(nodes=4, replication=2, logs=range(1, 3),
                            epoch_store=zk.uri("/spark"),
                            rebuilding_poll_ms=HOLD_OFF_REBUILDING)
    cfg = str(cluster.config_path)
    with ld.Client(cluster.config_path, timeout=20.0) as client:
        lsns = write(client, LOG, 600)
    with RawClient(cluster) as raw:
        owner = raw.owner(LOG)
    wiped = next(i for i in range(cluster.n) if i != owner)
    cluster.stop(wiped)
    wipe_and_start(cluster, wiped)
    assert cluster.shard_statuses() == {wiped: AuthoritativeStatus.UNDERREPLICATION}

    def load():
        return spark.read.format("logdevice").option("config", cfg).option("logs", "1").load()

    zk.stop()
    try:
        got = sorted(r.lsn for r in load().collect())
    except PySparkException as e:
        text = str(e)
        assert "DATALOSS" not in text and "records lost" not in text, text
        assert "cannot read its metadata" in text, text
    else:
        assert got == lsns
    zk.start()
    assert sorted(r.lsn for r in load().collect()) == lsns
