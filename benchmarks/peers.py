"""Peer benchmark: ours against Redis Streams and NATS JetStream, in the same
run, on the same machine, with the same workloads (in the manner of the OpenMessaging
Benchmark).

Workloads, each on fresh logs / streams, payloads are JSON-like log lines
(``logdevice.tools.loglines``):

1. one log / stream, 100 B records, max rate;
2. 16 logs / streams, 100 B records (round robin), max rate;
3. one log / stream, 1 KB (1,024 B) records, max rate;
4. end-to-end latency at a fixed rate (1,000/s and 10,000/s by default), 100 B: the
   time from a record's *scheduled* send time to its delivery to a tailing reader,
   measured open loop (send times fixed in advance; ``peers_openloop``, one scheduler for
   every system): p50 / p99 / p99.9;
5. backfill read: N records (10 M by default) written with the system's bulk path, then
   read back from the start by one reader.

Max-rate rows run for ``--seconds`` each with a bounded number of records in flight
(``--window``) and count records/s up to the last acknowledgement.  Systems (details and
durability in ``peers_systems``): ours (LocalCluster, 3 nodes, R=2, WAL not fsynced),
Redis Streams (AOF, ``appendfsync everysec``), NATS JetStream (file storage, R=1).  Each
system runs in a child process of its own (``--worker``), one after the other, its
servers started on free 127.0.0.1 ports in a temp dir and stopped after it.

Output: the table in ``benchmarks/last-peers.md`` (and printed), the JSON in
``benchmarks/last-peers.json``, two plots (throughput per workload grouped by system;
latency percentiles per system) as ``benchmarks/plots/last-peers-*.png`` (untracked) or,
with ``--update-plots``, as the tracked ``benchmarks/plots/peers-*.png`` (``make bench``
never writes those).  ``--from-json benchmarks/last-peers.json`` measures nothing and
redoes the report and plots of that run.

    .venv/bin/python benchmarks/peers.py [--quick] [--records 10000000] [--seconds 10]
        [--latency-seconds 20] [--rates 1000,10000] [--systems ours,redis,jetstream]
        [--update-plots] [--from-json PATH]

``--quick`` (or ``LD_PEERS_ARGS=--quick make bench``) runs every workload small: 2 s
per row, 100,000 backfill records; about a minute.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OUT_MD = HERE / "last-peers.md"
OUT_JSON = HERE / "last-peers.json"
PLOTS = HERE / "plots"

#: (key, title, number of logs / streams, payload bytes)
WORKLOADS = [("one_100", "1 log, 100 B", 1, 100),
             ("sixteen_100", "16 logs, 100 B", 16, 100),
             ("one_1k", "1 log, 1 KB", 1, 1024)]
LATENCY_SIZE = 100
BACKFILL_SIZE = 100
ORDER = ("ours", "redis", "jetstream")
NAMES = {"ours": "ours", "redis": "Redis Streams", "jetstream": "NATS JetStream"}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true",
                   help="small sizes: --seconds 2 --latency-seconds 2 --records 100000")
    p.add_argument("--records", type=int, default=None,
                   help="backfill records (default 10,000,000; env LD_PEERS_RECORDS)")
    p.add_argument("--seconds", type=float, default=None, help="per max-rate row (default 10)")
    p.add_argument("--latency-seconds", type=float, default=None,
                   help="per fixed-rate row (default 20)")
    p.add_argument("--rates", default="1000,10000", help="fixed rates, records/s")
    p.add_argument("--window", type=int, default=1000,
                   help="records in flight: append_async window, XADD pipeline, pending "
                        "JetStream acks (default 1000)")
    p.add_argument("--bw-memory-mb", type=int, default=32,
                   help="BufferedWriter memory_limit_bytes, MB (default 32)")
    p.add_argument("--bw-time-trigger-ms", type=float, default=1.0,
                   help="BufferedWriter time trigger in the latency rows, ms (default 1)")
    p.add_argument("--compression", choices=("zstd", "none"), default="zstd",
                   help="BufferedWriter blob compression (default zstd, its default)")
    p.add_argument("--systems", default=",".join(ORDER),
                   help="comma-separated subset of ours,redis,jetstream")
    p.add_argument("--update-plots", action="store_true",
                   help="write the tracked benchmarks/plots/peers-*.png (default: the "
                        "untracked benchmarks/plots/last-peers-*.png)")
    p.add_argument("--from-json", type=Path, metavar="PATH",
                   help="measure nothing: the report and plots of an earlier run's "
                        "last-peers.json (e.g. with --update-plots)")
    p.add_argument("--timeout", type=float, default=30.0, help="client timeouts, seconds")
    p.add_argument("--out", type=Path, default=OUT_MD)
    p.add_argument("--worker", choices=ORDER, help=argparse.SUPPRESS)
    p.add_argument("--worker-out", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    quick = args.quick
    if args.records is None:
        env = os.environ.get("LD_PEERS_RECORDS")
        args.records = int(env) if env else (100_000 if quick else 10_000_000)
    if args.seconds is None:
        args.seconds = 2.0 if quick else 10.0
    if args.latency_seconds is None:
        args.latency_seconds = 2.0 if quick else 20.0
    args.rate_list = [float(r) for r in args.rates.split(",") if r]
    args.system_list = [s for s in args.systems.split(",") if s]
    for s in args.system_list:
        if s not in ORDER:
            p.error(f"unknown system {s!r}")
    return args


# ---------------------------------------------------------------------------- worker


def run_worker(args: argparse.Namespace) -> int:
    """Every workload against one system (this process is its only client)."""
    from peers_openloop import latency_payloads
    from peers_systems import SYSTEMS, Settings

    from logdevice.tools.loglines import generate

    def lines(n: int, size: int) -> list[bytes]:
        buf, _ = generate(0, n, size)
        return [buf[i * size:(i + 1) * size].tobytes() for i in range(n)]

    settings = Settings(window=args.window, bw_memory=args.bw_memory_mb << 20,
                        bw_time_trigger=args.bw_time_trigger_ms / 1000,
                        compression=args.compression,
                        drain_seconds=max(10.0, args.latency_seconds), timeout=args.timeout)
    fmt = {"window": args.window, "bw_memory_mb": args.bw_memory_mb,
           "compression": args.compression, "bw_time_trigger_ms": args.bw_time_trigger_ms}
    cls = SYSTEMS[args.worker]
    tag = f"[{args.worker}]"
    out: dict[str, Any] = {"system": args.worker, "max_rate": {}, "latency": {},
                           "rows": {"max_rate": {k: d.format(**fmt) for k, d in cls.max_rate_rows},
                                    "latency": {k: d.format(**fmt) for k, d in cls.latency_rows}}}
    with tempfile.TemporaryDirectory(prefix=f"ld-peers-{args.worker}-") as tmp:
        t0 = time.perf_counter()
        with cls(Path(tmp), settings) as system:
            out["describe"] = system.describe()
            print(f"{tag} up in {time.perf_counter() - t0:.1f} s: {system.label}", flush=True)
            for key, title, nlogs, size in WORKLOADS:
                payloads = lines(10_000, size)
                out["max_rate"][key] = {}
                for row, _ in cls.max_rate_rows:
                    streams = system.new_streams(nlogs)
                    r = system.max_rate(row, streams, payloads, args.seconds)
                    out["max_rate"][key][row] = r
                    print(f"{tag} {title}, {row}: {r['records_per_s']:,.0f} rec/s, "
                          f"{r['mb_per_s']:.1f} MB/s ({r['records']:,} records, "
                          f"{r['errors']} errors)", flush=True)
            filler = lines(1, LATENCY_SIZE)[0]
            for rate in args.rate_list:
                total = int(rate * args.latency_seconds)
                payloads = latency_payloads(total + 200, LATENCY_SIZE, filler)
                out["latency"][str(int(rate))] = {}
                for row, _ in cls.latency_rows:
                    r = system.latency_run(row, rate, total, payloads)
                    out["latency"][str(int(rate))][row] = r
                    print(f"{tag} {rate:,.0f}/s, {row}: p50 {r['p50_ms']:.2f} / p99 "
                          f"{r['p99_ms']:.2f} / p99.9 {r['p999_ms']:.2f} ms, "
                          f"{r['undelivered']} undelivered, "
                          f"sender lag p99 {r['send_lag_ms']['p99']:.1f} ms", flush=True)
            r = system.backfill(args.records, lines(10_000, BACKFILL_SIZE))
            out["backfill"] = r
            print(f"{tag} backfill {args.records:,}: write {r['write']['records_per_s']:,.0f} "
                  f"rec/s, read {r['read']['records_per_s']:,.0f} rec/s "
                  f"({r['read']['records']:,} read)", flush=True)
    args.worker_out.write_text(json.dumps(out, indent=1) + "\n")
    return 0


def run_system(name: str, argv: list[str], work: Path) -> dict[str, Any]:
    """``peers.py --worker NAME`` in a child process; its results or ``{"error": ...}``."""
    out = work / f"{name}.json"
    cmd = [sys.executable, str(Path(__file__).resolve()), *argv, "--worker", name,
           "--worker-out", str(out)]
    print(f"== {NAMES[name]}", flush=True)
    try:
        rc = subprocess.run(cmd, timeout=3600).returncode
    except subprocess.TimeoutExpired:
        return {"system": name, "error": "timed out after 3600 s"}
    if rc != 0 or not out.exists():
        return {"system": name, "error": f"exit status {rc}"}
    return json.loads(out.read_text())  # type: ignore[no-any-return]


# ---------------------------------------------------------------------------- report


def _n(x: float) -> str:
    return f"{x:,.0f}"


def _ms(x: float) -> str:
    return "n/d" if x == float("inf") else f"{x:.2f}"


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}x" if a and b else "-"


def rows_of(results: dict[str, Any], section: str) -> list[tuple[str, str, str]]:
    """(system, row key, label) for every row of ``section``, systems in ORDER."""
    out = []
    for name in ORDER:
        r = results.get(name)
        if r and "error" not in r:
            for row, desc in r["rows"][section].items():
                out.append((name, row, f"{NAMES[name]}: {desc}"))
    return out


def _peer_rate(results: dict[str, Any], name: str, *path: str) -> float | None:
    r = results.get(name)
    if not r or "error" in r:
        return None
    v: Any = r
    for part in path:
        v = v[part]
    if isinstance(v, dict) and "records_per_s" not in v:  # the system's one row
        v = next(iter(v.values()))
    return float(v["records_per_s"])


def report(results: dict[str, Any], args: argparse.Namespace, meta: dict[str, Any]) -> str:
    lines = [
        "# Peers: ours vs Redis Streams vs NATS JetStream (benchmarks/peers.py)", "",
        f"{meta['time']}, {meta['cpus']} CPUs, Python {meta['python']}; load average "
        f"{meta['load_before']} before, {meta['load_after']} after.  "
        + ("**Quick run** (`--quick`): small sizes, figures only show that it works.  "
           if args.quick else "")
        + f"Max-rate rows: {args.seconds:g} s each, <= {args.window} records in flight; "
        f"fixed-rate rows: {args.latency_seconds:g} s each; backfill: "
        f"{args.records:,} records.  One round; every system ran on this machine in this "
        "run, one after the other, each client in a process of its own.", "",
        "## Systems and durability", "",
        "| system | version | when a write is acknowledged |", "|---|---|---|"]
    for name in ORDER:
        r = results.get(name)
        if r is None:
            continue
        if "error" in r:
            lines.append(f"| {NAMES[name]} | - | **failed: {r['error']}** |")
            continue
        d = r["describe"]
        lines.append(f"| {d['label']} | {d.get('version', 'this tree')} | {d['durability']} |")

    lines += ["", "## Throughput, max rate", "",
              "| workload | system: path | records/s | MB/s (payload) | ours / Redis "
              "| ours / JetStream |", "|---|---|---|---|---|---|"]
    for key, title, _, _ in WORKLOADS:
        redis = _peer_rate(results, "redis", "max_rate", key)
        jet = _peer_rate(results, "jetstream", "max_rate", key)
        for name, row, label in rows_of(results, "max_rate"):
            m = results[name]["max_rate"][key][row]
            ours = name == "ours"
            err = f" ({m['errors']} errors)" if m.get("errors") else ""
            lines.append(f"| {title} | {label}{err} | {_n(m['records_per_s'])} | "
                         f"{m['mb_per_s']:.1f} | "
                         f"{_ratio(m['records_per_s'], redis) if ours else ''} | "
                         f"{_ratio(m['records_per_s'], jet) if ours else ''} |")

    lines += ["", "## Backfill read", "",
              f"{args.records:,} records of {BACKFILL_SIZE} B in one log / stream, written "
              "with the system's bulk path (untimed for the comparison), then read from the "
              "start by one reader.", "",
              "| system: read path | records/s | MB/s (payload) | ours / Redis "
              "| ours / JetStream | (write: records/s) |", "|---|---|---|---|---|---|"]
    redis = _peer_rate(results, "redis", "backfill", "read")
    jet = _peer_rate(results, "jetstream", "backfill", "read")
    read_paths = {"ours": "Reader.read_batch (100,000 per batch)",
                  "redis": "redis-py XREAD COUNT 10000", "jetstream":
                  "nats-py ordered push consumer"}
    write_paths = {"ours": "BufferedWriter.append_many", "redis": "pre-encoded XADD pipeline",
                   "jetstream": "core publish, no per-message ack"}
    for name in ORDER:
        r = results.get(name)
        if not r or "error" in r:
            continue
        b = r["backfill"]
        ours = name == "ours"
        lines.append(f"| {NAMES[name]}: {read_paths[name]} | {_n(b['read']['records_per_s'])} "
                     f"| {b['read']['mb_per_s']:.1f} | "
                     f"{_ratio(b['read']['records_per_s'], redis) if ours else ''} | "
                     f"{_ratio(b['read']['records_per_s'], jet) if ours else ''} | "
                     f"{_n(b['write']['records_per_s'])} ({write_paths[name]}) |")

    lines += ["", "## End-to-end latency, open loop", "",
              f"{LATENCY_SIZE} B records to one log / stream at a fixed rate; latency = "
              "delivery to a tailing reader minus the record's scheduled send time (ms).  "
              "n/d: the percentile reaches records not delivered within the drain time "
              f"({max(10.0, args.latency_seconds):g} s after the last send).  Sender lag: "
              "how late the scheduler handed records to the system "
              "(a sender that cannot keep up shows here, and in the latency).", "",
              "| rate | system: send path | p50 | p99 | p99.9 | max | not delivered "
              "| sender lag p99 |", "|---|---|---|---|---|---|---|---|"]
    for rate in args.rate_list:
        for name, row, label in rows_of(results, "latency"):
            q = results[name]["latency"][str(int(rate))][row]
            lines.append(f"| {rate:,.0f}/s | {label} | {_ms(q['p50_ms'])} | {_ms(q['p99_ms'])} "
                         f"| {_ms(q['p999_ms'])} | {_ms(q['max_ms'])} | {q['undelivered']:,} | "
                         f"{q['send_lag_ms']['p99']:.1f} ms |")

    lines += ["", "## What each row means", "",
              "- **ours: append_async**: `Client.append_async` per record, a semaphore keeps "
              f"at most {args.window} unacknowledged; the client sends what queues for a log "
              "meanwhile in one APPEND_BATCH frame (at most two frames out per log).",
              "- **ours: BufferedWriter**: `BufferedWriter.append` per record (one call per "
              "record, like the peers' clients); records are batched per log into "
              f"{args.compression} blobs (one APPEND per blob, every record acknowledged with "
              "its blob); "
              f"at most {args.bw_memory_mb} MB buffered + in flight.  In the latency rows its "
              f"time trigger is {args.bw_time_trigger_ms:g} ms.",
              "- **Redis Streams**: redis-py `XADD key * p <payload>`; max rate: pipelines "
              f"of {args.window} (no MULTI), one round trip each; latency: the records due at "
              "once go in one pipeline (usually one XADD).  Reader: `XREAD BLOCK 100 COUNT "
              "1000` on its own connection.",
              "- **NATS JetStream**: nats-py `js.publish_async` (the ack of each message "
              f"collected asynchronously, at most {args.window} pending); reader: an ordered "
              "push consumer on its own connection.  One stream per subject.",
              "- Every client is Python in one process per system; on this 2-core machine "
              "the client's CPU is part of every figure, ours and the peers' alike.",
              "- Payloads: JSON-like log lines (they compress ~7x, which only our "
              "BufferedWriter rows use)."]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------- plots


SHORT = {"ours": "ours", "redis": "Redis", "jetstream": "JetStream",
         "append_async": "append_async", "buffered": "BufferedWriter",
         "xadd_pipeline": "XADD pipelined", "xadd": "XADD", "publish_async": "publish_async"}


def _short(name: str, row: str) -> str:
    return f"{SHORT[name]}\n{SHORT.get(row, row)}"


def plots(results: dict[str, Any], args: argparse.Namespace, subtitle: str) -> list[Path]:
    """Throughput per workload grouped by system (and the backfill read beside it);
    latency percentiles per system, one panel per rate."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    PLOTS.mkdir(exist_ok=True)
    prefix = "peers" if args.update_plots else "last-peers"
    written = []
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]

    def labels(ax: Any, bars: Any, vals: list[float]) -> None:
        ax.bar_label(bars, labels=[f"{v / 1e3:,.0f}k" for v in vals], fontsize=7,
                     rotation=90, padding=2)

    rows = rows_of(results, "max_rate")
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 5.5), width_ratios=[3, 1.2])
    width = 0.8 / max(1, len(rows))
    x = np.arange(len(WORKLOADS))
    for k, (name, row, label) in enumerate(rows):
        vals = [results[name]["max_rate"][key][row]["records_per_s"]
                for key, _, _, _ in WORKLOADS]
        bars = ax.bar(x + (k - (len(rows) - 1) / 2) * width, vals, width,
                      label=label, color=colors[k % len(colors)])
        labels(ax, bars, vals)
    ax.set_xticks(x, [title for _, title, _, _ in WORKLOADS])
    ax.set_yscale("log")
    ax.set_ylim(top=ax.get_ylim()[1] * 3)  # room for the labels
    ax.set_ylabel("records/s, acknowledged (log scale)")
    ax.set_title(f"Max rate, {args.seconds:g} s per row", fontsize=10)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.08), ncol=2)
    readers = [n for n in ORDER if n in results and "error" not in results[n]]
    vals = [results[n]["backfill"]["read"]["records_per_s"] for n in readers]
    bars = ax2.bar(np.arange(len(readers)), vals, 0.6,
                   color=[colors[(k + len(rows)) % len(colors)] for k in range(len(readers))])
    labels(ax2, bars, vals)
    ax2.set_xticks(np.arange(len(readers)), [SHORT[n] for n in readers])
    ax2.set_yscale("log")
    ax2.set_ylim(top=ax2.get_ylim()[1] * 3)
    ax2.set_title(f"Backfill read, {args.records:,} x {BACKFILL_SIZE} B", fontsize=10)
    written.append(_save(plt, fig, f"Throughput per workload\n{subtitle}",
                         PLOTS / f"{prefix}-throughput.png"))

    lat_rows = rows_of(results, "latency")
    fig, axes = plt.subplots(1, len(args.rate_list), figsize=(6 * len(args.rate_list), 5),
                             squeeze=False)
    for ax, rate in zip(axes[0], args.rate_list, strict=True):
        x = np.arange(len(lat_rows))
        for k, (pct, key) in enumerate((("p50", "p50_ms"), ("p99", "p99_ms"),
                                        ("p99.9", "p999_ms"))):
            vals = [results[n]["latency"][str(int(rate))][row][key] for n, row, _ in lat_rows]
            shown = [v if v != float("inf") else np.nan for v in vals]
            ax.bar(x + (k - 1) * 0.27, shown, 0.27, label=pct)
            for xi, v in zip(x, vals, strict=True):
                if v == float("inf"):
                    ax.text(xi + (k - 1) * 0.27, 1, "n/d", rotation=90, fontsize=7,
                            ha="center")
        ax.set_xticks(x, [_short(n, row) for n, row, _ in lat_rows], fontsize=8)
        ax.set_yscale("log")
        ax.set_ylabel("ms, scheduled send -> delivered (log scale)")
        ax.set_title(f"{rate:,.0f} records/s, open loop, {LATENCY_SIZE} B", fontsize=10)
        ax.legend(fontsize=8)
    written.append(_save(plt, fig, f"End-to-end latency percentiles\n{subtitle}",
                         PLOTS / f"{prefix}-latency.png"))
    return written


