"""Reading records appended one at a time (one record per LSN), with the default reader
(its window grows for small records) against a fixed window of 512 LSNs, the reference,
in the same run.

A 3-node local cluster (R=2) gets ``--records`` records of ``--payload`` bytes through
``append_async`` (bounded in flight), then one client reads them back with ``read_batch``
in rounds, alternating the order of the two readers, in single copy delivery and in
all-send-all.  Reported: the median round of each, and the default reader's rate as a
ratio of the fixed window's.  The table is printed and written to
``benchmarks/last-plain-read.md``.

    .venv/bin/python benchmarks/plain_read.py [--records 200000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import logdevice as ld
from logdevice.local_cluster import LocalCluster

HERE = Path(__file__).resolve().parent
OUT_MD = HERE / "last-plain-read.md"
IN_FLIGHT = 2000
LOG = 1


def write(client: ld.Client, records: int, payload: int) -> tuple[int, int]:
    body = b"x" * payload
    first = client.append(LOG, body)
    pending = []
    for _ in range(records - 1):
        pending.append(client.append_async(LOG, body))
        if len(pending) >= IN_FLIGHT:
            for f in pending:
                f.result(60)
            pending = []
    for f in pending:
        f.result(60)
    return first, client.get_tail_lsn(LOG)


def read_rate(client: ld.Client, first: int, last: int, records: int, scd: bool,
              options: dict[str, int]) -> float:
    with client.create_reader(**options) as r:  # type: ignore[arg-type]
        if not scd:
            r.force_no_single_copy_delivery()
        r.start_reading(LOG, first, last)
        t0, n = time.perf_counter(), 0
        while n < records:
            b = r.read_batch(100_000, timeout=30)
            if not len(b) and not r.is_reading(LOG):
                break
            n += len(b)
        seconds = time.perf_counter() - t0
    if n != records:
        raise RuntimeError(f"read {n} of {records} records")
    return records / seconds


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=int, default=200_000)
    p.add_argument("--payload", type=int, default=100)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    readers = {"default (window grows)": {}, "fixed window, buffer_size=512": {
        "buffer_size": 512}}
    rates: dict[tuple[str, bool], list[float]] = {(k, s): [] for k in readers
                                                  for s in (True, False)}
    with tempfile.TemporaryDirectory(prefix="ld-plain-read-") as root, \
            LocalCluster(nodes=3, replication=2, logs=[LOG], root=root) as cluster, \
            ld.Client(cluster.config_path, 30.0) as client:
        first, last = write(client, args.records, args.payload)
        for rnd in range(args.rounds):
            order = list(readers) if rnd % 2 == 0 else list(reversed(readers))
            for scd in (True, False):
                for name in order:
                    rates[(name, scd)].append(
                        read_rate(client, first, last, args.records, scd, readers[name]))
    rows = []
    for scd in (True, False):
        mode = "SCD" if scd else "all-send-all"
        ref = statistics.median(rates[("fixed window, buffer_size=512", scd)])
        for name in readers:
            med = statistics.median(rates[(name, scd)])
            rows.append((mode, name, f"{med / 1e6:.2f} M records/s",
                         f"{min(rates[(name, scd)]) / 1e6:.2f} - "
                         f"{max(rates[(name, scd)]) / 1e6:.2f}", f"{med / ref:.2f}x"))
    title = (f"plain records: {args.records:,} x {args.payload} B appended one at a time, "
             f"3 nodes, R=2, median of {args.rounds} rounds")
    md = [title, "", "| mode | reader | median | range | vs fixed window |",
          "|---|---|---|---|---|"] + [f"| {' | '.join(r)} |" for r in rows]
    print("\n".join(md))
    OUT_MD.write_text("\n".join(md) + "\n")


if __name__ == "__main__":
    main()
