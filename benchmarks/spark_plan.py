"""Spark planning benchmark: how long the driver takes to plan a batch read of many logs.

A local cluster (3 nodes, R=2) with ``--logs`` logs (one log range in the config, so
10,000 logs cost nothing to configure) gets one record in each log, so every log has a
sequencer, a tail and a trim point to report.  Then, each ``--repeat`` times, in this
process (planning runs on the driver; Spark adds nothing to it):

1. reference, the per-log path: ``extents.log_extent`` of each log (trim point, tail
   and size estimate: several round trips per log), 64 logs at a time over one client
   (``spark.fanout``);
2. the plan: ``extents.log_extents`` (one ``Client.log_summaries``: a request to each
   storage node and one to each sequencer node for all the logs) and
   ``plan.plan_extents``, what ``LogDeviceBatchReader.partitions`` does.

Both are measured in the same run against the same cluster; the table gives each time
and the ratio reference / plan, and is written to ``benchmarks/last-spark-plan.md``
(and ``--json``).

    .venv/bin/python benchmarks/spark_plan.py                  # 10,000 logs
    .venv/bin/python benchmarks/spark_plan.py --logs 200 --repeat 1
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from rich.console import Console

from logdevice.tools import benchutil

HERE = Path(__file__).resolve().parent
OUT_MD = HERE / "last-spark-plan.md"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--logs", type=int, default=10_000, help="logs to plan")
    p.add_argument("--repeat", type=int, default=3, help="rounds of each measurement")
    p.add_argument("--json", help="also write the results as JSON here")
    return p.parse_args(argv)


def fill(config: str, logs: int, console: Console) -> None:
    """One record in each log (its sequencer activates on the way)."""
    from logdevice.client import Client

    with Client(config, timeout=120.0) as client, benchutil.progress(console) as prog:
        task = prog.add_task("one record per log", total=logs, rate="")
        futs = [client.append_async(log_id, b"x") for log_id in range(1, logs + 1)]
        for k, f in enumerate(futs):
            f.result(300)
            if k % 500 == 0:
                prog.update(task, completed=k)
        prog.update(task, completed=logs)


def measure(args: argparse.Namespace, config: str, console: Console
            ) -> dict[str, list[float]]:
    from logdevice.client import Client
    from logdevice.spark.extents import log_extent, log_extents
    from logdevice.spark.fanout import fan_out
    from logdevice.spark.options import ReadOptions
    from logdevice.spark.plan import plan_extents

    opts = ReadOptions.parse({"config": config, "logs": f"1-{args.logs}"})
    secs: dict[str, list[float]] = {"per_log": [], "plan": []}
    for r in range(args.repeat):
        console.print(f"round {r + 1}/{args.repeat}")
        t0 = time.perf_counter()  # both open their client inside the measurement
        with Client(config, timeout=60.0) as client:
            old = fan_out(lambda log_id: log_extent(client, log_id, opts), opts.logs)
        secs["per_log"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        new = log_extents(config, opts.logs, opts)
        parts = plan_extents(new, opts.records_per_partition, opts.bytes_per_partition)
        secs["plan"].append(time.perf_counter() - t0)
        assert [(e.log_id, e.lo, e.hi) for e in new] == [(e.log_id, e.lo, e.hi) for e in old]
        assert sum(len(p.slices) for p in parts) == args.logs
    return secs


def report(args: argparse.Namespace, secs: dict[str, list[float]], console: Console
           ) -> list[tuple[str, str, str]]:
    med = {k: statistics.median(v) for k, v in secs.items()}

    def rng(k: str) -> str:
        return f"{min(secs[k]):.2f} - {max(secs[k]):.2f} s"

    rows = [
        ("reference: log_extent per log, 64 at a time", rng("per_log"),
         f"{args.logs / med['per_log']:,.0f} logs/s"),
        ("plan: log_extents (log_summaries) + plan_extents", rng("plan"),
         f"{args.logs / med['plan']:,.0f} logs/s; {med['per_log'] / med['plan']:.1f}x "
         "the reference"),
    ]
    console.print(benchutil.results_table(f"Spark planning, {args.logs:,} logs", rows))
    benchutil.write_results_md(
        OUT_MD, "Spark planning", f"{args.logs:,} logs with one record each, 3 nodes R=2, "
        f"{args.repeat} rounds (min - max).", rows)
    return rows


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    console = Console()
    with benchutil.cluster_config(None, nodes=3, replication=2, logs=args.logs,
                                  console=console) as config:
        fill(config, args.logs, console)
        secs = measure(args, config, console)
    rows = report(args, secs, console)
    if args.json:
        benchutil.write_json(args.json, {"machine": benchutil.machine(), "logs": args.logs,
                                         "seconds": secs, "table": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
