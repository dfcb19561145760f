"""Streaming reads: micro-batches while writers append, a restart from the checkpoint in
the middle, and every record exactly once in the output."""

from __future__ import annotations

import json
import threading
import time

import pytest

import logdevice as ld
from tests.waiting import wait_until

pytestmark = pytest.mark.cluster

LOGS = (1, 2)
CAP = 40


def start(spark, cluster, out, ckpt, *, available_now: bool):
    w = (spark.readStream.format("logdevice").option("config", str(cluster.config_path))
         .option("logs", "1,2").option("max_records_per_trigger", str(CAP)).load()
         .writeStream.format("parquet").option("path", str(out))
         .option("checkpointLocation", str(ckpt)))
    w = w.trigger(availableNow=True) if available_now else \
        w.trigger(processingTime="200 milliseconds")
    return w.start()


def test_stream_restart_from_checkpoint_delivers_every_record_once(spark, local_cluster,
                                                                   tmp_path):
    cluster = local_cluster(nodes=3, replication=2, logs=range(1, 4))
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    appended: dict[tuple[int, int], bytes] = {}
    lock = threading.Lock()
    with ld.Client(cluster.config_path, timeout=20.0) as client:
        def append(log_id: int, payload: bytes) -> None:
            lsn = client.append(log_id, payload)
            with lock:
                appended[(log_id, lsn)] = payload

        for i in range(60):
            append(LOGS[i % 2], b"before-%d" % i)
        stop = threading.Event()
        errors: list[BaseException] = []

        def writer() -> None:
            try:
                for i in range(400):
                    if stop.is_set():
                        return
                    append(LOGS[i % 2], b"during-%d" % i)
                    if i % 20 == 19:
                        time.sleep(0.02)
            except BaseException as e:  # reported by the test thread
                errors.append(e)

        t = threading.Thread(target=writer, daemon=True)
        t.start()
        q1 = start(spark, cluster, out, ckpt, available_now=False)
        try:
            wait_until(lambda: sum(p["numInputRows"] > 0 for p in q1.recentProgress) >= 3,
                       90, 0.1, "three micro-batches with data")
        finally:
            q1.stop()
        assert q1.exception() is None
        first_run = [p["numInputRows"] for p in q1.recentProgress]
        assert max(first_run) <= CAP  # admission control: at most CAP LSNs a trigger
        t.join(60)
        assert not t.is_alive() and not errors, errors
        for i in range(20):  # appended while no query runs
            append(LOGS[i % 2], b"after-%d" % i)

        q2 = start(spark, cluster, out, ckpt, available_now=True)
        assert q2.awaitTermination(120), "the restarted query did not finish"
        assert q2.exception() is None

    rows = [(r.log_id, r.lsn, r.batch_offset, bytes(r.payload))
            for r in spark.read.parquet(str(out)).collect()]
    keys = [(log_id, lsn) for log_id, lsn, _, _ in rows]
    assert len(keys) == len(set(keys)), "a record was delivered twice"
    assert {(log_id, lsn): p for log_id, lsn, _, p in rows} == appended
    assert len(appended) == 60 + 400 + 20


def test_starting_offsets_latest_and_json(spark, local_cluster, tmp_path):
    cluster = local_cluster(nodes=3, replication=2, logs=range(1, 3))
    cfg = str(cluster.config_path)

    def run(starting: str, name: str) -> list[bytes]:
        q = (spark.readStream.format("logdevice").option("config", cfg).option("logs", "1")
             .option("starting_offsets", starting).load()
             .writeStream.format("parquet").option("path", str(tmp_path / name))
             .option("checkpointLocation", str(tmp_path / f"{name}.ckpt"))
             .trigger(availableNow=True).start())
        assert q.awaitTermination(120) and q.exception() is None
        if not list((tmp_path / name).glob("*.parquet")):
            return []
        return sorted(bytes(r.payload) for r in spark.read.parquet(str(tmp_path / name))
                      .collect())

    with ld.Client(cluster.config_path) as client:
        lsns = [client.append(1, b"old-%d" % i) for i in range(10)]
        assert run("latest", "latest") == []
        assert run(json.dumps({"1": lsns[7]}), "json") == [b"old-7", b"old-8", b"old-9"]
        for i in range(5):
            client.append(1, b"new-%d" % i)
    # Restarted from their checkpoints: only what came after.
    assert run("latest", "latest") == [b"new-%d" % i for i in range(5)]
    assert run(json.dumps({"1": lsns[7]}), "json") == sorted(
        [b"old-7", b"old-8", b"old-9"] + [b"new-%d" % i for i in range(5)])


