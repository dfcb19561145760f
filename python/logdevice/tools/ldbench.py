"""``ldbench``: load generator with progress bars, percentiles and a results table.

Subcommands (each registers itself in ``SUBCOMMANDS``: a function adding its arguments
and one running it, returning a JSON-able dict)::

    ldbench write [--config PATH] [--records 1000000] [--payload-size 100] [--json OUT]
    ldbench read [--config PATH] [--records 10000000] [--payload-size 100] [--json OUT]

``write`` runs against ``--config`` or a local cluster it starts (3 nodes, R=2) and
measures, with one client in this process:

1. BufferedWriter throughput, bulk form (``append_many`` of 10,000 lines per call);
2. BufferedWriter throughput, one ``append`` call per record;
3. single-append latency (``append_async``) at a fixed rate (default 1,000/s), open loop:
   latency counts from the time the append was due, so a stall shows up;
4. single-append latency with a fixed number in flight (default 64), closed loop.

Payloads are 100-byte JSON-like log lines (``loglines``).  ``read`` (backfill, then
read_batch and read throughput, SCD vs all-send-all bytes, tail latency) lives in
``ldbench_read``.  To add a subcommand: write ``add_<name>_arguments(parser)`` and
``run_<name>(args, console)`` and list them in ``SUBCOMMANDS``.
"""

from __future__ import annotations

import argparse
import functools
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from logdevice.checker.driver import CheckOptions, run_check
from logdevice.cli import add_credentials, add_version, credentials, missing_extra
from logdevice.cli import console as tool_console
from logdevice.client import Client
from logdevice.config import Config
from logdevice.errors import LogDeviceError
from logdevice.security import ConnectSecurity
from logdevice.tools import benchutil
from logdevice.tools.ldbench_read import add_read_arguments, run_read
from logdevice.tools.loglines import generate

try:
    from rich.console import Console
except ImportError as exc:  # the "cli" extra
    raise missing_extra("ldbench", "cli", exc) from None

__all__ = ["main", "SUBCOMMANDS"]


def add_common_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", help="cluster config to use (default: start a local cluster)")
    p.add_argument("--nodes", type=int, default=3, help="local cluster size (default 3)")
    p.add_argument("--replication", type=int, default=2, help="local cluster R (default 2)")
    p.add_argument("--logs", type=int, default=4, help="logs to spread writes over (1..N)")
    p.add_argument("--payload-size", type=int, default=100, help="bytes per record")
    p.add_argument("--timeout", type=float, default=30.0, help="client timeout, seconds")
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON here")
    add_credentials(p)  # who the client is, with --config of a cluster with security


# ---------------------------------------------------------------------------- write


def add_write_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--durability", choices=("memory", "async_write", "sync_write"),
                   default=None, help="local cluster's append_store_durability "
                                      "(default: the config's, async_write)")
    p.add_argument("--records", type=int, default=1_000_000,
                   help="records for the bulk BufferedWriter run")
    p.add_argument("--per-call-records", type=int, default=200_000,
                   help="records for the one-append-call-per-record run (0: skip)")
    p.add_argument("--chunk", type=int, default=10_000, help="records per append_many call")
    p.add_argument("--size-trigger", type=int, default=1_000_000,
                   help="BufferedWriter size trigger, bytes")
    p.add_argument("--compression", default="zstd", choices=["zstd", "none"])
    p.add_argument("--rate", type=float, default=1000.0,
                   help="appends/s for the fixed-rate latency run")
    p.add_argument("--rate-seconds", type=float, default=5.0,
                   help="length of the fixed-rate run (0: skip)")
    p.add_argument("--inflight", type=int, default=64, help="appends in flight (closed loop)")
    p.add_argument("--inflight-appends", type=int, default=20_000,
                   help="appends for the in-flight run (0: skip)")


