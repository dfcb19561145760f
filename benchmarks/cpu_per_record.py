"""CPU per record, one record at a time: ours, Redis Streams and NATS JetStream in one run.

Services append events one by one and tail them; what that costs is CPU per record, not
records per second in bulk.  Each system (set up as in ``peers_systems``: ours a
LocalCluster of 3 nodes, R=2; Redis one server, AOF everysec; JetStream one server, file
store) runs in a child process of its own, which is its only client:

- **open loop** at each ``--rates`` value (default 1,000/s and 10,000/s), 100 B records
  appended one call each (ours ``append_async``, Redis one ``XADD`` per call or the due
  ones in one pipeline, JetStream ``publish_async``), for ``--seconds``; once without and
  once with a tailing reader in the writer's process.  CPU of every server process and of
  the client process (``/proc``, utime + stime, the pacing loop included for every system)
  divided by the records; append latency (scheduled send -> acknowledgement) and, with
  the reader, delivery latency (scheduled send -> delivered to the reader);
- **64 in flight** on one log and on four logs (ours ``append_async``, Redis ``XADD`` in
  pipelines of 64, JetStream ``publish_async`` with 64 acks pending), records/s and CPU
  per record.

``--repeat`` rounds (default 3) of all systems, one after the other, give each figure's
range.  The table (ranges, and ours / Redis ratios per round) goes to
``benchmarks/last-cpu-per-record.md`` (and is printed), the JSON to
``benchmarks/last-cpu-per-record.json``, a plot of CPU per record to
``benchmarks/plots/last-cpu-per-record.png``.

    .venv/bin/python benchmarks/cpu_per_record.py [--seconds 10] [--rates 1000,10000]
        [--repeat 3] [--systems ours,redis,jetstream] [--profile DIR]

``--baseline-tree PATH`` adds "ours, baseline": the same worker run with another checkout's
code (``PATH/python`` and ``PATH/src`` first on the path, its extensions built), in the
same rounds, for an A/B of a change.

``--profile DIR`` also records a py-spy profile (CPU time, flame graph SVG) of each of our
nodes and of the client during the 1,000/s row without a reader (py-spy must be
installed); the figures of that round then include py-spy's overhead.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from peers_openloop import Deliveries, latency_figures, latency_payloads, run_open_loop
from peers_systems import SYSTEMS, Settings, System

from logdevice.tools import benchutil

HERE = Path(__file__).resolve().parent
OUT_MD = HERE / "last-cpu-per-record.md"
OUT_JSON = HERE / "last-cpu-per-record.json"
PLOT = HERE / "plots" / "last-cpu-per-record.png"
ORDER = ("ours", "baseline", "redis", "jetstream")
NAMES = {"ours": "ours (3 nodes, R=2)", "redis": "Redis Streams",
         "jetstream": "NATS JetStream", "baseline": "ours, baseline"}
SIZE = 100
WARM = 200
WINDOW = 64
#: the open-loop row each system sends with, and its max-rate row at 64 in flight
OPEN_ROW = {"ours": "append_async", "redis": "xadd", "jetstream": "publish_async"}
MAX_ROW = {"ours": "append_async", "redis": "xadd_pipeline", "jetstream": "publish_async"}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=10.0, help="per row (default 10)")
    p.add_argument("--rates", default="1000,10000", help="open-loop rates, records/s")
    p.add_argument("--repeat", type=int, default=3, help="rounds (default 3)")
    p.add_argument("--systems", default="ours,redis,jetstream",
                   help="comma-separated subset of ours,redis,jetstream")
    p.add_argument("--baseline-tree", type=Path, metavar="PATH",
                   help="also run ours from this checkout (built), for an A/B")
    p.add_argument("--profile", type=Path, metavar="DIR",
                   help="py-spy profiles of our processes in the first round's 1,000/s row")
    p.add_argument("--timeout", type=float, default=30.0, help="client timeouts, seconds")
    p.add_argument("--out", type=Path, default=OUT_MD)
    p.add_argument("--json", type=Path, default=OUT_JSON)
    p.add_argument("--no-plot", action="store_true")
    p.add_argument("--worker", choices=ORDER, help=argparse.SUPPRESS)
    p.add_argument("--worker-out", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--worker-profile", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.rate_list = [float(r) for r in args.rates.split(",") if r]
    args.system_list = [s for s in args.systems.split(",") if s]
    for s in args.system_list:
        if s not in ORDER or s == "baseline":
            p.error(f"unknown system {s!r}")
    if args.baseline_tree is not None:
        args.baseline_tree = args.baseline_tree.resolve()
        args.system_list.insert(1, "baseline")
    return args


# ---------------------------------------------------------------------------- worker


@contextlib.contextmanager
def py_spy(pids: dict[str, int], out: Path | None, seconds: float) -> Iterator[None]:
    """py-spy record of each pid for ``seconds``, if ``out`` is set.  Only samples of a
    thread holding the GIL count: a node's idle wait inside uvloop's C loop would
    otherwise show as busy time in ``Runner.run``."""
    procs = []
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        # The one installed beside this interpreter (the venv's), whatever PATH says.
        spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or "py-spy"
        for name, pid in pids.items():
            procs.append(subprocess.Popen(
                [spy, "record", "--pid", str(pid), "--duration", str(int(seconds)),
                 "--rate", "200", "--format", "speedscope", "--nonblocking", "--gil",
                 "--output", str(out / f"{name}.speedscope.json")],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    try:
        yield
    finally:
        for proc in procs:
            try:
                proc.wait(seconds + 30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def cpu_figures(cpu: benchutil.CpuMeter, names: list[str], records: int,
                seconds: float) -> dict[str, Any]:
    """CPU per record (us) of each server process, their sum, and the client's."""
    servers = {name: cpu.node_cores.get(name, 0.0) * seconds / records * 1e6 for name in names}
    return {"servers_us": servers, "server_us": sum(servers.values()),
            "client_us": cpu.process_cores * seconds / records * 1e6,
            "machine_cores": cpu.machine_cores}


