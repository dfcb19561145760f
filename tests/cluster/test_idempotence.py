"""A BufferedWriter blob retried after its sequencer died is not stored twice: a new
sequencer asks the storage nodes which idempotent writers' blobs the log holds before it
takes one, whichever epoch they were stored in.

Made deterministic: the cluster stops with one blob of a writer stored (as if its
acknowledgement was lost in the crash); after the restart the writer's retry of the same
blob, sent after zero or two more sequencer failovers, must get the first attempt's LSN
back, not a new one."""

from __future__ import annotations

import time

import numpy as np
import pytest

from ldcore import codec
from ldcore import lsn as ldlsn
from logdevice.epochstore import open_epoch_store
from logdevice.errors import E
from logdevice.protocol import AppendFlag
from logdevice.protocol.flags import FLAG_BUFFERED_WRITER_BLOB, FLAG_CHECKSUM
from logdevice.storage.logsdb import LogsDB
from tests.cluster.conftest import RawClient, read_back

pytestmark = pytest.mark.cluster

LOG = 1
PRODUCER = (0x1234_5678_9ABC_DEF1, 7)


def _retry(client: RawClient, blob: bytes):
    """The writer's retry of ``blob``, sent to the log's sequencer (redirects followed
    while the view settles)."""
    flags = int(AppendFlag.BUFFERED_WRITER_BLOB)
    reply = client.append_once(client.owner(LOG), LOG, blob, flags=flags)
    for _ in range(50):
        if reply.status == E.OK or reply.redirect_to is None:
            break
        reply = client.append_once(reply.redirect_to, LOG, blob, flags=flags)
    return reply


def _plant(cluster, blob: bytes, landed: int, nodes: list[int]) -> None:
    """``blob`` stored at ``landed`` on ``nodes`` (stopped) with a timestamp of now."""
    now_ms = int(time.time() * 1000)  # inside the idempotence window
    for node in nodes:
        with LogsDB(cluster.logsdb_path(node)) as db:
            db.write_records(LOG, np.array([landed], np.uint64),
                             np.array([now_ms], np.int64),
                             np.array([FLAG_BUFFERED_WRITER_BLOB | FLAG_CHECKSUM], np.uint32),
                             np.array([nodes], np.int16), blob,
                             np.array([0, len(blob)], np.uint64), sync=True)


def test_retry_after_two_more_failovers_gets_the_first_lsn(local_cluster):
    """The blob's acknowledgement was lost; two sequencers come and go before the retry
    lands (each recovers only the epoch before it): the third answers the first LSN."""
    nodes = 5
    cluster = local_cluster(nodes=nodes, replication=3, logs=[LOG])
    with RawClient(cluster) as client:
        last = max(client.append(LOG, b"before %d" % i).lsn for i in range(5))
    cluster.stop_all()
    blob = codec.encode([b"payload %d" % i for i in range(10)], producer=PRODUCER)
    landed = last + 1
    _plant(cluster, blob, landed, [0, 1, 2])  # fully stored: its ack was what got lost

    for i in range(nodes):
        cluster.start(i)
    alive = set(range(nodes))
    with RawClient(cluster) as client, \
            open_epoch_store(cluster.config.epoch_store_uri) as store:
        def append_and_recover(payload: bytes) -> int:
            """The epoch of a new record, once its sequencer's recovery settled the
            epochs before it (so the next one recovers only this one)."""
            epoch = ldlsn.epoch_of(client.append(LOG, payload).lsn)
            deadline = time.monotonic() + 30
            while store.get(LOG).last_clean_epoch < epoch - 1:
                assert time.monotonic() < deadline, f"epoch {epoch} never recovered"
                time.sleep(0.05)  # polls a condition; bounded
            return epoch

        epochs = [append_and_recover(b"after restart")]
        for _ in range(2):  # the sequencer dies, another one takes the log
            owner = client.owner(LOG)
            cluster.kill(owner)
            alive.discard(owner)
            cluster.wait_alive(alive)
            client.drop(owner)
            epochs.append(append_and_recover(b"after a failover"))
        assert epochs[0] < epochs[1] < epochs[2], epochs
        reply = _retry(client, blob)
        assert reply.status == E.OK
        assert reply.lsn == landed, (ldlsn.to_string(reply.lsn), ldlsn.to_string(landed))
    cluster.stop_all()
    stored = read_back(cluster, [LOG])
    assert [lsn for (_, lsn), copies in stored.items()
            if any(c.payload == blob for c in copies)] == [landed]


def test_retry_after_failover_gets_the_recovered_lsn(local_cluster):
    cluster = local_cluster(nodes=3, replication=2, logs=[LOG])
    with RawClient(cluster) as client:
        last = max(client.append(LOG, b"before %d" % i).lsn for i in range(5))
    cluster.stop_all()

    blob = codec.encode([b"payload %d" % i for i in range(10)], producer=PRODUCER)
    landed = last + 1
    with LogsDB(cluster.logsdb_path(0)) as db:
        now_ms = int(time.time() * 1000)  # a blob of the idempotence window
        db.write_records(LOG, np.array([landed], np.uint64), np.array([now_ms], np.int64),
                         np.array([FLAG_BUFFERED_WRITER_BLOB | FLAG_CHECKSUM], np.uint32),
                         np.array([[0, 1]], np.int16), blob,
                         np.array([0, len(blob)], np.uint64), sync=True)

    for i in range(3):
        cluster.start(i)
    flags = int(AppendFlag.BUFFERED_WRITER_BLOB)
    with RawClient(cluster) as client:
        node = client.owner(LOG)
        reply = client.append_once(node, LOG, blob, flags=flags)  # the writer's retry
        for _ in range(50):  # follow redirects while the view settles
            if reply.status == E.OK or reply.redirect_to is None:
                break
            reply = client.append_once(reply.redirect_to, LOG, blob, flags=flags)
        assert reply.status == E.OK
        assert reply.lsn == landed, (ldlsn.to_string(reply.lsn), ldlsn.to_string(landed))
        after = client.append(LOG, b"after").lsn
        assert ldlsn.epoch_of(after) > ldlsn.epoch_of(landed)
    cluster.stop_all()
    stored = read_back(cluster, [LOG])
    blobs = [lsn for (_, lsn), copies in stored.items()
             if any(c.payload == blob for c in copies)]
    assert blobs == [landed]  # once, where the first attempt landed (re-replicated)
    assert len(stored[(LOG, landed)]) >= 2
