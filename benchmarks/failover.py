"""Appends around a hung sequencer: the longest stretch without an acknowledged append.

A local cluster (5 nodes, R=3; the dead timeout is the local 1.5 s unless ``--dead-ms``)
and one client whose threads append single records to one log in a loop (each thread one
append at a time, timeout 5 s).  Each round stops the log's sequencer node with SIGSTOP
(its sockets stay open) for ``--stopped`` seconds, then resumes it.  Measured per round,
from the acknowledgement times the client saw:

- while stopped: the longest stretch of [stop, resume] without an acknowledged append
  (goal: at most the dead timeout plus one second), and its ratio to the dead timeout;
- after the resume: the longest stretch of [resume, resume + 5 s] (the log may move
  back to its node then).

Appends that failed (TIMEDOUT: the client gave the silent node up, the append may be
stored) are counted.  The table is printed and written to ``benchmarks/last-failover.md``.

    .venv/bin/python benchmarks/failover.py                  # 5 rounds, 10 s stopped
    .venv/bin/python benchmarks/failover.py --rounds 1 --stopped 4   # a quick check
    .venv/bin/python benchmarks/failover.py --keepalive 0    # the client without keepalive
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path

import logdevice as ld
from logdevice.local_cluster import LocalCluster
from logdevice.placement import sequencer_for

HERE = Path(__file__).resolve().parent
OUT_MD = HERE / "last-failover.md"
LOG = 1
AFTER_RESUME = 5.0


class Appenders:
    """``threads`` threads appending to ``LOG``; acknowledgement times and failures."""

    def __init__(self, client: ld.Client, threads: int) -> None:
        self.client = client
        self.acked: list[float] = []
        self.failed: list[tuple[float, str]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(i,), daemon=True)
                         for i in range(threads)]

    def start(self) -> Appenders:
        for t in self._threads:
            t.start()
        return self

    def _run(self, me: int) -> None:
        i = 0
        while not self._stop.is_set():
            payload = b"t%d-%d" % (me, i)
            i += 1
            try:
                self.client.append(LOG, payload)
            except ld.LogDeviceError as exc:
                with self._lock:
                    self.failed.append((time.monotonic(), exc.status.name))
                continue
            with self._lock:
                self.acked.append(time.monotonic())

    def longest_gap(self, start: float, end: float) -> float:
        with self._lock:
            points = [start, *sorted(t for t in self.acked if start < t < end), end]
        return max(b - a for a, b in zip(points, points[1:], strict=False))

    def failures(self, start: float, end: float) -> int:
        with self._lock:
            return sum(start <= t <= end for t, _ in self.failed)

    def wait_ack_after(self, t: float, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                if self.acked and self.acked[-1] > t:
                    return
            if time.monotonic() > deadline:
                raise TimeoutError(f"no acknowledged append within {timeout:g} s")
            time.sleep(0.01)

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(60)


def owner_now(cluster: LocalCluster) -> int:
    views = cluster.views()
    view = next(iter(views.values()))
    node = sequencer_for(LOG, {s.node_index: s.weight for s in view.sequencers})
    assert node is not None
    return node


def run(rounds: int, stopped: float, threads: int, dead_ms: int,
        keepalive: float | None) -> list[dict[str, float]]:
    out = []
    with tempfile.TemporaryDirectory(prefix="ld-bench-failover-") as tmp, \
            LocalCluster(nodes=5, replication=3, logs=[LOG], root=Path(tmp) / "c",
                         dead_timeout_ms=dead_ms,
                         suspect_timeout_ms=min(1000, dead_ms)) as cluster, \
            cluster.client(timeout=5.0, **({} if keepalive is None else
                                           {"keepalive_timeout": keepalive})) as client:
        appenders = Appenders(client, threads).start()
        try:
            appenders.wait_ack_after(time.monotonic(), 30)
            for _ in range(rounds):
                node = owner_now(cluster)
                cluster.pause(node)
                t_stop = time.monotonic()
                try:
                    time.sleep(stopped)  # the fault lasts this long: the scenario itself
                finally:
                    cluster.resume(node)
                t_resume = time.monotonic()
                cluster.wait_ready(60)
                appenders.wait_ack_after(t_resume + AFTER_RESUME, 60)
                gap = appenders.longest_gap(t_stop, t_resume)
                out.append({"node": node, "gap_stopped_s": gap,
                            "ratio_to_dead": gap / (dead_ms / 1000),
                            "gap_after_resume_s": appenders.longest_gap(
                                t_resume, t_resume + AFTER_RESUME),
                            "failed": appenders.failures(t_stop, t_resume + AFTER_RESUME)})
        finally:
            appenders.stop()
    return out


def report(rows: list[dict[str, float]], stopped: float, threads: int, dead_ms: int) -> str:
    dead = dead_ms / 1000
    lines = [f"SIGSTOP of log {LOG}'s sequencer for {stopped:g} s, {threads} appending "
             f"threads, dead timeout {dead:g} s (goal: stretch <= {dead + 1:g} s)", "",
             "| round | node | longest stretch while stopped (s) | / dead timeout "
             "| longest stretch after resume (s) | failed appends |",
             "|---|---|---|---|---|---|"]
    for i, r in enumerate(rows, 1):
        lines.append(f"| {i} | N{r['node']} | {r['gap_stopped_s']:.2f} | "
                     f"{r['ratio_to_dead']:.2f} | {r['gap_after_resume_s']:.2f} | "
                     f"{r['failed']} |")
    gaps = [r["gap_stopped_s"] for r in rows]
    lines += ["", f"while stopped: median {statistics.median(gaps):.2f} s, max {max(gaps):.2f} s "
                  f"(max / dead timeout {max(gaps) / dead:.2f}); goal met in "
                  f"{sum(g <= dead + 1 for g in gaps)} of {len(gaps)} rounds"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--stopped", type=float, default=10.0, help="seconds stopped per round")
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--dead-ms", type=int, default=1500)
    p.add_argument("--keepalive", type=float, default=None,
                   help="the client's keepalive_timeout (default: the dead timeout; 0: off)")
    p.add_argument("--no-write", action="store_true", help="do not write the .md file")
    args = p.parse_args(argv)
    rows = run(args.rounds, args.stopped, args.threads, args.dead_ms, args.keepalive)
    table = report(rows, args.stopped, args.threads, args.dead_ms)
    if args.keepalive is not None:
        table = f"client keepalive_timeout {args.keepalive:g} s\n\n" + table
    print(table)
    if not args.no_write:
        OUT_MD.write_text("# Appends around a hung sequencer\n\n" + table + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