def open_loop_row(system: System, row: str, rate: float, seconds: float, tail: bool,
                  filler: bytes, profile: Path | None) -> dict[str, Any]:
    total = int(rate * seconds)
    payloads = latency_payloads(WARM + total, SIZE, filler)
    (stream,) = system.new_streams(1)
    acks = Deliveries(WARM + total)
    deliveries = Deliveries(WARM + total) if tail else None
    stop = system.start_tail(stream, deliveries) if deliveries is not None else None
    try:
        send, finish = system.open_sender(row, stream, payloads, acks)
        for i in range(WARM):  # the path (and the reader) are warm before the clock starts
            send(i, i + 1)
            time.sleep(0.001)
        if not acks.wait_count(WARM, system.s.timeout):
            raise RuntimeError("warm-up appends were not acknowledged")
        if deliveries is not None and not deliveries.wait_count(WARM, system.s.timeout):
            raise RuntimeError("warm-up records were not delivered")
        pids = system.server_pids()
        spy = {**pids, "client": os.getpid()}
        t0 = time.perf_counter()
        with py_spy(spy, profile, seconds), benchutil.CpuMeter(pids) as cpu:
            sched = run_open_loop(rate, total, lambda lo, hi: send(lo + WARM, hi + WARM))
            acked = acks.wait(system.s.timeout)
            if deliveries is not None:
                deliveries.wait(system.s.timeout)
        elapsed = time.perf_counter() - t0
        errors = finish()
    finally:
        if stop is not None:
            stop()
    if not acked:
        raise RuntimeError(f"{acks.count - WARM} of {total} appends acknowledged")
    out: dict[str, Any] = {"rate": rate, "records": total, "tail": tail, **errors,
                           **cpu_figures(cpu, list(pids), total, elapsed),
                           "append": latency_figures(sched["due"], acks.after(WARM)),
                           "send_lag_ms": sched["send_lag_ms"]}
    if deliveries is not None:
        out["delivery"] = latency_figures(sched["due"], deliveries.after(WARM))
    return out


def max_rate_row(system: System, row: str, nlogs: int, seconds: float,
                 payloads: list[bytes]) -> dict[str, Any]:
    streams = system.new_streams(nlogs)
    pids = system.server_pids()
    t0 = time.perf_counter()
    with benchutil.CpuMeter(pids) as cpu:
        r = system.max_rate(row, streams, payloads, seconds)
    elapsed = time.perf_counter() - t0
    return {**r, **cpu_figures(cpu, list(pids), r["records"], elapsed)}


