"""Node failures during writes: a storage node killed mid-stream, a sequencer killed (its
logs move), a node paused and resumed, a node restarted.  After each, the nodes are
stopped and every acknowledged record is checked in the LogsDBs.
"""

from __future__ import annotations

import threading
import time

import pytest

from ldcore import lsn as ldlsn
from logdevice.placement import sequencer_for
from tests.cluster.conftest import RawClient, check_acked_on_disk
from tests.waiting import wait_until

pytestmark = pytest.mark.cluster


class Streamer:
    """A thread appending to ``logs`` through the real client, ``window`` in flight."""

    def __init__(self, cluster, logs, window: int = 64) -> None:
        self.client = cluster.client(timeout=30.0)
        self.logs = logs
        self.window = window
        self.acked: dict[tuple[int, int], bytes] = {}
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._lock = threading.Lock()

    def count(self) -> int:
        with self._lock:
            return len(self.acked)

    def start(self) -> Streamer:
        self._thread.start()
        return self

    def _run(self) -> None:
        i = 0
        pending = []
        while not self._stop.is_set():
            while len(pending) < self.window:
                log_id = self.logs[i % len(self.logs)]
                payload = b"rec %d " % i * 3
                pending.append((log_id, payload, self.client.append_async(log_id, payload)))
                i += 1
            log_id, payload, fut = pending.pop(0)
            self._collect(log_id, payload, fut)
        for log_id, payload, fut in pending:
            self._collect(log_id, payload, fut)

    def _collect(self, log_id, payload, fut) -> None:
        try:
            lsn = fut.result(60)
        except Exception as exc:
            self.errors.append(exc)
            return
        with self._lock:
            assert (log_id, lsn) not in self.acked
            self.acked[(log_id, lsn)] = payload

    def wait_for(self, n: int, timeout: float = 30.0, max_errors: int = 0) -> None:
        def enough() -> bool:
            assert len(self.errors) <= max_errors, self.errors[:3]
            return self.count() >= n
        wait_until(enough, timeout, 0.02, lambda: f"only {self.count()} of {n} appends acked")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(90)
        assert not self._thread.is_alive()
        self.client.close()


def _owners(cluster, logs, alive=None):
    weights = cluster.config.sequencer_weights()
    return {log_id: sequencer_for(log_id, weights, alive) for log_id in logs}


def test_storage_node_killed_mid_stream(local_cluster):
    cluster = local_cluster(nodes=5, replication=2, logs=range(1, 41))
    victim = 4
    logs = [log_id for log_id, owner in _owners(cluster, range(1, 41)).items()
            if owner != victim][:8]
    streamer = Streamer(cluster, logs).start()
    try:
        streamer.wait_for(300)
        cluster.kill(victim)
        before = streamer.count()
        streamer.wait_for(before + 1500)
    finally:
        streamer.stop()
    assert not streamer.errors, streamer.errors[:3]
    codes = cluster.stop_all()
    assert all(code == 0 for i, code in codes.items() if i != victim), codes
    report = check_acked_on_disk(cluster, streamer.acked, 2)
    assert report["records"] >= 1800


def test_sequencer_killed_logs_move(local_cluster):
    cluster = local_cluster(nodes=4, replication=2, logs=range(1, 21))
    owners = _owners(cluster, range(1, 21))
    victim = owners[1]
    logs = [log_id for log_id, owner in owners.items() if owner == victim][:3]
    streamer = Streamer(cluster, logs, window=16).start()
    try:
        streamer.wait_for(200)
        cluster.kill(victim)
        t0 = time.monotonic()
        before = streamer.count()
        # Appends in flight at the killed sequencer fail (PEER_CLOSED: the client
        # cannot know whether they were stored); at most one window of them.
        streamer.wait_for(before + 300, timeout=30.0, max_errors=16)
        failover = time.monotonic() - t0
    finally:
        streamer.stop()
    alive = [i for i in range(4) if i != victim]
    # Clients route around the dead node as soon as its connection breaks, which can be
    # before the failure detectors declare it dead: wait for the cluster's view.
    cluster.wait_alive(alive, timeout=15.0)
    new_owners = _owners(cluster, logs, alive)
    with RawClient(cluster) as raw:
        for log_id in logs:
            assert raw.owner(log_id) == new_owners[log_id] != victim
    # The moved logs got a new epoch.
    epochs = {ldlsn.epoch_of(lsn) for (_, lsn) in streamer.acked}
    assert max(epochs) >= 2
    cluster.stop_all()
    check_acked_on_disk(cluster, streamer.acked, 2)
    print(f"appends resumed {failover:.2f} s after the sequencer was killed")
    # Errors an in-flight append may get when its sequencer dies are allowed (the
    # client may not know whether it was stored), but not many.
    assert len(streamer.errors) <= 16


def test_pause_resume_and_restart(local_cluster):
    cluster = local_cluster(nodes=3, replication=2, logs=range(1, 11))
    cluster.pause(2)
    try:
        cluster.wait_alive([0, 1], timeout=15.0)  # declared dead after ~1.5 s of silence
    finally:
        cluster.resume(2)
    cluster.wait_alive([0, 1, 2], timeout=15.0)  # alive again with its next heartbeat
    with RawClient(cluster) as raw:
        acked = {(5, raw.append(5, b"before %d" % i).lsn): b"before %d" % i
                 for i in range(20)}
    cluster.kill(1)
    cluster.wait_alive([0, 2], timeout=15.0)
    cluster.start(1)
    with RawClient(cluster) as raw:
        assert raw.view(1).alive == [0, 1, 2]
        for i in range(20):
            acked[(5, raw.append(5, b"after %d" % i).lsn)] = b"after %d" % i
    cluster.stop_all()
    check_acked_on_disk(cluster, acked, 2)