def _bulk_throughput(client: Client, args: argparse.Namespace, console: Console,
                     buf: np.ndarray, offsets: np.ndarray) -> dict[str, Any]:
    n, size, chunk = args.records, args.payload_size, args.chunk
    logs = list(range(1, args.logs + 1))
    w = client.create_buffered_writer(size_trigger=args.size_trigger, time_trigger=0.01,
                                      compression=args.compression)
    acked = [0]
    lock = threading.Lock()

    def on_done(count: int, fut: Any) -> None:
        if fut.exception() is None:
            with lock:
                acked[0] += count

    futs = []
    with benchutil.progress(console) as prog:
        task = prog.add_task("BufferedWriter append_many", total=n, rate="")
        t0 = time.perf_counter()
        for k, start in enumerate(range(0, n, chunk)):
            m = min(chunk, n - start)
            f = w.append_many(logs[k % len(logs)],
                              (buf[start * size:(start + m) * size], offsets[:m + 1]))
            f.add_done_callback(functools.partial(on_done, m))
            futs.append(f)
            if k % 10 == 0:
                dt = time.perf_counter() - t0
                prog.update(task, completed=acked[0], rate=f"{acked[0] / max(dt, 1e-9):,.0f} rec/s")
        w.flush()
        last = 0
        for f in futs:
            last = max(last, int(f.result(args.timeout * 4).max(initial=0)))
            dt = time.perf_counter() - t0
            prog.update(task, completed=acked[0], rate=f"{acked[0] / dt:,.0f} rec/s")
        elapsed = time.perf_counter() - t0
    w.close()
    st = w.stats
    return {"records": n, "seconds": elapsed, "records_per_s": n / elapsed,
            "mb_per_s": n * size / elapsed / 1e6, "blobs": st["blobs"],
            "blob_bytes": st["blob_bytes"], "compression_ratio":
                st["payload_bytes"] / max(1, st["blob_bytes"]),
            "retries": st["retries"], "last_lsn": last}


def _per_call_throughput(client: Client, args: argparse.Namespace, console: Console,
                         buf: np.ndarray) -> dict[str, Any]:
    n, size = args.per_call_records, args.payload_size
    logs = list(range(1, args.logs + 1))
    payloads = [buf[i * size:(i + 1) * size].tobytes() for i in range(n)]
    w = client.create_buffered_writer(size_trigger=args.size_trigger, time_trigger=0.01,
                                      compression=args.compression)
    with benchutil.progress(console) as prog:
        task = prog.add_task("BufferedWriter append", total=n, rate="")
        t0 = time.perf_counter()
        nl = len(logs)
        futs = []
        step = 10_000
        for a in range(0, n, step):
            for i in range(a, min(n, a + step)):
                futs.append(w.append(logs[i % nl], payloads[i]))
            dt = time.perf_counter() - t0
            prog.update(task, completed=min(n, a + step), rate=f"{(a + step) / dt:,.0f} calls/s")
        w.flush()
        for f in futs[-nl:]:
            f.result(args.timeout * 4)
        ok = w.close(timeout=args.timeout * 4)
        elapsed = time.perf_counter() - t0
    assert ok, "per-call run did not finish"
    return {"records": n, "seconds": elapsed, "records_per_s": n / elapsed,
            "mb_per_s": n * size / elapsed / 1e6}


class _LatencyLog:
    """Per-append latencies filled in by the futures' callbacks; each completion releases
    ``done`` (a semaphore the caller waits on: completions, or free in-flight slots)."""

    def __init__(self, total: int, done: threading.Semaphore) -> None:
        self.seconds = np.zeros(total, dtype=np.float64)
        self.errors = 0
        self.done = done

    def callback(self, i: int, since: float) -> Any:
        def record(fut: Any) -> None:
            self.seconds[i] = time.perf_counter() - since
            if fut.exception() is not None:
                self.errors += 1
            self.done.release()
        return record


