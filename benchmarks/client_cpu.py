"""The client's CPU per single-record append, ours against redis-py, in one run.

One process, two systems one after the other, the same open-loop pacing: a LocalCluster
(3 nodes, R=2) written with ``Client.append_async`` one record per call, and a
redis-server written with one ``XADD`` per call (redis-py, synchronous: each call waits
for its answer).  100 B records at ``--rate``/s for ``--seconds``; the client's CPU is
this process's user + system time (``os.times()``) over the run, pacing loop included,
divided by the records.  ``--reader`` also tails the log with a reader in this process
(``read_batch``) and reports delivery latency (scheduled send -> delivered).

    PYTHONPATH=python:src .venv/bin/python benchmarks/client_cpu.py [--rate 1000]
        [--seconds 10] [--reader] [--systems ours,redis]

Run it against two trees (``PYTHONPATH=/other/tree/python:...``) for an A/B.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from peers_openloop import Deliveries, latency_figures, run_open_loop
from peers_systems import redis_server

SIZE = 100
WARM = 200


def cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system


def payloads(n: int) -> list[bytes]:
    """100 B records whose first 8 bytes are their index (little endian)."""
    return [i.to_bytes(8, "little") + b"x" * (SIZE - 8) for i in range(n)]


def paced(rate: float, seconds: float, send: Callable[[int], None],
          acked: Callable[[], bool], frames: Callable[[], int] = lambda: 0
          ) -> dict[str, float]:
    """Send WARM records, then ``rate * seconds`` more paced; CPU per record (us), and
    records per frame (``frames``: frames sent so far) when the system counts frames:
    appends that queued while others were out share a frame and cost less each, which a
    loaded machine makes more frequent (on a quiet one nearly every append is alone)."""
    for i in range(WARM):
        send(i)
        time.sleep(0.001)
    total = int(rate * seconds)
    c0, t0, f0 = cpu_seconds(), time.perf_counter(), frames()
    sched = run_open_loop(rate, total, lambda lo, hi: [send(WARM + i) for i in range(lo, hi)])
    if not acked():
        raise RuntimeError("appends were not all acknowledged")
    c1, t1, f1 = cpu_seconds(), time.perf_counter(), frames()
    return {"cpu_us": (c1 - c0) / total * 1e6, "wall_s": t1 - t0,
            "records_per_frame": total / (f1 - f0) if f1 > f0 else 1.0,
            "send_lag_p99_ms": sched["send_lag_ms"]["p99"], "due": sched["due"]}


def run_ours(rate: float, seconds: float, reader: bool, work: Path) -> dict[str, float]:
    from logdevice.client import Client
    from logdevice.local_cluster import LocalCluster
    from logdevice.records import LSN_MAX

    total = WARM + int(rate * seconds)
    data = payloads(total)
    acks = Deliveries(total - WARM)  # the warm-up's indices are negative: ignored
    deliveries = Deliveries(total - WARM)
    with LocalCluster(nodes=3, replication=2, logs=range(1, 3), root=work / "ours",
                      log_level="WARNING") as cluster, \
            Client(cluster.config_path, timeout=30.0) as client:
        client.append(1, b"warm")
        stop = threading.Event()
        started = threading.Event()

        def tail() -> None:
            with client.create_reader() as r:
                r.wait_only_when_no_data()
                r.start_reading(1, client.get_tail_lsn(1) + 1, LSN_MAX)
                started.set()
                while not stop.is_set():
                    b = r.read_batch(10_000, timeout=0.1)
                    if len(b):
                        now = time.perf_counter()
                        p, starts = b.payloads, b.offsets[:-1].astype(np.intp)
                        idx = np.zeros(len(b), dtype=np.int64)
                        for k in range(8):
                            idx |= p[starts + k].astype(np.int64) << (8 * k)
                        deliveries.mark_many(idx - WARM, now)

        t = threading.Thread(target=tail, daemon=True)
        if reader:
            t.start()
            started.wait(30)

        def send(i: int) -> None:
            client.append_async(1, data[i]).add_done_callback(
                lambda f, i=i: acks.mark(i - WARM, time.perf_counter()))

        try:
            out = paced(rate, seconds, send, lambda: acks.wait(30),
                        lambda: client.stats["append_batches"])
            if reader:
                deliveries.wait(30)
        finally:
            stop.set()
            if reader:
                t.join(30)
    due = out.pop("due")
    out["append_p50_ms"] = latency_figures(due, acks)["p50_ms"]
    if reader:
        d = latency_figures(due, deliveries)
        out["delivery_p50_ms"], out["delivery_p99_ms"] = d["p50_ms"], d["p99_ms"]
    return out


def run_redis(rate: float, seconds: float, work: Path) -> dict[str, float]:
    import redis

    total = WARM + int(rate * seconds)
    data = payloads(total)
    with redis_server(work / "redis") as (port, _pid):
        r = redis.Redis(port=port)
        out = paced(rate, seconds, lambda i: r.xadd("s", {"p": data[i]}), lambda: True)
        r.close()
    out.pop("due")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--reader", action="store_true")
    ap.add_argument("--systems", default="ours,redis")
    args = ap.parse_args()
    results = {}
    with tempfile.TemporaryDirectory(prefix="ld-client-cpu-") as tmp:
        for name in args.systems.split(","):
            if name == "ours":
                results[name] = run_ours(args.rate, args.seconds, args.reader, Path(tmp))
            else:
                results[name] = run_redis(args.rate, args.seconds, Path(tmp))
            print(name, {k: round(v, 2) for k, v in results[name].items()}, flush=True)
    if "ours" in results and "redis" in results:
        print(f"client CPU ours / redis-py: "
              f"{results['ours']['cpu_us'] / results['redis']['cpu_us']:.2f}")


if __name__ == "__main__":
    main()
