"""Spark read path benchmark: the ``logdevice`` data source against its ceiling and against
Parquet, measured in the same run on the same records.

A local cluster (3 nodes, R=2) gets N records of 100-byte log lines
(``logdevice.tools.loglines``) spread over ``--logs`` logs by BufferedWriter ``append_many``.
Then, each ``--repeat`` times:

1. ceiling: one ``Reader.read_batch`` loop over every log, in this process;
2. the data source into ``count()``: ``spark.read.format("logdevice")...load().count()``
   (every record is read and shipped to Spark as Arrow; Spark only counts);
3. the data source into ``sum(length(payload))`` (Spark touches every payload);
4. the data source into a Parquet write (the ``logs_to_parquet`` path, no partitioning);
5. Spark reading the same records from that Parquet copy, ``sum(length(payload))``
   (what users compare with);
6. streaming: ``readStream`` with ``Trigger.AvailableNow`` and ``max_records_per_trigger``
   into the ``noop`` sink: sustained rows/s and the mean/max trigger duration.

Spark runs in local mode (``--master``, default ``local[2]``); one full ``count()`` and
one ``sum`` before the rounds warm it up (its JIT runs the first scans at half speed).
The table of rates and ratios (data source / read_batch, data source / Parquet) is
printed and written to ``benchmarks/last-spark-read.md`` (and ``--json``).

    .venv/bin/python benchmarks/spark_read.py                 # 10 M records (the target)
    LD_BENCH_SPARK_RECORDS=20000 .venv/bin/python benchmarks/spark_read.py --repeat 1
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console

import logdevice.spark
from logdevice.tools import benchutil
from logdevice.tools.loglines import generate

HERE = Path(__file__).resolve().parent
OUT_MD = HERE / "last-spark-read.md"
PAYLOAD = 100
CHUNK = 100_000
TARGET_ROWS_PER_S = 1_000_000
TARGET_VS_READ_BATCH = 0.60


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--records", type=int,
                   default=int(os.environ.get("LD_BENCH_SPARK_RECORDS", 10_000_000)),
                   help="records to write and read (env LD_BENCH_SPARK_RECORDS)")
    p.add_argument("--logs", type=int, default=4, help="logs the records are spread over")
    p.add_argument("--repeat", type=int, default=3, help="rounds of every measurement")
    p.add_argument("--master", default="local[2]", help="Spark master")
    p.add_argument("--records-per-partition", type=int, default=1_000_000)
    p.add_argument("--max-records-per-trigger", type=int, default=1_000_000)
    p.add_argument("--json", help="also write the results as JSON here")
    return p.parse_args(argv)


def fill(config: str, n: int, logs: int, console: Console) -> dict[int, tuple[int, int]]:
    """Write ``n`` lines over logs 1..logs; per log the LSN span written."""
    from logdevice.client import Client

    spans: dict[int, tuple[int, int]] = {}
    with Client(config, timeout=60.0) as client, \
            client.create_buffered_writer() as w, benchutil.progress(console) as prog:
        task = prog.add_task("writing", total=n, rate="")
        futs = []
        for k, start in enumerate(range(0, n, CHUNK)):
            buf, offs = generate(start, min(CHUNK, n - start), PAYLOAD)
            log_id = 1 + k % logs
            futs.append((log_id, w.append_many(log_id, (buf, offs))))
            prog.update(task, completed=min(n, start + CHUNK))
        w.flush()
        for log_id, f in futs:
            lsns = f.result(120)
            lo, hi = spans.get(log_id, (int(lsns[0]), int(lsns[-1])))
            spans[log_id] = (min(lo, int(lsns[0])), max(hi, int(lsns[-1])))
    return spans




def timed(fn: Any) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def measure(args: argparse.Namespace, config: str, spans: dict[int, tuple[int, int]],
            console: Console, work: Path) -> dict[str, list[float]]:
    from logdevice.client import Client

    spark = benchutil.spark_session(args.master, "spark_read bench")
    logdevice.spark.register(spark)
    logs = ",".join(str(k) for k in sorted(spans))
    n = args.records

    def source() -> Any:
        return (spark.read.format("logdevice").option("config", config).option("logs", logs)
                .option("records_per_partition", str(args.records_per_partition)).load())

    secs: dict[str, list[float]] = {k: [] for k in (
        "read_batch", "source_count", "source_sum", "source_to_parquet", "parquet_sum",
        "stream")}
    stream_triggers: list[float] = []
    # Warm up: Python workers, the data source's imports, and the JVM's JIT (the first
    # full scans of a session run at half speed; a user's long-lived session does not).
    source().count()
    source().selectExpr("sum(length(payload))").first()
    try:
        for r in range(args.repeat):
            console.print(f"round {r + 1}/{args.repeat}")
            with Client(config, timeout=60.0) as client:
                res = benchutil.read_spans(client, console, spans, scd=True, total=n)
            assert res["records"] == n, res["records"]
            secs["read_batch"].append(res["seconds"])
            t, c = timed(lambda: source().count())
            assert c == n, c
            secs["source_count"].append(t)
            t, s = timed(lambda: source().selectExpr("sum(length(payload))").first()[0])
            assert s == n * PAYLOAD, s
            secs["source_sum"].append(t)
            pq = str(work / f"parquet-{r}")
            t, _ = timed(lambda: source().write.parquet(pq))  # noqa: B023 (called at once)
            secs["source_to_parquet"].append(t)
            t, s = timed(lambda: spark.read.parquet(pq)  # noqa: B023
                         .selectExpr("sum(length(payload))").first()[0])
            assert s == n * PAYLOAD, s
            secs["parquet_sum"].append(t)
            shutil.rmtree(pq)
            ckpt = work / f"ckpt-{r}"
            q = (spark.readStream.format("logdevice").option("config", config)
                 .option("logs", logs)
                 .option("max_records_per_trigger", str(args.max_records_per_trigger))
                 .load().writeStream.format("noop").option("checkpointLocation", str(ckpt))
                 .trigger(availableNow=True))
            t0 = time.perf_counter()
            query = q.start()
            query.awaitTermination()
            secs["stream"].append(time.perf_counter() - t0)
            done = [p for p in query.recentProgress if p["numInputRows"] > 0]
            assert sum(p["numInputRows"] for p in done) == n
            stream_triggers += [p["durationMs"]["triggerExecution"] / 1000 for p in done]
    finally:
        spark.stop()
    secs["trigger_seconds"] = stream_triggers
    return secs


def report(args: argparse.Namespace, secs: dict[str, list[float]], console: Console
           ) -> list[tuple[str, str, str]]:
    n = args.records
    rate = {k: [n / s for s in v] for k, v in secs.items() if k != "trigger_seconds"}
    med = {k: statistics.median(v) for k, v in rate.items()}

    def rng(k: str) -> str:
        return f"{min(rate[k]) / 1e6:.2f} - {max(rate[k]) / 1e6:.2f} M rows/s"

    trig = secs["trigger_seconds"]
    rows = [
        ("Reader.read_batch (ceiling)", rng("read_batch"), "one reader, this process"),
        ("data source -> count()", rng("source_count"),
         f"{med['source_count'] / med['read_batch']:.0%} of read_batch; target >= "
         f"{TARGET_VS_READ_BATCH:.0%} and {TARGET_ROWS_PER_S / 1e6:.0f} M rows/s"),
        ("data source -> sum(length(payload))", rng("source_sum"),
         f"{med['source_sum'] / med['parquet_sum']:.2f}x Spark on Parquet"),
        ("data source -> Parquet write", rng("source_to_parquet"), ""),
        ("Parquet -> sum(length(payload))", rng("parquet_sum"), "the same records"),
        ("streaming, AvailableNow -> noop", rng("stream"),
         f"{len(trig)} triggers, mean {statistics.mean(trig):.2f} s, max {max(trig):.2f} s"
         if trig else ""),
    ]
    console.print(benchutil.results_table(
        f"Spark read path, {n:,} x {PAYLOAD} B records, {args.logs} logs, {args.master}",
        rows))
    benchutil.write_results_md(
        OUT_MD, "Spark read path", f"{n:,} records of {PAYLOAD} B over {args.logs} logs, "
        f"3 nodes R=2, {args.master}, {args.repeat} rounds (min - max).", rows)
    return rows


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    console = Console()
    with tempfile.TemporaryDirectory(prefix="ld-spark-bench-") as tmp, \
            benchutil.cluster_config(None, nodes=3, replication=2, logs=args.logs,
                                     console=console) as config:
        spans = fill(config, args.records, args.logs, console)
        secs = measure(args, config, spans, console, Path(tmp))
    rows = report(args, secs, console)
    if args.json:
        benchutil.write_json(args.json, {"machine": benchutil.machine(), "records":
                                         args.records, "seconds": secs, "table": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
