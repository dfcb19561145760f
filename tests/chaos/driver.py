"""The chaos driver: a real LocalCluster under load while a seeded scheduler injects
faults, then a check of the log store's promises against what the writers were told.

Load: a synchronous appender, an asynchronous appender (bounded in flight) and a
BufferedWriter per log, tailing readers started at the beginning, and a tail watcher that
asks a fresh client for every log's tail over and over.  Faults (at most R - 1 nodes
faulty at a time): SIGKILL and restart, SIGSTOP and SIGCONT, either of them on the
sequencer node of a busy log, now and then every node killed at once, and now and then
one node's store wiped before it restarts (a lost disk: the other nodes rebuild its
records; the next wipe waits until that rebuilding is over, so no record ever loses
more than one copy this way).

At the end the cluster is healed and checked:

- every acknowledged record is read back exactly once, with its payload (lost,
  duplicated); a BufferedWriter blob retried across a sequencer failover may land
  twice, in two epochs (redelivered: counted, not a violation: the writer's idempotence
  does not survive a failover);
- readers of each log (single copy delivery and all-send-all, started after the run,
  each reading twice) deliver the same sequence of records and gaps (divergent);
- no DATALOSS gap (dataloss);
- what each tailing reader delivered is a prefix of that sequence (divergent);
- no tail ever went back (tail_regressions);
- every rebuilding started by a wipe finishes once the cluster is healed (rebuilds_stuck).

One summary line, and exit status 1 with the seed and the fault schedule on any
violation.  ``python -m tests.chaos.driver --seconds 600 --seed 7`` (``make chaos``).
"""

from __future__ import annotations

import argparse
import contextlib
import random
import shutil
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import logdevice as ld
from ldcore import lsn as ldlsn
from logdevice.placement import sequencer_for
from logdevice.records import DataRecord, GapRecord, GapType

LOGS = (1, 2, 3)
PREFIX_BYTES = 24


@dataclass
class Fault:
    at: float  # seconds since the start of the run
    kind: str  # kill / pause / kill_all / wipe
    nodes: tuple[int, ...]
    duration: float
    log: int | None = None  # the busy log whose sequencer it hit, if it was aimed


@dataclass
class Ledger:
    """What the writers were told, and when (thread-safe)."""

    acked: dict[tuple[int, int, int], bytes] = field(default_factory=dict)
    # log -> (sent, acknowledged) of the synchronous writer's appends
    round_trips: dict[int, list[tuple[float, float]]] = field(default_factory=dict)
    failed: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def ack(self, log_id: int, lsn: int, offset: int, payload: bytes) -> None:
        with self.lock:
            self.acked[(log_id, lsn, offset)] = payload

    def round_trip(self, log_id: int, sent: float, acked: float) -> None:
        with self.lock:
            self.round_trips.setdefault(log_id, []).append((sent, acked))

    def fail(self) -> None:
        with self.lock:
            self.failed += 1


