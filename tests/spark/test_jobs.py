"""The jobs in spark/ run end to end on a small cluster.

Each job's ``run(args, spark)`` runs on the shared session (a job's own session costs
another JVM start); one job also runs as a separate process, as a user starts it, to
cover ``main`` and the session it builds from ``--master``.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.spark.conftest import read_all

pytestmark = pytest.mark.cluster

JOBS = Path(__file__).resolve().parents[2] / "spark"


def job(name: str):
    spec = importlib.util.spec_from_file_location(f"ldjob_{name}", JOBS / f"{name}.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def cluster(module_cluster):
    return module_cluster(nodes=3, replication=2, logs=range(1, 9))


@pytest.mark.parametrize("name", ["logs_to_parquet", "stream_to_parquet", "ingest"])
def test_jobs_have_help(name):
    out = subprocess.run([sys.executable, str(JOBS / f"{name}.py"), "--help"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "--config" in out.stdout and "--master" in out.stdout


def test_ingest_then_export_to_parquet(spark, cluster, tmp_path):
    cfg = str(cluster.config_path)
    lines = tmp_path / "in.txt"
    lines.write_text("".join(f"line {i}\n" for i in range(250)))
    ingest = job("ingest")
    args = ingest.build_parser().parse_args(["--config", cfg, "--log", "1",
                                             "--input", str(lines)])
    assert ingest.run(args, spark) == 250
    with cluster.client() as client:
        got = read_all(client, 1, client.get_tail_lsn(1))
    assert sorted(r[3] for r in got) == sorted(b"line %d" % i for i in range(250))

    table = tmp_path / "rows.parquet"
    spark.createDataFrame([(i, f"ev{i}", 2 + i % 2) for i in range(40)],
                          "id int, name string, shard int").write.parquet(str(table))
    args = ingest.build_parser().parse_args(["--config", cfg, "--log-column", "shard",
                                             "--format", "parquet", "--input", str(table)])
    assert ingest.run(args, spark) == 40
    with cluster.client() as client:
        assert len(read_all(client, 2, client.get_tail_lsn(2))) == 20
        rows = [json.loads(r[3]) for r in read_all(client, 3, client.get_tail_lsn(3))]
        assert sorted(r["id"] for r in rows) == list(range(1, 40, 2))
        assert {"id": 1, "name": "ev1", "shard": 3} in rows

    out = tmp_path / "export"
    export = job("logs_to_parquet")
    args = export.build_parser().parse_args(["--config", cfg, "--logs", "1-3",
                                             "--out", str(out)])
    assert export.run(args, spark) == 290
    today = dt.datetime.now(dt.UTC).date()
    dates = {p.name for p in out.glob("log_id=1/date=*")}
    assert dates and dates <= {f"date={today}", f"date={today - dt.timedelta(days=1)}"}
    assert {p.name for p in out.glob("log_id=*")} == {"log_id=1", "log_id=2", "log_id=3"}


def test_stream_to_parquet_resumes_from_its_checkpoint(spark, cluster, tmp_path):
    cfg = str(cluster.config_path)
    stream = job("stream_to_parquet")
    argv = ["--config", cfg, "--logs", "5", "--out", str(tmp_path / "out"),
            "--checkpoint", str(tmp_path / "ckpt"), "--available-now",
            "--max-records-per-trigger", "30"]
    with cluster.client() as client:
        for i in range(70):
            client.append(5, b"a%d" % i)
        stream.run(stream.build_parser().parse_args(argv), spark)
        for i in range(50):
            client.append(5, b"b%d" % i)
        stream.run(stream.build_parser().parse_args(argv), spark)
    rows = spark.read.parquet(str(tmp_path / "out")).collect()
    assert sorted(bytes(r.payload) for r in rows) == sorted(
        [b"a%d" % i for i in range(70)] + [b"b%d" % i for i in range(50)])


def test_logs_to_parquet_runs_as_a_program(cluster, tmp_path):
    with cluster.client() as client:
        for i in range(30):
            client.append(6, b"x%d" % i)
    out = tmp_path / "export"
    proc = subprocess.run([sys.executable, str(JOBS / "logs_to_parquet.py"), "--config",
                           str(cluster.config_path), "--logs", "6", "--out", str(out),
                           "--master", "local[1]"],
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"30 records under {out}" in proc.stdout
