"""Spark write path benchmark: the ``logdevice`` sink, exactly once and at least once,
against a BufferedWriter alone, measured in the same run on the same rows.

A local cluster (3 nodes, R=2) and a local-mode Spark (``--master``, default
``local[2]``).  Each ``--repeat`` round writes N rows of 100-byte payloads:

1. reference: one BufferedWriter ``append_many`` of the rows (as one buffer) in this
   process, to a fresh log;
2. the sink, ``exactly_once=true`` (the default): ``spark.range(N)`` turned into payloads
   in the JVM and written by ``--partitions`` tasks, to a fresh log;
3. the sink, ``exactly_once=false`` (random writer ids, time trigger allowed).

The three take turns going first (a write leaves the nodes background work that slows
whatever follows), so use a multiple of 3 rounds.

Every round checks the log holds N records.  Rates (min - max over the rounds) and the
ratios sink / BufferedWriter and exactly once / at least once (medians) are printed and
written to ``benchmarks/last-spark-write.md`` (and ``--json``).

    .venv/bin/python benchmarks/spark_write.py                     # 5 M rows, 3 rounds
    .venv/bin/python benchmarks/spark_write.py --records 200000 --repeat 1
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from rich.console import Console

import logdevice.spark
from logdevice.tools import benchutil
from logdevice.tools.loglines import generate

HERE = Path(__file__).resolve().parent
OUT_MD = HERE / "last-spark-write.md"
PAYLOAD = 100
TARGET_EXACTLY_ONCE_OVERHEAD = 0.10


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--records", type=int, default=5_000_000)
    p.add_argument("--repeat", type=int, default=3, help="rounds (a multiple of 3)")
    p.add_argument("--partitions", type=int, default=4, help="write tasks")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--json", help="also write the results as JSON here")
    return p.parse_args(argv)




def count(client: Any, log_id: int) -> int:
    """Records in ``log_id`` (BufferedWriter rows counted one by one)."""
    n = 0
    with client.create_reader() as reader:
        reader.start_reading(log_id, 1, client.get_tail_lsn(log_id))
        while reader.is_reading(log_id):
            n += len(reader.read_batch(65_536, timeout=1.0))
        n += len(reader.read_batch(65_536, timeout=0))
    return n


def measure(args: argparse.Namespace, config: str, console: Console) -> dict[str, list[float]]:
    from logdevice.client import Client

    n = args.records
    spark = benchutil.spark_session(args.master, "spark_write bench")
    logdevice.spark.register(spark)
    # Payloads made in the JVM: 100 bytes each, distinct (the id padded with dots).
    rows = spark.range(n, numPartitions=args.partitions).selectExpr(
        f"cast(rpad(concat('row-', id, ' '), {PAYLOAD}, '.') as binary) as payload")
    buf, offs = generate(0, n, PAYLOAD)
    secs: dict[str, list[float]] = {"buffered_writer": [], "exactly_once": [],
                                    "at_least_once": []}
    log_id = 0
    try:
        for exactly in ("true", "false"):  # warm up: Python workers, imports, the JIT
            rows.limit(100_000).write.format("logdevice").option("config", config) \
                .option("log", "99").option("exactly_once", exactly).mode("append").save()
        with Client(config, timeout=60.0) as client:
            def buffered_writer(target: int) -> None:
                with client.create_buffered_writer() as w:
                    w.append_many(target, (buf, offs)).result(300)

            def sink(exactly: str) -> Any:
                return lambda target: (
                    rows.write.format("logdevice").option("config", config)
                    .option("log", str(target)).option("exactly_once", exactly)
                    .mode("append").save())

            runs = [("buffered_writer", buffered_writer), ("exactly_once", sink("true")),
                    ("at_least_once", sink("false"))]
            for r in range(args.repeat):
                console.print(f"round {r + 1}/{args.repeat}")
                # Each goes first in turn: a write leaves the nodes background work
                # (memtable flushes, compactions) that slows whatever comes next.
                for name, run in runs[r % 3:] + runs[:r % 3]:
                    log_id += 1
                    t0 = time.perf_counter()
                    run(log_id)
                    secs[name].append(time.perf_counter() - t0)
                    assert count(client, log_id) == n, name
    finally:
        spark.stop()
    return secs


def report(args: argparse.Namespace, secs: dict[str, list[float]], console: Console
           ) -> list[tuple[str, str, str]]:
    n = args.records
    rate = {k: [n / s for s in v] for k, v in secs.items()}
    med = {k: statistics.median(v) for k, v in rate.items()}

    def rng(k: str) -> str:
        return f"{min(rate[k]) / 1e6:.2f} - {max(rate[k]) / 1e6:.2f} M rows/s"

    overhead = 1 - med["exactly_once"] / med["at_least_once"]
    rows = [
        ("BufferedWriter.append_many (reference)", rng("buffered_writer"), "this process"),
        ("sink, exactly once", rng("exactly_once"),
         f"{med['exactly_once'] / med['buffered_writer']:.0%} of the BufferedWriter"),
        ("sink, at least once", rng("at_least_once"),
         f"{med['at_least_once'] / med['buffered_writer']:.0%} of the BufferedWriter"),
        ("exactly-once overhead", f"{overhead:.1%}",
         f"median rates; target < {TARGET_EXACTLY_ONCE_OVERHEAD:.0%}"),
    ]
    console.print(benchutil.results_table(
        f"Spark write path, {n:,} x {PAYLOAD} B rows, {args.partitions} tasks, "
        f"{args.master}", rows))
    benchutil.write_results_md(
        OUT_MD, "Spark write path", f"{n:,} rows of {PAYLOAD} B, {args.partitions} write "
        f"tasks, 3 nodes R=2, {args.master}, {args.repeat} rounds (min - max).", rows)
    return rows


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    console = Console()
    import logdevice as ld

    with ld.LocalCluster(nodes=3, replication=2, logs=range(1, 100)) as cluster:
        secs = measure(args, str(cluster.config_path), console)
    report(args, secs, console)
    if args.json:
        Path(args.json).write_text(json.dumps(secs, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
