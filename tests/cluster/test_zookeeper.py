"""Clusters on a real ZooKeeper epoch store: appends and reads; sequencer failover through
ZooKeeper; ZooKeeper stopped and restarted under a running writer (appends go on, a read
started meanwhile fails with a clear status, every acknowledged record reads back); the
metadata requests a node gets during an outage all answered within its store's timeout of
the outage, and a read started during one starting once ZooKeeper is back; a cluster on
distinct loopback addresses with no shared files; and the guards against nodes that do
not share one epoch store."""

from __future__ import annotations

import json
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import logdevice as ld
from ldcore import lsn as ldlsn
from logdevice.epochstore import AuthoritativeStatus, open_epoch_store
from logdevice.protocol import GetMetadata, MetadataReply
from logdevice.protocol.probe import NodeConnection
from tests.cluster.conftest import RawClient, check_acked_on_disk
from tests.cluster.test_failures import Streamer, _owners
from tests.waiting import wait_until

pytestmark = pytest.mark.cluster

#: Seconds a node's epoch store waits for ZooKeeper to come back.
STORE_TIMEOUT = 10.0
HOSTS = ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6"]


def read_back(client, log_id: int, until: int, timeout: float = 60.0):
    """Every data record of ``log_id`` up to ``until`` by LSN, and the gaps."""
    out: dict[int, bytes] = {}
    gaps = []
    deadline = time.monotonic() + timeout
    with client.create_reader() as r:
        r.start_reading(log_id, ld.LSN_OLDEST, until)
        while r.is_reading(log_id):
            assert time.monotonic() < deadline, f"log {log_id}: read did not finish"
            for item in r.read(1000, timeout=1.0):
                if isinstance(item, ld.DataRecord):
                    out[item.lsn] = bytes(item.payload)
                else:
                    gaps.append(item)
    assert not [g for g in gaps if g.type == ld.GapType.DATALOSS], gaps
    return out, gaps


def check_reads(cluster, acked: dict[tuple[int, int], bytes]) -> None:
    with cluster.client(timeout=30.0) as client:
        for log_id in sorted({log for log, _ in acked}):
            mine = {lsn: p for (log, lsn), p in acked.items() if log == log_id}
            got, gaps = read_back(client, log_id, max(mine))
            missing = [lsn for lsn in mine if got.get(lsn) != mine[lsn]]
            assert not missing, (f"log {log_id}: {len(missing)} acknowledged records not "
                                 f"read, from {min(missing):#x} to {max(missing):#x}; read "
                                 f"{len(got)}, gaps {gaps}")


def test_appends_and_reads_on_zookeeper(local_cluster, zk_uri):
    cluster = local_cluster(nodes=3, replication=2, logs=range(1, 11), epoch_store=zk_uri)
    acked = {}
    with cluster.client(timeout=30.0) as client:
        for i in range(50):
            log_id = 1 + i % 5
            acked[(log_id, client.append(log_id, b"zk %d" % i))] = b"zk %d" % i
    check_reads(cluster, acked)
    with open_epoch_store(zk_uri) as store:  # the epochs came from ZooKeeper
        assert set(store.logs()) == set(range(1, 6))
        assert all(store.get(log).epoch >= 1 for log in range(1, 6))


def test_sequencer_failover_through_zookeeper(local_cluster, zk_uri):
    cluster = local_cluster(nodes=4, replication=2, logs=range(1, 21), epoch_store=zk_uri)
    owners = _owners(cluster, range(1, 21))
    victim = owners[1]
    logs = [log for log, owner in owners.items() if owner == victim][:3]
    streamer = Streamer(cluster, logs, window=16).start()
    try:
        streamer.wait_for(200)
        cluster.kill(victim)
        before = streamer.count()
        streamer.wait_for(before + 300, timeout=60.0, max_errors=16)
    finally:
        streamer.stop()
    with open_epoch_store(zk_uri) as store:
        assert all(store.get(log).epoch >= 2 for log in logs)  # new epochs from ZooKeeper
    assert max(ldlsn.epoch_of(lsn) for _, lsn in streamer.acked) >= 2
    check_reads(cluster, streamer.acked)


def test_zookeeper_restart_under_a_running_writer(zookeeper_factory, local_cluster):
    zk = zookeeper_factory()
    cluster = local_cluster(nodes=3, replication=2, logs=range(1, 11),
                            epoch_store=zk.uri("/restart"))
    logs = [1, 2, 3]
    streamer = Streamer(cluster, logs, window=16).start()
    try:
        streamer.wait_for(200)
        zk.stop()
        # Sequencers hold their epochs: appends go on while ZooKeeper is away.
        before = streamer.count()
        streamer.wait_for(before + 300, timeout=60.0)
        # A read started now does not guess where the log's records are (a guess could
        # count a wiped node's "nothing here" toward DATALOSS): it fails, in bounded time,
        # naming the epoch store.
        with cluster.client(timeout=15.0) as client, client.create_reader() as r, \
                pytest.raises(ld.TimedOutError, match="cannot read its metadata.*ZooKeeper"):
            r.start_reading(1)
        zk.start()
        before = streamer.count()
        streamer.wait_for(before + 300, timeout=60.0)
    finally:
        streamer.stop()
    assert not streamer.errors, streamer.errors[:3]
    check_reads(cluster, streamer.acked)
    cluster.stop_all()
    check_acked_on_disk(cluster, streamer.acked, 2)


