"""End-to-end write path benchmark, with its anchors measured in the same run.

Ours: ``ldbench write --json`` in a client process of its own, against a local cluster it
starts (3 node processes, R=2): BufferedWriter throughput (bulk ``append_many`` and one
``append`` call per record), single-append latency at 1,000 appends/s (open loop) and
with 64 in flight.  Records are the same 100-byte JSON-like log lines everywhere
(``logdevice.tools.loglines.generate(0, n, 100)``).

Anchors, run right after ours in each round:

- raw LogsDB: ``LogsDB.write_records`` of the same records, batches of 1,000, one store in
  this process (no network, no replication, no blobs: one RocksDB entry per record);
- Redis Streams: Debian's ``redis-server`` started here on a free 127.0.0.1 port in a temp
  dir (AOF on, ``appendfsync everysec``, no RDB snapshots), redis-py pipelined ``XADD``
  of the same records (1,000 per pipeline, one field per entry); then Redis's best case
  from one Python client, the same XADDs pre-encoded with numpy and pipelined over the
  socket 1,000 at a time (the server is the limit, not redis-py); and single ``XADD``
  latency at 1,000/s.

Each round runs ours, then the anchors; ``--repeat`` rounds (default 3) give a range.
The table (values, ratios ours / Redis and ours / raw LogsDB, targets) is printed and
written to ``benchmarks/last-write-path.md``.

    .venv/bin/python benchmarks/write_path.py [--records 1000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from peers_systems import redis_server, xadd_commands  # benchmarks/: run as scripts

from logdevice.storage.logsdb import LogsDB
from logdevice.tools import benchutil
from logdevice.tools.loglines import generate

HERE = Path(__file__).resolve().parent
OUT_MD = HERE / "last-write-path.md"
PAYLOAD = 100
BATCH = 1000

TARGET_RECORDS_PER_S = 1_000_000
TARGET_VS_REDIS = 2.0
TARGET_P99_MS = 5.0


# ---------------------------------------------------------------------------- ours


def run_ours(args: argparse.Namespace, work: Path, round_no: int) -> dict[str, Any]:
    """``ldbench write`` in a child process (the one client process); its JSON results."""
    out = work / f"ldbench-{round_no}.json"
    log = work / f"ldbench-{round_no}.log"
    cmd = [sys.executable, "-m", "logdevice.tools.ldbench", "write", "--json", str(out),
           "--nodes", "3", "--replication", "2", "--payload-size", str(PAYLOAD),
           "--records", str(args.records), "--per-call-records", str(args.per_call_records),
           "--rate", "1000", "--rate-seconds", str(args.rate_seconds),
           "--inflight", "64", "--inflight-appends", str(args.inflight_appends)]
    env = dict(os.environ, COLUMNS="100")
    with open(log, "wb") as f:
        rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env,
                            timeout=args.timeout).returncode
    if rc != 0 or not out.exists():
        sys.stderr.write(log.read_text(errors="replace")[-4000:])
        raise SystemExit(f"ldbench write failed (exit {rc}); log: {log}")
    return json.loads(out.read_text())["results"]


# ---------------------------------------------------------------------------- raw LogsDB


def run_raw_logsdb(buf: np.ndarray, offsets: np.ndarray, work: Path) -> dict[str, Any]:
    """The same records into one LogsDB, batches of 1,000, R=2 copysets over 3 nodes."""
    n = len(offsets) - 1
    rng = np.random.default_rng(3)
    pairs = np.array([(0, 1), (1, 2), (2, 0), (1, 0), (2, 1), (0, 2)], np.int16)
    cs = pairs[rng.integers(0, len(pairs), n)]
    lsns = np.arange(1, n + 1, dtype=np.uint64)
    ts = np.int64(int(time.time() * 1000)) + np.arange(n, dtype=np.int64) // 1000
    flags = np.zeros(n, np.uint32)
    path = work / "raw-logsdb"
    with LogsDB(path) as db:
        # the partition's column family exists before timing, as on a running node
        db.write_records(2, [1], ts[:1], [0], cs[:1], buf[:PAYLOAD], offsets[:2])
        t0 = time.perf_counter()
        for a in range(0, n, BATCH):
            b = min(a + BATCH, n)
            db.write_records(1, lsns[a:b], ts[a:b], flags[a:b], cs[a:b], buf, offsets[a:b + 1])
        elapsed = time.perf_counter() - t0
    shutil.rmtree(path, ignore_errors=True)
    return {"records": n, "seconds": elapsed, "records_per_s": n / elapsed,
            "mb_per_s": n * PAYLOAD / elapsed / 1e6}


# ---------------------------------------------------------------------------- Redis


@contextlib.contextmanager
def redis_client(work: Path) -> Iterator[Any]:
    """redis-server on a free 127.0.0.1 port, data in ``work``; a connected client."""
    import redis  # the bench extra

    with redis_server(work / "redis") as (port, _pid):
        client = redis.Redis(host="127.0.0.1", port=port)
        try:
            yield client
        finally:
            client.close()
            shutil.rmtree(work / "redis", ignore_errors=True)


def xadd_raw(r: Any, cmds: np.ndarray) -> None:
    """Pipeline pre-encoded XADDs over one connection of its own to ``r``'s server, 1,000
    at a time; all replies of a batch (bulk strings: two CRLFs each, stream IDs hold none)
    are read before the next."""
    where = r.connection_pool.connection_kwargs
    with socket.create_connection((where["host"], where["port"]), timeout=60) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for a in range(0, len(cmds), BATCH):
            chunk = cmds[a:a + BATCH]
            sock.sendall(chunk.data)
            want, seen, last = 2 * len(chunk), 0, b""
            while seen < want:
                data = sock.recv(1 << 20)
                if not data:
                    raise ConnectionError("redis closed the connection")
                if b"-ERR" in data:
                    raise RuntimeError(f"redis error: {data[:200]!r}")
                seen += data.count(b"\r\n") + (last == b"\r" and data[:1] == b"\n")
                last = data[-1:]


def run_redis(buf: np.ndarray, offsets: np.ndarray, work: Path,
              rate_seconds: float) -> dict[str, Any]:
    n = len(offsets) - 1
    payloads = [buf[i * PAYLOAD:(i + 1) * PAYLOAD].tobytes() for i in range(n)]
    out: dict[str, Any] = {}
    with redis_client(work) as r:
        for i in range(200):  # warm the connection
            r.xadd("warm", {"p": payloads[i]})
        t0 = time.perf_counter()
        for a in range(0, n, BATCH):
            pipe = r.pipeline(transaction=False)
            for p in payloads[a:a + BATCH]:
                pipe.xadd("bench", {"p": p})
            pipe.execute()
        elapsed = time.perf_counter() - t0
        assert r.xlen("bench") == n
        out["pipelined"] = {"records": n, "seconds": elapsed, "records_per_s": n / elapsed,
                            "mb_per_s": n * PAYLOAD / elapsed / 1e6}
        # Redis's best case from one Python client: the same XADDs pre-encoded with numpy
        # (no per-command client work), so the server is what limits the rate.
        cmds = xadd_commands(payloads, b"bench-raw")
        t0 = time.perf_counter()
        xadd_raw(r, cmds)
        elapsed = time.perf_counter() - t0
        assert r.xlen("bench-raw") == n
        out["resp"] = {"records": n, "seconds": elapsed, "records_per_s": n / elapsed,
                       "mb_per_s": n * PAYLOAD / elapsed / 1e6}
        total = int(1000 * rate_seconds)
        lat = np.zeros(total)
        t0 = time.perf_counter()
        for i in range(total):  # open loop at 1,000/s, as ldbench measures ours
            due = t0 + i / 1000.0
            delay = due - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            r.xadd("lat", {"p": payloads[i % n]})
            lat[i] = time.perf_counter() - due
        out["rate_latency"] = benchutil.percentiles(lat)
    return out


# ---------------------------------------------------------------------------- report


def _span(values: list[float], fmt: str) -> str:
    lo, hi = min(values), max(values)
    return fmt.format(lo) if len(values) == 1 or fmt.format(lo) == fmt.format(hi) \
        else f"{fmt.format(lo)} - {fmt.format(hi)}"


def report(rounds: list[dict[str, Any]], args: argparse.Namespace) -> str:
    def col(path: str) -> list[float]:
        vals = []
        for rd in rounds:
            v: Any = rd
            for part in path.split("."):
                v = v[part]
            vals.append(float(v))
        return vals

    def ratio(a: str, b: str) -> list[float]:
        return [x / y for x, y in zip(col(a), col(b), strict=True)]

    def pcts(prefix: str) -> str:
        return " / ".join(_span(col(f"{prefix}.{p}_ms"), "{:.2f}") for p in ("p50", "p99", "p999"))

    def vs_target(values: list[float], target: float, fmt: str) -> tuple[str, str, str]:
        return (_span(values, fmt), f">= {fmt.format(target)}",
                _met(min(values) >= target, max(values) >= target))

    have_redis = all(rd["redis"] for rd in rounds)
    bulk = "ours.bulk.records_per_s"
    rows = [
        ("BufferedWriter append_many, records/s",
         *vs_target(col(bulk), TARGET_RECORDS_PER_S, "{:,.0f}")),
        ("BufferedWriter append_many, MB/s (payload)", _span(col("ours.bulk.mb_per_s"),
                                                             "{:.1f}"), "", ""),
    ]
    if have_redis:
        rows += [
            ("  / Redis, redis-py pipelined XADD",
             *vs_target(ratio(bulk, "redis.pipelined.records_per_s"), TARGET_VS_REDIS,
                        "{:.2f}x")),
            ("  / Redis, pre-encoded XADD pipeline (server-bound)",
             *vs_target(ratio(bulk, "redis.resp.records_per_s"), TARGET_VS_REDIS, "{:.2f}x")),
        ]
    rows.append(("  / raw LogsDB write_records", _span(ratio(bulk, "raw.records_per_s"),
                                                       "{:.2f}x"), "", ""))
    if all("per_call" in rd["ours"] for rd in rounds):
        rows.append(("BufferedWriter append per call, records/s",
                     _span(col("ours.per_call.records_per_s"), "{:,.0f}"), "", ""))
        if have_redis:
            rows.append(("  / Redis, redis-py pipelined XADD",
                         _span(ratio("ours.per_call.records_per_s",
                                     "redis.pipelined.records_per_s"), "{:.2f}x"), "", ""))
    p99 = col("ours.rate_latency.p99_ms")
    rows += [
        ("append at 1,000/s: p50 / p99 / p99.9 ms", pcts("ours.rate_latency"),
         f"p99 <= {TARGET_P99_MS:g} ms", _met(max(p99) <= TARGET_P99_MS,
                                              min(p99) <= TARGET_P99_MS)),
        ("append, 64 in flight: p50 / p99 / p99.9 ms", pcts("ours.inflight_latency"), "", ""),
        ("append, 64 in flight: appends/s",
         _span(col("ours.inflight_latency.appends_per_s"), "{:,.0f}"), "", ""),
    ]
    if have_redis:
        rows += [
            ("anchor: Redis, redis-py pipelined XADD, records/s",
             _span(col("redis.pipelined.records_per_s"), "{:,.0f}"), "", ""),
            ("anchor: Redis, pre-encoded XADD pipeline, records/s",
             _span(col("redis.resp.records_per_s"), "{:,.0f}"), "", ""),
            ("anchor: Redis XADD at 1,000/s: p50 / p99 / p99.9 ms",
             pcts("redis.rate_latency"), "", ""),
        ]
    rows.append(("anchor: raw LogsDB write_records, records/s",
                 _span(col("raw.records_per_s"), "{:,.0f}"), "", ""))
    m = benchutil.machine()
    lines = [
        "# Write path, end to end (benchmarks/write_path.py)",
        "",
        f"{m['time']}, {m['cpus']} CPUs, Python {m['python']}, {m['platform']}.  "
        f"{len(rounds)} round(s); a range is min - max over the rounds.  3 node processes, "
        f"R=2, {PAYLOAD}-byte records, {args.records:,} records per throughput run."
        + ("" if have_redis else "  Redis anchor not run (--no-redis)."),
        "",
        "| measurement | result | target | met |",
        "|---|---|---|---|",
        *[f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows],
        "",
        "Per round (ours = BufferedWriter append_many):",
        "",
        "| round | ours rec/s | Redis redis-py rec/s | Redis pre-encoded rec/s "
        "| raw LogsDB rec/s | ours/Redis (redis-py / pre-encoded) | ours/raw "
        "| p99 at 1k/s ms | p99 64 in flight ms |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for i, rd in enumerate(rounds, 1):
        o, rs, rw = rd["ours"], rd["redis"], rd["raw"]
        ours_rate = o["bulk"]["records_per_s"]
        if rs:
            red = (f"{rs['pipelined']['records_per_s']:,.0f} | "
                   f"{rs['resp']['records_per_s']:,.0f} | {rw['records_per_s']:,.0f} | "
                   f"{ours_rate / rs['pipelined']['records_per_s']:.2f}x / "
                   f"{ours_rate / rs['resp']['records_per_s']:.2f}x")
        else:
            red = f"- | - | {rw['records_per_s']:,.0f} | -"
        lines.append(
            f"| {i} | {ours_rate:,.0f} | {red} | {ours_rate / rw['records_per_s']:.2f}x | "
            f"{o['rate_latency']['p99_ms']:.2f} | {o['inflight_latency']['p99_ms']:.2f} |")
    return "\n".join(lines) + "\n"


def _met(all_rounds: bool, some_round: bool) -> str:
    return "met" if all_rounds else ("in some rounds" if some_round else "missed")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--per-call-records", type=int, default=200_000)
    p.add_argument("--rate-seconds", type=float, default=5.0)
    p.add_argument("--inflight-appends", type=int, default=20_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--no-redis", action="store_true",
                   help="skip the Redis Streams anchor (no redis-server or redis-py here)")
    p.add_argument("--timeout", type=float, default=300.0, help="per ldbench run, seconds")
    p.add_argument("--out", type=Path, default=OUT_MD)
    args = p.parse_args(argv)
    buf, offsets = generate(0, args.records, PAYLOAD)
    rounds = []
    with tempfile.TemporaryDirectory(prefix="ld-write-bench-") as tmp:
        work = Path(tmp)
        for i in range(1, args.repeat + 1):
            print(f"round {i}/{args.repeat}: ldbench write (3 nodes, R=2) ...", flush=True)
            ours = run_ours(args, work, i)
            redis_res = None
            if not args.no_redis:
                print(f"round {i}/{args.repeat}: Redis Streams ...", flush=True)
                redis_res = run_redis(buf, offsets, work, min(args.rate_seconds, 3.0))
            print(f"round {i}/{args.repeat}: raw LogsDB ...", flush=True)
            raw = run_raw_logsdb(buf, offsets, work)
            rounds.append({"ours": ours, "redis": redis_res, "raw": raw})
    text = report(rounds, args)
    print()
    print(text)
    args.out.write_text(text)
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
