"""A node under 100 hostile connections while a writer appends at 1,000/s.

A secured 3-node cluster (TLS, R=2).  First the quiet run: ``ldbench write`` appends one
record at a time at 1,000/s (open loop) and reports latency.  Then the same run while an
attacker process holds 100 connections to node 0, authenticated as a read-only
principal, each doing one of three things over and over:

- *slow frames*: a frame prefix claiming 1 MiB, then a byte every 100 ms;
- *oversized lists*: a RECOVERY_LIST (a node's reply type) whose header is 8 MB of empty
  lists: the node closes the connection on the prefix; the attacker reconnects;
- *reply types*: STORE frames, which only nodes send: closed on the prefix; reconnect.

Reported, with the quiet run as the reference in the same round: the writer's p50/p99
(goal: hostile p99 within 2x of quiet), node 0's peak RSS over its baseline (goal: under
512 MiB, the node-wide budget for half-received input, whatever the frames claim), and
whether any node was declared dead meanwhile (goal: no failover).  The attacker runs on
the same two cores; its own CPU use is reported.
The table is printed and written to ``benchmarks/last-hostile.md``.

    .venv/bin/python benchmarks/hostile.py
    .venv/bin/python benchmarks/hostile.py --seconds 5 --repeat 1   # quick
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from ldbench_runs import ldbench_write, span  # benchmarks/: run as scripts

from logdevice.config import Config
from logdevice.local_cluster import LocalCluster
from logdevice.protocol import Hello, MessageType, encode_frame
from logdevice.security import ConnectSecurity
from logdevice.tools import benchutil

HERE = Path(__file__).resolve().parent
OUT_MD = HERE / "last-hostile.md"
MIX = "slow=40,lists=30,reply=30"
RSS_GOAL_MIB = 512  # the node-wide budget for half-received input
P99_GOAL = 2.0
SECURITY = {"principals": {"writer": {}, "viewer": {}},
            "acl": {"append": ["writer"], "read": ["writer", "viewer"]}}


# ---------------------------------------------------------------------------- the attacker
def _prefix(total: int, type_id: int, header_length: int) -> bytes:
    return struct.pack("<IHBBI", total, type_id, 1, 0, header_length)


async def _one(kind: str, config: Config, security: ConnectSecurity, until: float,
               counts: dict[str, int]) -> None:
    node = config.node(0)
    hello = encode_frame(Hello(cluster=config.cluster, token=security.token))
    big = 8 << 20
    while time.monotonic() < until:
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(
                node.host, node.port, ssl=security.ssl, server_hostname=node.host), 10)
        except (TimeoutError, OSError):
            counts["refused"] += 1
            await asyncio.sleep(0.1)
            continue
        counts["connections"] += 1
        try:
            writer.write(hello)
            await writer.drain()
            if kind == "slow":
                writer.write(_prefix(1 << 20, int(MessageType.APPEND), 64))
                while time.monotonic() < until:
                    await asyncio.sleep(0.1)
                    writer.write(b"\x00")
                    await writer.drain()
            elif kind == "lists":
                writer.write(_prefix(12 + 5 + big, int(MessageType.RECOVERY_LIST), 5 + big)
                             + b"\xdd" + struct.pack(">I", big))
                writer.write(b"\x90" * (1 << 20))
                await writer.drain()
            else:
                writer.write(_prefix(12 + 64, int(MessageType.STORE), 64) + b"\x00" * 64)
                await writer.drain()
            await asyncio.wait_for(reader.read(), 5)  # until the node closes
        except (TimeoutError, OSError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
        counts["closed_by_node"] += 1


def parse_mix(text: str) -> list[str]:
    """``slow=40,lists=30,reply=30`` -> one kind per connection."""
    kinds: list[str] = []
    for part in text.split(","):
        kind, _, n = part.partition("=")
        if kind not in ("slow", "lists", "reply"):
            raise SystemExit(f"unknown attack {kind!r}")
        kinds += [kind] * int(n)
    return kinds


async def _attack(config_path: str, cert: str, key: str, seconds: float, mix: str
                  ) -> dict[str, int]:
    config = Config.load(config_path)
    security = ConnectSecurity.for_client(config, tls_cert=cert, tls_key=key)
    until = time.monotonic() + seconds
    counts = {"connections": 0, "closed_by_node": 0, "refused": 0}
    kinds = parse_mix(mix)
    random.shuffle(kinds)
    await asyncio.gather(*(_one(k, config, security, until, counts) for k in kinds))
    return counts


# ---------------------------------------------------------------------------- measuring
def _rss_mib(pid: int) -> float:
    return benchutil.rss_kib(pid) / 1024


class RssWatch(threading.Thread):
    """The largest RSS of ``pid`` while running (sampled every 50 ms)."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak, self._stop_event = pid, 0.0, threading.Event()

    def run(self) -> None:
        while not self._stop_event.wait(0.05):
            self.peak = max(self.peak, _rss_mib(self.pid))

    def stop(self) -> float:
        self._stop_event.set()
        self.join()
        return self.peak


def dead_events(cluster: LocalCluster) -> int:
    """How many times a node's log says a peer is dead (a failover happened)."""
    return sum(cluster.log_path(i).read_text(errors="replace").count("now dead")
               for i in range(cluster.n))


