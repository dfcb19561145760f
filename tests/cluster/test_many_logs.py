"""Appends spread over many logs at once: a sequencer sends a storage node the STOREs of
one loop turn, whatever their logs, in one STORE_LOGS frame (the node answers them in
STORED_LOGS frames), and each log keeps its records, its order and its own outcome."""

from __future__ import annotations

import time

import numpy as np
import pytest

from ldcore import lsn as ldlsn
from logdevice.epochstore import open_epoch_store
from logdevice.errors import E
from logdevice.protocol import (
    PeerFeature,
    Seal,
    Sealed,
    Store,
    Stored,
    StoredLogs,
    StoreLogs,
    pack_payloads,
)
from logdevice.protocol.probe import NodeConnection
from tests.cluster.conftest import check_acked_on_disk, read_back, scrape

pytestmark = pytest.mark.cluster

LOGS = list(range(1, 41))
ROUNDS = 5


def test_appends_to_many_logs_at_once_keep_each_logs_records_and_order(local_cluster):
    cluster = local_cluster(nodes=3, replication=2, logs=LOGS)
    acked: dict[tuple[int, int], bytes] = {}
    with cluster.client() as client:
        # Each log's sequencer is active and its route known first, as in the one-log
        # order test: the order of the very first appends to a cold log, in flight
        # together while it activates, is not what this test is about.
        for f in [client.append_async(log_id, b"warm-up") for log_id in LOGS]:
            f.result(60)
        # Every log gets a record per round, all in flight together.
        futures = [(log_id, r, client.append_async(log_id, b"log %d round %d" % (log_id, r)))
                   for r in range(ROUNDS) for log_id in LOGS]
        lsns: dict[int, list[int]] = {log_id: [] for log_id in LOGS}
        for log_id, r, fut in futures:
            lsn = fut.result(60)
            lsns[log_id].append(lsn)
            acked[(log_id, lsn)] = b"log %d round %d" % (log_id, r)
    for log_id, got in lsns.items():
        assert got == sorted(got) and len(set(got)) == ROUNDS, (log_id, got)
    # The STOREs (one per node, log and epoch per turn, at least R per log) of
    # different logs shared frames.
    stores = frames = 0.0
    for i in range(3):
        m = scrape(cluster, i)
        stores += m.get("logdevice_stores_sent_total", 0)
        frames += m.get("logdevice_store_frames_sent_total", 0)
    assert stores >= len(LOGS) * 2 and frames < stores, (stores, frames)
    assert cluster.stop_all() == {0: 0, 1: 0, 2: 0}
    check_acked_on_disk(cluster, acked, 2)
    # On disk each log holds its rounds in LSN order, and nothing of another log.
    stored = read_back(cluster, LOGS)
    for log_id in LOGS:
        keys = sorted(k for k in stored if k[0] == log_id)
        assert [stored[k][0].payload for k in keys] == \
            [b"warm-up"] + [b"log %d round %d" % (log_id, r) for r in range(ROUNDS)]


def _store(rid: int, log_id: int, epoch: int, seq: int, payload: bytes) -> Store:
    offsets, buf = pack_payloads([payload])
    return Store(request_id=rid, log_id=log_id, epoch=epoch,
                 lsns=np.array([ldlsn.compose(epoch, seq)], np.uint64),
                 timestamps=np.full(1, 1_700_000_000_000, np.int64),
                 flags=np.zeros(1, np.uint32), waves=np.ones(1, np.uint32),
                 copysets=np.int16([[0, 1]]), payload_offsets=offsets, payloads=buf)


def test_each_part_of_a_store_logs_frame_has_its_own_outcome(local_cluster):
    """One frame: a part for a log of the config at its issued epoch (stored), one for
    a log the config does not have (NOTFOUND), one for an epoch the epoch store never
    issued (INVALID_PARAM), one for an epoch sealed since (PREEMPTED, a recovery's seal
    as a peer node would send it)."""
    cluster = local_cluster(nodes=3, replication=2, logs=[1, 2])
    with cluster.client() as client:
        first = {log_id: client.append(log_id, b"activate") for log_id in (1, 2)}
    with open_epoch_store(cluster.config.epoch_store_uri) as store:
        epoch = {log_id: store.get(log_id).epoch for log_id in (1, 2)}
    assert all(ldlsn.epoch_of(first[k]) == epoch[k] for k in (1, 2))
    with NodeConnection(cluster.node_address(0), "local", role="node",
                        node_index=1) as peer:
        assert peer.hello_reply is not None
        assert peer.hello_reply.features & PeerFeature.STORE_LOGS
        sealed = peer.request(Seal(request_id=1, log_id=2, seal_epoch=epoch[2]), Sealed)
        assert sealed.status == E.OK
        parts = [_store(11, 1, epoch[1], 1000, b"kept"),
                 _store(12, 999, 1, 1, b"no such log"),
                 _store(13, 1, epoch[1] + 5, 1, b"never issued"),
                 _store(14, 2, epoch[2], 1000, b"sealed")]
        peer.send(StoreLogs.of(parts))
        outcomes: dict[int, Stored] = {}
        deadline = time.monotonic() + 30
        while len(outcomes) < len(parts):
            assert time.monotonic() < deadline, outcomes
            msg = peer.recv(timeout=max(0.1, deadline - time.monotonic()))
            for reply in msg.parts() if type(msg) is StoredLogs else [msg]:
                assert type(reply) is Stored
                outcomes[reply.request_id] = reply
    assert outcomes[11].status == E.OK and all(s == E.OK for s in outcomes[11].statuses)
    assert outcomes[12].status == E.NOTFOUND
    assert outcomes[13].status == E.INVALID_PARAM
    assert outcomes[14].status == E.PREEMPTED
    assert cluster.stop_all() == {0: 0, 1: 0, 2: 0}
    stored = read_back(cluster, [1, 2], nodes=[0])
    assert stored[(1, ldlsn.compose(epoch[1], 1000))][0].payload == b"kept"
    assert not any(c.payload in (b"never issued", b"sealed")
                   for copies in stored.values() for c in copies)


def test_metadata_of_thousands_of_logs_read_from_every_node_matches_the_store(local_cluster):
    """The epoch states of 2,500 logs go out as three requests at once, which different
    nodes answer; together they are exactly what the epoch store holds, logs never
    activated included (None)."""
    cluster = local_cluster(nodes=3, replication=2, logs=range(1, 2501))
    written = [1, 999, 1000, 1001, 2000, 2001, 2500]
    with cluster.client(timeout=30.0) as client:
        for log_id in written:
            client.append(log_id, b"x")
        states = client.context.metadata.log_states(range(1, 2501))
    with open_epoch_store(cluster.config.epoch_store_uri) as store:
        expected = store.get_many(list(range(1, 2501)))
    assert sorted(states) == list(range(1, 2501))
    assert {log for log, s in states.items() if s is not None} == set(written)
    for log_id in written:
        assert states[log_id] == expected[log_id], log_id
