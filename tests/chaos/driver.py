"""The chaos driver: a real LocalCluster under load while a seeded scheduler injects
faults, then a check of the log store's promises against what the writers were told.

Load: a synchronous appender, an asynchronous appender (bounded in flight) and a
BufferedWriter per log, tailing readers started at the beginning, and a tail watcher
that asks a fresh client for every log's tail over and over. Faults (at most R - 1 nodes
faulty at a time): SIGKILL and restart, SIGSTOP and SIGCONT (one pause in five longer
than the clients' timeout), either of them on the sequencer node of a busy log, now and
then every node killed at once, and now and then one node's store wiped before it
restarts (a lost disk: the other nodes rebuild its records; the next wipe waits until
that rebuilding is over, so no record ever loses more than one copy this way). Now and
then a rolling restart: every node stopped cleanly and started again, one at a time,
each down a few seconds.

With ``partitions`` (needs root and ``ip netns``; see ``tests/chaos/netns.py``) every
node runs in a network namespace of its own on a ZooKeeper epoch store, the driver
(clients, checker, ZooKeeper) in a hub namespace joined to them by a bridge, and half
the faults cut links for a seeded while: a node isolated from everything; a node (often
a busy log's sequencer) cut from its peers but not from clients; a minority cut from the
majority; a node cut from ZooKeeper (one cut in five longer than the clients' timeout).

With ``never_return`` one node is killed and never restarted (``kill_forever``): the
cluster must notice and rebuild it by itself (self-initiated rebuilding, after
``self_rebuild_grace_period_ms``, set short for this), and everything acknowledged must
still be there afterwards; a node not rebuilt in time is a violation (not_rebuilt).

The metadata checker runs every ``check_every`` seconds during the run and once at the
end; what it reports while the run lost nothing are false alarms, counted in the
summary (not violations of the run).

At the end the cluster is healed and checked:

- every acknowledged record is read back exactly once, with its payload (lost,
  duplicated), also a BufferedWriter blob retried across any number of sequencer
  failovers (the writer's idempotence survives them);
- readers of each log (single copy delivery and all-send-all, started after the run,
  each reading twice) deliver the same sequence of records and gaps (divergent);
- no DATALOSS gap (dataloss);
- what each tailing reader delivered is a prefix of that sequence (divergent);
- no tail ever went back (tail_regressions);
- every rebuilding started by a wipe finishes once the cluster is healed (rebuilds_stuck).

Availability is measured, not judged: per fault kind, the longest stretch without an
acknowledged append to a log the fault hit (its sequencer's node was faulty, or every
log for kill_all and rolling restarts), from the fault until the first acknowledgement
after it healed; the summary gives the max and median over the faults of each kind.

One summary line, and exit status 1 with the run's seed and the fault schedule on any
violation.  ``python -m tests.chaos.driver --seconds 600 --seed 7`` (``make chaos``;
``--partitions``, ``--never-return``).
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import random
import shutil
import signal
import statistics
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import logdevice as ld
from ldcore import lsn as ldlsn
from logdevice.checker.driver import CheckOptions, run_check
from logdevice.local_zookeeper import LocalZooKeeper
from logdevice.placement import sequencer_for
from logdevice.records import DataRecord, GapRecord, GapType
from logdevice.shards import AuthoritativeStatus
from tests.chaos.netns import HUB, Network

LOGS = (1, 2, 3)
PREFIX_BYTES = 24
#: Faults that cut links (``partitions``).
PARTITIONS = ("isolate", "cut_peers", "split", "cut_zk")
#: Seconds a node stays down in a rolling restart (at most), and what a rolling restart
#: needs left of the run to be scheduled (per node: down, then back up under load).
ROLLING_DOWN = 3.0
#: The clients' timeout; now and then a pause or a cut lasts longer than it (seconds), so
#: a client that waited on a silent node instead of routing around it would show.
CLIENT_TIMEOUT = 15.0
LONG_FAULT = (CLIENT_TIMEOUT + 1.0, CLIENT_TIMEOUT + 5.0)
ROLLING_PER_NODE = 6.0
#: How long a node killed for good may take to be rebuilt (from its kill).
REBUILD_DEADLINE = 180.0
#: Details of the checker's alarms logged per check.
DETAILS_SHOWN = 10


@dataclass
class Fault:
    at: float  # seconds since the start of the run
    kind: str  # kill / pause / kill_all / wipe / rolling_restart / kill_forever / PARTITIONS
    nodes: tuple[int, ...]
    duration: float
    log: int | None = None  # the busy log whose sequencer it hit, if it was aimed
    hit: tuple[int, ...] = ()  # the logs whose sequencer's node it made faulty
    healed: float | None = None  # seconds since the start of the run, once over


@dataclass
class Ledger:
    """What the writers were told, and when (thread-safe)."""

    acked: dict[tuple[int, int, int], bytes] = field(default_factory=dict)
    # log -> (sent, acknowledged) of the synchronous writer's appends
    round_trips: dict[int, list[tuple[float, float]]] = field(default_factory=dict)
    # log -> when any writer was told an append succeeded (monotonic, in order per writer)
    ack_times: dict[int, list[float]] = field(default_factory=dict)
    failed: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def ack(self, log_id: int, lsn: int, offset: int, payload: bytes) -> None:
        with self.lock:
            self.acked[(log_id, lsn, offset)] = payload

    def acked_at(self, log_id: int, when: float) -> None:
        with self.lock:
            self.ack_times.setdefault(log_id, []).append(when)

    def round_trip(self, log_id: int, sent: float, acked: float) -> None:
        with self.lock:
            self.round_trips.setdefault(log_id, []).append((sent, acked))

    def fail(self) -> None:
        with self.lock:
            self.failed += 1


class Run:
    """One chaos run: build with the options, ``run()``, read ``report``.

    ``partitions`` adds the faults that cut links (needs root and ``ip netns``: the run
    then builds its namespaces and moves the calling thread into the hub until it ends),
    ``never_return`` one node killed for good, ``check_every`` the seconds between
    checker runs (0: only the one at the end).
    """

    def __init__(self, seconds: float, seed: int, replication: int = 3, nodes: int = 5,
                 root: Any = None, log: Callable[[str], None] = print, *,
                 partitions: bool = False, never_return: bool = False,
                 check_every: float = 20.0) -> None:
        self.seconds = seconds
        self.seed = seed
        self.r = replication
        self.n = nodes
        self.rng = random.Random(seed)
        self.root = root
        self.log = log
        self.partitions = partitions
        self.never_return = never_return
        self.check_every = check_every
        self.ledger = Ledger()
        self.faults: list[Fault] = []
        self.tail_regressions: list[str] = []
        self.stop = threading.Event()
        self.t0 = 0.0
        self.stopped = 0.0
        self.report: dict[str, Any] = {}
        self.net: Network | None = None
        self.zk_port = 0
        # Nodes killed for good -> when; when the event log first had them rebuilding,
        # and when they were rebuilt (AUTHORITATIVE_EMPTY).
        self.gone: dict[int, float] = {}
        self.rebuild_seen: dict[int, float] = {}
        self.rebuilt: dict[int, float] = {}
        self.watchers: list[threading.Thread] = []
        # With never_return: when in the run (seconds) the node is killed for good (early
        # enough for its rebuilding to overlap the faults that follow).
        self.forever_at = self.rng.uniform(0.1, 0.4) * seconds if never_return else None
        self.checks = 0
        self.check_errors: list[str] = []
        self.alarms: dict[str, int] = {}
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
                lsn = client.append(log_id, p, timeout=CLIENT_TIMEOUT)
            except ld.LogDeviceError:
                self.ledger.fail()
                continue
            self.ledger.ack(log_id, lsn, 0, p)
            now = time.monotonic()
            self.ledger.round_trip(log_id, sent, now)
            self.ledger.acked_at(log_id, now)

    def _async_writer(self, client: ld.Client, log_id: int) -> None:
        seq = 0
        while not self.stop.wait(self.pace * 20):
            batch = []
            for _ in range(32):
                p = self._payload(f"async{log_id}", seq)
                seq += 1
                batch.append((p, client.append_async(log_id, p, timeout=CLIENT_TIMEOUT)))
            for p, fut in batch:
                try:
                    lsn = fut.result(60)
                except ld.LogDeviceError:
                    self.ledger.fail()
                    continue
                self.ledger.ack(log_id, lsn, 0, p)
                self.ledger.acked_at(log_id, time.monotonic())

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
                self.ledger.acked_at(log_id, time.monotonic())
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
                            at = time.monotonic() - self.t0
                            self.tail_regressions.append(
                                f"[{at:6.1f}s] log {log_id}: tail {ldlsn.to_string(tail)} "
                                f"after {ldlsn.to_string(last[log_id])}")
                        last[log_id] = max(last.get(log_id, 0), tail)
            except ld.LogDeviceError:
                continue  # no answer in time: nothing to compare

    # -- faults -----------------------------------------------------------------------------
    def _cap(self) -> int:
        """How many nodes a fault may make faulty now: R - 1, less the nodes killed for
        good and not rebuilt yet."""
        return self.r - 1 - sum(i not in self.rebuilt for i in self.gone)

    def _choose(self, cluster: ld.LocalCluster) -> Fault | None:
        """The next fault (None: none fits now)."""
        rng = self.rng
        at = time.monotonic() - self.t0
        roll = rng.random()
        duration = rng.uniform(0.2, 2.0)
        up = [i for i in range(self.n) if i not in self.gone]
        weights = cluster.config.sequencer_weights()
        running = {i: weights[i] for i in cluster.running() if i in weights}
        sequencers = {log_id: sequencer_for(log_id, running) for log_id in LOGS}

        def hit(nodes: tuple[int, ...]) -> tuple[int, ...]:
            return tuple(x for x, s in sequencers.items() if s in nodes)

        if roll < 0.03:
            return Fault(at, "kill_all", tuple(up), duration, hit=LOGS)
        if roll < 0.07:
            if self.seconds - at < ROLLING_PER_NODE * len(up):
                return None
            return Fault(at, "rolling_restart", tuple(up), rng.uniform(1.0, ROLLING_DOWN),
                         hit=LOGS)
        unrebuilt = len(self.gone) > len(self.rebuilt)
        if roll < 0.12 and not unrebuilt and not cluster.shard_statuses():
            node = rng.choice(up)
            return Fault(at, "wipe", (node,), duration, hit=hit((node,)))
        cap = self._cap()
        if cap < 1:
            return None
        if (self.forever_at is not None and at >= self.forever_at and not self.gone
                and not cluster.shard_statuses()):
            node = rng.choice(up)
            return Fault(at, "kill_forever", (node,), 0.0, hit=hit((node,)))
        aimed = rng.random() < 0.5
        log_id = rng.choice(LOGS) if aimed else None
        candidates = list(up)
        rng.shuffle(candidates)
        target = sequencers[log_id] if log_id is not None else None
        if target is not None and target in candidates:
            candidates.remove(target)
            candidates.insert(0, target)
        if self.net is not None and rng.random() < 0.5:
            kind = rng.choice(PARTITIONS)
            # A minority: as many as may be faulty, fewer than half of the nodes up.
            size = max(1, min(cap, (len(up) - 1) // 2)) if kind == "split" else 1
            nodes = tuple(candidates[:size])
            return Fault(at, kind, nodes, self._hold(rng.uniform(0.5, 5.0), at), log_id,
                         hit(nodes))
        nodes = tuple(candidates[:rng.randint(1, cap)])
        if rng.random() < 0.5:
            return Fault(at, "kill", nodes, duration, log_id, hit(nodes))
        return Fault(at, "pause", nodes, self._hold(duration, at), log_id, hit(nodes))

    def _hold(self, short: float, at: float) -> float:
        """How long a pause or a cut lasts: ``short``, or one time in five (when the run
        has room for it) longer than the clients' timeout."""
        lo, hi = LONG_FAULT
        if self.seconds - at > hi + 10.0 and self.rng.random() < 0.2:
            return self.rng.uniform(lo, hi)
        return short

    def _inject(self, cluster: ld.LocalCluster) -> None:
        end = self.t0 + self.seconds
        while time.monotonic() < end - 2.0 and not self.stop.is_set():
            time.sleep(self.rng.uniform(0.1, 1.0))
            fault = self._choose(cluster)
            if fault is None:
                continue
            self.faults.append(fault)
            self.log(f"[{fault.at:6.1f}s] {fault.kind} {list(fault.nodes)} for "
                     f"{fault.duration:.1f}s"
                     + (f" (sequencer of log {fault.log})" if fault.log else ""))
            try:
                self._apply(cluster, fault)
            finally:
                fault.healed = time.monotonic() - self.t0

    def _apply(self, cluster: ld.LocalCluster, fault: Fault) -> None:
        if fault.kind in PARTITIONS:
            self._cut(fault)
            try:
                time.sleep(fault.duration)
            finally:
                assert self.net is not None
                self.net.heal()
            return
        if fault.kind == "pause":
            for i in fault.nodes:
                cluster.pause(i)
            time.sleep(fault.duration)
            for i in fault.nodes:
                cluster.resume(i)
            return
        if fault.kind == "rolling_restart":
            for i in fault.nodes:
                cluster.stop(i)
                time.sleep(fault.duration)
                cluster.start(i, timeout=60.0)
            return
        if fault.kind == "kill_forever":
            (i,) = fault.nodes
            cluster.kill(i)
            self.gone[i] = time.monotonic()
            watcher = threading.Thread(target=self._watch_rebuild, args=(cluster, i),
                                       daemon=True)
            watcher.start()
            self.watchers.append(watcher)
            return
        for i in fault.nodes:
            cluster.kill(i)
            if fault.kind == "wipe":
                shutil.rmtree(cluster.node_data_dir(i))
        time.sleep(fault.duration)
        for i in fault.nodes:
            cluster.start(i, timeout=60.0)

    def _cut(self, fault: Fault) -> None:
        """Cut the links of ``fault`` (a partition kind); ``net.heal()`` undoes it."""
        assert self.net is not None
        others = [i for i in range(self.n) if i not in fault.nodes]
        for i in fault.nodes:
            if fault.kind == "isolate":
                self.net.isolate(i)
            elif fault.kind == "cut_zk":
                self.net.cut_port(i, self.zk_port)
            else:  # cut_peers (one node) and split (a minority): from all the others
                self.net.cut_peers(i, others)

    def _watch_rebuild(self, cluster: ld.LocalCluster, i: int) -> None:
        """Note when the event log starts rebuilding node ``i`` (killed for good) and
        when it is rebuilt, up to ``REBUILD_DEADLINE`` after its kill."""
        deadline = self.gone[i] + REBUILD_DEADLINE
        while time.monotonic() < deadline:
            try:
                status = cluster.shard_statuses().get(i)
            except ld.LogDeviceError:
                status = None  # the epoch store did not answer: ask again
            now = time.monotonic()
            if status is not None and i not in self.rebuild_seen:
                self.rebuild_seen[i] = now
                self.log(f"[{now - self.t0:6.1f}s] N{i} (gone) is {status.name}")
            if status == AuthoritativeStatus.AUTHORITATIVE_EMPTY:
                self.rebuilt[i] = now
                self.log(f"[{now - self.t0:6.1f}s] N{i} (gone) rebuilt")
                return
            time.sleep(1.0)

    # -- the checker ------------------------------------------------------------------------
    def _checker(self, cluster: ld.LocalCluster) -> None:
        while self.check_every > 0 and not self.stop.wait(self.check_every):
            self._check(cluster)

    def _check(self, cluster: ld.LocalCluster) -> None:
        report = run_check(cluster.config, CheckOptions(logs=list(LOGS), timeout=5.0))
        self.checks += 1
        self.check_errors += report.errors
        for category, count in report.violations.items():
            self.alarms[category] = self.alarms.get(category, 0) + count
            if count:
                at = time.monotonic() - self.t0
                self.log(f"[{at:6.1f}s] checker: {count} {category}")
        # What each alarm is about (few: a check keeps its details bounded anyway).
        for d in report.details[:DETAILS_SHOWN]:
            self.log(f"    {d['category']}/{d['kind']} log {d['log_id']} "
                     f"{ldlsn.to_string(d['lsn_lo'])}..{ldlsn.to_string(d['lsn_hi'])} "
                     f"({d['records']} records) missing on {d['nodes_missing']} "
                     f"copysets {d['copysets']}")
        if report.details and (report.down_nodes or report.rechecked_nodes):
            self.log(f"    down {report.down_nodes}, re-checked "
                     f"{sorted(report.rechecked_nodes)}")

    # -- the run ----------------------------------------------------------------------------
    def _partitioned(self, stack: contextlib.ExitStack) -> dict[str, Any]:
        """Namespaces, the calling thread in the hub, ZooKeeper there: the LocalCluster
        options of a cluster whose links can be cut."""
        net = Network.create(self.n)
        stack.callback(net.close)
        net.enter_hub()
        self.net = net
        zk_root = None if self.root is None else Path(self.root) / "zookeeper"
        zk = stack.enter_context(LocalZooKeeper(root=zk_root, host=HUB))
        self.zk_port = zk.port
        # Each node is alone in its namespace: any port is free there.
        return dict(hosts=net.node_hosts, epoch_store=zk.uri("/chaos"),
                    security={"insecure": True}, ports=[(4440, 4441)] * self.n,
                    command_prefix=net.node_command)

    def run(self) -> dict[str, Any]:
        opts: dict[str, Any] = dict(nodes=self.n, replication=self.r, logs=LOGS,
                                    root=self.root, ready_timeout=60.0)
        if self.never_return:
            opts["self_rebuild_grace_period_ms"] = 3000
        with contextlib.ExitStack() as stack:
            if self.partitions:
                opts.update(self._partitioned(stack))
            cluster = stack.enter_context(ld.LocalCluster(**opts))
            self._run(cluster)
        return self.report

    def _run(self, cluster: ld.LocalCluster) -> None:
        clients = [cluster.client(timeout=CLIENT_TIMEOUT) for _ in range(3)]
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
        threads.append(threading.Thread(target=self._checker, args=(cluster,)))
        self.t0 = time.monotonic()
        for t in threads:
            t.daemon = True
            t.start()
        try:
            self._inject(cluster)
            time.sleep(max(0.0, self.t0 + self.seconds - time.monotonic()))
        finally:
            self.stop.set()
            self.stopped = time.monotonic()
            if self.net is not None:
                self.net.heal()
            for t in threads:
                t.join(120)
        stuck = [t.name for t in threads if t.is_alive()]
        for c in clients:
            c.close()
        for w in self.watchers:
            w.join(max(0.0, REBUILD_DEADLINE + 10 - (time.monotonic() - self.stopped)))
        problems: list[str] = []
        try:
            cluster.wait_rebuilt(set(range(self.n)) - set(self.gone), timeout=120)
        except TimeoutError as exc:
            problems.append(f"rebuilding did not finish: {exc}")
        rebuilds_stuck = len(problems)
        not_rebuilt = sorted(set(self.gone) - set(self.rebuilt))
        for i in not_rebuilt:
            seen = ("the event log never had it rebuilding" if i not in self.rebuild_seen
                    else "its rebuilding started but did not finish")
            problems.append(f"N{i}, killed for good, not rebuilt within "
                            f"{REBUILD_DEADLINE:g} s: {seen}")
        self._check(cluster)
        self.report = self._verify(cluster, tails)
        self.report["stuck_threads"] = stuck
        self.report["rebuilds_stuck"] = rebuilds_stuck
        self.report["not_rebuilt"] = len(not_rebuilt)
        self.report["problems"] += problems
        self.report["wipes"] = sum(f.kind == "wipe" for f in self.faults)
        self.report["rebuild_s"] = [round(self.rebuilt[i] - t, 1)
                                    for i, t in self.gone.items() if i in self.rebuilt]
        self.report["unavailable_ms"] = self._unavailability()
        self.report["checks"] = self.checks
        self.report["checker_alarms"] = sum(self.alarms.values())
        self.report["checker_by_category"] = dict(self.alarms)
        self.report["checker_errors"] = self.check_errors

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
        lost = duplicated = divergent = dataloss = 0
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
                "duplicated": duplicated,
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

    def _unavailability(self) -> dict[str, list[float]]:
        """Per fault kind, for each fault that hit a log: ms of the longest stretch
        without an acknowledged append to a log it hit, between the fault and the first
        acknowledgement after it healed (or the end of the load, if none came)."""
        acks = {log_id: sorted(t) for log_id, t in self.ledger.ack_times.items()}
        out: dict[str, list[float]] = {}
        for f in self.faults:
            if not f.hit or f.healed is None:
                continue
            start, healed = self.t0 + f.at, self.t0 + f.healed
            worst = 0.0
            for log_id in f.hit:
                times = acks.get(log_id, [])
                previous = start
                for t in times[bisect.bisect_right(times, start):]:
                    worst = max(worst, t - previous)
                    previous = t
                    if t >= healed:
                        break
                else:
                    worst = max(worst, self.stopped - previous)
            out.setdefault(f.kind, []).append(worst * 1000.0)
        return out


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
    unavailable = " ".join(f"{kind}={max(ms):.0f}/{statistics.median(ms):.0f}"
                           for kind, ms in sorted(report["unavailable_ms"].items()))
    # With nothing lost, whatever the checker reported was a false alarm.
    alarms = ("checker_false_alarms" if report["lost"] + report["dataloss"] == 0
              else "checker_alarms")
    return (f"faults={report['faults']} acked={report['acked']} lost={report['lost']} "
            f"duplicated={report['duplicated']} "
            f"divergent={report['divergent']} "
            f"dataloss={report['dataloss']} tail_regressions={report['tail_regressions']} "
            f"wipes={report['wipes']} not_rebuilt={report['not_rebuilt']} "
            f"{alarms}={report['checker_alarms']} (in {report['checks']} checks) "
            f"failover_ms p50/p99={percentile(fo, 0.5):.0f}/{percentile(fo, 0.99):.0f} "
            f"unavailable_ms max/p50: {unavailable or '-'}")