def run_worker(args: argparse.Namespace) -> int:
    from logdevice.tools.loglines import generate

    buf, _ = generate(0, 10_000, SIZE)
    lines = [buf[i * SIZE:(i + 1) * SIZE].tobytes() for i in range(10_000)]
    settings = Settings(window=WINDOW, bw_memory=32 << 20, bw_time_trigger=0.001,
                        compression="zstd", drain_seconds=10.0, timeout=args.timeout)
    name = args.worker
    kind = "ours" if name == "baseline" else name  # the baseline is ours, other code
    out: dict[str, Any] = {"system": name, "open_loop": [], "max_rate": {}}
    with tempfile.TemporaryDirectory(prefix=f"ld-cpu-{name}-") as tmp, \
            SYSTEMS[kind](Path(tmp), settings) as system:
        out["describe"] = system.describe()
        for rate in args.rate_list:
            for tail in (False, True):
                profile = args.worker_profile if rate == args.rate_list[0] and not tail \
                    else None
                r = open_loop_row(system, OPEN_ROW[kind], rate, args.seconds, tail,
                                  lines[0], profile)
                out["open_loop"].append(r)
                print(f"[{name}] {rate:,.0f}/s{' + reader' if tail else ''}: servers "
                      f"{r['server_us']:.0f} us, client {r['client_us']:.0f} us per record; "
                      f"append p50 {r['append']['p50_ms']:.2f} / p99 "
                      f"{r['append']['p99_ms']:.2f} ms"
                      + (f"; delivery p50 {r['delivery']['p50_ms']:.2f} / p99 "
                         f"{r['delivery']['p99_ms']:.2f} ms" if tail else ""), flush=True)
        for nlogs in (1, 4):
            r = max_rate_row(system, MAX_ROW[kind], nlogs, args.seconds, lines)
            out["max_rate"][str(nlogs)] = r
            print(f"[{name}] {WINDOW} in flight, {nlogs} log(s): {r['records_per_s']:,.0f} "
                  f"rec/s; servers {r['server_us']:.0f} us, client {r['client_us']:.0f} us "
                  f"per record", flush=True)
    args.worker_out.write_text(json.dumps(out, indent=1) + "\n")
    return 0


def run_system(name: str, args: argparse.Namespace, work: Path, round_no: int) -> dict[str, Any]:
    out = work / f"{name}-{round_no}.json"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--seconds", str(args.seconds),
           "--rates", args.rates, "--timeout", str(args.timeout),
           "--worker", name, "--worker-out", str(out)]
    if args.profile is not None and round_no == 0 and name == "ours":
        cmd += ["--worker-profile", str(args.profile)]
    env = None
    if name == "baseline":
        tree = args.baseline_tree
        env = dict(os.environ, PYTHONPATH=f"{tree / 'python'}:{tree / 'src'}")
    rc = subprocess.run(cmd, timeout=3600, env=env).returncode
    if rc != 0 or not out.exists():
        raise SystemExit(f"{name}: the worker failed (exit {rc})")
    return json.loads(out.read_text())  # type: ignore[no-any-return]


# ---------------------------------------------------------------------------- report


def _span(values: list[float], fmt: str = "{:,.0f}") -> str:
    vals = [v for v in values if v is not None and np.isfinite(v)]
    if not vals:
        return "n/d"
    lo, hi = min(vals), max(vals)
    return fmt.format(lo) if fmt.format(lo) == fmt.format(hi) else \
        f"{fmt.format(lo)} - {fmt.format(hi)}"


def _row_key(r: dict[str, Any]) -> str:
    return f"{r['rate']:,.0f}/s" + (" + reader" if r["tail"] else "")