def _latency_at_rate(client: Client, args: argparse.Namespace, console: Console,
                     payload: bytes, node_pids: dict[int, int]) -> dict[str, Any]:
    rate, total = args.rate, int(args.rate * args.rate_seconds)
    log = _LatencyLog(total, threading.Semaphore(0))
    with benchutil.progress(console) as prog, benchutil.CpuMeter(node_pids) as cpu:
        task = prog.add_task(f"append_async at {rate:,.0f}/s", total=total, rate="")
        t0 = time.perf_counter()
        for i in range(total):
            due = t0 + i / rate
            delay = due - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            f = client.append_async(1 + i % args.logs, payload)
            f.add_done_callback(log.callback(i, due))
            if i % 200 == 0:
                dt = max(1e-9, time.perf_counter() - t0)
                prog.update(task, completed=i, rate=f"{i / dt:,.0f}/s")
        for _ in range(total):
            log.done.acquire(timeout=args.timeout * 2)
        prog.update(task, completed=total)
    out: dict[str, Any] = {**benchutil.percentiles(log.seconds)}
    out.update({"rate": rate, "errors": log.errors, **cpu.as_dict(), "cpu": cpu.describe()})
    return out


def _latency_in_flight(client: Client, args: argparse.Namespace, console: Console,
                       payload: bytes, node_pids: dict[int, int]) -> dict[str, Any]:
    total, depth = args.inflight_appends, args.inflight
    log = _LatencyLog(total, threading.Semaphore(depth))
    with benchutil.progress(console) as prog, benchutil.CpuMeter(node_pids) as cpu:
        task = prog.add_task(f"append_async, {depth} in flight", total=total, rate="")
        t0 = time.perf_counter()
        for i in range(total):
            log.done.acquire()
            t = time.perf_counter()
            f = client.append_async(1 + i % args.logs, payload)
            f.add_done_callback(log.callback(i, t))
            if i % 500 == 0:
                dt = max(1e-9, time.perf_counter() - t0)
                prog.update(task, completed=i, rate=f"{i / dt:,.0f}/s")
        for _ in range(depth):
            log.done.acquire(timeout=args.timeout * 2)
        elapsed = time.perf_counter() - t0
        prog.update(task, completed=total)
    out: dict[str, Any] = {**benchutil.percentiles(log.seconds)}
    out.update({"in_flight": depth, "appends_per_s": total / elapsed, "errors": log.errors,
                **cpu.as_dict(), "cpu": cpu.describe(),
                "cpu_per_append": cpu.per_op_us(total / elapsed)})
    return out


def run_write(args: argparse.Namespace, console: Console) -> dict[str, Any]:
    """BufferedWriter throughput and single-append latency."""
    size = args.payload_size
    with console.status("generating log lines"):
        buf, offsets = generate(0, max(args.records, args.per_call_records, 1), size)
    payload = buf[:size].tobytes()
    results: dict[str, Any] = {}
    options = {} if args.durability is None else {"append_store_durability": args.durability}
    with benchutil.bench_cluster(args.config, nodes=args.nodes, replication=args.replication,
                                 logs=max(args.logs, 1), console=console, **options) as target, \
            Client(target.config_path, timeout=args.timeout, **credentials(args)) as client:
        for log in range(1, args.logs + 1):  # activate every sequencer before timing
            client.append(log, b"warm-up")
        if args.records:
            results["bulk"] = _bulk_throughput(client, args, console, buf, offsets)
        if args.per_call_records:
            results["per_call"] = _per_call_throughput(client, args, console, buf)
        if args.rate_seconds and args.rate:
            for _ in range(200):  # warm the single-append path
                client.append(1, payload)
            results["rate_latency"] = _latency_at_rate(client, args, console, payload,
                                                       target.node_pids())
        if args.inflight_appends:
            results["inflight_latency"] = _latency_in_flight(client, args, console, payload,
                                                             target.node_pids())
        results["copies"] = _count_copies(target.config_path, args, console)
    _print_write(results, args, console)
    return results