def test_metadata_requests_are_answered_in_bounded_time_while_zookeeper_is_down(
        zookeeper_factory, local_cluster):
    """Several metadata requests reach one node while ZooKeeper is down: each gets
    TIMEDOUT naming ZooKeeper within the store's timeout of the outage, not one store
    timeout after the other (a reader asking while another client's request waited
    there got no answer within its own timeout)."""
    zk = zookeeper_factory()
    cluster = local_cluster(nodes=1, replication=1, logs=range(1, 4),
                            epoch_store=zk.uri("/queued"))
    kinds = ["log_states", "shard_statuses", "logs_config", "log_states"]
    with NodeConnection(cluster.node_address(0), cluster.config.cluster,
                        timeout=60.0) as conn:
        assert conn.request(GetMetadata(request_id=1, kind="shard_statuses"),
                            MetadataReply).status == ld.E.OK  # the store is open
        zk.stop()
        down = time.monotonic()
        for i, kind in enumerate(kinds):
            conn.send(GetMetadata(request_id=10 + i, kind=kind,
                                  log_ids=np.array([1] if kind == "log_states" else [],
                                                   np.uint64)))
        replies = {}
        while len(replies) < len(kinds):
            reply = conn.recv(max(0.0, down + 60.0 - time.monotonic()))
            if isinstance(reply, MetadataReply):
                replies[reply.request_id] = (reply, time.monotonic() - down)
    for reply, after in replies.values():
        assert reply.status == ld.E.TIMEDOUT and "ZooKeeper" in reply.message, reply
        # The node's store gives ZooKeeper 10 s to come back; then it answers at once.
        assert after < STORE_TIMEOUT + 4.0, (reply, after)


def test_a_read_started_during_an_outage_waits_for_zookeeper(zookeeper_factory,
                                                            local_cluster):
    """ZooKeeper has been down so long that the nodes' stores answer at once that it is
    unreachable; a read started then, whose timeout outlasts the outage, starts when
    ZooKeeper comes back (3 s later) and delivers the record."""
    zk = zookeeper_factory()
    cluster = local_cluster(nodes=3, replication=2, logs=range(1, 4),
                            epoch_store=zk.uri("/back"))
    with cluster.client(timeout=60.0) as client:
        lsn = client.append(1, b"before the outage")
        zk.stop()
        for node in range(3):
            with NodeConnection(cluster.node_address(node), cluster.config.cluster,
                                timeout=30.0) as conn:
                def gave_up() -> bool:
                    reply = conn.request(GetMetadata(request_id=1, kind="shard_statuses"),
                                         MetadataReply)
                    return reply.status == ld.E.TIMEDOUT and "the store waits" in reply.message

                wait_until(gave_up, 60.0, message=f"N{node} still waits for ZooKeeper")
        restart = threading.Timer(3.0, zk.start)
        restart.start()
        try:
            with client.create_reader() as r:
                r.start_reading(1, lsn, lsn)
                got = [x for x in r.read(10, timeout=30.0) if isinstance(x, ld.DataRecord)]
        finally:
            restart.join()
    assert [(x.lsn, bytes(x.payload)) for x in got] == [(lsn, b"before the outage")]


def test_new_epochs_wait_for_zookeeper_then_proceed(zookeeper_factory, local_cluster):
    """A sequencer killed while ZooKeeper is down: its logs cannot get a new epoch until
    ZooKeeper is back; appends fail in bounded time meanwhile, then succeed."""
    zk = zookeeper_factory()
    cluster = local_cluster(nodes=3, replication=2, logs=range(1, 11),
                            epoch_store=zk.uri("/wait"))
    owners = _owners(cluster, range(1, 11))
    victim = owners[1]
    with RawClient(cluster) as raw:
        raw.append(1, b"before")
    zk.stop()
    cluster.kill(victim)
    alive = [i for i in range(3) if i != victim]
    cluster.wait_alive(alive, timeout=30.0)
    with cluster.client(timeout=3.0) as client:
        t0 = time.monotonic()
        with pytest.raises(ld.LogDeviceError):
            client.append(1, b"while zookeeper is down")
        assert time.monotonic() - t0 < 30
    new_owner = _owners(cluster, [1], alive)[1]
    assert "ZooKeeper unreachable" in cluster.log_path(new_owner).read_text()
    zk.start()
    with cluster.client(timeout=30.0) as client:
        lsn = client.append(1, b"after")
    assert ldlsn.epoch_of(lsn) >= 2


