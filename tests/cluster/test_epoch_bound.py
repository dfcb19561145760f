"""Storage nodes take only epochs the epoch store has issued (regression: a peer that
called itself a node sealed a log at epoch 2**64-1 and made it unwritable for good, across
restarts).  Security is off here, as on a dev cluster: nothing stops the forged HELLO,
the epoch bound alone must hold."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest

from ldcore import lsn as ldlsn
from logdevice.epochstore import open_epoch_store
from logdevice.errors import E
from logdevice.protocol import Seal, Sealed, Store, Stored, pack_payloads
from logdevice.protocol.probe import NodeConnection
from logdevice.storage.logsdb import LogsDB
from tests.waiting import wait_until

pytestmark = pytest.mark.cluster

LOG = 1


def _store(rid: int, epoch: int, lsn_epoch: int, esn: int = 1) -> Store:
    offsets, buf = pack_payloads([b"forged"])
    return Store(request_id=rid, log_id=LOG, epoch=epoch,
                 lsns=np.array([ldlsn.compose(lsn_epoch, esn)], np.uint64),
                 timestamps=np.full(1, 1_700_000_000_000, np.int64),
                 flags=np.zeros(1, np.uint32), waves=np.ones(1, np.uint32),
                 copysets=np.int16([[0, 1]]), payload_offsets=offsets, payloads=buf)


def test_forged_seal_and_store_of_unissued_epochs_are_refused(local_cluster):
    cluster = local_cluster(nodes=3, replication=2, logs=range(1, 3))
    with cluster.client() as client:
        before = client.append(LOG, b"before")
    with open_epoch_store(cluster.config.epoch_store_uri) as store:
        issued = store.get(LOG).epoch
    for i in range(3):
        with NodeConnection(cluster.node_address(i), "local", role="node",
                            node_index=0) as forged:
            sealed = forged.request(Seal(request_id=1, log_id=LOG, seal_epoch=2**64 - 1), Sealed)
            assert (sealed.status, sealed.request_id) == (E.INVALID_PARAM, 1)
            sealed = forged.request(Seal(request_id=2, log_id=LOG, seal_epoch=issued + 1), Sealed)
            assert sealed.status == E.INVALID_PARAM
            # A STORE above the issued epoch, or claiming an old one for records of a
            # future one, is refused as well.
            for rid, epoch, lsn_epoch in ((3, issued + 1, issued + 1), (4, issued, 2**32 - 1)):
                stored = forged.request(_store(rid, epoch, lsn_epoch), Stored)
                assert (stored.status, stored.request_id) == (E.INVALID_PARAM, rid)
    with cluster.client() as client:
        after = client.append(LOG, b"after")
        assert after > before
    # Nothing of it reached the disk, and the log stays writable across restarts.
    cluster.stop_all()
    for i in range(3):
        with LogsDB(cluster.logsdb_path(i)) as db:
            assert db.sealed_epoch(LOG) < issued
            assert db.tail(LOG) < ldlsn.compose(issued + 1, 0)
    for i in range(3):
        cluster.start(i)
    with cluster.client() as client:
        assert client.append(LOG, b"restarted") > after


def test_a_store_held_for_an_epoch_store_read_is_refused_once_its_epoch_is_sealed(
        local_cluster, zk_server, zk_uri):
    """Regression (a chaos run lost an acknowledged record): a STORE that passed the seal
    check on arrival but then waited behind another STORE of the log for a read of the
    epoch store was written after a SEAL of its epoch had been answered.  The recovery
    that sealed had read the node's records without it; the old sequencer, told STORED,
    acknowledged a record the recovery had cut off.  A held STORE is decided against the
    seal in force when it leaves the queue: PREEMPTED, and nothing written."""
    cluster = local_cluster(nodes=3, replication=2, logs=range(1, 3), epoch_store=zk_uri)
    with cluster.client() as client:
        client.append(LOG, b"epoch known everywhere")
    with open_epoch_store(cluster.config.epoch_store_uri) as store:
        issued = store.get(LOG).epoch
    late = ldlsn.compose(issued, 1000)
    with NodeConnection(cluster.node_address(0), "local", role="node",
                        node_index=1) as peer:
        # N0 must know the epoch before the store pauses, or the SEAL below waits for a
        # read of it.  The append only taught it to N0 if N0 was in its copyset (else a
        # read started by the RELEASE, which may not have landed yet): a STORE of the
        # epoch, answered, says N0 has read it.
        known = peer.request(_store(4, issued, issued, esn=999), Stored)
        assert known.status == E.OK, known
        os.kill(zk_server.pid, signal.SIGSTOP)  # the node's epoch store reads wait
        try:
            peer.send(_store(1, issued + 1, issued + 1))  # an epoch the node has not seen
            peer.send(_store(2, issued, issued, esn=1000))  # held behind it, not sealed yet
            sealed = peer.request(Seal(request_id=3, log_id=LOG, seal_epoch=issued,
                                       epoch=issued), Sealed)
            assert sealed.status == E.OK, sealed
        finally:
            os.kill(zk_server.pid, signal.SIGCONT)
        answers = {}
        while len(answers) < 2:
            reply = peer.recv(15)
            if isinstance(reply, Stored):
                answers[reply.request_id] = reply.status
    assert answers == {1: E.INVALID_PARAM, 2: E.PREEMPTED}
    cluster.stop_all()
    with LogsDB(cluster.logsdb_path(0)) as db:
        assert len(db.read_records(LOG, late, late)) == 0


def test_a_forged_release_past_the_issued_epochs_moves_nothing(local_cluster):
    """A RELEASE of LSN_MAX (or of an LSN in an epoch the store has not issued) was
    persisted as the release pointer: readers would wait for records that never come and
    tail queries would lie.  It is dropped; the log goes on."""
    from logdevice.protocol import GetHead, Head, Release

    cluster = local_cluster(nodes=3, replication=2, logs=range(1, 3))
    with cluster.client() as client:
        last = client.append(LOG, b"released")
    with open_epoch_store(cluster.config.epoch_store_uri) as store:
        issued = store.get(LOG).epoch
    forged = {0: (2**64 - 1, issued),  # an LSN past the releasing sequencer's epoch
              1: (ldlsn.compose(issued + 1, 5), issued),
              2: (2**64 - 1, 2**32 - 1)}  # an epoch nobody issued
    for i, (lsn, epoch) in forged.items():
        with NodeConnection(cluster.node_address(i), "local", role="node",
                            node_index=(i + 1) % 3) as peer:
            peer.send(Release(log_id=LOG, lsn=lsn, epoch=epoch))
            # A request after it on the same connection: the RELEASE was handled.
            assert peer.request(GetHead(request_id=9, log_id=LOG), Head).status == E.OK
    with cluster.client() as client:
        assert client.append(LOG, b"after") > last
    cluster.stop_all()  # persists the release pointers
    for i in range(3):
        with LogsDB(cluster.logsdb_path(i)) as db:
            assert db.last_released(LOG) < ldlsn.compose(issued + 1, 0), i


def test_a_heartbeat_from_the_future_is_ignored(local_cluster):
    """A generation is a node's start time: one far ahead would make every real heartbeat
    of that node look stale, and the node dead to its peers."""
    from logdevice.protocol import Heartbeat

    cluster = local_cluster(nodes=3, replication=2, logs=range(1, 3))
    with NodeConnection(cluster.node_address(0), "local", role="node",
                        node_index=1) as forged:
        forged.send(Heartbeat(node_index=1, generation=2**62, time_ms=0))
        wait_until(lambda: "ignoring a heartbeat of N1" in cluster.log_path(0).read_text(),
                   15, 0.05, "N0 took the heartbeat")
    cluster.wait_alive([0, 1, 2], timeout=15)
    with cluster.client() as client:
        assert client.append(LOG, b"everyone alive") > 0


def test_forged_rebuilt_copies_of_an_unissued_epoch_are_refused(local_cluster):
    from logdevice.protocol import RebuildStore, RebuildStored

    cluster = local_cluster(nodes=3, replication=2, logs=range(1, 3))
    with cluster.client() as client:
        client.append(LOG, b"real")
    with open_epoch_store(cluster.config.epoch_store_uri) as store:
        issued = store.get(LOG).epoch
    forged_copy = _store(1, issued, issued + 1)
    with NodeConnection(cluster.node_address(2), "local", role="node",
                        node_index=0) as peer:
        reply = peer.request(RebuildStore(
            request_id=11, log_id=LOG, set_version=1, lsns=forged_copy.lsns,
            timestamps=forged_copy.timestamps, flags=forged_copy.flags,
            waves=forged_copy.waves, copysets=forged_copy.copysets,
            payload_offsets=forged_copy.payload_offsets, payloads=forged_copy.payloads),
            RebuildStored)
        assert (reply.request_id, reply.status) == (11, E.INVALID_PARAM)
    cluster.stop(2)
    with LogsDB(cluster.logsdb_path(2)) as db:
        assert db.tail(LOG) < ldlsn.compose(issued + 1, 0)
