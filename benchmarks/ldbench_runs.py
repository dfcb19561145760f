"""What the benchmarks that drive ``ldbench write`` share: one run in a subprocess (its
output to a log file, its results from the JSON it writes) and ranges over rounds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["ldbench_write", "span"]


def ldbench_write(args: list[str], out: Path, timeout: float, what: str) -> dict[str, Any]:
    """``ldbench write --json OUT ARGS`` in a subprocess; its ``results``.  Exits with the
    tail of the run's log (``OUT`` with ``.log``) when it fails."""
    log = out.with_suffix(".log")
    cmd = [sys.executable, "-m", "logdevice.tools.ldbench", "write", "--json", str(out),
           *args]
    with open(log, "wb") as f:
        rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT,
                            env=dict(os.environ, COLUMNS="100"), timeout=timeout).returncode
    if rc != 0 or not out.exists():
        sys.stderr.write(log.read_text(errors="replace")[-3000:])
        raise SystemExit(f"ldbench write {what} failed (exit {rc})")
    return json.loads(out.read_text())["results"]  # type: ignore[no-any-return]


def span(values: list[float], fmt: str) -> str:
    """``lo - hi`` of ``values`` formatted with ``fmt`` (one number when they agree)."""
    lo, hi = min(values), max(values)
    return format(lo, fmt) if lo == hi else f"{format(lo, fmt)} - {format(hi, fmt)}"
