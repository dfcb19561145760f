"""The benchmarks that ``make bench`` runs keep working: each runs here in a tiny
configuration (no figure is asserted: speed is measured on a quiet machine, not in
tests), and its report holds every row it promises."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_cpu_per_record_tiny(tmp_path: Path) -> None:
    systems = ["ours"]
    if shutil.which("redis-server") or os.access("/usr/bin/redis-server", os.X_OK):
        systems.append("redis")  # ci/system-deps.sh installs it unless told not to
    out_md, out_json = tmp_path / "cpu.md", tmp_path / "cpu.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "cpu_per_record.py"), "--seconds", "0.5",
         "--rates", "200", "--repeat", "1", "--systems", ",".join(systems),
         "--out", str(out_md), "--json", str(out_json), "--no-plot"],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (round_,) = json.loads(out_json.read_text())["rounds"]
    assert sorted(round_) == sorted(systems)
    ours = round_["ours"]
    assert [(r["rate"], r["tail"]) for r in ours["open_loop"]] == [(200.0, False),
                                                                    (200.0, True)]
    for row in ours["open_loop"]:
        assert row["records"] == 100 and row["errors"] == 0
        assert row["append"]["undelivered"] == 0  # every append acknowledged
        assert set(row["servers_us"]) == {"N0", "N1", "N2"}
    assert ours["open_loop"][1]["delivery"]["undelivered"] == 0
    assert sorted(ours["max_rate"]) == ["1", "4"]
    text = out_md.read_text()
    assert "| 200/s + reader | ours (3 nodes, R=2) |" in text
    if "redis" in systems:
        assert "Ours / Redis Streams, per round" in text


def test_many_logs_at_a_thousand(tmp_path: Path) -> None:
    out_md, out_json = tmp_path / "many.md", tmp_path / "many.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "many_logs.py"), "--logs", "1000",
         "--reader-logs", "1000", "--out", str(out_md), "--json", str(out_json), "--no-plot"],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (run,) = json.loads(out_json.read_text())["runs"]
    assert run["logs"] == 1000
    assert run["reader"]["logs"] == 1000  # every log's first record was delivered
    assert set(run["rss_per_written_log_kb"]) == {"N0", "N1", "N2"}
    assert set(run["rss_per_idle_log_kb"]) == {"N0", "N1", "N2"}
    assert run["restart_s"] > 0
    assert "| 1,000 |" in out_md.read_text()


def test_log_memory_tiny() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "log_memory.py"), "--logs", "200"],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for row in ("| sequencer, awake after 2 appends |", "| sequencer, asleep |",
                "| LogsDB directory + metadata |", "| storage role: release pointer + LNG |"):
        assert row in proc.stdout