def report(rounds: list[dict[str, dict[str, Any]]], args: argparse.Namespace) -> str:
    systems = [s for s in ORDER if s in args.system_list]
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [f"# CPU per record, one record at a time ({when})",
             "", f"`.venv/bin/python benchmarks/cpu_per_record.py --seconds {args.seconds:g} "
             f"--rates {args.rates} --repeat {args.repeat} --systems {args.systems}"
             + (" --baseline-tree PATH" if args.baseline_tree else "") + "`", "",
             f"{args.repeat} round(s); each cell is the range over the rounds.  CPU per "
             f"record in us (servers: every server process summed; client: the writer's "
             f"process, its pacing loop and, in the reader rows, the tailing reader "
             f"included).  Latencies in ms from the scheduled send time.", "",
             "| row | system | servers | client | append p50 / p99 | delivery p50 / p99 |",
             "|---|---|---|---|---|---|"]
    keys = [_row_key(r) for r in rounds[0][systems[0]]["open_loop"]]
    for k, key in enumerate(keys):
        for s in systems:
            rs = [rd[s]["open_loop"][k] for rd in rounds]
            app = (f"{_span([r['append']['p50_ms'] for r in rs], '{:.2f}')} / "
                   f"{_span([r['append']['p99_ms'] for r in rs], '{:.2f}')}")
            dl = "" if not rs[0]["tail"] else (
                f"{_span([r['delivery']['p50_ms'] for r in rs], '{:.2f}')} / "
                f"{_span([r['delivery']['p99_ms'] for r in rs], '{:.2f}')}")
            lines.append(f"| {key} | {NAMES[s]} | {_span([r['server_us'] for r in rs])} | "
                         f"{_span([r['client_us'] for r in rs])} | {app} | {dl} |")
    lines += ["", f"{WINDOW} in flight (ours `append_async`, Redis XADD pipelines of {WINDOW}, "
              f"JetStream `publish_async`), {args.seconds:g} s each:", "",
              "| logs | system | records/s | servers us/record | client us/record |",
              "|---|---|---|---|---|"]
    for nlogs in ("1", "4"):
        for s in systems:
            rs = [rd[s]["max_rate"][nlogs] for rd in rounds]
            lines.append(f"| {nlogs} | {NAMES[s]} | {_span([r['records_per_s'] for r in rs])} "
                         f"| {_span([r['server_us'] for r in rs])} | "
                         f"{_span([r['client_us'] for r in rs])} |")
    for other in ("redis", "baseline"):
        if "ours" in systems and other in systems:
            lines += _ratio_rows(rounds, keys, other)
    return "\n".join(lines) + "\n"


def _ratio_rows(rounds: list[dict[str, dict[str, Any]]], keys: list[str],
                other: str) -> list[str]:
    """Ours / ``other``, round by round (each ratio from the figures of one round)."""
    out = ["", f"Ours / {NAMES[other]}, per round (the same round's figures):", "",
           "| figure | ratios |", "|---|---|"]
    for k, key in enumerate(keys):
        for part in ("server_us", "client_us"):
            ratios = [_ratio(rd["ours"]["open_loop"][k][part], rd[other]["open_loop"][k][part])
                      for rd in rounds]
            out.append(f"| {key}, {part.split('_')[0]} CPU per record | {', '.join(ratios)} |")
    for nlogs in ("1", "4"):
        ratios = [_ratio(rd["ours"]["max_rate"][nlogs]["records_per_s"],
                         rd[other]["max_rate"][nlogs]["records_per_s"]) for rd in rounds]
        out.append(f"| {WINDOW} in flight, {nlogs} log(s), records/s | {', '.join(ratios)} |")
    return out


def _ratio(a: float, b: float) -> str:
    """``a / b`` as "1.23x"; n/d when ``b`` is zero (a run too short for the clock tick)."""
    return f"{a / b:.2f}x" if b > 0 else "n/d"


def plot(rounds: list[dict[str, dict[str, Any]]], args: argparse.Namespace) -> None:
    import matplotlib  # the bench extra

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    systems = [s for s in ORDER if s in args.system_list]
    keys = [_row_key(r) for r in rounds[0][systems[0]]["open_loop"]]
    fig, ax = plt.subplots(figsize=(9, 4.5))
    width = 0.8 / len(systems)
    x = np.arange(len(keys))
    for j, s in enumerate(systems):
        server = [np.median([rd[s]["open_loop"][k]["server_us"] for rd in rounds])
                  for k in range(len(keys))]
        client = [np.median([rd[s]["open_loop"][k]["client_us"] for rd in rounds])
                  for k in range(len(keys))]
        ax.bar(x + j * width, server, width, label=f"{NAMES[s]}: servers")
        ax.bar(x + j * width, client, width, bottom=server, alpha=0.5,
               label=f"{NAMES[s]}: client")
    ax.set_xticks(x + width * (len(systems) - 1) / 2, keys)
    ax.set_ylabel("CPU per record, us (median of rounds)")
    ax.set_title("CPU per record, one record per call")
    ax.legend(fontsize=7)
    PLOT.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(PLOT, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        return run_worker(args)
    rounds: list[dict[str, dict[str, Any]]] = []
    with tempfile.TemporaryDirectory(prefix="ld-cpu-per-record-") as tmp:
        for n in range(args.repeat):
            print(f"== round {n + 1} of {args.repeat}", flush=True)
            rounds.append({s: run_system(s, args, Path(tmp), n)
                           for s in ORDER if s in args.system_list})
    text = report(rounds, args)
    print(text)
    args.out.write_text(text)
    benchutil.write_json(args.json, {"machine": benchutil.machine(), "rounds": rounds})
    if not args.no_plot:
        plot(rounds, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