def _count_copies(config_path: str, args: argparse.Namespace,
                  console: Console) -> dict[str, Any]:
    """Ask the cluster checker how many copies beyond the copysets the run left (a store
    wave given up on, then stored anyway): disk and WAL the write path wasted."""
    config = Config.load(config_path)
    security = ConnectSecurity.for_client(config, **credentials(args))
    with console.status("counting copies (cluster checker)"):
        report = run_check(config, CheckOptions(logs=list(range(1, args.logs + 1)),
                                                security=security, recheck_delay=0.5))
    if report.errors:
        return {"error": "; ".join(report.errors)}
    summary = report.summary
    records = max(1, summary["records"])
    return {"records": summary["records"], "extra_copies": summary["extra_copies"],
            "extra_pct": 100.0 * summary["extra_copies"] / records}


def _ms(d: dict[str, Any]) -> str:
    return f"p50 {d['p50_ms']:.2f} / p99 {d['p99_ms']:.2f} / p99.9 {d['p999_ms']:.2f} ms"


def _print_write(r: dict[str, Any], args: argparse.Namespace, console: Console) -> None:
    rows = []
    if "bulk" in r:
        b = r["bulk"]
        rows.append(("BufferedWriter, append_many", f"{b['records_per_s']:,.0f} rec/s",
                     f"{b['mb_per_s']:.1f} MB/s, {b['blobs']} blobs, zstd x"
                     f"{b['compression_ratio']:.1f}, {b['records']:,} records"))
    if "per_call" in r:
        p = r["per_call"]
        rows.append(("BufferedWriter, append per record", f"{p['records_per_s']:,.0f} rec/s",
                     f"{p['mb_per_s']:.1f} MB/s, {p['records']:,} records"))
    if "rate_latency" in r:
        q = r["rate_latency"]
        rows.append((f"append latency at {q['rate']:,.0f}/s", f"p99 {q['p99_ms']:.2f} ms",
                     _ms(q) + f", {q['count']:,} appends, {q['errors']} errors; "
                     + q.get("cpu", "")))
    if "inflight_latency" in r:
        q = r["inflight_latency"]
        rows.append((f"append latency, {q['in_flight']} in flight", f"p99 {q['p99_ms']:.2f} ms",
                     _ms(q) + f", {q['appends_per_s']:,.0f} appends/s; " + q.get("cpu", "")))
        if q.get("cpu_per_append"):
            rows.append((f"CPU per append, {q['in_flight']} in flight", "",
                         q["cpu_per_append"]))
    c = r.get("copies", {})
    if "error" in c:
        rows.append(("copies beyond the copysets", "not counted", c["error"]))
    elif c:
        rows.append(("copies beyond the copysets", f"{c['extra_pct']:.2f} %",
                     f"{c['extra_copies']:,} extra copies of {c['records']:,} records "
                     f"(cluster checker)"))
    console.print(benchutil.results_table(
        f"ldbench write: {args.payload_size}-byte records"
        + ("" if args.config else f", local cluster {args.nodes} nodes R={args.replication}"),
        rows))


# ---------------------------------------------------------------------------- main

Subcommand = tuple[str, Callable[[argparse.ArgumentParser], None],
                   Callable[[argparse.Namespace, Console], dict[str, Any]]]
SUBCOMMANDS: list[Subcommand] = [
    ("write", add_write_arguments, run_write),
    ("read", add_read_arguments, run_read),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ldbench", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_version(parser)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, add_args, run in SUBCOMMANDS:
        p = sub.add_parser(name, help=(run.__doc__ or name).strip().split("\n")[0])
        add_common_arguments(p)
        add_args(p)
        p.set_defaults(run=run)
    args = parser.parse_args(argv)
    console = tool_console()
    try:
        results = args.run(args, console)
    except (LogDeviceError, OSError) as exc:
        console.print(f"[red]ldbench {args.command} failed:[/red] {exc}")
        return 1
    except KeyboardInterrupt:
        return 130
    if args.json:
        params = {k: v for k, v in vars(args).items() if k not in ("run", "json", "token")}
        path = benchutil.write_json(args.json, {
            "benchmark": f"ldbench {args.command}", "params": params,
            "machine": benchutil.machine(), "results": results})
        console.print(f"results written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
