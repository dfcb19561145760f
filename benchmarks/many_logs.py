"""Many logs: what each log costs as their number grows.

A LocalCluster of 3 nodes, R=2, provisioned with logs ``1 .. N`` for each ``--logs`` value
(default 1,000, 10,000 and 100,000), then, as a new user would:

1. **first touch**: one 100 B append to each of the N logs, at most 256 in flight (each
   activates the log's sequencer: an epoch store write);
2. **second round**: one more append to each log, at most 1,000 in flight, against the
   same number of appends to one log with 1,000 in flight in the same run (the ratio;
   log N + 1, which nothing else touches).  For these three, the CPU per append of the
   client process and of all nodes together (``/proc``): it moves less with the
   machine's speed than a rate does;
3. **memory**: every node's resident set before the first touch and after the second
   round: the growth per written log, a second after the last append and once every
   sequencer went idle and gave its window back (``--idle-ms``, the nodes'
   ``sequencer_idle_ms``; the nodes' ``logdevice_sequencers_awake`` gauges say when);
4. **one reader** over ``min(N, --reader-logs)`` logs (default 10,000): the time
   ``start_reading_many`` takes for all of them, then how long until every log's first
   record arrived, counted from its return; the nodes' resident set
   with those read streams open and idle (growth per log per node);
5. **restart**: node 0 stopped and started again; seconds until the cluster sees it.

``--epoch-store zookeeper`` runs the same against a ZooKeeper the benchmark starts.
The table goes to ``benchmarks/last-many-logs.md`` (and is printed), the JSON to
``benchmarks/last-many-logs.json``, one plot per figure against N to
``benchmarks/plots/last-many-logs.png``.

    .venv/bin/python benchmarks/many_logs.py [--logs 1000,10000,100000]
        [--reader-logs 10000] [--epoch-store sqlite|zookeeper] [--idle-ms 2000]
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import numpy as np

from logdevice.client import Client
from logdevice.local_cluster import LocalCluster
from logdevice.records import LSN_MAX
from logdevice.tools import benchutil

HERE = Path(__file__).resolve().parent
OUT_MD = HERE / "last-many-logs.md"
OUT_JSON = HERE / "last-many-logs.json"
PLOT = HERE / "plots" / "last-many-logs.png"
PAYLOAD = b"x" * 100


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--logs", default="1000,10000,100000", help="numbers of logs, one run each")
    p.add_argument("--reader-logs", type=int, default=10_000,
                   help="logs the one reader reads (at most the run's number of logs)")
    p.add_argument("--epoch-store", choices=("sqlite", "zookeeper"), default="sqlite")
    p.add_argument("--timeout", type=float, default=120.0, help="bound on every wait, s")
    p.add_argument("--idle-ms", type=int, default=2000,
                   help="the nodes' sequencer_idle_ms: how soon an idle log's sequencer "
                        "gives its window back")
    p.add_argument("--out", type=Path, default=OUT_MD)
    p.add_argument("--json", type=Path, default=OUT_JSON)
    p.add_argument("--no-plot", action="store_true")
    args = p.parse_args(argv)
    args.log_counts = [int(n) for n in args.logs.split(",") if n]
    return args


def node_rss(cluster: LocalCluster) -> dict[int, int]:
    return {i: benchutil.rss_kib(cluster.pid(i)) for i in cluster.running()}


def awake_sequencers(cluster: LocalCluster) -> int:
    """Sequencers holding a window, over the running nodes (their /metrics)."""
    total = 0
    for i in cluster.running():
        with urllib.request.urlopen(cluster.metrics_url(i), timeout=10) as resp:
            for line in resp.read().decode().splitlines():
                if line.startswith("logdevice_sequencers_awake "):
                    total += int(float(line.split()[1]))
    return total


def wait_idle(cluster: LocalCluster, timeout: float) -> float:
    """Wait until no node's sequencer holds a window; the seconds it took."""
    t0 = time.perf_counter()
    while awake_sequencers(cluster):
        if time.perf_counter() - t0 > timeout:
            raise RuntimeError(f"sequencers still awake after {timeout:g} s")
        time.sleep(0.2)
    return time.perf_counter() - t0


