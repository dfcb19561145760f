"""Export logs to Parquet, partitioned by log and by date.

    python spark/logs_to_parquet.py --config cluster.json --logs 1-10 --out /data/logs
    spark-submit spark/logs_to_parquet.py --config ... --logs ... --out ...

Reads the logs through the ``logdevice`` data source (oldest .. the tail when the job
starts, or the LSN/time range given) and writes Parquet files under
``OUT/log_id=<log>/date=<yyyy-mm-dd>/`` (dates of the records' timestamps, UTC).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _session import add_common, run_job  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="logs_to_parquet.py", description=__doc__.split("\n")[0])
    add_common(p)
    p.add_argument("--logs", required=True, help='log ids, e.g. "1,2,10-20"')
    p.add_argument("--out", required=True, help="output directory (any Hadoop path)")
    p.add_argument("--from-lsn", help="first LSN (inclusive)")
    p.add_argument("--until-lsn", help="last LSN (inclusive)")
    p.add_argument("--from-time", help="first timestamp (ms or ISO 8601, inclusive)")
    p.add_argument("--until-time", help="end timestamp (ms or ISO 8601, exclusive)")
    p.add_argument("--skip-data-loss", action="store_true",
                   help="skip DATALOSS gaps instead of failing")
    p.add_argument("--records-per-partition", help="records one Spark task reads")
    p.add_argument("--mode", default="errorifexists",
                   choices=["errorifexists", "overwrite", "append", "ignore"],
                   help="what to do if OUT exists (default: fail)")
    return p


def run(args: argparse.Namespace, spark: Any) -> int:
    """Write the export; returns the number of records written."""
    from pyspark.sql import functions as F

    reader = (spark.read.format("logdevice").option("config", args.config)
              .option("logs", args.logs)
              .option("fail_on_data_loss", str(not args.skip_data_loss).lower()))
    for name in ("from_lsn", "until_lsn", "from_time", "until_time",
                 "records_per_partition"):
        value = getattr(args, name)
        if value is not None:
            reader = reader.option(name, value)
    df = reader.load().withColumn("date", F.to_date(F.col("timestamp")))
    df.write.mode(args.mode).partitionBy("log_id", "date").parquet(args.out)
    return int(spark.read.parquet(args.out).count())


def main(argv: list[str] | None = None) -> int:
    return run_job(build_parser(), argv, "logs_to_parquet",
                   lambda args, spark: f"{run(args, spark)} records under {args.out}")


if __name__ == "__main__":
    sys.exit(main())
