"""What each ``append_store_durability`` level costs, measured in one run.

For each level (``memory``, ``async_write``, ``sync_write``) the same ``ldbench write``
runs against a fresh 3-node local cluster (R=2): BufferedWriter bulk throughput, single
appends with 64 in flight, and single-append latency at 1,000/s (open loop).  The table
gives each level's figures and their ratio to ``async_write`` (the default) from the same
run; ``--repeat`` rounds (the levels interleaved) give a range.  Written to
``benchmarks/last-durability.md``.

    .venv/bin/python benchmarks/durability.py [--records 1000000] [--repeat 2]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

from ldbench_runs import ldbench_write, span  # benchmarks/: run as scripts

HERE = Path(__file__).resolve().parent
OUT_MD = HERE / "last-durability.md"
LEVELS = ("memory", "async_write", "sync_write")


def run_level(level: str, args: argparse.Namespace, work: Path, tag: str) -> dict[str, Any]:
    return ldbench_write(["--durability", level, "--nodes", "3", "--replication", "2",
                          "--records", str(args.records), "--per-call-records", "0",
                          "--rate", "1000", "--rate-seconds", str(args.rate_seconds),
                          "--inflight", "64", "--inflight-appends", str(args.inflight_appends)],
                         work / f"{level}-{tag}.json", args.timeout, f"--durability {level}")


def figures(r: dict[str, Any]) -> dict[str, float]:
    return {"bulk_rps": r["bulk"]["records_per_s"],
            "inflight_aps": r["inflight_latency"]["appends_per_s"],
            "inflight_p99": r["inflight_latency"]["p99_ms"],
            "rate_p50": r["rate_latency"]["p50_ms"],
            "rate_p99": r["rate_latency"]["p99_ms"]}


def report(rounds: list[dict[str, dict[str, float]]], args: argparse.Namespace) -> str:
    rows = [("BufferedWriter bulk, records/s", "bulk_rps", ",.0f"),
            ("append_async, 64 in flight, appends/s", "inflight_aps", ",.0f"),
            ("append_async, 64 in flight, p99 ms", "inflight_p99", ".2f"),
            ("append at 1,000/s, p50 ms", "rate_p50", ".2f"),
            ("append at 1,000/s, p99 ms", "rate_p99", ".2f")]
    lines = [f"Durability levels: 3 nodes, R=2, 100 B records, {args.records:,} bulk records, "
             f"{len(rounds)} round(s); ratio = level / async_write in the same round.", "",
             "| figure | " + " | ".join(LEVELS) + " | memory / async | sync / async |",
             "|---|" + "---|" * (len(LEVELS) + 2)]
    for name, key, fmt in rows:
        cells = [span([r[level][key] for r in rounds], fmt) for level in LEVELS]
        ratios = [span([r[level][key] / r["async_write"][key] for r in rounds], ".2f")
                  for level in ("memory", "sync_write")]
        lines.append(f"| {name} | " + " | ".join(cells + ratios) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--inflight-appends", type=int, default=20_000)
    p.add_argument("--rate-seconds", type=float, default=5.0)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument("--out", type=Path, default=OUT_MD)
    args = p.parse_args(argv)
    rounds = []
    with tempfile.TemporaryDirectory(prefix="ld-durability-") as tmp:
        for k in range(args.repeat):
            rounds.append({level: figures(run_level(level, args, Path(tmp), str(k)))
                           for level in LEVELS})
    text = report(rounds, args)
    print(text)
    args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
