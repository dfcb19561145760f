"""``ldbench read``: read throughput, bytes on the wire and tail latency.

    ldbench read [--config PATH] [--records 10000000] [--payload-size 100] [--json OUT]

Against ``--config`` or a local cluster (3 nodes, R=2), with one client in this process:

1. backfill: ``--records`` log lines (100 bytes by default) through the BufferedWriter,
   spread over ``--logs`` logs (zstd blobs, as a service would write them);
2. ``read_batch``: every log read back at once into columnar batches, with single copy
   delivery (SCD) and all-send-all (ASA), ``--rounds`` times each, alternating which goes
   first (the first read after a backfill meets cold caches and compactions: measured
   that way, whichever ran first looked up to 2x slower); the median round's
   records/s, and the bytes the client received from the nodes for each (connection
   level: frames, headers and payloads);
3. ``read``: the same through ``read`` (one ``DataRecord`` per record), over at most
   ``--read-records`` records;
4. tail latency: a tailing reader in its own thread while ``append_async`` runs at
   ``--tail-rate`` for ``--tail-seconds``: for each record, delivery time minus the
   time its append was acknowledged (negative when the reader had it before the writer
   heard back), and delivery minus the time the append was issued.
"""

from __future__ import annotations

import argparse
import functools
import threading
import time
from typing import Any

import numpy as np

from logdevice.cli import credentials, missing_extra
from logdevice.client import Client
from logdevice.records import LSN_MAX, DataRecord
from logdevice.tools import benchutil
from logdevice.tools.loglines import generate

try:
    from rich.console import Console
except ImportError as exc:  # the "cli" extra
    raise missing_extra("ldbench", "cli", exc) from None

__all__ = ["add_read_arguments", "run_read"]


def add_read_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--records", type=int, default=10_000_000, help="records to backfill")
    p.add_argument("--read-records", type=int, default=2_000_000,
                   help="records read through read() (0: skip)")
    p.add_argument("--batch", type=int, default=100_000, help="max_records per read_batch")
    p.add_argument("--rounds", type=int, default=3,
                   help="read_batch rounds of SCD and of all-send-all (the median counts)")
    p.add_argument("--chunk", type=int, default=10_000, help="records per append_many call")
    p.add_argument("--tail-rate", type=float, default=1000.0, help="appends/s, tail latency")
    p.add_argument("--tail-seconds", type=float, default=5.0,
                   help="length of the tail latency run (0: skip)")


def _backfill(client: Client, args: argparse.Namespace, console: Console,
              logs: list[int]) -> dict[int, tuple[int, int]]:
    """Write the records; per log the (first, last) LSN written."""
    n, size, chunk = args.records, args.payload_size, args.chunk
    with console.status(f"generating {n:,} log lines"):
        buf, offsets = generate(0, min(n, 1_000_000), size)
    base = min(n, 1_000_000)
    w = client.create_buffered_writer(size_trigger=1_000_000, time_trigger=0.01)
    futs: list[tuple[int, Any]] = []
    with benchutil.progress(console) as prog:
        task = prog.add_task("backfill", total=n, rate="")
        t0 = time.perf_counter()
        for k, start in enumerate(range(0, n, chunk)):
            m = min(chunk, n - start)
            a = start % base
            m = min(m, base - a)
            log = logs[k % len(logs)]
            futs.append((log, w.append_many(log, (buf[a * size:(a + m) * size],
                                                  offsets[a:a + m + 1] - offsets[a]))))
            if k % 20 == 0:
                prog.update(task, completed=start,
                            rate=f"{start / max(1e-9, time.perf_counter() - t0):,.0f} rec/s")
        w.flush()
        span: dict[int, tuple[int, int]] = {}
        for log, f in futs:
            lsns = f.result(args.timeout * 4)
            lo, hi = span.get(log, (LSN_MAX, 0))
            span[log] = (min(lo, int(lsns.min())), max(hi, int(lsns.max())))
        prog.update(task, completed=n, rate=f"{n / (time.perf_counter() - t0):,.0f} rec/s")
    w.close()
    return span