class Run:
    """One chaos run: build with the options, ``run()``, read ``report``."""

    def __init__(self, seconds: float, seed: int, replication: int = 3, nodes: int = 5,
                 root: Any = None, log: Callable[[str], None] = print) -> None:
        self.seconds = seconds
        self.seed = seed
        self.r = replication
        self.n = nodes
        self.rng = random.Random(seed)
        self.root = root
        self.log = log
        self.ledger = Ledger()
        self.faults: list[Fault] = []
        self.tail_regressions: list[str] = []
        self.stop = threading.Event()
        self.t0 = 0.0
        self.report: dict[str, Any] = {}
        # Seconds writers pause between appends: the log's volume stays what the final
        # check can read back in a few seconds per reader, whatever the run's length.
        self.pace = 0.001

    # -- load -------------------------------------------------------------------------------
    def _payload(self, who: str, seq: int) -> bytes:
        return f"{who}:{seq}".encode().ljust(PREFIX_BYTES, b".")

    def _sync_writer(self, client: ld.Client, log_id: int) -> None:
        seq = 0
        while not self.stop.is_set():
            p = self._payload(f"sync{log_id}", seq)
            seq += 1
            sent = time.monotonic()
            time.sleep(self.pace)
            try:
                lsn = client.append(log_id, p, timeout=15.0)
            except ld.LogDeviceError:
                self.ledger.fail()
                continue
            self.ledger.ack(log_id, lsn, 0, p)
            self.ledger.round_trip(log_id, sent, time.monotonic())

    def _async_writer(self, client: ld.Client, log_id: int) -> None:
        seq = 0
        while not self.stop.wait(self.pace * 20):
            batch = []
            for _ in range(32):
                p = self._payload(f"async{log_id}", seq)
                seq += 1
                batch.append((p, client.append_async(log_id, p, timeout=15.0)))
            for p, fut in batch:
                try:
                    lsn = fut.result(60)
                except ld.LogDeviceError:
                    self.ledger.fail()
                    continue
                self.ledger.ack(log_id, lsn, 0, p)

    def _buffered_writer(self, client: ld.Client, log_id: int) -> None:
        writer = client.create_buffered_writer(time_trigger=0.02, size_trigger=16 << 10)
        seq = 0
        try:
            while not self.stop.wait(self.pace * 50):
                payloads = [self._payload(f"bw{log_id}", seq + k) for k in range(100)]
                seq += 100
                fut = writer.append_many(log_id, payloads)
                try:
                    lsns = fut.result(60)
                except ld.LogDeviceError:
                    self.ledger.fail()
                    continue
                for p, lsn, off in zip(payloads, lsns.tolist(),
                                       fut.batch_offsets.tolist(), strict=True):
                    self.ledger.ack(log_id, lsn, off, p)
        finally:
            writer.close(timeout=30)

    def _tailer(self, reader: Any, out: list[Any]) -> None:
        while not self.stop.is_set():
            with contextlib.suppress(ld.LogDeviceError):
                out.extend(reader.read(1000, timeout=0.2))

    def _tail_watcher(self, config_path: str) -> None:
        last: dict[int, int] = {}
        while not self.stop.wait(0.3):
            try:
                with ld.Client(config_path, timeout=10.0) as client:
                    for log_id in LOGS:
                        tail = client.get_tail_lsn(log_id)
                        if tail < last.get(log_id, 0):
                            self.tail_regressions.append(
                                f"log {log_id}: tail {ldlsn.to_string(tail)} after "
                                f"{ldlsn.to_string(last[log_id])}")
                        last[log_id] = max(last.get(log_id, 0), tail)
            except ld.LogDeviceError:
                continue  # no answer in time: nothing to compare

    # -- faults -----------------------------------------------------------------------------
    def _inject(self, cluster: ld.LocalCluster) -> None:
        rng = self.rng
        weights = cluster.config.sequencer_weights()
        end = self.t0 + self.seconds
        while time.monotonic() < end - 2.0 and not self.stop.is_set():
            time.sleep(rng.uniform(0.1, 1.0))
            roll = rng.random()
            duration = rng.uniform(0.2, 2.0)
            at = time.monotonic() - self.t0
            if roll < 0.03:
                fault = Fault(at, "kill_all", tuple(range(self.n)), duration)
            elif roll < 0.10 and not cluster.shard_statuses():
                fault = Fault(at, "wipe", (rng.randrange(self.n),), duration)
            else:
                faulty = rng.randint(1, self.r - 1)
                aimed = rng.random() < 0.5
                log_id = rng.choice(LOGS) if aimed else None
                candidates = list(range(self.n))
                rng.shuffle(candidates)
                if log_id is not None:
                    seq = sequencer_for(log_id, {i: weights[i] for i in cluster.running()})
                    if seq is not None:
                        candidates.remove(seq)
                        candidates.insert(0, seq)
                kind = "kill" if rng.random() < 0.5 else "pause"
                fault = Fault(at, kind, tuple(candidates[:faulty]), duration, log_id)
            self.faults.append(fault)
            self.log(f"[{at:6.1f}s] {fault.kind} {list(fault.nodes)} for {duration:.1f}s"
                     + (f" (sequencer of log {fault.log})" if fault.log else ""))
            self._apply(cluster, fault)

    def _apply(self, cluster: ld.LocalCluster, fault: Fault) -> None:
        if fault.kind == "pause":
            for i in fault.nodes:
                cluster.pause(i)
            time.sleep(fault.duration)
            for i in fault.nodes:
                cluster.resume(i)
            return
        for i in fault.nodes:
            cluster.kill(i)
            if fault.kind == "wipe":
                shutil.rmtree(cluster.node_data_dir(i))
        time.sleep(fault.duration)
        for i in fault.nodes:
            cluster.start(i, timeout=60.0)

    # -- the run ----------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        opts = dict(nodes=self.n, replication=self.r, logs=LOGS, root=self.root,
                    ready_timeout=60.0)
        with ld.LocalCluster(**opts) as cluster:
            clients = [cluster.client(timeout=15.0) for _ in range(3)]
            tails: dict[tuple[int, int], list[Any]] = {}
            threads = []
            for k, log_id in enumerate(LOGS):
                for target in (self._sync_writer, self._async_writer, self._buffered_writer):
                    threads.append(threading.Thread(target=target,
                                                    args=(clients[k % 3], log_id)))
                reader = clients[(k + 1) % 3].create_reader()
                reader.start_reading(log_id)
                tails[(log_id, k)] = []
                threads.append(threading.Thread(target=self._tailer,
                                                args=(reader, tails[(log_id, k)])))
            threads.append(threading.Thread(target=self._tail_watcher,
                                            args=(str(cluster.config_path),)))
            self.t0 = time.monotonic()
            for t in threads:
                t.daemon = True
                t.start()
            try:
                self._inject(cluster)
                time.sleep(max(0.0, self.t0 + self.seconds - time.monotonic()))
            finally:
                self.stop.set()
                for t in threads:
                    t.join(120)
            stuck = [t.name for t in threads if t.is_alive()]
            for c in clients:
                c.close()
            stuck_rebuild = None
            try:
                cluster.wait_rebuilt(range(self.n), timeout=120)
            except TimeoutError as exc:
                stuck_rebuild = f"rebuilding did not finish: {exc}"
            self.report = self._verify(cluster, tails)
            self.report["stuck_threads"] = stuck
            self.report["rebuilds_stuck"] = int(stuck_rebuild is not None)
            if stuck_rebuild is not None:
                self.report["problems"].append(stuck_rebuild)
            self.report["wipes"] = sum(f.kind == "wipe" for f in self.faults)
        return self.report

    # -- verification ----------------------------------------------------------------------
    def _read_log(self, client: ld.Client, log_id: int, until: int, scd: bool
                  ) -> list[tuple]:
        """Everything of ``log_id`` up to ``until``, as (kind, lo, hi, batch offset,
        payload) tuples in delivery order, read in columnar batches."""
        reader = client.create_reader()
        if not scd:
            reader.force_no_single_copy_delivery()
        reader.start_reading(log_id, until_lsn=until)
        items: list[tuple] = []
        deadline = time.monotonic() + 600
        try:
            while time.monotonic() < deadline:
                batch = reader.read_batch(100_000, timeout=1.0)
                items += _batch_keys(batch)
                if items and items[-1][2] >= until:
                    return items
        finally:
            reader.close()
        raise AssertionError(f"log {log_id}: a reader did not reach the tail in time "
                             f"(at {ldlsn.to_string(items[-1][2]) if items else '-'} of "
                             f"{ldlsn.to_string(until)})")

    def _verify(self, cluster: ld.LocalCluster, tails: dict[tuple[int, int], list[Any]]
                ) -> dict[str, Any]:
        lost = duplicated = redelivered = divergent = dataloss = 0
        problems: list[str] = []
        with cluster.client(timeout=30.0) as client:
            for log_id in LOGS:
                until = client.get_tail_lsn(log_id)
                histories = [self._read_log(client, log_id, until, scd)
                             for scd in (True, False, True, False)]
                base = histories[0]
                for h in histories[1:]:
                    if h != base:
                        divergent += 1
                        problems.append(f"log {log_id}: readers diverge at "
                                        f"{_first_difference(base, h)}")
                data: dict[bytes, list[tuple[int, int]]] = {}
                for kind, lo, _hi, off, payload in base:
                    if kind == "R":
                        data.setdefault(payload, []).append((lo, off))
                    elif kind == GapType.DATALOSS.name:
                        dataloss += 1
                        problems.append(f"log {log_id}: DATALOSS "
                                        f"{ldlsn.to_string(lo)}..{ldlsn.to_string(_hi)}")
                for (lg, lsn, off), payload in self.ledger.acked.items():
                    if lg != log_id:
                        continue
                    where = data.get(payload, [])
                    if (lsn, off) not in where:
                        lost += 1
                        if lost <= 5:
                            problems.append(f"log {log_id}: acked {ldlsn.to_string(lsn)}"
                                            f"/{off} {payload!r} not read back")
                for payload, where in data.items():
                    if len(where) < 2:
                        continue
                    epochs = {ldlsn.epoch_of(x) for x, _ in where}
                    if len(epochs) == len(where) and payload.startswith(b"bw"):
                        # A BufferedWriter blob retried after its sequencer failed over:
                        # the new sequencer cannot know the first attempt landed (the
                        # writer's at-least-once across failovers).
                        redelivered += len(where) - 1
                        continue
                    duplicated += len(where) - 1
                    if duplicated <= 5:
                        problems.append(f"log {log_id}: {payload!r} stored at "
                                        f"{[ldlsn.to_string(x) for x, _ in where]}")
                for (lg, _k), seen in tails.items():
                    if lg != log_id:
                        continue
                    got = [_key(i) for i in seen]
                    got = [g for g in got if g[2] <= until]
                    if got != base[:len(got)]:
                        divergent += 1
                        problems.append(f"log {log_id}: a tailing reader saw another "
                                        f"history at {_first_difference(base, got)}")
        failover = self._failover_times()
        return {"faults": len(self.faults), "acked": len(self.ledger.acked),
                "failed_appends": self.ledger.failed, "lost": lost,
                "duplicated": duplicated, "redelivered": redelivered,
                "divergent": divergent, "dataloss": dataloss,
                "tail_regressions": len(self.tail_regressions),
                "failover_ms": failover, "problems": problems + self.tail_regressions}

    def _failover_times(self) -> list[float]:
        """For each SIGKILL of a log's sequencer node: ms from the kill until an append
        sent after it is acknowledged (the log is writable again)."""
        out = []
        for f in self.faults:
            if f.log is None or f.kind != "kill":
                continue
            start = self.t0 + f.at
            acks = [a for s, a in self.ledger.round_trips.get(f.log, []) if s >= start]
            if acks:
                out.append((min(acks) - start) * 1000.0)
        return sorted(out)