# ---------------------------------------------------------------------------- main

#: what the report needs of the arguments (kept in last-peers.json for --from-json)
REPORT_ARGS = ("quick", "records", "seconds", "latency_seconds", "rate_list", "window",
               "bw_memory_mb", "bw_time_trigger_ms", "compression")


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> int:
    raw = sys.argv[1:] if argv is None else argv
    args = parse_args(raw)
    if args.worker:
        return run_worker(args)
    from logdevice.tools import benchutil

    if args.from_json:  # the report and plots of an earlier run, nothing measured
        doc = json.loads(args.from_json.read_text())
        results, meta = doc["results"], doc["machine"]
        for k in REPORT_ARGS:
            setattr(args, k, doc["args"][k])
    else:
        meta = {**benchutil.machine(), "load_before": _load()}
        results = {}
        with tempfile.TemporaryDirectory(prefix="ld-peers-") as tmp:
            for name in ORDER:
                if name in args.system_list:
                    results[name] = run_system(name, raw, Path(tmp))
        meta["load_after"] = _load()
    text = report(results, args, meta)
    print()
    print(text)
    args.out.write_text(text)
    if not args.from_json:
        OUT_JSON.write_text(json.dumps(
            {"machine": meta, "args": {k: getattr(args, k) for k in REPORT_ARGS},
             "results": results}, indent=1) + "\n")
    written = []
    try:
        written = plots(results, args, f"{meta['time']}, {meta['cpus']} CPUs"
                        + (", quick run" if args.quick else ""))
    except Exception as exc:  # a report without plots is still a report
        print(f"plots not written: {exc!r}")
    print(f"written to {args.out}" + ("" if args.from_json else f" and {OUT_JSON}")
          + "".join(f", {p.relative_to(HERE.parent)}" for p in written))
    print("To update benchmarks/RESULTS.md (from a full run on a quiet machine, not --quick):"
          " copy the tables of benchmarks/last-peers.md into its \"Peers\" section with the "
          "date, load average and command, then write the tracked plots from the same run "
          "with `.venv/bin/python benchmarks/peers.py --from-json benchmarks/last-peers.json "
          "--update-plots` and commit benchmarks/plots/peers-*.png with it.")
    failed = [n for n, r in results.items() if "error" in r]
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def _save(plt: Any, fig: Any, title: str, path: Path) -> Path:
    """Title, lay out, write and close one figure; its path."""
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


if __name__ == "__main__":
    sys.exit(main())