def _read_batches(client: Client, args: argparse.Namespace, console: Console,
                  span: dict[int, tuple[int, int]], scd: bool) -> dict[str, Any]:
    r = benchutil.read_spans(client, console, span, scd=scd, total=args.records,
                             batch=args.batch)
    elapsed = r["seconds"]
    return {"records": r["records"], "seconds": elapsed, "records_per_s": r["records"] / elapsed,
            "payload_mb_per_s": r["payload_bytes"] / elapsed / 1e6,
            "bytes_received": r["bytes_received"],
            "copies_received": r["stats"].records_received, "starts": r["stats"].starts_sent}


def _median_round(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """The round with the median records/s, with every round's figure alongside."""
    ordered = sorted(rounds, key=lambda r: r["records_per_s"])
    return {**ordered[len(ordered) // 2],
            "rounds_records_per_s": [r["records_per_s"] for r in rounds]}


def _read_records(client: Client, args: argparse.Namespace, console: Console,
                  span: dict[int, tuple[int, int]]) -> dict[str, Any]:
    limit = args.read_records
    got = 0
    with client.create_reader(max_logs=len(span)) as r, benchutil.progress(console) as prog:
        task = prog.add_task("read", total=min(limit, args.records), rate="")
        t0 = time.perf_counter()
        for log, (lo, hi) in span.items():
            r.start_reading(log, lo, hi)
        while got < limit:
            items = r.read(min(65536, limit - got))
            if not items:
                break
            got += sum(1 for i in items if type(i) is DataRecord)
            prog.update(task, completed=got,
                        rate=f"{got / max(1e-9, time.perf_counter() - t0):,.0f} rec/s")
        elapsed = time.perf_counter() - t0
    return {"records": got, "seconds": elapsed, "records_per_s": got / elapsed}


def _tail_latency(client: Client, args: argparse.Namespace, console: Console,
                  log: int) -> dict[str, Any]:
    total = int(args.tail_rate * args.tail_seconds)
    issued = np.full(total, np.nan)
    acked = np.full(total, np.nan)
    delivered = np.full(total, np.nan)
    start = client.get_tail_lsn(log) + 1
    done = threading.Event()
    size = max(8, args.payload_size)

    def read() -> None:
        with client.create_reader() as r:
            r.wait_only_when_no_data()
            r.start_reading(log, start, LSN_MAX)
            seen = 0
            while seen < total and not done.is_set():
                b = r.read_batch(10_000, timeout=0.2)
                if not len(b):
                    continue
                now = time.perf_counter()
                p = b.payloads
                starts = b.offsets[:-1].astype(np.intp)
                idx = np.zeros(len(b), dtype=np.int64)
                for k in range(8):  # the first 8 payload bytes hold the index
                    idx |= p[starts + k].astype(np.int64) << (8 * k)
                ok = (idx >= 0) & (idx < total)
                delivered[idx[ok]] = now
                seen += int(ok.sum())

    reader = threading.Thread(target=read, name="ldbench-tail-reader")
    reader.start()
    time.sleep(0.3)  # let the reader's streams start

    def on_ack(i: int, fut: Any) -> None:
        if fut.exception() is None:
            acked[i] = time.perf_counter()

    with benchutil.progress(console) as prog:
        task = prog.add_task(f"tailing reader, appends at {args.tail_rate:,.0f}/s",
                             total=total, rate="")
        t0 = time.perf_counter()
        for i in range(total):
            due = t0 + i / args.tail_rate
            delay = due - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            payload = int(i).to_bytes(8, "little") + b"t" * (size - 8)
            issued[i] = time.perf_counter()
            client.append_async(log, payload).add_done_callback(functools.partial(on_ack, i))
            if i % 200 == 0:
                prog.update(task, completed=i)
        prog.update(task, completed=total)
    reader.join(args.timeout)
    done.set()
    reader.join(5)
    ok = ~np.isnan(delivered) & ~np.isnan(acked)
    out = {"appends": total, "delivered": int((~np.isnan(delivered)).sum()),
           "rate": args.tail_rate}
    out["ack_to_delivery"] = _signed_percentiles(delivered[ok] - acked[ok])
    out["append_to_delivery"] = benchutil.percentiles(delivered[ok] - issued[ok])
    return out


def _signed_percentiles(seconds: np.ndarray) -> dict[str, float]:
    a = np.asarray(seconds, dtype=np.float64) * 1000.0
    if a.size == 0:
        return {"count": 0}
    p50, p99 = np.percentile(a, [50, 99])
    return {"count": int(a.size), "p50_ms": float(p50), "p99_ms": float(p99),
            "min_ms": float(a.min()), "max_ms": float(a.max()),
            "before_ack": float((a < 0).mean())}


def run_read(args: argparse.Namespace, console: Console) -> dict[str, Any]:
    """Read throughput (read_batch, read), SCD vs all-send-all bytes, tail latency."""
    logs = list(range(1, max(1, args.logs) + 1))
    results: dict[str, Any] = {}
    with benchutil.cluster_config(args.config, nodes=args.nodes, replication=args.replication,
                                  logs=len(logs) + 1, console=console) as cfg, \
            Client(cfg, timeout=args.timeout, **credentials(args)) as client:
        for log in logs:
            client.append(log, b"warm-up")
        span = _backfill(client, args, console, logs)
        results["backfill"] = {"records": args.records, "logs": len(logs)}
        rounds: dict[bool, list[dict[str, Any]]] = {True: [], False: []}
        for k in range(max(1, args.rounds)):
            for scd in ((True, False) if k % 2 == 0 else (False, True)):
                rounds[scd].append(_read_batches(client, args, console, span, scd=scd))
        results["read_batch_scd"] = _median_round(rounds[True])
        results["read_batch_asa"] = _median_round(rounds[False])
        results["scd_bytes_ratio"] = (results["read_batch_scd"]["bytes_received"]
                                      / max(1, results["read_batch_asa"]["bytes_received"]))
        if args.read_records:
            results["read"] = _read_records(client, args, console, span)
        if args.tail_seconds and args.tail_rate:
            tail_log = len(logs) + 1
            client.append(tail_log, b"warm-up")
            results["tail_latency"] = _tail_latency(client, args, console, tail_log)
    _print(results, args, console)
    return results


def _print(r: dict[str, Any], args: argparse.Namespace, console: Console) -> None:
    rows = []
    for key, name in (("read_batch_scd", "read_batch, SCD"),
                      ("read_batch_asa", "read_batch, all-send-all")):
        b = r[key]
        rows.append((name, f"{b['records_per_s']:,.0f} rec/s",
                     f"median of {len(b['rounds_records_per_s'])} rounds; "
                     f"{b['records']:,} records in {b['seconds']:.2f} s, "
                     f"{b['payload_mb_per_s']:.0f} MB/s of payload, "
                     f"{b['bytes_received'] / 1e6:,.1f} MB received"))
    rows.append(("bytes received, SCD / all-send-all", f"{r['scd_bytes_ratio']:.2f}x",
                 f"R={args.replication}: ~1/R expected"))
    if "read" in r:
        q = r["read"]
        rows.append(("read (DataRecord objects)", f"{q['records_per_s']:,.0f} rec/s",
                     f"{q['records']:,} records in {q['seconds']:.2f} s"))
    if "tail_latency" in r:
        t = r["tail_latency"]
        a, e = t["ack_to_delivery"], t["append_to_delivery"]
        if a.get("count"):
            rows.append((f"tail: append ack -> delivery at {t['rate']:,.0f}/s",
                         f"p50 {a['p50_ms']:.2f} / p99 {a['p99_ms']:.2f} ms",
                         f"{100 * a['before_ack']:.0f}% delivered before the ack; "
                         f"{t['delivered']:,} of {t['appends']:,} delivered"))
            rows.append(("tail: append issued -> delivery",
                         f"p50 {e['p50_ms']:.2f} / p99 {e['p99_ms']:.2f} ms",
                         f"p99.9 {e['p999_ms']:.2f} ms, max {e['max_ms']:.2f} ms"))
    console.print(benchutil.results_table(
        f"ldbench read: {args.records:,} x {args.payload_size}-byte records"
        + ("" if args.config else f", local cluster {args.nodes} nodes R={args.replication}"),
        rows))

