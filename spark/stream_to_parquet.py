"""Stream logs into Parquet with Structured Streaming, checkpointed: exactly-once files.

    python spark/stream_to_parquet.py --config cluster.json --logs 1-10 \
        --out /data/logs --checkpoint /data/logs.ckpt

Each micro-batch reads the LSN ranges released when it was planned and Spark's file sink
commits its files with the batch; a restarted job resumes from the checkpoint, so every
record lands in the output exactly once.  Output: ``OUT/log_id=<log>/date=<yyyy-mm-dd>/``.
``--available-now`` processes what is in the logs now and exits; otherwise the job runs
until ``--run-seconds`` pass (or forever).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _session import add_common, run_job  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="stream_to_parquet.py",
                                description=__doc__.split("\n")[0])
    add_common(p)
    p.add_argument("--logs", required=True, help='log ids, e.g. "1,2,10-20"')
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--checkpoint", required=True, help="checkpoint directory")
    p.add_argument("--starting-offsets", default="earliest",
                   help='earliest, latest or JSON {"<log>": lsn} (first run only)')
    p.add_argument("--max-records-per-trigger", type=int, help="admission control")
    p.add_argument("--trigger-seconds", type=float, default=1.0,
                   help="micro-batch interval (default 1 s)")
    p.add_argument("--available-now", action="store_true",
                   help="process what is in the logs now, then exit")
    p.add_argument("--run-seconds", type=float,
                   help="stop after this many seconds (default: run until killed)")
    p.add_argument("--skip-data-loss", action="store_true",
                   help="skip DATALOSS gaps instead of failing")
    return p


def start(args: argparse.Namespace, spark: Any) -> Any:
    """Start the query; returns the ``StreamingQuery``."""
    from pyspark.sql import functions as F

    reader = (spark.readStream.format("logdevice").option("config", args.config)
              .option("logs", args.logs).option("starting_offsets", args.starting_offsets)
              .option("fail_on_data_loss", str(not args.skip_data_loss).lower()))
    if args.max_records_per_trigger:
        reader = reader.option("max_records_per_trigger", str(args.max_records_per_trigger))
    df = reader.load().withColumn("date", F.to_date(F.col("timestamp")))
    writer = (df.writeStream.format("parquet").option("path", args.out)
              .option("checkpointLocation", args.checkpoint).partitionBy("log_id", "date"))
    if args.available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{args.trigger_seconds} seconds")
    return writer.start()


def run(args: argparse.Namespace, spark: Any) -> Any:
    """Run the query until it ends (``--available-now``) or ``--run-seconds`` pass."""
    query = start(args, spark)
    try:
        query.awaitTermination(args.run_seconds)
    finally:
        query.stop()
    if query.exception() is not None:
        raise RuntimeError(f"streaming query failed: {query.exception()}")
    return query


def main(argv: list[str] | None = None) -> int:
    def job(args: argparse.Namespace, spark: Any) -> str:
        query = run(args, spark)
        rows = sum(p["numInputRows"] for p in query.recentProgress)
        return (f"{rows} records in {len(query.recentProgress)} micro-batches "
                f"(recent ones) to {args.out}")

    return run_job(build_parser(), argv, "stream_to_parquet", job)


if __name__ == "__main__":
    sys.exit(main())
