"""How fast a cluster rebuilds a lost node, and what it costs appends meanwhile.

For a 3-node (R=2) and a 5-node (R=3) local cluster: write ``--records`` records of 100 B
(BufferedWriter, uncompressed blobs of ``--blob-bytes``) over 4 logs, measure single
appends at ``--rate``/s on a fifth log (the baseline), then mark one node (not the fifth
log's sequencer) unrecoverable and time the rebuilding until every donor reported.  Up to
four rounds per cluster, each on a fresh one: appends idle during the rebuilding (its full
speed), appending at the same rate all the while (what appends pay), the same
throttled to ``--throttle-mb`` MB/s per donor (0: no such round), and one where the node
is killed and the cluster rebuilds it by itself after ``--grace-ms`` (the time from its
death to rebuilt, grace period excluded).

Figures: payload MB/s and records/s re-replicated (from the donors' own counters, summed
over the cluster: each record is counted once, by its donor; user records are the 100 B
records inside the blobs), the ratio of that MB/s to the raw LogsDB write rate of the
same blobs measured in the same run (one ``LogsDB.write_records`` writer, no cluster),
and append p50/p99 during the rebuilding against the baseline (p99's ratio too).  Two
figures matter: rebuild MB/s against raw LogsDB when appends are idle, and append p99
during a rebuilding at default settings against the quiet p99.  Written to
``benchmarks/last-rebuilding.md``.

    .venv/bin/python benchmarks/rebuilding.py [--records 10000000] [--throttle-mb 5]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

import logdevice as ld
from logdevice.placement import sequencer_for
from logdevice.storage.logsdb import LogsDB
from logdevice.tools.loglines import generate

HERE = Path(__file__).resolve().parent
OUT_MD = HERE / "last-rebuilding.md"
DATA_LOGS = (1, 2, 3, 4)
LATENCY_LOG = 5
SIZE = 100
CHUNK = 10_000


def load(client: ld.Client, records: int, blob_bytes: int) -> int:
    """Write ``records`` records over the data logs; the number of blobs (LSNs)."""
    buf, offsets = generate(0, min(records, 1_000_000), SIZE)
    base = len(offsets) - 1
    w = client.create_buffered_writer(size_trigger=blob_bytes, time_trigger=0.05,
                                      compression="none")
    futs = []
    for k, start in enumerate(range(0, records, CHUNK)):
        a = start % base
        m = min(CHUNK, records - start, base - a)
        futs.append(w.append_many(DATA_LOGS[k % len(DATA_LOGS)],
                                  (buf[a * SIZE:(a + m) * SIZE],
                                   offsets[a:a + m + 1] - offsets[a])))
    w.flush()
    blobs = set()
    for k, f in enumerate(futs):
        blobs.update((DATA_LOGS[k % len(DATA_LOGS)], lsn) for lsn in f.result(600).tolist())
    w.close()
    return len(blobs)


class Appender:
    """Single appends at a fixed rate (open loop) on the latency log, in a thread."""

    def __init__(self, client: ld.Client, rate: float) -> None:
        self.client, self.period = client, 1.0 / rate
        self.latencies: list[float] = []
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        nxt = time.perf_counter()
        while not self._stop.is_set():
            t = time.perf_counter()
            try:
                self.client.append(LATENCY_LOG, b"x" * SIZE)
                self.latencies.append(time.perf_counter() - t)
            except ld.LogDeviceError:
                self.failures += 1
            nxt += self.period
            delay = nxt - time.perf_counter()
            if delay > 0:
                time.sleep(delay)

    def stop(self) -> dict[str, float]:
        self._stop.set()
        self._thread.join(30)
        ms = np.array(self.latencies) * 1000
        return {"n": len(ms), "p50": float(np.percentile(ms, 50)),
                "p99": float(np.percentile(ms, 99)), "failures": self.failures}


def scrape_totals(cluster: ld.LocalCluster) -> tuple[float, float]:
    """Records and payload bytes donated, summed over the running nodes."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    records = nbytes = 0.0
    for i in cluster.running():
        with urllib.request.urlopen(cluster.metrics_url(i), timeout=10) as resp:
            text = resp.read().decode()
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                if s.name == "logdevice_rebuilding_records_total":
                    records += s.value
                elif s.name == "logdevice_rebuilding_bytes_total":
                    nbytes += s.value
    return records, nbytes


