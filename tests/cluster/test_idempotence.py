"""A BufferedWriter blob retried after its sequencer died is not stored twice: the new
sequencer learns from epoch recovery which blobs the old epoch holds.

Made deterministic: the cluster stops with one blob of a writer stored (on one node,
never released, as if its acknowledgement was lost in the crash); after the restart the
writer's retry of the same blob must get the recovered LSN back, not a new one."""

from __future__ import annotations

import numpy as np
import pytest

from ldcore import codec
from ldcore import lsn as ldlsn
from logdevice.errors import E
from logdevice.protocol import AppendFlag
from logdevice.protocol.flags import FLAG_BUFFERED_WRITER_BLOB, FLAG_CHECKSUM
from logdevice.storage.logsdb import LogsDB
from tests.cluster.conftest import RawClient, read_back

pytestmark = pytest.mark.cluster

LOG = 1
PRODUCER = (0x1234_5678_9ABC_DEF1, 7)


def test_retry_after_failover_gets_the_recovered_lsn(local_cluster):
    cluster = local_cluster(nodes=3, replication=2, logs=[LOG])
    with RawClient(cluster) as client:
        last = max(client.append(LOG, b"before %d" % i).lsn for i in range(5))
    cluster.stop_all()

    blob = codec.encode([b"payload %d" % i for i in range(10)], producer=PRODUCER)
    landed = last + 1
    with LogsDB(cluster.logsdb_path(0)) as db:
        db.write_records(LOG, np.array([landed], np.uint64), np.array([1], np.int64),
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