def test_cluster_on_distinct_loopback_addresses_no_shared_files(local_cluster, zk_uri):
    cluster = local_cluster(nodes=5, replication=2, logs=range(1, 21), epoch_store=zk_uri,
                            hosts=HOSTS)
    for i, host in enumerate(HOSTS):
        assert cluster.node_address(i)[0] == host
        assert cluster.node_data_dir(i).is_relative_to(cluster.node_root(i))
        assert cluster.node_config_path(i).exists()
    # Nobody listens on 127.0.0.1 at the nodes' ports: each binds its own address.
    for i in range(5):
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", cluster.node_address(i)[1]), timeout=5)
    owners = _owners(cluster, range(1, 21))
    victim = owners[2]
    logs = [log for log, owner in owners.items() if owner == victim][:2] + [
        log for log, owner in owners.items() if owner != victim][:2]
    streamer = Streamer(cluster, logs, window=16).start()
    try:
        streamer.wait_for(200)
        cluster.kill(victim)
        before = streamer.count()
        streamer.wait_for(before + 300, timeout=60.0, max_errors=16)
    finally:
        streamer.stop()
    check_reads(cluster, streamer.acked)
    # No node's directory holds an epoch store file, and none reads another's.
    for i in range(5):
        assert not list(cluster.node_root(i).rglob("*.sqlite"))
        cfg = json.loads(cluster.node_config_path(i).read_text())
        assert cfg["epoch_store"] == zk_uri and cfg["data_dir"] == "data"
    cluster.stop_all()
    check_acked_on_disk(cluster, streamer.acked, 2)


def test_node_refuses_to_start_on_another_epoch_store(local_cluster, tmp_path):
    """The new user's mistake: each node's directory with a copy of a config saying
    ``file:epochs.sqlite`` gives every node its own SQLite file.  The node whose store is
    not its peers' must refuse to start, saying why."""
    cluster = local_cluster(nodes=3, replication=2, logs=range(1, 5))
    cluster.kill(2)
    d = json.loads(cluster.config_path.read_text())
    d["epoch_store"] = "file:epochs.sqlite"  # relative: a different file per directory
    d["data_dir"] = str(cluster.node_data_dir(2).parent)
    own = tmp_path / "own"
    own.mkdir()
    (own / "cluster.json").write_text(json.dumps(d))
    proc = subprocess.run(
        [sys.executable, "-m", "logdevice.node.main", "--config", str(own / "cluster.json"),
         "--node-index", "2"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert "epoch store mismatch" in proc.stderr and "cannot start" in proc.stderr


def test_ld_dev_cluster_on_zookeeper_and_loopback_hosts(zk_uri, tmp_path):
    hosts = HOSTS[:3]
    proc = subprocess.Popen(
        [sys.executable, "-m", "logdevice.tools.dev_cluster", "--epoch-store", zk_uri,
         "--hosts", ",".join(hosts), "--logs", "1-4", "--root", str(tmp_path / "dev")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 120)
        assert ready, "ld-dev-cluster printed no config path in time"
        config_path = proc.stdout.readline().strip()
        assert config_path.endswith("cluster.json"), config_path
        cfg = json.loads(Path(config_path).read_text())
        assert [n["host"] for n in cfg["nodes"]] == hosts and cfg["epoch_store"] == zk_uri
        with ld.Client(config_path, timeout=30) as client:
            assert ldlsn.epoch_of(client.append(2, b"via ld-dev-cluster")) >= 1
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        proc.stdout.close()
        proc.stderr.close()


def test_a_reader_started_while_the_store_is_down_reports_no_dataloss(zookeeper_factory,
                                                                        local_cluster):
    """A wiped node (in the rebuilding set, its "nothing here" not to be counted) and
    ZooKeeper stopped: a reader cannot learn the log's metadata, so it does not start
    (before, it read from every node as if fully authoritative, where the wiped node's
    answers could make a DATALOSS gap of records that exist).  With ZooKeeper back the
    same read delivers every record."""
    from tests.cluster.test_reader_failures import (
        HOLD_OFF_REBUILDING,
        drain,
        expected,
        split,
        wipe_and_start,
        write,
    )

    zk = zookeeper_factory()
    cluster = local_cluster(nodes=4, replication=2, logs=range(1, 4),
                            epoch_store=zk.uri("/outage"),
                            rebuilding_poll_ms=HOLD_OFF_REBUILDING)
    with cluster.client(timeout=20.0) as client:
        lsns = write(client, 1, 1000)
        wiped = next(i for i in range(4) if i != _owners(cluster, [1])[1])
        cluster.stop(wiped)
        wipe_and_start(cluster, wiped)
        assert cluster.shard_statuses() == {wiped: AuthoritativeStatus.UNDERREPLICATION}
        zk.stop()
        with client.create_reader() as r:
            with pytest.raises(ld.TimedOutError, match="cannot read its metadata"):
                r.start_reading(1, lsns[0], lsns[-1])
            assert not r.is_reading(1)
        zk.start()
        for scd in (True, False):
            with client.create_reader() as r:
                if not scd:
                    r.force_no_single_copy_delivery()
                r.start_reading(1, lsns[0], lsns[-1])
                recs, gaps = split(drain(r, [], lsns[-1], timeout=60))
            assert recs == expected(lsns) and not gaps, gaps
