"""Cluster checker benchmark: check one large log on 3 nodes (R=2).

Builds a log of ``--records`` records (default: ``$LD_CHECKER_RECORDS``, else 10 M) of
``--payload`` bytes on a 3-node local cluster with R=2: one real append activates the log,
then the cluster is stopped and every node's share (copysets drawn at random per record,
or one per block of 4,096 with ``--sticky``) is written straight into its LogsDB in
batches of 4,096 records (a large group commit), with the release pointer at the end, and
compacted (a node in steady state, not one busy compacting a burst of writes), and the
cluster is started again.  Then one check of the log
runs in this process (``logdevice.checker.driver.check_cluster``) against the node
processes, and reports:

- records checked per second (goal: >= 5 M/s);
- bytes the check moved over the network as a ratio of the log's data (payload bytes of
  one copy; goal: < 2 %), and of the bytes stored (R copies);
- the anchor, measured in the same run: one node's ``LogsDB.read_csi`` over its share of
  the log in process (no network, no verdict): the rate a check cannot beat per node.

The node-side budget (``checker_records_per_second``) is raised so it does not limit the
run.  ``NUMPY_MADVISE_HUGEPAGE`` defaults to 0 here, as the operations guide says to run
``ldshell check`` on a storage host (with huge pages, the kernel compacting memory for
them doubled the check time after the build filled the page cache); set it to 1 to
measure with them.  The table is printed and written to ``benchmarks/last-checker.md``.

    LD_CHECKER_RECORDS=10000000 .venv/bin/python benchmarks/checker.py [--sticky]
    LD_CHECKER_RECORDS=20000 .venv/bin/python benchmarks/checker.py      # a quick look
"""

from __future__ import annotations

import os

# As ``ldshell check`` is run on a storage host: numpy's huge-page advice off unless the
# caller says otherwise.  numpy reads it when imported, hence before any such import.
os.environ.setdefault("NUMPY_MADVISE_HUGEPAGE", "0")

import argparse  # noqa: E402
import asyncio  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from logdevice.checker.driver import CheckOptions, check_cluster  # noqa: E402
from logdevice.local_cluster import LocalCluster  # noqa: E402
from logdevice.storage.logsdb import LogsDB  # noqa: E402

HERE = Path(__file__).resolve().parent
OUT_MD = HERE / "last-checker.md"
#: Records per LogsDB write: about what one large group commit of STOREs writes.  (One
#: write of a million records would make copyset-index entries of 16 MB, which no node
#: writes and which a paged read would decode once per page.)
CHUNK = 4096
NODES, R, LOG = 3, 2, 1


def _copysets(rng: np.random.Generator, n: int, sticky: bool) -> np.ndarray:
    """R=2 of 3 nodes per record, in random order (or one copyset per 4,096 records)."""
    blocks = (n + 4095) // 4096 if sticky else n
    left_out = rng.integers(0, NODES, blocks)
    first = (left_out + rng.integers(1, NODES, blocks)) % NODES
    second = 3 - left_out - first  # the third of {0, 1, 2}
    cs = np.stack([first, second], axis=1).astype(np.int16)
    return np.repeat(cs, 4096, axis=0)[:n] if sticky else cs


def build(cluster: LocalCluster, records: int, payload: int, sticky: bool) -> tuple[int, int]:
    """Write the log into the stopped nodes' LogsDBs; returns (first, last) LSN."""
    with cluster.client() as client:
        first = client.append(LOG, b"x" * payload)
    cluster.stop_all()
    rng = np.random.default_rng(1)
    dbs = [LogsDB(cluster.logsdb_path(i)) for i in range(NODES)]
    body = np.frombuffer(rng.bytes(CHUNK * payload), np.uint8)
    try:
        lsn, left, now = first + 1, records - 1, int(time.time() * 1000)
        while left > 0:
            n = min(CHUNK, left)
            lsns = np.arange(lsn, lsn + n, dtype=np.uint64)
            cs = _copysets(rng, n, sticky)
            ts = np.full(n, now, np.int64)
            for x, db in enumerate(dbs):
                mine = np.flatnonzero((cs == x).any(axis=1))
                k = len(mine)
                db.write_records(LOG, lsns[mine], ts[mine], np.zeros(k, np.uint32), cs[mine],
                                 body[:k * payload], np.arange(k + 1, dtype=np.uint64) * payload,
                                 sticky_block=sticky)
            lsn += n
            left -= n
        last = lsn - 1
        for db in dbs:
            db.set_last_released(LOG, last, sync=True)
            db.compact()  # else the restarted nodes compact 2 GB during the check
    finally:
        for db in dbs:
            db.close()
    return first, last


