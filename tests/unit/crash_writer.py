"""Child process of the LogsDB crash test: writes synced batches until killed.

Usage: ``python crash_writer.py DB_PATH [RECORDS_PER_BATCH]``.  Batch b holds LSNs
``b * n + 1 .. (b + 1) * n`` of log 1 with payloads from :func:`payload`; after each
write returns, the batch id is printed (and flushed), so everything printed is acknowledged.
"""

import sys

import numpy as np

from logdevice.storage.logsdb import LogsDB

LOG = 1


def payload(batch: int, i: int) -> bytes:
    return (b"batch %d record %d " % (batch, i)) * (1 + (batch * 7 + i) % 5)


def batch_arrays(batch: int, n: int):
    items = [payload(batch, i) for i in range(n)]
    offsets = np.zeros(n + 1, np.uint64)
    np.cumsum([len(x) for x in items], out=offsets[1:])
    lsns = np.arange(batch * n + 1, (batch + 1) * n + 1, dtype=np.uint64)
    timestamps = np.full(n, 1_000 * batch, np.int64)
    copysets = np.tile(np.array([[batch % 5, 5 + batch % 3]], np.int16), (n, 1))
    return lsns, timestamps, copysets, b"".join(items), offsets


def main() -> None:
    path = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 50
    with LogsDB(path, partition_duration_ms=10_000) as db:
        batch = 0
        while True:
            lsns, ts, cs, data, offs = batch_arrays(batch, n)
            db.write_records(LOG, lsns, ts, np.zeros(n, np.uint32), cs, data, offs, sync=True)
            print(batch, flush=True)
            batch += 1


if __name__ == "__main__":
    main()