def test_capped_stream_crosses_a_sequencer_change_quickly(spark, local_cluster, tmp_path):
    """Records in two epochs (the sequencer node is killed in between): a stream capped
    at 20 LSNs a trigger reads all of them once, and the empty rest of the first epoch
    (billions of LSNs) costs no more than a trigger."""
    from tests.cluster.conftest import RawClient

    cluster = local_cluster(nodes=3, replication=2, logs=range(1, 3))
    with ld.Client(cluster.config_path, timeout=30.0) as client:
        first = [client.append(1, b"e1-%d" % i) for i in range(30)]
        with RawClient(cluster) as raw:
            owner = raw.owner(1)
        cluster.kill(owner)
        second = [client.append(1, b"e2-%d" % i) for i in range(30)]
    assert first[-1] >> 32 < second[0] >> 32  # a new epoch
    q = (spark.readStream.format("logdevice").option("config", str(cluster.config_path))
         .option("logs", "1").option("max_records_per_trigger", "20").load()
         .writeStream.format("parquet").option("path", str(tmp_path / "out"))
         .option("checkpointLocation", str(tmp_path / "ckpt"))
         .trigger(availableNow=True).start())
    assert q.awaitTermination(180) and q.exception() is None
    batches = [p["numInputRows"] for p in q.recentProgress]
    assert max(batches) <= 20 and len(batches) <= 8, batches
    rows = spark.read.parquet(str(tmp_path / "out")).collect()
    assert sorted(r.lsn for r in rows) == first + second


def _latest_reports(q) -> list[dict]:
    reports = []
    for p in q.recentProgress:
        latest = p["sources"][0].get("latestOffset")
        reports.append(json.loads(latest) if isinstance(latest, str) else latest)
    return [r for r in reports if r]


def test_starting_timestamp_and_lag_in_progress(spark, local_cluster, tmp_path):
    cluster = local_cluster(nodes=3, replication=2, logs=range(1, 3))
    cfg = str(cluster.config_path)
    with ld.Client(cluster.config_path) as client:
        old = [client.append(1, b"old-%d" % i) for i in range(10)]
        t_old = client.get_tail_attributes(1).last_timestamp
        wait_until(lambda: time.time() * 1000 > t_old + 5, 10, 0.01, "the clock to move on")
        split_ms = int(time.time() * 1000)
        new = [client.append(1, b"new-%d" % i) for i in range(25)]
        new += [client.append(2, b"two-%d" % i) for i in range(5)]
    assert old[-1] < new[0]
    q = (spark.readStream.format("logdevice").option("config", cfg).option("logs", "1,2")
         .option("starting_timestamp", str(split_ms))
         .option("max_records_per_trigger", "10").load()
         .writeStream.format("parquet").option("path", str(tmp_path / "out"))
         .option("checkpointLocation", str(tmp_path / "ckpt"))
         .trigger(availableNow=True).start())
    assert q.awaitTermination(120) and q.exception() is None
    got = sorted(bytes(r.payload) for r in spark.read.parquet(str(tmp_path / "out")).collect())
    assert got == sorted([b"new-%d" % i for i in range(25)] + [b"two-%d" % i for i in range(5)])
    # Per log: what is left behind the tail after each micro-batch, down to nothing.
    lags = [r["lag"] for r in _latest_reports(q)]
    assert lags and lags[0]["1"] > 0
    assert lags[-1] == {"1": 0, "2": 0}
    assert all(set(r["latest"]) == {"1", "2"} for r in _latest_reports(q))


def test_the_cap_counts_rows_of_blobs_not_lsns(spark, local_cluster, tmp_path):
    """BufferedWriter blobs of 1,000 rows and a cap of 2,500 rows a trigger: micro-batches
    of whole blobs within the cap, every row once; a blob of 4,000 rows (over the cap)
    is read alone rather than stalling the stream."""
    cluster = local_cluster(nodes=3, replication=2, logs=range(1, 3))
    with ld.Client(cluster.config_path, timeout=30.0) as client:
        for log_id, rows, blob in ((1, 8000, 1000), (2, 4000, 4000)):
            with client.create_buffered_writer(count_trigger=blob, size_trigger=None,
                                               time_trigger=None) as w:
                w.append_many(log_id, [b"%d-%d" % (log_id, i) for i in range(rows)]
                              ).result(60)
    q = (spark.readStream.format("logdevice").option("config", str(cluster.config_path))
         .option("logs", "1,2").option("max_records_per_trigger", "2500").load()
         .writeStream.format("parquet").option("path", str(tmp_path / "out"))
         .option("checkpointLocation", str(tmp_path / "ckpt"))
         .trigger(availableNow=True).start())
    assert q.awaitTermination(180) and q.exception() is None
    batches = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    assert all(n <= 2500 or n == 4000 for n in batches), batches
    assert 4000 in batches and sum(batches) == 12000, batches
    rows = [(r.log_id, bytes(r.payload)) for r in
            spark.read.parquet(str(tmp_path / "out")).collect()]
    assert len(rows) == len(set(rows)) == 12000
