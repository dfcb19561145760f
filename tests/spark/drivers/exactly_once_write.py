"""Driver program for the exactly-once sink tests on a standalone cluster: ROWS rows in
PARTITIONS partitions, made slowly (so a task is still appending when the test acts), into
log LOG through the ``logdevice`` sink.

    exactly_once_write.py CONFIG LOG ROWS PARTITIONS MARKS_DIR MODE

MODE ``slow``: every task takes a few seconds (the test kills the executor meanwhile).
MODE ``speculate``: speculation is on and the first attempt of partition 0 crawls, so
Spark starts a second attempt on the other host; the first keeps appending meanwhile.
Each task attempt leaves an empty file ``p<partition>-a<attempt>`` in MARKS_DIR (the rows
themselves must be the same for every attempt).  Emits the rows the job committed and the
application id.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from tests.spark.standalone_app import emit, session

BATCH = 500  # rows per Arrow batch the slow source yields


def main(argv: list[str]) -> None:
    config, log_id, rows, partitions, marks, mode = argv[:6]
    extra = {}
    if mode == "speculate":
        extra = {"spark.speculation": "true", "spark.speculation.interval": "200ms",
                 "spark.speculation.multiplier": "1.5", "spark.speculation.quantile": "0.5",
                 "spark.speculation.minTaskRuntime": "500ms",
                 "spark.cores.max": "4"}  # an executor on each worker
    spark = session("logdevice-exactly-once", extra)
    spark.sparkContext.setLogLevel("ERROR")

    def slow_rows(batches):  # runs in the task: deterministic rows, paced
        import pyarrow as pa
        from pyspark import TaskContext

        ctx = TaskContext.get()
        Path(marks, f"p{ctx.partitionId()}-a{ctx.attemptNumber()}").touch()
        crawl = mode == "speculate" and ctx.partitionId() == 0 and ctx.attemptNumber() == 0
        for rb in batches:
            ids = rb.column(0).to_pylist()
            for i in range(0, len(ids), BATCH):
                time.sleep(1.0 if crawl else 0.05)
                yield pa.record_batch({"payload": pa.array(
                    [b"row-%08d" % x + b"." * 100 for x in ids[i:i + BATCH]])})

    df = spark.range(int(rows), numPartitions=int(partitions)) \
        .mapInArrow(slow_rows, "payload binary")
    (df.write.format("logdevice").option("config", config).option("log", log_id)
     .option("size_trigger", "20000").mode("append").save())
    emit({"app_id": spark.sparkContext.applicationId})
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
