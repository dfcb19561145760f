"""Epoch activation on the ZooKeeper epoch store vs the embedded SQLite store, same run.

Two measurements, each on both backends:

- store: ``EpochStore.activate`` of fresh logs one after another (the compare-and-set a
  sequencer activation costs: a read and a conditional write), one client; the SQLite
  store is a file in a temp dir (WAL, ``synchronous=FULL``), ZooKeeper is Debian's
  package started here on a free 127.0.0.1 port (standalone, its data dir in the same
  temp dir; fsync on, as in production);
- end to end: a 3-node local cluster on that store; the first append to each of N fresh
  logs (the sequencer activates the log: epoch store round trip, then the append), timed
  from the client, logs one after another.

Reported: median, p99 and rate of each, and ZooKeeper / SQLite ratios.  Sizes come from the
environment (``LD_BENCH_ACTIVATIONS``, default 2000 store activations;
``LD_BENCH_ACTIVATION_LOGS``, default 300 first appends), or ``--activations/--logs``.
The table is printed and written to ``benchmarks/last-epoch-activation.md``.

    .venv/bin/python benchmarks/epoch_activation.py
    LD_BENCH_ACTIVATIONS=50 LD_BENCH_ACTIVATION_LOGS=10 .venv/bin/python \\
        benchmarks/epoch_activation.py          # a quick check that it runs
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from logdevice.epochstore import open_epoch_store
from logdevice.local_cluster import LocalCluster
from logdevice.local_zookeeper import LocalZooKeeper

HERE = Path(__file__).resolve().parent
OUT_MD = HERE / "last-epoch-activation.md"
MD = {"nodeset": [0, 1, 2], "replication": {"node": 2}}


def _stats(samples: list[float]) -> dict[str, float]:
    a = np.asarray(samples) * 1000
    return {"median_ms": float(np.median(a)), "p99_ms": float(np.percentile(a, 99)),
            "per_s": len(a) / (a.sum() / 1000) if a.sum() else 0.0, "n": len(a)}


def bench_store(uri: str, n: int) -> dict[str, float]:
    with open_epoch_store(uri, timeout=30) as store:
        store.activate(1, MD)  # connect / create the layout outside the timing
        samples = []
        for log_id in range(2, n + 2):
            t0 = time.perf_counter()
            store.activate(log_id, MD)
            samples.append(time.perf_counter() - t0)
    return _stats(samples)


def bench_cluster(root: Path, epoch_store: str | None, n_logs: int) -> dict[str, float]:
    with LocalCluster(nodes=3, replication=2, logs=range(1, n_logs + 2), root=root,
                      epoch_store=epoch_store, ready_timeout=120) as cluster, \
            cluster.client(timeout=60) as client:
        client.append(n_logs + 1, b"warm")  # connections up, outside the timing
        samples = []
        for log_id in range(1, n_logs + 1):
            t0 = time.perf_counter()
            client.append(log_id, b"first")
            samples.append(time.perf_counter() - t0)
    return _stats(samples)


def report(results: dict[str, dict[str, dict[str, float]]]) -> str:
    lines = ["| measurement | backend | n | median ms | p99 ms | per s | ZK / SQLite (median) |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for what, by_backend in results.items():
        base = by_backend["sqlite"]["median_ms"]
        for backend, s in by_backend.items():
            ratio = f"{s['median_ms'] / base:.2f}x" if backend == "zookeeper" and base else ""
            lines.append(f"| {what} | {backend} | {s['n']} | {s['median_ms']:.2f} | "
                         f"{s['p99_ms']:.2f} | {s['per_s']:,.0f} | {ratio} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--activations", type=int,
                   default=int(os.environ.get("LD_BENCH_ACTIVATIONS", "2000")))
    p.add_argument("--logs", type=int,
                   default=int(os.environ.get("LD_BENCH_ACTIVATION_LOGS", "300")))
    p.add_argument("--no-write", action="store_true", help="do not write the .md file")
    args = p.parse_args(argv)
    results: dict[str, dict[str, Any]] = {"store activate": {}, "first append": {}}
    with tempfile.TemporaryDirectory(prefix="ld-bench-epoch-") as tmp:
        work = Path(tmp)
        with LocalZooKeeper(root=work / "zk", durable=True) as zk:
            results["store activate"]["sqlite"] = bench_store(
                f"file:{work / 'bench.sqlite'}", args.activations)
            results["store activate"]["zookeeper"] = bench_store(zk.uri("/bench_store"),
                                                                 args.activations)
            results["first append"]["sqlite"] = bench_cluster(work / "c-sqlite", None,
                                                              args.logs)
            results["first append"]["zookeeper"] = bench_cluster(
                work / "c-zk", zk.uri("/bench_cluster"), args.logs)
    table = report(results)
    print(table)
    if not args.no_write:
        OUT_MD.write_text("# Epoch activation: ZooKeeper vs SQLite\n\n" + table + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
