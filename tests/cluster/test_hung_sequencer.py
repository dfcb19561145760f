"""A client keeps appending while the log's sequencer node is hung or cut off from it.

- hung: the sequencer node is stopped (SIGSTOP: its sockets stay open, as with a long
  pause of the process) for longer than the client's timeout.  The client gives the
  silent connection up within the cluster's dead timeout, learns the new sequencer from
  another node and its appends are acknowledged in a later epoch while the node is
  still stopped.
- partitioned: only this client's packets to the sequencer node are dropped (an
  iptables rule on the client's group id); the cluster holds the node alive, so the
  client asks another node to take the log over (``NO_REDIRECT``) and its appends go
  through there.
- timed out: with the keepalive off, appends to the stopped node end at their own
  deadline; none of them is sent again (it may have been stored), so the node, once
  resumed, stores each at most once.

Each time, every acknowledged record reads back exactly once and no single append is
stored twice.  A BufferedWriter blob is stored at most once per epoch; after the
partition, one may be in both epochs of the takeover: its first attempt reached the
cut-off node after the client gave it up (or was answered too late), and its retry went
to the node that took over, whose recovery only knows the blobs above the old epoch's
last known good record (at least once across a failover, as the README says).  While
the node is stopped, its epoch is sealed before it runs again, so no blob is stored twice.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import textwrap
import threading
import time
from typing import Any

import pytest

import logdevice as ld
from ldcore import lsn as ldlsn
from tests.cluster.conftest import RawClient
from tests.waiting import wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]

LOG = 1
CLIENT_TIMEOUT = 5.0
#: The sequencer stays stopped this long: longer than the client's timeout.
STOPPED_FOR = CLIENT_TIMEOUT + 3.0
#: Bound of every wait for appends to come back (a loaded machine).
WAIT = 30.0
#: The group id the partitioned client runs as (no group on the machine uses it).
WALLED_GID = 48_152


class Appender:
    """A thread appending single records and BufferedWriter payloads to ``LOG`` in a
    loop, one of each at a time; what was acknowledged (and when) and what failed."""

    def __init__(self, client: ld.Client) -> None:
        self.client = client
        self.writer = client.create_buffered_writer(time_trigger=0.01, retries=10,
                                                    backoff=(0.05, 0.5))
        self.acked: list[tuple[float, int, bytes]] = []  # (monotonic time, lsn, payload)
        self.blobs_acked: list[tuple[int, bytes]] = []
        self.failed: list[BaseException] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Appender:
        self._thread.start()
        return self

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            single, blob = b"single %d" % i, b"blob %d" % i
            i += 1
            pending = self.writer.append(LOG, blob)
            try:
                lsn = self.client.append(LOG, single)
            except ld.LogDeviceError as exc:  # may have been stored: not acknowledged
                self.failed.append(exc)
            else:
                with self._lock:
                    self.acked.append((time.monotonic(), lsn, single))
            try:
                blob_lsn = pending.result(CLIENT_TIMEOUT * 12)
            except ld.LogDeviceError as exc:
                self.failed.append(exc)
            else:
                with self._lock:
                    self.blobs_acked.append((blob_lsn, blob))

    def acked_since(self, t: float) -> list[tuple[float, int, bytes]]:
        with self._lock:
            return [a for a in self.acked if a[0] > t]

    def wait(self, what: str, condition: Any, timeout: float = WAIT) -> None:
        def met() -> bool:
            assert self._thread.is_alive(), "the appending thread died"
            return bool(condition())
        wait_until(met, timeout, 0.02, lambda: f"{what} (failures: {self.failed[-3:]})")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(CLIENT_TIMEOUT * 15)
        assert not self._thread.is_alive()
        self.writer.close(timeout=WAIT)


def longest_gap(times: list[float], start: float, end: float) -> float:
    """The longest stretch of [start, end] without an acknowledgement."""
    points = [start, *sorted(t for t in times if start < t < end), end]
    return max(b - a for a, b in zip(points, points[1:], strict=False))


def check_read_back(client: ld.Client, acked: list[tuple[int, bytes]],
                    blobs: list[tuple[int, bytes]],
                    takeover: tuple[int, int] | None = None) -> None:
    """Every acknowledged record and payload is in the log where it was acknowledged, and
    nothing is stored twice, except as the contract allows across a takeover
    (``takeover``: the cut-off sequencer's epoch and the one that took the log over):
    a BufferedWriter blob whose first attempt the old epoch stored after the client had
    given it up, and which the writer then retried on the new sequencer, may be in both
    (at least once across a failover); never twice in one epoch.  A single append is
    never stored twice."""
    until = max(client.get_tail_lsn(LOG), *(lsn for lsn, _ in [*acked, *blobs]))
    with client.create_reader() as r:
        r.start_reading(LOG, ld.LSN_OLDEST, until)
        records = [(i.lsn, bytes(i.payload)) for i in r if isinstance(i, ld.DataRecord)]
    where: dict[bytes, list[int]] = {}
    for lsn, payload in records:
        where.setdefault(payload, []).append(lsn)
    twice = {p: lsns for p, lsns in where.items() if len(lsns) > 1}
    allowed = {p: lsns for p, lsns in twice.items() if takeover is not None
               and p.startswith(b"blob ") and len(lsns) == 2
               and ldlsn.epoch_of(lsns[0]) == takeover[0]
               and takeover[0] < ldlsn.epoch_of(lsns[1]) <= takeover[1]}
    assert twice.keys() == allowed.keys(), ("payloads stored twice", sorted(
        (p, [ldlsn.to_string(lsn) for lsn in lsns]) for p, lsns in twice.items()))
    if allowed:
        print("blobs in both epochs of the takeover:", sorted(
            (p, [ldlsn.to_string(lsn) for lsn in lsns]) for p, lsns in allowed.items()))
    for lsn, payload in [*acked, *blobs]:
        assert lsn in where.get(payload, []), (payload, ldlsn.to_string(lsn))


def test_appends_go_on_while_the_sequencer_is_hung(local_cluster):
    cluster = local_cluster(nodes=5, replication=3, logs=range(1, 3))
    with RawClient(cluster) as raw:
        hung = raw.owner(LOG)
    with cluster.client(timeout=CLIENT_TIMEOUT) as client:
        appender = Appender(client).start()
        try:
            appender.wait("appends before the pause", lambda: len(appender.acked) >= 20)
            before = ldlsn.epoch_of(appender.acked[-1][1])
            cluster.pause(hung)
            paused_at = time.monotonic()
            try:
                appender.wait(f"an append acknowledged in a later epoch while N{hung} is "
                              "stopped", lambda: any(
                                  ldlsn.epoch_of(lsn) > before
                                  for _, lsn, _ in appender.acked_since(paused_at)))
                # Stopped longer than the client's timeout, appends keep coming back.
                appender.wait("the node stopped for longer than the client timeout",
                              lambda: time.monotonic() - paused_at >= STOPPED_FOR)
                resumed_at = time.monotonic()
                during = [a for a in appender.acked_since(paused_at)
                          if ldlsn.epoch_of(a[1]) > before]
                assert len(during) >= 10
            finally:
                cluster.resume(hung)
            gap = longest_gap([t for t, _, _ in appender.acked], paused_at, resumed_at)
            print(f"N{hung} stopped for {resumed_at - paused_at:.1f} s: longest stretch "
                  f"without an acknowledged append {gap:.2f} s (dead timeout 1.5 s), "
                  f"{len(during)} acknowledged meanwhile, {len(appender.failed)} failed")
            appender.wait("appends after the resume", lambda: len(
                appender.acked_since(time.monotonic() - 0.5)) > 0)
        finally:
            appender.stop()
        check_read_back(client, [(lsn, p) for _, lsn, p in appender.acked],
                        appender.blobs_acked)


#: Appends to the stopped node time out after this: a fraction of a millisecond past a
#: whole one, where the client loop's millisecond timers (uvloop) may fire just before
#: the deadline by the loop's own clock.
SHORT_TIMEOUT = 0.3004


def test_an_append_that_timed_out_is_not_sent_again(local_cluster):
    # The keepalive is off: the connection to the stopped node stays up, so each append
    # ends at its own deadline, not when the node is given up.
    cluster = local_cluster(nodes=3, replication=2, logs=range(1, 31))
    with RawClient(cluster) as raw:
        hung = raw.owner(LOG)
        logs = [log for log in range(1, 31) if raw.owner(log) == hung]
    assert len(logs) >= 3, logs
    with cluster.client(timeout=WAIT, keepalive_timeout=0) as client:
        for log in logs:  # sequencers active, the connection up
            client.append(log, b"first")
        cluster.pause(hung)
        try:
            # One APPEND_BATCH per log, each with its own deadline; a moment apart, so
            # that the deadlines fall at different points of their millisecond.
            late = {}
            for log in logs:
                late[log] = client.append_async(log, b"late", timeout=SHORT_TIMEOUT)
                time.sleep(0.0003)
            for fut in late.values():
                with pytest.raises(ld.TimedOutError):
                    fut.result(WAIT)
        finally:
            cluster.resume(hung)
        # What the node received while stopped, it stores once resumed and before these
        # (same connection, in order).
        markers = {log: client.append(log, b"marker") for log in logs}
        for log, marker in markers.items():
            with client.create_reader() as r:
                r.start_reading(log, ld.LSN_OLDEST, marker)
                payloads = [bytes(i.payload) for i in r if isinstance(i, ld.DataRecord)]
            assert payloads.count(b"late") <= 1, (log, payloads)
            assert payloads[-1] == b"marker", (log, payloads)


# -- the partition ---------------------------------------------------------------------------

#: The partitioned client: appends to LOG (a single record and a BufferedWriter payload at
#: a time) and prints one JSON line per outcome until its stdin closes.
PARTITIONED_CLIENT = textwrap.dedent("""
    import json, sys, threading, time
    import logdevice as ld

    client = ld.Client(sys.argv[1], timeout=float(sys.argv[2]))
    writer = client.create_buffered_writer(time_trigger=0.01, retries=10,
                                           backoff=(0.05, 0.5))
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    i = 0
    while not stop.is_set():
        single, blob = "single %d" % i, "blob %d" % i
        i += 1
        pending = writer.append(1, blob.encode())
        try:
            lsn = client.append(1, single.encode())
            out = {"t": time.monotonic(), "lsn": lsn, "payload": single}
        except ld.LogDeviceError as exc:
            out = {"t": time.monotonic(), "error": str(exc)}
        print(json.dumps(out), flush=True)
        try:
            out = {"blob": pending.result(120), "payload": blob}
        except ld.LogDeviceError as exc:
            out = {"t": time.monotonic(), "error": str(exc)}
        print(json.dumps(out), flush=True)
    writer.close(timeout=30)
    client.close()
    print(json.dumps({"done": True}), flush=True)
""")


def _in_walled_group() -> None:  # preexec_fn: runs in the child before exec
    os.setgroups([])
    os.setgid(WALLED_GID)


class WalledClient:
    """The partitioned client's process and what it reported."""

    def __init__(self, cluster: Any) -> None:
        self.stderr_path = cluster.root / "walled-client.err"
        with open(self.stderr_path, "w") as stderr:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", PARTITIONED_CLIENT, str(cluster.config_path),
                 str(CLIENT_TIMEOUT)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=stderr, text=True, preexec_fn=_in_walled_group)
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        self.acked: list[tuple[float, int, bytes]] = []
        self.blobs: list[tuple[int, bytes]] = []
        self.errors: list[str] = []
        self.done = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(json.loads(line))

    def _take(self, timeout: float) -> None:
        try:
            out = self.lines.get(timeout=timeout)
        except queue.Empty:
            return
        if "lsn" in out:
            self.acked.append((out["t"], out["lsn"], out["payload"].encode()))
        elif "blob" in out:
            self.blobs.append((out["blob"], out["payload"].encode()))
        elif "error" in out:
            self.errors.append(out["error"])
        elif out.get("done"):
            self.done = True

    def wait(self, what: str, condition: Any, timeout: float = WAIT) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            left = deadline - time.monotonic()
            assert left > 0, f"{what}: not within {timeout:g} s (errors: {self.errors[-3:]})"
            assert self.proc.poll() is None or not self.lines.empty(), \
                f"the client exited: {self.stderr_path.read_text()[-3000:]}"
            self._take(min(left, 0.5))

    def close(self) -> None:
        try:
            if self.proc.poll() is None and self.proc.stdin is not None:
                self.proc.stdin.close()
                self.wait("the client finishing", lambda: self.done, timeout=60)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait(30)
            self._reader.join(30)
            for pipe in (self.proc.stdin, self.proc.stdout):
                if pipe is not None:
                    pipe.close()


