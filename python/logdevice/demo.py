"""``make run``: a local cluster, a million log lines through the BufferedWriter, read back,
and where they landed.

    python -m logdevice.demo [--records 1000000] [--nodes 5] [--replication 2]

Exits 1 when a read did not get every record back or a blob is not on the R nodes of its
copyset (CI runs it at a small size against the installed wheel).

1. start ``ld.LocalCluster(nodes=5, replication=2)`` (real node processes on loopback);
2. write the records (100-byte JSON-like log lines) through a BufferedWriter, spread over
   a few logs, with a progress bar; print records/s and MB/s;
3. read them all back through ``Reader.read_batch`` (columnar batches), once with single
   copy delivery and once all-send-all: records/s, and the bytes the client received
   from the nodes for each (counted on its connections);
4. stop the nodes and open each one's LogsDB: how many blobs, records and bytes each node
   holds, and a check that every blob is on exactly R nodes.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import logdevice as ld
from ldcore.lsn import to_string as lsn_str
from logdevice.cli import console as tool_console
from logdevice.cli import missing_extra
from logdevice.storage.logsdb import LogsDB
from logdevice.tools import benchutil
from logdevice.tools.loglines import generate

try:
    from rich.console import Console
    from rich.table import Table
except ImportError as exc:  # the "cli" extra
    raise missing_extra("the demo", "cli", exc) from None

__all__ = ["main"]


@dataclass
class Written:
    """What the writer reported: per log, the LSN of every record (one per record)."""

    records: int = 0
    payload_bytes: int = 0
    seconds: float = 0.0
    lsns: dict[int, list[np.ndarray]] = field(default_factory=dict)
    stats: dict[str, int] = field(default_factory=dict)

    def records_per_blob(self, log_id: int) -> dict[int, int]:
        parts = self.lsns.get(log_id)
        if not parts:
            return {}
        lsns, counts = np.unique(np.concatenate(parts), return_counts=True)
        return dict(zip(lsns.tolist(), counts.tolist(), strict=True))


# ---------------------------------------------------------------------------- writing


def write_records(client: Any, console: Console, n: int, logs: list[int],
                  size: int = 100, chunk: int = 10_000) -> Written:
    """Write ``n`` log lines through a BufferedWriter, ``chunk`` per ``append_many`` call,
    logs taking turns."""
    with console.status(f"generating {n:,} log lines"):
        buf, offsets = generate(0, n, size)
    out = Written(records=n, payload_bytes=n * size)
    acked = [0]
    lock = threading.Lock()

    def on_done(log_id: int, fut: Any) -> None:
        if fut.exception() is None:
            with lock:
                acked[0] += len(fut.result())
                out.lsns.setdefault(log_id, []).append(fut.result())

    w = client.create_buffered_writer(size_trigger=1_000_000, time_trigger=0.01)
    futs = []
    with benchutil.progress(console) as prog:
        task = prog.add_task("writing", total=n, rate="")
        t0 = time.perf_counter()
        for k, start in enumerate(range(0, n, chunk)):
            m = min(chunk, n - start)
            log_id = logs[k % len(logs)]
            f = w.append_many(log_id, (buf[start * size:(start + m) * size], offsets[:m + 1]))
            f.add_done_callback(lambda fut, log_id=log_id: on_done(log_id, fut))
            futs.append(f)
            if k % 5 == 0:
                prog.update(task, completed=acked[0],
                            rate=f"{acked[0] / max(1e-9, time.perf_counter() - t0):,.0f} rec/s")
        w.flush()
        for f in futs:
            f.result(120)
            prog.update(task, completed=acked[0],
                        rate=f"{acked[0] / (time.perf_counter() - t0):,.0f} rec/s")
        out.seconds = time.perf_counter() - t0
    w.close()
    out.stats = dict(w.stats)
    return out


def show_throughput(console: Console, written: Written) -> None:
    s = written.stats
    console.print(
        f"[bold green]{written.records:,} records[/] in {written.seconds:.2f} s: "
        f"[bold]{written.records / written.seconds:,.0f} records/s[/], "
        f"{written.payload_bytes / written.seconds / 1e6:.1f} MB/s of payload; "
        f"{s.get('blobs', 0)} blobs, zstd shrank {s.get('payload_bytes', 0) / 1e6:.0f} MB to "
        f"{s.get('blob_bytes', 0) / 1e6:.1f} MB")


# ---------------------------------------------------------------------------- reading


def read_back(client: Any, console: Console, written: Written, logs: list[int],
              scd: bool) -> dict[str, Any]:
    """Read every log back through ``read_batch``; records, payload bytes, seconds and
    bytes received from the nodes."""
    spans = {log_id: (int(min(p.min() for p in written.lsns[log_id])),
                      int(max(p.max() for p in written.lsns[log_id])))
             for log_id in logs if written.lsns.get(log_id)}
    done = benchutil.read_spans(client, console, spans, scd=scd, total=written.records)
    return {"scd": scd, **done}


def show_reads(console: Console, written: Written, reads: list[dict[str, Any]],
               replication: int) -> bool:
    """The table of the reads; whether every read got every record back."""
    all_ok = True
    t = Table(title="read back through Reader.read_batch")
    for col in ("mode", "records", "records/s", "MB/s", "received", "all back?"):
        t.add_column(col, justify="right")
    for r in reads:
        ok = r["records"] == written.records and r["payload_bytes"] == written.payload_bytes
        all_ok &= ok
        t.add_row("SCD" if r["scd"] else "all-send-all", f"{r['records']:,}",
                  f"{r['records'] / r['seconds']:,.0f}",
                  f"{r['payload_bytes'] / r['seconds'] / 1e6:,.0f}",
                  f"{r['bytes_received'] / 1e6:,.1f} MB", "[green]yes[/]" if ok else "[red]NO[/]")
    console.print(t)
    scd = next(r for r in reads if r["scd"])
    asa = next(r for r in reads if not r["scd"])
    ratio = scd["bytes_received"] / max(1, asa["bytes_received"])
    console.print(f"single copy delivery (SCD) received {ratio:.2f}x the bytes of all-send-all "
                  f"(R={replication}: each record once instead of R times)")
    return all_ok


# ---------------------------------------------------------------------------- placement


def where_landed(cluster: Any, written: Written, logs: list[int]) -> dict[str, Any]:
    """Stop the nodes and read every node's LogsDB: copies, records and bytes per node."""
    cluster.stop_all()
    per_node: dict[int, dict[str, int]] = {}
    copies: dict[tuple[int, int], list[tuple[int, int, set[int]]]] = {}
    for node in range(cluster.n):
        row = per_node.setdefault(node, {"blobs": 0, "records": 0, "bytes": 0})
        path = cluster.logsdb_path(node)
        if not path.exists():
            continue
        with LogsDB(path) as db:
            for log_id in logs:
                per_blob = written.records_per_blob(log_id)
                lo = 1
                while True:
                    rb = db.read_records(log_id, lo, max_records=10_000, max_bytes=0)
                    for j, lsn in enumerate(rb.lsns.tolist()):
                        if lsn in per_blob:  # skip the warm-up records, if any
                            row["blobs"] += 1
                            row["records"] += per_blob[lsn]
                            copyset = {int(x) for x in rb.copysets[j] if x >= 0}
                            copies.setdefault((log_id, lsn), []).append(
                                (node, int(rb.waves[j]), copyset))
                    row["bytes"] += int(rb.nbytes)
                    if not len(rb) or rb.next_lsn >= ld.LSN_MAX:
                        break
                    lo = rb.next_lsn
    expected = sum(len(written.records_per_blob(log_id)) for log_id in logs)
    return {"per_node": per_node, "copies": copies, "expected_blobs": expected}