def _batch_keys(batch: Any) -> list[tuple]:
    """A ReaderBatch as ``_key`` tuples, records and gaps in LSN order (a gap comes
    before the records after it)."""
    buf = batch.payloads.tobytes()
    offs = batch.offsets.tolist()
    recs = [("R", lsn, lsn, bo, buf[offs[i]:offs[i + 1]]) for i, (lsn, bo) in enumerate(
        zip(batch.lsns.tolist(), batch.batch_offsets.tolist(), strict=True))]
    gaps = [(GapType(g.type).name, g.lo, g.hi, 0, b"") for g in batch.gaps]
    if not gaps:
        return recs
    return sorted(recs + gaps, key=lambda t: (t[1], t[0] == "R"))


def _key(item: Any) -> tuple:
    if isinstance(item, DataRecord):
        return ("R", item.lsn, item.lsn, item.batch_offset, bytes(item.payload))
    assert isinstance(item, GapRecord)
    return (GapType(item.type).name, item.lo, item.hi, 0, b"")


def _first_difference(a: list[tuple], b: list[tuple]) -> str:
    for k, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return f"item {k}: {x[:4]} vs {y[:4]}"
    return f"length {len(a)} vs {len(b)}"


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    return values[min(len(values) - 1, int(q * len(values)))]


