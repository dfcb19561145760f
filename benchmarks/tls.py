"""What TLS costs the write path, TLS on and off measured in one run.

Two 3-node local clusters (R=2) run side by side: one plain, one with TLS on every
connection (nodes and client) and the client authenticated by its certificate (mutual
TLS, so the request gate checks every APPEND against the ACL too).  Against each, the
same ``ldbench write`` measures BufferedWriter bulk throughput (``append_many``) and
single-append latency at 1,000/s (open loop); ``--repeat`` rounds alternate the two
clusters and give a range.  The goal: TLS costs less than 15% of BufferedWriter
throughput (ratio >= 0.85).  The table is printed and written to
``benchmarks/last-tls.md``.  Sizes from ``LD_TLS_RECORDS`` (default 1 M records) and
``LD_TLS_RATE_SECONDS`` (default 5), or the options.

    .venv/bin/python benchmarks/tls.py
    .venv/bin/python benchmarks/tls.py --records 20000 --rate-seconds 1 --repeat 1  # quick
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from ldbench_runs import ldbench_write, span  # benchmarks/: run as scripts

from logdevice.local_cluster import LocalCluster

HERE = Path(__file__).resolve().parent
OUT_MD = HERE / "last-tls.md"
MODES = ("plain", "tls")
GOAL = 0.85  # TLS bulk throughput / plain, at least


def run_write(cluster: LocalCluster, creds: list[str], args: argparse.Namespace,
              out: Path) -> dict[str, Any]:
    r = ldbench_write(["--config", str(cluster.config_path), *creds,
                       "--records", str(args.records), "--per-call-records", "0",
                       "--rate", "1000", "--rate-seconds", str(args.rate_seconds),
                       "--inflight-appends", "0"], out, args.timeout,
                      f"against {cluster.config_path}")
    return {"bulk_rps": r["bulk"]["records_per_s"], "bulk_mbps": r["bulk"]["mb_per_s"],
            "rate_p50": r["rate_latency"]["p50_ms"], "rate_p99": r["rate_latency"]["p99_ms"]}


def report(rounds: list[dict[str, dict[str, float]]], args: argparse.Namespace) -> str:
    rows = [("BufferedWriter bulk, records/s", "bulk_rps", ",.0f"),
            ("BufferedWriter bulk, MB/s", "bulk_mbps", ".1f"),
            ("append at 1,000/s, p50 ms", "rate_p50", ".2f"),
            ("append at 1,000/s, p99 ms", "rate_p99", ".2f")]
    lines = [f"TLS on vs off: 3 nodes, R=2, 100 B records, {args.records:,} bulk records, "
             f"{args.rate_seconds:g} s of single appends, {len(rounds)} round(s); "
             "ratio = tls / plain in the same round.", "",
             "| figure | plain | tls (mutual) | tls / plain |", "|---|---|---|---|"]
    for name, key, fmt in rows:
        cells = [span([r[m][key] for r in rounds], fmt) for m in MODES]
        ratio = span([r["tls"][key] / r["plain"][key] for r in rounds], ".2f")
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {ratio} |")
    worst = min(r["tls"]["bulk_rps"] / r["plain"]["bulk_rps"] for r in rounds)
    lines += ["", f"BufferedWriter throughput with TLS: {worst:.2f} of plain at worst "
                  f"(goal >= {GOAL:.2f}: {'met' if worst >= GOAL else 'NOT met'})."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=int,
                   default=int(os.environ.get("LD_TLS_RECORDS", 1_000_000)))
    p.add_argument("--rate-seconds", type=float,
                   default=float(os.environ.get("LD_TLS_RATE_SECONDS", 5.0)))
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument("--out", type=Path, default=OUT_MD)
    args = p.parse_args(argv)
    rounds = []
    with tempfile.TemporaryDirectory(prefix="ld-tls-") as tmp:
        work = Path(tmp)
        with LocalCluster(nodes=3, replication=2, logs=range(1, 5), root=work / "plain",
                          log_level="WARNING") as plain, \
                LocalCluster(nodes=3, replication=2, logs=range(1, 5), root=work / "tls",
                             log_level="WARNING", tls=True,
                             security={"principals": {"bench": {}}}) as secure:
            cert, key = secure.client_cert("bench")
            targets = {"plain": (plain, []),
                       "tls": (secure, ["--tls-cert", str(cert), "--tls-key", str(key)])}
            for k in range(args.repeat):
                order = MODES if k % 2 == 0 else MODES[::-1]  # neither always goes first
                rounds.append({m: run_write(*targets[m], args, work / f"{m}-{k}.json")
                               for m in order})
    text = report(rounds, args)
    print(text)
    args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