def anchor_read_csi(path: Path) -> tuple[int, float]:
    """(rows, seconds) of reading one node's whole CSI of the log in process."""
    with LogsDB(path) as db:
        t0, rows, lo = time.perf_counter(), 0, 1
        while True:
            csi = db.read_csi(LOG, lo, max_entries=1 << 18)
            rows += len(csi)
            if not len(csi):
                break
            lo = csi.next_lsn
        return rows, time.perf_counter() - t0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=int,
                   default=int(os.environ.get("LD_CHECKER_RECORDS", 10_000_000)))
    p.add_argument("--payload", type=int, default=100)
    p.add_argument("--sticky", action="store_true", help="one copyset per 4,096 records")
    p.add_argument("--window-records", type=int, default=CheckOptions.window_records,
                   help="records per node judged at a time (the check's memory bound)")
    args = p.parse_args()
    root = Path(tempfile.mkdtemp(prefix="ld-checker-bench-"))
    console = Console()
    try:
        cluster = LocalCluster(nodes=NODES, replication=R, logs=[LOG], root=root,
                               checker_records_per_second=10**12, ready_timeout=120)
        with cluster:
            t0 = time.perf_counter()
            first, last = build(cluster, args.records, args.payload, args.sticky)
            console.print(f"built {args.records:,} records in {time.perf_counter() - t0:.1f} s")
            rows, anchor_s = anchor_read_csi(cluster.logsdb_path(0))
            for i in range(NODES):
                cluster.start(i)
            t0 = time.perf_counter()
            report = asyncio.run(check_cluster(cluster.config, CheckOptions(
                logs=[LOG], timeout=120, window_records=args.window_records)))
            seconds = time.perf_counter() - t0
    finally:
        shutil.rmtree(root, ignore_errors=True)
    summary = report.to_json()
    checked = summary["summary"]["records"]
    assert checked == args.records, summary
    assert not any(summary["violations"].values()), summary["violations"]
    data = args.records * args.payload
    rate = checked / seconds
    rows_out = [
        ("records checked", f"{checked:,}", ""),
        ("check time", f"{seconds:.2f} s", ""),
        ("records checked / s", f"{rate / 1e6:.2f} M/s", ">= 5 M/s"),
        ("bytes moved by the check", f"{report.bytes_received:,}", ""),
        ("  / data bytes (one copy)", f"{100 * report.bytes_received / data:.2f} %", "< 2 %"),
        ("  / bytes stored (R copies)", f"{100 * report.bytes_received / (R * data):.2f} %",
         ""),
        ("anchor: one node's read_csi in process", f"{rows / anchor_s / 1e6:.2f} M rows/s",
         ""),
        ("check rate / anchor (records vs rows of one node)",
         f"{rate / (rows / anchor_s):.2f}x", ""),
    ]
    t = Table(title=f"checker: {args.records:,} records x {args.payload} B, 3 nodes, R=2, "
                    f"{'sticky' if args.sticky else 'per-record'} copysets, windows of "
                    f"{args.window_records:,} records per node")
    for col in ("measure", "value", "goal"):
        t.add_column(col)
    for row in rows_out:
        t.add_row(*row)
    console.print(t)
    md = ["| measure | value | goal |", "|---|---|---|"]
    md += [f"| {a} | {b} | {c} |" for a, b, c in rows_out]
    OUT_MD.write_text(f"{t.title}\n\n" + "\n".join(md) + "\n")


if __name__ == "__main__":
    main()
