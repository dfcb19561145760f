"""Ingest files or a table into logs through the ``logdevice`` sink (at least once).

    python spark/ingest.py --config cluster.json --log 7 --input /data/events.jsonl
    python spark/ingest.py --config cluster.json --table events --log-column shard

Each input row becomes one record.  Text files: one record per line.  Other formats
(``--format parquet|json|csv|orc``) and tables: ``--payload-column`` is the payload
(binary or string); without it every column is packed into one JSON object per row.
Rows go to ``--log``, or to the log named by ``--log-column`` (an integer column).
Retried tasks write their rows again: delivery is at least once.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _session import add_common, run_job  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ingest.py", description=__doc__.split("\n")[0])
    add_common(p)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--input", nargs="+", help="input file(s) or directories")
    src.add_argument("--table", help="a table of the Spark catalog")
    p.add_argument("--format", default="text",
                   choices=["text", "parquet", "json", "csv", "orc"],
                   help="input format (default: text, one record per line)")
    dest = p.add_mutually_exclusive_group(required=True)
    dest.add_argument("--log", type=int, help="write every row to this log")
    dest.add_argument("--log-column", help="integer column naming each row's log")
    p.add_argument("--payload-column",
                   help="column holding the payload (default: text lines, or the row as JSON)")
    p.add_argument("--repartition", type=int, help="writer tasks (default: input partitions)")
    return p


def load(args: argparse.Namespace, spark: Any) -> Any:
    """The rows to write: ``payload`` (and ``log_id`` with ``--log-column``)."""
    from pyspark.sql import functions as F

    if args.table:
        df = spark.table(args.table)
    else:
        reader = spark.read.format(args.format)
        if args.format == "csv":
            reader = reader.option("header", "true")
        df = reader.load(args.input)
    if args.payload_column:
        payload = F.col(args.payload_column)
    elif args.format == "text" and not args.table:
        payload = F.col("value")
    else:
        payload = F.to_json(F.struct(*[F.col(c) for c in df.columns]))
    cols = [payload.cast("binary").alias("payload")]
    if args.log_column:
        cols.append(F.col(args.log_column).cast("bigint").alias("log_id"))
    out = df.select(*cols)
    return out.repartition(args.repartition) if args.repartition else out


def run(args: argparse.Namespace, spark: Any) -> int:
    """Write the rows; returns how many."""
    df = load(args, spark).cache()
    n = int(df.count())
    writer = df.write.format("logdevice").option("config", args.config).mode("append")
    if args.log is not None:
        writer = writer.option("log", str(args.log))
    writer.save()
    df.unpersist()
    return n


def main(argv: list[str] | None = None) -> int:
    return run_job(build_parser(), argv, "ingest",
                   lambda args, spark: f"{run(args, spark)} rows written")


if __name__ == "__main__":
    sys.exit(main())