def rebuild_round(nodes: int, replication: int, throttle: int, args: argparse.Namespace,
                  root: Path, appending: bool = True, death: bool = False) -> dict[str, Any]:
    """One cluster, one rebuilding; ``appending``: appends at ``--rate`` run during the
    rebuilding (else they are idle: the rebuilding's full speed).  ``death``: the node
    is killed and the cluster starts the rebuilding itself after ``--grace-ms``; the
    time counted is from the kill to rebuilt, less the grace period."""
    grace_ms = args.grace_ms if death else 0
    with ld.LocalCluster(nodes=nodes, replication=replication,
                         logs=(*DATA_LOGS, LATENCY_LOG), root=root, log_level="WARNING",
                         rebuilding_rate_bytes_per_s=throttle,
                         rebuilding_append_share=args.append_share,
                         self_rebuild_grace_period_ms=grace_ms) as cluster, \
            cluster.client(timeout=60.0) as client:
        blobs = load(client, args.records, args.blob_bytes)
        base = Appender(client, args.rate)
        time.sleep(args.baseline_seconds)  # the baseline's length, not a condition
        baseline = base.stop()
        owner = sequencer_for(LATENCY_LOG, cluster.config.sequencer_weights())
        victim = max(i for i in range(nodes) if i != owner)
        during = Appender(client, args.rate) if appending else None
        t0 = time.perf_counter()
        if death:
            cluster.kill(victim)
            wait_in_rebuilding_set(cluster, victim, args.timeout)
        else:
            cluster.mark_unrecoverable(victim)
        cluster.wait_rebuilt([victim], timeout=args.timeout)
        seconds = time.perf_counter() - t0 - grace_ms / 1000
        lat = during.stop() if during is not None else None
        records, nbytes = scrape_totals(cluster)
    user_records = records * (args.blob_bytes // SIZE) if records else 0.0
    return {"nodes": nodes, "r": replication, "throttle": throttle, "blobs": blobs,
            "trigger": "death" if death else "operator",
            "seconds": seconds, "lsns": records, "mb": nbytes / 1e6,
            "mb_per_s": nbytes / 1e6 / seconds, "lsns_per_s": records / seconds,
            "user_records_per_s": user_records / seconds, "baseline": baseline,
            "during": lat}


def wait_in_rebuilding_set(cluster: ld.LocalCluster, node: int, timeout: float) -> None:
    """Until the cluster has put ``node`` in the rebuilding set by itself."""
    from logdevice.security.store import open_cluster_store

    deadline = time.monotonic() + timeout
    with open_cluster_store(cluster.config) as store:
        while node not in store.rebuilding_set().nodes:
            if time.monotonic() > deadline:
                raise TimeoutError(f"N{node} not in the rebuilding set after {timeout} s")
            time.sleep(0.05)


def raw_logsdb_rate(args: argparse.Namespace, root: Path) -> dict[str, float]:
    """One writer putting blob-sized records into a fresh LogsDB, 64 per write."""
    total = min(args.records * SIZE, 1 << 30)
    n = total // args.blob_bytes
    payload = np.random.default_rng(1).integers(0, 256, 64 * args.blob_bytes, np.uint8)
    offsets = np.arange(65, dtype=np.uint64) * np.uint64(args.blob_bytes)
    with LogsDB(root / "raw") as db:
        now = int(time.time() * 1000)
        t0 = time.perf_counter()
        for start in range(0, n, 64):
            lsns = np.arange(start + 1, start + 65, dtype=np.uint64)
            db.write_records(1, lsns, np.full(64, now, np.int64), np.zeros(64, np.uint32),
                             np.tile(np.array([[0, 1]], np.int16), (64, 1)), payload, offsets)
        db.flush()
        seconds = time.perf_counter() - t0
    return {"mb_per_s": n * args.blob_bytes / 1e6 / seconds, "lsns_per_s": n / seconds}


def report(rounds: list[dict[str, Any]], raw: dict[str, float],
           args: argparse.Namespace) -> str:
    lines = [f"Rebuilding one lost node: {args.records:,} records of {SIZE} B in "
             f"{args.blob_bytes // 1000} kB blobs over {len(DATA_LOGS)} logs; appends at "
             f"{args.rate:g}/s on another log throughout.  Raw LogsDB write rate of the "
             f"same blobs (one writer, same run): {raw['mb_per_s']:,.0f} MB/s, "
             f"{raw['lsns_per_s']:,.0f} blobs/s.", "",
             f"Rebuilding's share of a node while appends come in "
             f"(rebuilding_append_share): {args.append_share:g}.", "",
             "Started by: operator (mark-unrecoverable), or death (the node killed, the "
             "cluster starts the rebuilding itself after the grace period; seconds are "
             "from the kill to rebuilt, grace period excluded).", "",
             "| cluster | started by | throttle per donor | rebuilt | seconds | MB/s | blobs/s | "
             "records/s | MB/s / raw LogsDB | append p50 / p99 ms before | during | "
             "p99 during / before |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rounds:
        thr = "none" if not r["throttle"] else f"{r['throttle'] / 1e6:g} MB/s"
        b, d = r["baseline"], r["during"]
        during = ("appends idle | - " if d is None else
                  f"{d['p50']:.2f} / {d['p99']:.2f} ({d['failures']} failed) | "
                  f"{d['p99'] / b['p99']:.1f}x")
        lines.append(
            f"| {r['nodes']} nodes, R={r['r']} | {r['trigger']} | {thr} | {r['mb']:,.0f} MB, "
            f"{r['lsns']:,.0f} blobs | {r['seconds']:.1f} | {r['mb_per_s']:,.0f} | "
            f"{r['lsns_per_s']:,.0f} | {r['user_records_per_s']:,.0f} | "
            f"{r['mb_per_s'] / raw['mb_per_s']:.2f} | {b['p50']:.2f} / {b['p99']:.2f} | "
            f"{during} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=int,
                   default=int(os.environ.get("LD_REBUILD_RECORDS", 10_000_000)))
    p.add_argument("--blob-bytes", type=int, default=64_000)
    p.add_argument("--rate", type=float, default=200.0)
    p.add_argument("--baseline-seconds", type=float, default=5.0)
    p.add_argument("--throttle-mb", type=float, default=5.0)
    p.add_argument("--append-share", type=float, default=0.25,
                   help="rebuilding_append_share of the clusters (1: never yield)")
    p.add_argument("--grace-ms", type=int, default=5_000,
                   help="self_rebuild_grace_period_ms of the death rounds")
    p.add_argument("--timeout", type=float, default=900.0)
    p.add_argument("--out", type=Path, default=OUT_MD)
    args = p.parse_args(argv)
    rounds = []
    with tempfile.TemporaryDirectory(prefix="ld-rebuild-") as tmp:
        raw = raw_logsdb_rate(args, Path(tmp))
        for nodes, r in ((3, 2), (5, 3)):
            # Appends idle (full speed), appends running, and throttled if asked.
            # Then a node that dies and is rebuilt by the cluster itself.
            plan = [(0, False, False), (0, True, False)]
            if args.throttle_mb > 0:
                plan.append((int(args.throttle_mb * 1e6), True, False))
            plan.append((0, False, True))
            for k, (throttle, appending, death) in enumerate(plan):
                root = Path(tmp) / f"c{nodes}-{k}"
                rounds.append(rebuild_round(nodes, r, throttle, args, root, appending,
                                            death))
                print(rounds[-1], flush=True)
    text = report(rounds, raw, args)
    print(text)
    args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