def show_placement(console: Console, placement: dict[str, Any], replication: int) -> bool:
    """The table of copies per node; whether every blob is on the R nodes of its copyset."""
    per_node = placement["per_node"]
    total_copies = sum(r["blobs"] for r in per_node.values()) or 1
    t = Table(title="where the records landed (read back from each node's LogsDB)")
    for col in ("node", "blob copies", "records", "bytes stored", "share"):
        t.add_column(col, justify="right")
    for node, r in sorted(per_node.items()):
        t.add_row(f"N{node}", f"{r['blobs']:,}", f"{r['records']:,}",
                  f"{r['bytes'] / 1e6:,.2f} MB", f"{100 * r['blobs'] / total_copies:.0f}%")
    console.print(t)
    # The copyset of a record is the one of its last wave; a wave that timed out may have
    # left extra copies elsewhere (harmless; LogDevice behaves the same).
    complete = extra = 0
    for held in placement["copies"].values():
        final = max(held, key=lambda h: h[1])[2]
        nodes = {h[0] for h in held}
        complete += len(final) == replication and final <= nodes
        extra += len(nodes - final)
    found = len(placement["copies"])
    ok = complete == found == placement["expected_blobs"]
    verdict = "[green]yes[/]" if ok else "[red]NO[/]"
    console.print(f"every blob on all R={replication} nodes of its copyset: {verdict} "
                  f"({complete:,} of {placement['expected_blobs']:,} blobs; "
                  f"{extra} extra copies left by retried store waves)")
    return ok


# ---------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m logdevice.demo",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--nodes", type=int, default=5)
    p.add_argument("--replication", type=int, default=2)
    p.add_argument("--logs", type=int, default=8, help="logs to spread the records over")
    args = p.parse_args(argv)
    console = tool_console()
    logs = list(range(1, args.logs + 1))
    console.rule("[bold]logdevice for Python: demo")
    t0 = time.perf_counter()
    with console.status(f"starting a local cluster: {args.nodes} nodes, "
                        f"R={args.replication}"):
        cluster = ld.LocalCluster(nodes=args.nodes, replication=args.replication,
                                  logs=range(1, 101), log_level="WARNING")
    with cluster:
        console.print(f"cluster up in {time.perf_counter() - t0:.1f} s; config: "
                      f"{cluster.config_path}")
        with cluster.client() as client:
            console.rule("writing")
            written = write_records(client, console, args.records, logs)
            show_throughput(console, written)
            tails = {log_id: lsn_str(client.get_tail_lsn(log_id)) for log_id in logs}
            console.print("tails: " + ", ".join(f"log {k}: {v}" for k, v in tails.items()))
            console.rule("reading")
            reads = [read_back(client, console, written, logs, scd) for scd in (True, False)]
            reads_ok = show_reads(console, written, reads, args.replication)
        console.rule("placement")
        with console.status("stopping the nodes and reading their LogsDBs"):
            placement = where_landed(cluster, written, logs)
        placed_ok = show_placement(console, placement, args.replication)
    return 0 if reads_ok and placed_ok else 1


if __name__ == "__main__":
    sys.exit(main())