def iptables(action: str, rule: list[str]) -> None:
    subprocess.run(["iptables", action, *rule], check=True, capture_output=True)


def test_appends_go_through_another_node_when_the_sequencer_is_cut_off(local_cluster):
    cluster = local_cluster(nodes=5, replication=3, logs=range(1, 3))
    with RawClient(cluster) as raw:
        cut_off = raw.owner(LOG)
    host, port = cluster.node_address(cut_off)
    # Drop (not reject: a partition says nothing) this client's packets to the node.
    rule = ["OUTPUT", "-p", "tcp", "-d", host, "--dport", str(port), "-m", "owner",
            "--gid-owner", str(WALLED_GID), "-j", "DROP"]
    walled = WalledClient(cluster)
    try:
        walled.wait("appends before the partition", lambda: len(walled.acked) >= 20)
        before = ldlsn.epoch_of(walled.acked[-1][1])
        iptables("-I", rule)
        cut_at = time.monotonic()
        try:
            walled.wait(f"an append acknowledged by another node while N{cut_off} is "
                        "cut off", lambda: sum(ldlsn.epoch_of(lsn) > before and t > cut_at
                                               for t, lsn, _ in walled.acked) >= 20)
            taken_over = ldlsn.epoch_of(walled.acked[-1][1])
            # The cluster never held the node dead: the client went around it alone.
            views = cluster.views()
            assert views and all(cut_off in v.alive for v in views.values()), views
            # A client that does reach N(cut_off) is sent to the node that took the log
            # over: the log does not flap back (no new epoch for either client).
            with cluster.client(timeout=CLIENT_TIMEOUT) as other:
                others = []
                for i in range(20):
                    try:
                        others.append((other.append(LOG, b"other %d" % i), b"other %d" % i))
                    except ld.LogDeviceError as exc:  # one may hit the old epoch's end
                        walled.errors.append(f"other client: {exc}")
            assert len(others) >= 10
            count = len(walled.acked)
            walled.wait("more appends of the cut-off client",
                        lambda: len(walled.acked) >= count + 20)
            healed_at = time.monotonic()
            epochs = {ldlsn.epoch_of(lsn) for lsn, _ in others} | {
                ldlsn.epoch_of(lsn) for _, lsn, _ in walled.acked[count:]}
            assert epochs == {taken_over}, epochs
        finally:
            iptables("-D", rule)
        gap = longest_gap([t for t, _, _ in walled.acked], cut_at, healed_at)
        print(f"N{cut_off} cut off from the client: longest stretch without an "
              f"acknowledged append {gap:.2f} s (dead timeout 1.5 s), "
              f"{len(walled.errors)} failed")
    finally:
        walled.close()
    with cluster.client(timeout=CLIENT_TIMEOUT) as client:
        check_read_back(client, [(lsn, p) for _, lsn, p in walled.acked] + others,
                        walled.blobs, takeover=(before, taken_over))