def one_round(cluster: LocalCluster, args: argparse.Namespace, work: Path, k: int
              ) -> dict[str, dict[str, float]]:
    cert, key = cluster.client_cert("writer")
    writer = ["--config", str(cluster.config_path), "--tls-cert", str(cert), "--tls-key",
              str(key), "--records", "0", "--per-call-records", "0", "--rate", "1000",
              "--rate-seconds", str(args.seconds), "--inflight-appends", "0"]
    pid = cluster.pid(0)
    assert pid is not None
    out: dict[str, dict[str, float]] = {}
    for mode in ("quiet", "hostile"):
        base = _rss_mib(pid)
        dead_before = dead_events(cluster)
        watch = RssWatch(pid)
        watch.start()
        attacker = None
        if mode == "hostile":
            vcert, vkey = cluster.client_cert("viewer")
            attacker = subprocess.Popen(
                [sys.executable, __file__, "--attack", str(cluster.config_path), str(vcert),
                 str(vkey), str(args.seconds + 4), args.mix], stdout=subprocess.PIPE,
                text=True)
            time.sleep(2)  # the connections are up before the writer starts
        r = ldbench_write(writer, work / f"{mode}-{k}.json", args.timeout, mode)
        counts = {}
        if attacker is not None:
            stdout, _ = attacker.communicate(timeout=args.seconds + 60)
            counts = dict(item.split("=") for item in stdout.split())
        peak = watch.stop()
        out[mode] = {"p50": r["rate_latency"]["p50_ms"], "p99": r["rate_latency"]["p99_ms"],
                     "rss_base": base, "rss_over": max(0.0, peak - base),
                     "dead": dead_events(cluster) - dead_before,
                     "attacks": float(counts.get("connections", 0)),
                     "attacker_cores": float(counts.get("cores", 0))}
    return out


def report(rounds: list[dict[str, dict[str, float]]], args: argparse.Namespace) -> str:
    lines = [f"{len(parse_mix(args.mix))} hostile connections ({args.mix}) against N0 of a "
             f"secured 3-node cluster (TLS, R=2) while a writer appends at 1,000/s for "
             f"{args.seconds:g} s; {len(rounds)} round(s); quiet = the same writer alone, "
             "just before.", "",
             "| figure | quiet | hostile | hostile / quiet |", "|---|---|---|---|"]
    for name, key in (("append p50, ms", "p50"), ("append p99, ms", "p99")):
        q = [r["quiet"][key] for r in rounds]
        h = [r["hostile"][key] for r in rounds]
        ratio = span([r["hostile"][key] / r["quiet"][key] for r in rounds], ".2f")
        lines.append(f"| {name} | {span(q, '.2f')} | {span(h, '.2f')} | {ratio} |")
    rss = [r["hostile"]["rss_over"] for r in rounds]
    quiet_rss = [r["quiet"]["rss_over"] for r in rounds]
    lines.append(f"| N0 RSS over its baseline, MiB | {span(quiet_rss, '.1f')} | "
                 f"{span(rss, '.1f')} | |")
    lines.append(f"| nodes declared dead | {span([r['quiet']['dead'] for r in rounds], '.0f')}"
                 f" | {span([r['hostile']['dead'] for r in rounds], '.0f')} | |")
    lines.append(f"| hostile connections made | | "
                 f"{span([r['hostile']['attacks'] for r in rounds], ',.0f')} | |")
    lines.append(f"| the attacker's own CPU, cores (of 2) | | "
                 f"{span([r['hostile']['attacker_cores'] for r in rounds], '.2f')} | |")
    worst = max(r["hostile"]["p99"] / r["quiet"]["p99"] for r in rounds)
    verdicts = [f"p99 within {P99_GOAL:g}x of quiet: {'met' if worst <= P99_GOAL else 'NOT met'}"
                f" (worst {worst:.2f}x)",
                f"RSS under +{RSS_GOAL_MIB} MiB: "
                f"{'met' if max(rss) < RSS_GOAL_MIB else 'NOT met'} (worst +{max(rss):.1f})",
                "no failover: " + ("met" if all(r["hostile"]["dead"] == 0 for r in rounds)
                                   else "NOT met")]
    return "\n".join(lines + [""] + [f"- {v}" for v in verdicts]) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float,
                   default=float(os.environ.get("LD_HOSTILE_SECONDS", 20.0)))
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument("--out", type=Path, default=OUT_MD)
    p.add_argument("--mix", default=MIX,
                   help=f"connections per attack: slow, lists, reply (default {MIX})")
    p.add_argument("--attack", nargs=5, metavar=("CONFIG", "CERT", "KEY", "SECONDS", "MIX"),
                   help=argparse.SUPPRESS)  # the attacker process
    args = p.parse_args(argv)
    if args.attack:
        config, cert, key, seconds, mix = args.attack
        t0, c0 = time.monotonic(), time.process_time()
        counts = asyncio.run(_attack(config, cert, key, float(seconds), mix))
        cores = (time.process_time() - c0) / (time.monotonic() - t0)
        print(" ".join(f"{k}={v}" for k, v in {**counts, "cores": round(cores, 2)}.items()))
        return 0
    rounds = []
    with tempfile.TemporaryDirectory(prefix="ld-hostile-") as tmp:
        work = Path(tmp)
        with LocalCluster(nodes=3, replication=2, logs=range(1, 5), root=work / "cluster",
                          log_level="INFO", tls=True, security=SECURITY) as cluster:
            for k in range(args.repeat):
                rounds.append(one_round(cluster, args, work, k))
    text = report(rounds, args)
    print(text)
    args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
