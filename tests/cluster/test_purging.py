"""One history after a failover: a node that missed epoch recovery purges its copies of
the unclean epoch before it serves them (every reader sees the same records and gaps).

The scenario of a sequencer paused mid-append, made deterministic: the sequencer node
holds copies of records it never got acknowledged (stored only on itself).  While it is
down a new sequencer recovers the epoch without it and ends it with a bridge record where
the stale copies stand.  When the node comes back every reader, single copy delivery or
all-send-all, started before or after, must see the same records and gaps, and none of
the stale records.
"""

from __future__ import annotations

import numpy as np
import pytest

from ldcore import lsn as ldlsn
from logdevice.placement import sequencer_for
from logdevice.protocol.flags import FLAG_CHECKSUM
from logdevice.records import DataRecord
from logdevice.storage.logsdb import LogsDB
from tests.cluster.conftest import read_back
from tests.cluster.test_recovery import read_all, same_items, summary

pytestmark = pytest.mark.cluster

LOG = 1
STALE = b"never acknowledged %d"


def plant_stale_copies(cluster, node: int, after_lsn: int, count: int) -> list[int]:
    """Write ``count`` sequencer copies right after ``after_lsn`` into ``node``'s store
    (stopped), as the node's own sequencer would have before it froze."""
    others = [i for i in range(cluster.n) if i != node]
    lsns = [after_lsn + 1 + k for k in range(count)]
    payloads = [STALE % k for k in range(count)]
    offsets = np.cumsum([0] + [len(p) for p in payloads]).astype(np.uint64)
    with LogsDB(cluster.logsdb_path(node)) as db:
        ts = db.read_records(LOG, after_lsn, after_lsn, max_records=1).timestamps
        db.write_records(LOG, np.array(lsns, np.uint64),
                         np.full(count, int(ts[0]) if len(ts) else 1, np.int64),
                         np.full(count, FLAG_CHECKSUM, np.uint32),
                         np.array([[node, others[0], others[1]]] * count, np.int16),
                         b"".join(payloads), offsets, sync=True)
    return lsns


def test_node_that_missed_recovery_purges_before_serving(local_cluster):
    cluster = local_cluster(nodes=5, replication=3, logs=[LOG])
    sequencer = sequencer_for(LOG, cluster.config.sequencer_weights())
    client = cluster.client(timeout=20.0)
    acked = {client.append(LOG, b"before %d" % i): b"before %d" % i for i in range(10)}
    last = max(acked)

    # The sequencer node goes away holding three copies nobody else has.
    cluster.stop(sequencer)
    stale = plant_stale_copies(cluster, sequencer, last, 3)

    # A new sequencer recovers the epoch without it: a bridge record at the first stale
    # LSN on the other nodes.
    for i in range(10):
        acked[client.append(LOG, b"after %d" % i)] = b"after %d" % i
    assert ldlsn.epoch_of(max(acked)) > ldlsn.epoch_of(last)
    early = client.create_reader()
    early.start_reading(LOG)

    # The old sequencer node comes back; appends keep coming, so it hears RELEASEs of
    # the new epoch.
    cluster.start(sequencer)
    cluster.wait_alive(range(5), timeout=20.0)
    for i in range(10):
        acked[client.append(LOG, b"later %d" % i)] = b"later %d" % i
    target = max(acked)

    histories = [read_all(early, target)]
    for scd in (True, False, True, False):
        reader_client = cluster.client(timeout=20.0)
        reader = reader_client.create_reader()
        if not scd:
            reader.force_no_single_copy_delivery()
        reader.start_reading(LOG, until_lsn=target)
        histories.append(read_all(reader, target))
        reader_client.close()
    for h in histories[1:]:
        same_items(histories[0], h)
    delivered = {i.lsn: bytes(i.payload) for i in histories[0] if isinstance(i, DataRecord)}
    assert not [s for s in stale if s in delivered], \
        [summary(i) for i in histories[0] if isinstance(i, DataRecord) and i.lsn in stale]
    for lsn, payload in acked.items():
        assert delivered.get(lsn) == payload
    client.close()

    # On disk: the node that came back kept none of its stale copies.
    cluster.stop_all()
    stored = read_back(cluster, [LOG])
    for lsn in stale:
        bad = [c for c in stored.get((LOG, lsn), []) if c.payload.startswith(b"never")]
        assert not bad, f"{ldlsn.to_string(lsn)} still holds a stale copy: {bad}"
