"""The write path end to end: concurrent writers from several processes, then the nodes
are stopped and every node's LogsDB is opened to check where the records are.

Cluster: 6 nodes in 3 racks, replication ``{"rack": 2, "node": 3}`` (3 copies spread over
at least 2 racks).
"""

from __future__ import annotations

import multiprocessing

import pytest

from logdevice.errors import E
from tests.cluster.conftest import RawClient, check_acked_on_disk, read_back

pytestmark = pytest.mark.cluster

REPLICATION = {"rack": 2, "node": 3}
LOCATIONS = [f"reg.dc.cl.row1.rack{i // 2}" for i in range(6)]
LOGS = list(range(1, 13))


def _writer(config_path: str, writer: int, n_sync: int, n_async: int) -> list[tuple]:
    """In a child process: sync appends round-robin over the logs, then a burst of async
    ones.  Returns (kind, log, lsn, payload) per acknowledged append."""
    from logdevice.client import Client

    out = []
    with Client(config_path, timeout=30.0) as client:
        for i in range(n_sync):
            log_id = LOGS[(i + writer) % len(LOGS)]
            payload = f"sync w{writer} #{i} ".encode() * (1 + i % 7)
            out.append(("sync", log_id, client.append(log_id, payload), payload))
        futs = []
        for i in range(n_async):
            log_id = LOGS[(i * 5 + writer) % len(LOGS)]
            payload = f"async w{writer} #{i}".encode()
            futs.append((log_id, payload, client.append_async(log_id, payload)))
        for log_id, payload, fut in futs:
            out.append(("async", log_id, fut.result(60), payload))
    return out


def test_concurrent_writers_all_records_on_their_copysets(module_cluster):
    cluster = module_cluster(nodes=6, replication=REPLICATION, logs=LOGS, locations=LOCATIONS)
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(3) as pool:
        results = pool.starmap(_writer, [(str(cluster.config_path), w, 150, 600)
                                         for w in range(3)])
    acked: dict[tuple[int, int], bytes] = {}
    for res in results:
        last: dict[int, int] = {}
        for kind, log_id, lsn, payload in res:
            assert (log_id, lsn) not in acked, f"LSN {lsn} of log {log_id} acked twice"
            acked[(log_id, lsn)] = payload
            if kind == "sync":  # a synchronous writer sees increasing LSNs per log
                assert lsn > last.get(log_id, 0)
                last[log_id] = lsn
    assert len(acked) == 3 * 750
    codes = cluster.stop_all()
    assert all(code == 0 for code in codes.values()), codes
    report = check_acked_on_disk(cluster, acked, REPLICATION)
    assert report["records"] == 3 * 750
    # Nothing was stored that was not acknowledged (no failures in this test).
    assert report["stored_records"] == len(acked)


def test_sticky_copysets_make_long_runs(local_cluster):
    cluster = local_cluster(nodes=4, replication=2, logs=[1, 2], sticky_copysets=True)
    with RawClient(cluster) as client:
        acked = {(1, client.append(1, b"sticky %d" % i).lsn): b"sticky %d" % i
                 for i in range(100)}
    cluster.stop_all()
    check_acked_on_disk(cluster, acked, 2)
    stored = read_back(cluster, [1])
    copysets = []
    for key in sorted(acked):
        final = max(stored[key], key=lambda c: c.wave)
        copysets.append(final.copyset)
    runs = 1 + sum(a != b for a, b in zip(copysets, copysets[1:], strict=False))
    assert runs <= 3, f"{runs} copysets for 100 records of a sticky log"


@pytest.mark.parametrize("durability", ["memory", "sync_write"])
def test_durability_setting_reaches_the_nodes(local_cluster, durability):
    """Each level stores and acknowledges (the level itself is tested against RocksDB's
    statistics in tests/unit/test_group_commit.py); records survive a clean restart."""
    cluster = local_cluster(nodes=3, replication=2, logs=[1],
                            append_store_durability=durability)
    assert cluster.config.settings.append_store_durability == durability
    acked = {}
    with RawClient(cluster) as client:
        for i in range(30):
            acked[(1, client.append(1, b"r%d" % i).lsn)] = b"r%d" % i
    cluster.stop_all()
    check_acked_on_disk(cluster, acked, 2)


def test_window_full_gives_seqnobufs(local_cluster):
    # Two nodes, R=2: every copyset needs both.  With the non-owner paused, stores hang,
    # the window (4) fills and further appends get SEQNOBUFS at once.
    cluster = local_cluster(nodes=2, replication=2, logs=[1], max_writes_in_flight=4,
                            store_timeout_ms=[50, 200])
    with RawClient(cluster) as client:
        owner = client.owner(1)
        assert client.append(1, b"warm-up").status == E.OK
        other = 1 - owner
        conn = client.conn(owner)
        cluster.pause(other)
        try:
            from logdevice.protocol import Append, Appended

            for i in range(10):
                conn.send(Append(request_id=100 + i, log_id=1, payload=b"p%d" % i))
            early = [conn.recv(5.0) for _ in range(6)]
            assert all(isinstance(m, Appended) for m in early)
            assert sorted(m.request_id for m in early) == list(range(104, 110))
            assert all(m.status == E.SEQNOBUFS for m in early)
        finally:
            cluster.resume(other)
        late = [conn.recv(20.0) for _ in range(4)]
        assert sorted(m.request_id for m in late) == [100, 101, 102, 103]
        assert all(m.status == E.OK for m in late), late
        lsns = [m.lsn for m in sorted(late, key=lambda m: m.request_id)]
        assert lsns == sorted(lsns)


def test_an_append_past_its_timeout_is_not_written_once_the_sequencer_activates(
        local_cluster):
    # The epoch store is locked, so the log's sequencer cannot activate: both APPENDs wait.
    # One says the client waits 200 ms.  Once the store is free, that one is answered
    # TIMEDOUT and not written (its client gave up and may retry: writing it would make a
    # duplicate); the one without a timeout is written.
    import sqlite3
    import time

    from logdevice.protocol import Append

    cluster = local_cluster(nodes=2, replication=1, logs=[1])
    store_path = cluster.config.epoch_store_uri.removeprefix("file:")
    with RawClient(cluster) as client:
        conn = client.conn(client.owner(1))
        lock = sqlite3.connect(store_path, isolation_level=None)
        lock.execute("BEGIN EXCLUSIVE")
        try:
            conn.send(Append(request_id=1, log_id=1, payload=b"late", timeout_ms=200))
            conn.send(Append(request_id=2, log_id=1, payload=b"patient"))
            time.sleep(0.6)  # the condition is the first APPEND's own timeout elapsing
        finally:
            lock.execute("ROLLBACK")
            lock.close()
        replies = {m.request_id: m for m in (conn.recv(20.0), conn.recv(20.0))}
    assert replies[1].status == E.TIMEDOUT, replies[1]
    assert replies[2].status == E.OK, replies[2]
    cluster.stop_all()
    stored = {bytes(c.payload) for copies in read_back(cluster, [1]).values() for c in copies}
    assert stored == {b"patient"}
