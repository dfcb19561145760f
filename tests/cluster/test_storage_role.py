"""The storage role over the wire: STORE statuses, RELEASE persistence, a node without
the storage role.  Raw STOREs are sent the way a sequencer does (HELLO role "node")."""

from __future__ import annotations

import numpy as np
import pytest

from ldcore import lsn as ldlsn
from ldcore.checksum import crc32c
from logdevice.epochstore import LogEpochState, open_epoch_store
from logdevice.errors import E
from logdevice.protocol import (
    Error,
    RecordFlag,
    Release,
    ReleaseBatch,
    Store,
    Stored,
    pack_payloads,
)
from logdevice.protocol.probe import NodeConnection
from logdevice.storage.logsdb import LogsDB
from tests.cluster.conftest import RawClient, read_back

pytestmark = pytest.mark.cluster

ROLES = [["sequencer", "storage"], ["sequencer", "storage"], ["sequencer"]]


def _store(rid: int, log_id: int, epoch: int, esns, payloads, checksums=None) -> Store:
    n = len(esns)
    offsets, buf = pack_payloads(payloads)
    flags = np.zeros(n, np.uint32)
    if checksums is not None:
        flags |= np.uint32(int(RecordFlag.CHECKSUM))
    return Store(request_id=rid, log_id=log_id, epoch=epoch,
                 lsns=np.array([ldlsn.compose(epoch, e) for e in esns], np.uint64),
                 timestamps=np.full(n, 1_700_000_000_000, np.int64), flags=flags,
                 waves=np.ones(n, np.uint32), copysets=np.tile(np.int16([0, 1]), (n, 1)),
                 payload_offsets=offsets, payloads=buf,
                 checksums=np.array(checksums or [], np.uint32))


def _node_conn(cluster, i: int) -> NodeConnection:
    return NodeConnection(cluster.node_address(i), cluster.config.cluster, role="node",
                          node_index=0)


def test_store_statuses_and_release(local_cluster):
    cluster = local_cluster(nodes=3, replication=2, logs=range(1, 6), roles=ROLES)
    # Seal log 4 at epoch 5 on N1 (as recovery would), with the node down.
    cluster.stop(1)
    with LogsDB(cluster.logsdb_path(1)) as db:
        db.seal(4, 5)
    cluster.start(1)
    # Nodes take STOREs only of epochs the epoch store has issued.
    with open_epoch_store(cluster.config.epoch_store_uri) as es:
        for log_id, epoch in ((3, 102), (4, 6)):
            es.update(log_id, lambda cur, log_id=log_id, epoch=epoch: LogEpochState(
                log_id, epoch=epoch))
    with _node_conn(cluster, 1) as conn:
        ok = conn.request(_store(1, 3, 100, [1, 2, 3], [b"a", b"b", b"c"]), Stored)
        assert ok.status == E.OK and ok.request_id == 1 and ok.node_index == 1
        assert not len(ok.statuses)
        unknown = conn.request(_store(2, 999, 100, [1], [b"x"]), Stored)
        assert unknown.status == E.NOTFOUND
        sealed = conn.request(_store(3, 4, 5, [1], [b"x"]), Stored)
        assert sealed.status == E.PREEMPTED
        assert conn.request(_store(4, 4, 6, [1], [b"x"]), Stored).status == E.OK
        mixed = conn.request(_store(5, 3, 101, [1, 2], [b"good", b"bad"],
                                    [crc32c(b"good"), crc32c(b"bad") ^ 1]), Stored)
        assert mixed.status == E.OK
        assert mixed.statuses.tolist() == [E.OK, E.CHECKSUM_MISMATCH]
        # Out of order, with an LSN twice (a later wave): sorted, the last copy wins.
        lsns = [ldlsn.compose(102, e) for e in (3, 1, 3)]
        st = _store(6, 3, 102, [3, 1, 3], [b"old", b"one", b"new"])
        st.lsns = np.array(lsns, np.uint64)
        assert conn.request(st, Stored).status == E.OK
        # Releases name the releasing sequencer's epoch; the epochs before it must be
        # clean in the epoch store (the node purges up to there first).
        with open_epoch_store(cluster.config.epoch_store_uri) as es:
            for log_id, epoch in ((3, 102), (4, 6)):
                es.update(log_id, lambda cur, log_id=log_id, epoch=epoch: LogEpochState(
                    log_id, epoch=epoch, last_clean_epoch=epoch - 1))
        conn.send(Release(log_id=3, lsn=ldlsn.compose(100, 3), epoch=102))
        conn.send(ReleaseBatch(log_ids=np.array([3, 4], np.uint64),
                               lsns=np.array([ldlsn.compose(100, 2), ldlsn.compose(6, 1)],
                                             np.uint64),
                               epochs=np.array([102, 6], np.uint64)))
    with _node_conn(cluster, 2) as conn:
        assert conn.request(_store(1, 3, 100, [1], [b"x"]), Stored).status == E.DISABLED
    with NodeConnection(cluster.node_address(1), cluster.config.cluster) as client:
        assert client.request(_store(1, 3, 100, [1], [b"x"]), Stored).status == E.ACCESS
        err = client.request(Release(log_id=3, lsn=1, epoch=1))
        assert isinstance(err, Error) and err.status == E.ACCESS
    cluster.stop_all()
    stored = read_back(cluster, [3, 4], nodes=[1])
    assert stored[(3, ldlsn.compose(100, 2))][0].payload == b"b"
    assert stored[(3, ldlsn.compose(101, 1))][0].payload == b"good"
    assert (3, ldlsn.compose(101, 2)) not in stored
    assert stored[(3, ldlsn.compose(102, 3))][0].payload == b"new"
    assert (4, ldlsn.compose(5, 1)) not in stored
    with LogsDB(cluster.logsdb_path(1)) as db:
        assert db.last_released(3) == ldlsn.compose(100, 3)  # a lower release is ignored
        assert db.last_released(4) == ldlsn.compose(6, 1)


def test_sequencer_only_node_never_stores(local_cluster):
    cluster = local_cluster(nodes=3, replication=2, logs=range(1, 6), roles=ROLES)
    acked = {}
    with RawClient(cluster) as client:
        for log_id in range(1, 6):
            for i in range(5):
                acked[(log_id, client.append(log_id, b"r%d" % i).lsn)] = b"r%d" % i
        owners = {client.owner(log_id) for log_id in range(1, 6)}
    assert owners <= {0, 1, 2}
    cluster.stop_all()
    stored = read_back(cluster, range(1, 6))
    assert set(stored) == set(acked)
    assert all(sorted(c.node for c in copies) == [0, 1] for copies in stored.values())
    assert not cluster.logsdb_path(2).exists()