def violations(report: dict[str, Any]) -> int:
    return sum(report[k] for k in ("lost", "duplicated", "divergent", "dataloss",
                                   "tail_regressions", "rebuilds_stuck", "not_rebuilt")
               ) + len(report["stuck_threads"])


def _exit_on_sigterm(signum: int, frame: Any) -> None:
    sys.exit(128 + signum)  # unwinds: nodes stopped, namespaces deleted


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=600.0)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--replication", type=int, default=3)
    p.add_argument("--nodes", type=int, default=5)
    p.add_argument("--partitions", action="store_true",
                   help="nodes in network namespaces, and faults that cut links (root)")
    p.add_argument("--never-return", action="store_true",
                   help="one node killed for good: the cluster must rebuild it by itself")
    p.add_argument("--check-every", type=float, default=20.0, metavar="SECONDS",
                   help="seconds between checker runs during the run (0: only at the end)")
    args = p.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(2**31)
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    run = Run(args.seconds, seed, args.replication, args.nodes,
              partitions=args.partitions, never_return=args.never_return,
              check_every=args.check_every)
    report = run.run()
    print(summary(report))
    if report["checker_alarms"] or report["checker_errors"]:
        print(f"checker: {report['checker_by_category']}, errors {report['checker_errors']}")
    if violations(report):
        flags = (" --partitions" if args.partitions else "") + (
            " --never-return" if args.never_return else "")
        print(f"VIOLATIONS (replay with --seed {seed} --replication {args.replication} "
              f"--nodes {args.nodes} --seconds {args.seconds:g}{flags}):", file=sys.stderr)
        for line in report["problems"]:
            print("  " + line, file=sys.stderr)
        for f in run.faults:
            print(f"  fault {f}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