def append_all(client: Client, cluster: LocalCluster, logs: list[int], in_flight: int,
               timeout: float) -> dict[str, float]:
    """One append to each of ``logs`` (repeats allowed), at most ``in_flight`` at once:
    seconds until the last acknowledgement, and the CPU per append (us) of this process
    (the client) and of all nodes together.  Any failure ends the run."""
    slots = threading.Semaphore(in_flight)
    failures: list[BaseException] = []

    def done(f: Future[int]) -> None:
        if f.exception() is not None:
            failures.append(f.exception())  # type: ignore[arg-type]
        slots.release()

    with benchutil.CpuMeter({i: cluster.pid(i) for i in cluster.running()}) as cpu:
        t0 = time.perf_counter()
        for log in logs:
            if not slots.acquire(timeout=timeout):
                raise RuntimeError(f"no acknowledgement within {timeout:g} s")
            client.append_async(log, PAYLOAD).add_done_callback(done)
            if failures:
                raise RuntimeError(f"append failed: {failures[0]!r}")
        for _ in range(in_flight):
            if not slots.acquire(timeout=timeout):
                raise RuntimeError(f"no acknowledgement within {timeout:g} s")
        seconds = time.perf_counter() - t0
    if failures:
        raise RuntimeError(f"{len(failures)} appends failed, the first: {failures[0]!r}")
    per_append = seconds / len(logs) * 1e6
    return {"seconds": seconds, "client_cpu_us": cpu.process_cores * per_append,
            "nodes_cpu_us": sum(cpu.node_cores.values()) * per_append}


def read_first_records(client: Client, logs: list[int], cluster: LocalCluster,
                       timeout: float) -> dict[str, Any]:
    """One reader over ``logs`` from LSN 1: start_reading_many time, time from its return
    until every log delivered a record, node RSS growth with the streams
    open and idle."""
    before = node_rss(cluster)
    with client.create_reader(max_logs=len(logs)) as reader:
        reader.wait_only_when_no_data()
        t0 = time.perf_counter()
        reader.start_reading_many(logs, 1, LSN_MAX)
        started = time.perf_counter()
        seen = np.zeros(max(logs) + 1, dtype=bool)
        missing = len(logs)
        deadline = started + timeout
        while missing:
            if time.perf_counter() > deadline:
                raise RuntimeError(f"{missing} logs delivered nothing within {timeout:g} s")
            batch = reader.read_batch(100_000, timeout=1.0)
            if len(batch):  # (not np.unique: its first call imports numpy.ma, half a second)
                seen[batch.log_ids.astype(np.intp)] = True
                missing = len(logs) - int(np.count_nonzero(seen))
        delivered = time.perf_counter()
        after = node_rss(cluster)
    return {"logs": len(logs), "start_reading_s": started - t0,
            "first_records_s": delivered - started,
            "rss_per_log_kb": per_log(before, after, len(logs))}


def per_log(before: dict[int, int], after: dict[int, int], n: int) -> dict[str, float]:
    """Growth of each node's resident set per log, KiB."""
    return {f"N{i}": (after.get(i, 0) - kb) / n for i, kb in sorted(before.items())}


@contextlib.contextmanager
def epoch_store(kind: str, work: Path) -> Iterator[str | None]:
    if kind == "sqlite":
        yield None  # LocalCluster's default: SQLite in the cluster root
        return
    from logdevice.local_zookeeper import LocalZooKeeper

    with LocalZooKeeper(work / "zk") as zk:
        yield zk.uri()