def summary(report: dict[str, Any]) -> str:
    fo = report["failover_ms"]
    return (f"faults={report['faults']} acked={report['acked']} lost={report['lost']} "
            f"duplicated={report['duplicated']} redelivered={report['redelivered']} "
            f"divergent={report['divergent']} "
            f"dataloss={report['dataloss']} tail_regressions={report['tail_regressions']} "
            f"wipes={report['wipes']} "
            f"failover_ms p50/p99={percentile(fo, 0.5):.0f}/{percentile(fo, 0.99):.0f}")


def violations(report: dict[str, Any]) -> int:
    return sum(report[k] for k in ("lost", "duplicated", "divergent", "dataloss",
                                   "tail_regressions", "rebuilds_stuck")
               ) + len(report["stuck_threads"])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=600.0)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--replication", type=int, default=3)
    p.add_argument("--nodes", type=int, default=5)
    args = p.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(2**31)
    run = Run(args.seconds, seed, args.replication, args.nodes)
    report = run.run()
    print(summary(report))
    if violations(report):
        print(f"VIOLATIONS (replay with --seed {seed} --replication {args.replication} "
              f"--nodes {args.nodes} --seconds {args.seconds:g}):", file=sys.stderr)
        for line in report["problems"]:
            print("  " + line, file=sys.stderr)
        for f in run.faults:
            print(f"  fault {f}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
