"""A BufferedWriter's blobs for one log get LSNs in the order they were made unless one
of them failed and was retried: the first ``append_many`` of a fresh client to a fresh log
(the client connects and the sequencer activates while the blobs are sent), and the first
after the log's sequencer died, land in call order."""

from __future__ import annotations

import numpy as np
import pytest

import logdevice as ld
from logdevice.placement import sequencer_for

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]

RECORDS = 50_000


def _payloads(tag: int) -> list[bytes]:
    return [b"%d:%07d:" % (tag, i) + b"p" * 100 for i in range(RECORDS)]


def _append_in_order(client, log_id: int, tag: int) -> None:
    """One ``append_many`` of a new writer to ``log_id``: its records' LSNs never go back,
    and no blob was retried by the writer (else reordering would be allowed)."""
    writer = client.create_buffered_writer(size_trigger=500_000)
    lsns = np.asarray(writer.append_many(log_id, _payloads(tag)).result(60))
    writer.close()
    assert writer.stats["retries"] == 0 and writer.stats["failed_blobs"] == 0
    blobs = len(np.unique(lsns))
    assert blobs >= 8, blobs
    back = np.flatnonzero(np.diff(lsns.astype(np.int64)) < 0)
    assert len(back) == 0, (f"log {log_id}: {len(back)} places where a later record "
                            f"got a lower LSN among {blobs} blobs")


def test_first_append_many_to_fresh_logs_keeps_call_order(local_cluster):
    """A fresh client each time: it connects while the blobs are being sent."""
    cluster = local_cluster(nodes=3, replication=2, logs=range(1, 11))
    for log_id in range(1, 11):
        with ld.Client(cluster.config_path, timeout=20.0) as client:
            _append_in_order(client, log_id, log_id)


def test_first_append_many_after_a_failover_keeps_call_order(local_cluster):
    """The client learns of the failover from the blobs' own attempts (the dead node
    refuses connections, its successor activates and recovers)."""
    nodes = 4
    cluster = local_cluster(nodes=nodes, replication=2, logs=range(1, 5))
    weights = cluster.config.sequencer_weights()
    for log_id in range(1, 5):
        owner = sequencer_for(log_id, weights)
        with ld.Client(cluster.config_path, timeout=20.0) as client:
            _append_in_order(client, log_id, log_id)
            cluster.kill(owner)
            _append_in_order(client, log_id, 100 + log_id)
        cluster.start(owner)
        cluster.wait_alive(range(nodes))