def run_one(n: int, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    out: dict[str, Any] = {"logs": n}
    with epoch_store(args.epoch_store, work) as store, \
            LocalCluster(nodes=3, replication=2, logs=range(1, n + 2), root=work / f"c{n}",
                         epoch_store=store, log_level="WARNING",
                         sequencer_idle_ms=args.idle_ms) as cluster, \
            Client(cluster.config_path, timeout=args.timeout) as client:
        logs = list(range(1, n + 1))
        rss0 = node_rss(cluster)
        ft = append_all(client, cluster, logs, 256, args.timeout)
        out["first_touch"] = {**ft, "logs_per_s": n / ft["seconds"]}
        print(f"[{n:,} logs] first touch: {n / ft['seconds']:,.0f} logs/s; {_cpu(ft)}",
              flush=True)
        sr = append_all(client, cluster, logs, 1000, args.timeout)
        # The same appends to one log, a log of its own: the reader below reads logs 1 ..
        # n, and this log's n records would keep its stream busy while it is measured.
        one = append_all(client, cluster, [n + 1] * n, 1000, args.timeout)
        s = sr["seconds"]
        out["second_round"] = {**sr, "appends_per_s": n / s,
                               "one_log_appends_per_s": n / one["seconds"],
                               "ratio": one["seconds"] / s,
                               "one_log_client_cpu_us": one["client_cpu_us"],
                               "one_log_nodes_cpu_us": one["nodes_cpu_us"]}
        print(f"[{n:,} logs] second round: {n / s:,.0f} appends/s, one log "
              f"{n / one['seconds']:,.0f}/s ({one['seconds'] / s:.2f}x); {_cpu(sr)}, one "
              f"log {_cpu(one)}", flush=True)
        time.sleep(1.0)  # settle: released buffers show in the RSS
        out["rss_per_written_log_kb"] = per_log(rss0, node_rss(cluster), n)
        print(f"[{n:,} logs] memory per written log: {out['rss_per_written_log_kb']} KiB",
              flush=True)
        out["idle_after_s"] = wait_idle(cluster, args.timeout)
        out["rss_per_idle_log_kb"] = per_log(rss0, node_rss(cluster), n)
        print(f"[{n:,} logs] memory per written, idle log: {out['rss_per_idle_log_kb']} KiB",
              flush=True)
        r = read_first_records(client, logs[:min(n, args.reader_logs)], cluster, args.timeout)
        out["reader"] = r
        print(f"[{n:,} logs] reader over {r['logs']:,}: start_reading_many "
              f"{r['start_reading_s']:.2f} s, every first record after "
              f"{r['first_records_s']:.2f} s; {r['rss_per_log_kb']} KiB per stream", flush=True)
        cluster.stop(0)
        t0 = time.perf_counter()
        cluster.start(0, timeout=args.timeout)
        out["restart_s"] = time.perf_counter() - t0
        print(f"[{n:,} logs] restart of N0: {out['restart_s']:.2f} s", flush=True)
    return out


def _cpu(figures: dict[str, float]) -> str:
    return (f"CPU per append {figures['client_cpu_us']:.0f} us client, "
            f"{figures['nodes_cpu_us']:.0f} us nodes")


def _kb(d: dict[str, float]) -> str:
    return ", ".join(f"{v:.1f}" for v in d.values())


def report(runs: list[dict[str, Any]], args: argparse.Namespace) -> str:
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [f"# Many logs ({when}, epoch store {args.epoch_store})", "",
             f"`.venv/bin/python benchmarks/many_logs.py --logs {args.logs} --reader-logs "
             f"{args.reader_logs} --epoch-store {args.epoch_store} --idle-ms "
             f"{args.idle_ms}`", "",
             "| logs | first touch, logs/s | second round, appends/s (x one log) | "
             "KiB per written log (N0, N1, N2) | KiB per written, idle log (N0, N1, N2) | "
             "reader: start_reading_many s / all first records s | KiB per open stream "
             "(N0, N1, N2) | restart s |",
             "|---|---|---|---|---|---|---|---|"]
    for r in runs:
        sr, rd = r["second_round"], r["reader"]
        lines.append(
            f"| {r['logs']:,} | {r['first_touch']['logs_per_s']:,.0f} | "
            f"{sr['appends_per_s']:,.0f} ({sr['ratio']:.2f}x) | "
            f"{_kb(r['rss_per_written_log_kb'])} | {_kb(r['rss_per_idle_log_kb'])} | "
            f"{rd['start_reading_s']:.2f} / "
            f"{rd['first_records_s']:.2f} ({rd['logs']:,} logs) | {_kb(rd['rss_per_log_kb'])} "
            f"| {r['restart_s']:.2f} |")
    lines += ["", "CPU per append, us (client / all nodes):", "",
              "| logs | first touch | second round | the same appends to one log |",
              "|---|---|---|---|"]
    for r in runs:
        ft, sr = r["first_touch"], r["second_round"]
        lines.append(
            f"| {r['logs']:,} | {ft['client_cpu_us']:.0f} / {ft['nodes_cpu_us']:.0f} | "
            f"{sr['client_cpu_us']:.0f} / {sr['nodes_cpu_us']:.0f} | "
            f"{sr['one_log_client_cpu_us']:.0f} / {sr['one_log_nodes_cpu_us']:.0f} |")
    return "\n".join(lines) + "\n"


def plot(runs: list[dict[str, Any]]) -> None:
    import matplotlib  # the bench extra

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = [r["logs"] for r in runs]
    figures = [
        ("first touch, logs/s", [r["first_touch"]["logs_per_s"] for r in runs]),
        ("second round, appends/s", [r["second_round"]["appends_per_s"] for r in runs]),
        ("KiB per written log (node mean)",
         [np.mean(list(r["rss_per_written_log_kb"].values())) for r in runs]),
        ("KiB per written, idle log (node mean)",
         [np.mean(list(r["rss_per_idle_log_kb"].values())) for r in runs]),
        ("restart, s", [r["restart_s"] for r in runs]),
    ]
    fig, axes = plt.subplots(1, len(figures), figsize=(4 * len(figures), 3.5))
    for ax, (title, ys) in zip(axes, figures, strict=True):
        ax.plot(n, ys, marker="o")
        ax.set_xscale("log")
        ax.set_xlabel("logs")
        ax.set_title(title, fontsize=9)
    fig.tight_layout()
    PLOT.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(PLOT, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    runs = []
    with tempfile.TemporaryDirectory(prefix="ld-many-logs-") as tmp:
        for n in args.log_counts:
            runs.append(run_one(n, args, Path(tmp)))
    text = report(runs, args)
    print(text)
    args.out.write_text(text)
    benchutil.write_json(args.json, {"machine": benchutil.machine(), "runs": runs,
                                     "epoch_store": args.epoch_store})
    if not args.no_plot:
        plot(runs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
