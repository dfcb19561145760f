"""Helpers shared by ``ldbench`` subcommands: a cluster to run against, latency
percentiles, progress bars and result output (rich table and JSON)."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
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

__all__ = ["cluster_config", "percentiles", "progress", "results_table", "write_json",
           "machine"]


@contextlib.contextmanager
def cluster_config(config: str | None, *, nodes: int, replication: int, logs: int,
                   console: Console, **options: Any) -> Iterator[str]:
    """The config path to run against: ``config`` as given, or a ``LocalCluster`` started
    here (``nodes``, ``replication``, logs ``1..logs``; stopped on exit)."""
    if config:
        yield str(config)
        return
    from logdevice.local_cluster import LocalCluster

    t0 = time.perf_counter()
    with console.status(f"starting a local cluster: {nodes} nodes, R={replication}"):
        cluster = LocalCluster(nodes=nodes, replication=replication, logs=range(1, logs + 1),
                               log_level="WARNING", **options)
    console.print(f"local cluster up in {time.perf_counter() - t0:.1f} s "
                  f"({cluster.config_path})")
    with cluster:
        yield str(cluster.config_path)


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


def results_table(title: str, rows: list[tuple[str, str, str]]) -> Table:
    t = Table(title=title)
    t.add_column("measurement")
    t.add_column("result", justify="right")
    t.add_column("detail")
    for row in rows:
        t.add_row(*row)
    return t


def machine() -> dict[str, Any]:
    return {"python": platform.python_version(), "platform": platform.platform(),
            "cpus": os.cpu_count(), "time": time.strftime("%Y-%m-%dT%H:%M:%S%z")}


def write_json(path: str | os.PathLike[str], doc: dict[str, Any]) -> Path:
    p = Path(path)
    if p.parent != Path():
        p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(doc, indent=2) + "\n")
    return p
