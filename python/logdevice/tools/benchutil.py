"""Helpers shared by ``ldbench`` subcommands: a cluster to run against, latency
percentiles, progress bars and result output (rich table and JSON)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import platform
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from logdevice.cli import missing_extra
from logdevice.local_cluster import LocalCluster

try:
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from rich.table import Table
except ImportError as exc:  # the "cli" extra
    raise missing_extra("ldbench", "cli", exc) from None

__all__ = ["BenchCluster", "bench_cluster", "cluster_config", "percentiles", "progress",
           "results_table", "write_json", "machine", "CpuMeter", "rss_kib"]


@dataclasses.dataclass(frozen=True)
class BenchCluster:
    """What a benchmark runs against: a config path, and the local cluster started for
    the run (None with ``--config``)."""

    config_path: str
    local: LocalCluster | None = None

    def node_pids(self) -> dict[int, int]:
        """Process ids of the local cluster's running nodes (none with ``--config``)."""
        if self.local is None:
            return {}
        return {i: pid for i in self.local.running() if (pid := self.local.pid(i))}


@contextlib.contextmanager
def bench_cluster(config: str | None, *, nodes: int, replication: int, logs: int,
                  console: Console, **options: Any) -> Iterator[BenchCluster]:
    """``config`` as given, or a ``LocalCluster`` started here (``nodes``,
    ``replication``, logs ``1..logs``; stopped on exit)."""
    if config:
        yield BenchCluster(str(config))
        return
    t0 = time.perf_counter()
    with console.status(f"starting a local cluster: {nodes} nodes, R={replication}"):
        cluster = LocalCluster(nodes=nodes, replication=replication, logs=range(1, logs + 1),
                               log_level="WARNING", **options)
    console.print(f"local cluster up in {time.perf_counter() - t0:.1f} s "
                  f"({cluster.config_path})")
    with cluster:
        yield BenchCluster(str(cluster.config_path), cluster)


@contextlib.contextmanager
def cluster_config(config: str | None, *, nodes: int, replication: int, logs: int,
                   console: Console, **options: Any) -> Iterator[str]:
    """The config path of ``bench_cluster``."""
    with bench_cluster(config, nodes=nodes, replication=replication, logs=logs,
                       console=console, **options) as target:
        yield target.config_path


def percentiles(seconds: Any) -> dict[str, float]:
    """p50 / p99 / p99.9 / mean / max of latency samples (seconds in, milliseconds out)."""
    a = np.asarray(seconds, dtype=np.float64) * 1000.0
    if a.size == 0:
        return {"count": 0}
    p50, p99, p999 = np.percentile(a, [50, 99, 99.9])
    return {"count": int(a.size), "p50_ms": float(p50), "p99_ms": float(p99),
            "p999_ms": float(p999), "mean_ms": float(a.mean()), "max_ms": float(a.max())}


def progress(console: Console) -> Progress:
    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("{task.fields[rate]}"), TimeElapsedColumn(),
                    TimeRemainingColumn(), console=console, transient=False)


def read_spans(client: Any, console: Console, spans: dict[int, tuple[int, int]], *,
               scd: bool, total: int, batch: int = 100_000) -> dict[str, Any]:
    """Read ``{log_id: (lo, hi)}`` through one Reader's ``read_batch`` with a progress bar.

    Returns records, payload bytes, seconds, bytes the client received from the nodes and
    the reader's stats (``scd=False`` forces all-send-all).
    """
    label = "read_batch, " + ("single copy delivery" if scd else "all-send-all")
    rows = payload = 0
    b0 = client.bytes_received
    with client.create_reader(max_logs=len(spans)) as r, progress(console) as prog:
        task = prog.add_task(label, total=total, rate="")
        if not scd:
            r.force_no_single_copy_delivery()
        t0 = time.perf_counter()
        for log_id, (lo, hi) in spans.items():
            r.start_reading(log_id, lo, hi)
        while True:
            b = r.read_batch(batch)
            if not len(b) and not b.gaps:
                break
            rows += len(b)
            payload += b.nbytes
            prog.update(task, completed=rows,
                        rate=f"{rows / max(1e-9, time.perf_counter() - t0):,.0f} rec/s")
        seconds = time.perf_counter() - t0
        stats = r.stats
    return {"records": rows, "payload_bytes": payload, "seconds": seconds,
            "bytes_received": client.bytes_received - b0, "stats": stats}


def results_table(title: str, rows: list[tuple[str, str, str]]) -> Table:
    t = Table(title=title)
    t.add_column("measurement")
    t.add_column("result", justify="right")
    t.add_column("detail")
    for row in rows:
        t.add_row(*row)
    return t


