"""Driver program for the standalone test: a batch read, a batch write and an AvailableNow
stream into Parquet through the ``logdevice`` data source, run on a standalone cluster.

    read_write_stream.py CONFIG READ_LOG WRITE_LOG ROWS OUT_DIR [--hold]

Emits the payloads read, what the stream wrote, the application id and the PIDs of the
executors that ran tasks; with ``--hold`` it keeps the application until its stdin closes.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.spark.standalone_app import emit, executor_pid, hold, session


def main(argv: list[str]) -> None:
    config, read_log, write_log, rows, out = argv[:5]
    spark = session("logdevice-standalone")
    read = (spark.read.format("logdevice").option("config", config)
            .option("logs", read_log).option("recordsPerPartition", "25").load())
    batch = sorted(bytes(r.payload).decode() for r in read.select("payload").collect())

    (spark.range(int(rows)).selectExpr("cast(concat('sa-', id) as binary) as payload")
     .repartition(2).write.format("logdevice").option("config", config)
     .option("log", write_log).mode("append").save())

    stream = (spark.readStream.format("logdevice").option("config", config)
              .option("logs", read_log).option("maxRecordsPerTrigger", "40").load()
              .select("lsn", "payload"))
    query = (stream.writeStream.format("parquet").option("path", str(Path(out) / "data"))
             .option("checkpointLocation", str(Path(out) / "ckpt"))
             .trigger(availableNow=True).start())
    if not query.awaitTermination(180):
        query.stop()
        raise SystemExit("the stream did not finish within 180 s")
    streamed = sorted(bytes(r.payload).decode()
                      for r in spark.read.parquet(str(Path(out) / "data")).collect())

    pids = spark.sparkContext.parallelize(range(4), 2) \
        .mapPartitions(lambda _: [executor_pid()]).collect()
    emit({"batch": batch, "streamed": streamed, "app_id": spark.sparkContext.applicationId,
          "executor_pids": sorted(set(pids))})
    if "--hold" in argv[5:]:
        hold()
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