def write_results_md(path: str | os.PathLike[str], title: str, conditions: str,
                     rows: list[tuple[str, str, str]]) -> None:
    """``rows`` (as ``results_table`` shows them) as a markdown table under ``# title
    (now)`` and a line of ``conditions``."""
    md = [f"# {title} ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})", "",
          conditions, "", "| measurement | result | detail |", "|---|---|---|"]
    md += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    Path(path).write_text("\n".join(md) + "\n")


def spark_session(master: str, app_name: str) -> Any:
    """A quiet local ``SparkSession`` on loopback (pyspark needed; register the
    ``logdevice`` data source on it with ``logdevice.spark.register``)."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession  # pyspark (optional): the Spark benchmarks only

    spark = (SparkSession.builder.master(master).appName(app_name)
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


class CpuMeter:
    """CPU used over a ``with`` block, in cores: the whole machine's (``/proc/stat``; None
    where there is none), this process's, and that of the local cluster's nodes
    (``node_pids``: index -> pid, from ``/proc/<pid>/stat``).  On a shared machine a
    latency figure means little without it: our nodes and client use about one core at
    1,000 appends/s, and other work on a 2-core box queues every hop behind it.
    """

    def __init__(self, node_pids: Mapping[Any, int] | None = None) -> None:
        self.machine_cores: float | None = None
        self.process_cores = 0.0
        self.node_cores: dict[Any, float] = {}
        self._node_pids = dict(node_pids or {})

    @staticmethod
    def _busy_ticks() -> int | None:
        try:
            with open("/proc/stat") as f:
                fields = [int(x) for x in f.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
        return sum(fields[:8]) - idle  # guest time is already counted in user

    @staticmethod
    def _process_ticks(pid: int) -> int | None:
        """utime + stime of ``pid`` (None once it is gone)."""
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return None
        return int(fields[11]) + int(fields[12])  # fields 14 and 15 of proc(5)

    def __enter__(self) -> CpuMeter:
        self._t0 = time.perf_counter()
        self._busy0 = self._busy_ticks()
        self._times0 = os.times()
        self._nodes0 = {i: self._process_ticks(pid) for i, pid in self._node_pids.items()}
        return self

    def __exit__(self, *exc: object) -> None:
        elapsed = max(1e-9, time.perf_counter() - self._t0)
        t = os.times()
        self.process_cores = (t.user + t.system - self._times0.user - self._times0.system) \
            / elapsed
        tick = os.sysconf("SC_CLK_TCK")
        busy = self._busy_ticks()
        if busy is not None and self._busy0 is not None:
            self.machine_cores = (busy - self._busy0) / tick / elapsed
        for i, pid in self._node_pids.items():
            before, after = self._nodes0.get(i), self._process_ticks(pid)
            if before is not None and after is not None:
                self.node_cores[i] = (after - before) / tick / elapsed

    def as_dict(self) -> dict[str, Any]:
        return {"machine_busy_cores": self.machine_cores, "client_cores": self.process_cores,
                "node_cores": {str(i): c for i, c in sorted(self.node_cores.items())}}

    def per_op_us(self, ops_per_s: float) -> str:
        """CPU per operation at ``ops_per_s``, per process: "client 12 us, N0 7 us, ..."."""
        if ops_per_s <= 0:
            return ""
        parts = [f"client {self.process_cores / ops_per_s * 1e6:.0f} us"]
        parts += [f"N{i} {c / ops_per_s * 1e6:.0f} us"
                  for i, c in sorted(self.node_cores.items())]
        return ", ".join(parts)

    def describe(self) -> str:
        nodes = "".join(f", N{i} {c:.2f}" for i, c in sorted(self.node_cores.items()))
        if self.machine_cores is None:
            return f"client used {self.process_cores:.2f} cores{nodes}"
        return (f"machine busy {self.machine_cores:.1f} of {os.cpu_count()} cores "
                f"(client {self.process_cores:.2f}{nodes})")


def rss_kib(pid: int | None) -> int:
    """Resident set of process ``pid`` in KiB, from ``/proc`` (0 when it is gone)."""
    if pid is None:
        return 0
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def machine() -> dict[str, Any]:
    return {"python": platform.python_version(), "platform": platform.platform(),
            "cpus": os.cpu_count(), "time": time.strftime("%Y-%m-%dT%H:%M:%S%z")}


def write_json(path: str | os.PathLike[str], doc: dict[str, Any]) -> Path:
    p = Path(path)
    if p.parent != Path():
        p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(doc, indent=2) + "\n")
    return p
