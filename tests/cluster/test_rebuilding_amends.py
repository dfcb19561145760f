"""Rebuilding amends the surviving copies instead of writing them again.

With R=3, every record that named the lost node has a donor, one more surviving copy and
gets one new copy: the new copy is the only payload written.  The surviving copies keep
their payload as stored (their nodes' LogsDBs grow by the new copies only) and carry the
amended copyset through every read path: both read modes (single copy delivery decides
on copysets), the copyset index (``record_csi``), the checker, and the records on disk.
"""

from __future__ import annotations

import pytest

import logdevice as ld
from logdevice.protocol import GetPartitions, PartitionList
from logdevice.protocol.probe import NodeConnection
from tests.cluster.conftest import ldshell, scrape
from tests.cluster.test_rebuilding import (
    assert_complete,
    check_rebuilt_on_disk,
    check_report,
    copies_naming,
    non_sequencer,
)
from tests.cluster.workload import append_many

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]

LOGS = (1, 2)
PAD = 2000


def stored_bytes(cluster, node: int) -> int:
    """Bytes node ``node``'s LogsDB holds, from its partition directory."""
    with NodeConnection(cluster.node_address(node), cluster.config.cluster) as conn:
        reply = conn.request(GetPartitions(request_id=1), PartitionList)
    return int(reply.nbytes.sum())


def test_surviving_copies_are_amended_not_written_again(local_cluster):
    cluster = local_cluster(nodes=4, replication=3, logs=LOGS)
    with ld.Client(cluster.config_path, timeout=30.0) as client:
        acked = {}
        for log_id in LOGS:
            acked |= append_many(client, log_id, 600, b"a", pad=PAD)
        lost = non_sequencer(cluster)
        named = copies_naming(cluster, lost)
        survivors = [n for n in range(4) if n != lost]
        before = {n: stored_bytes(cluster, n) for n in survivors}
        cluster.stop(lost)
        p = ldshell(cluster, "mark-unrecoverable", str(lost))
        assert p.returncode == 0, p.stderr
        cluster.wait_rebuilt([lost], timeout=120)
        metrics = {n: scrape(cluster, n) for n in survivors}
        donated = sum(m["logdevice_rebuilding_records_total"] for m in metrics.values())
        taken = {n: m["logdevice_rebuilding_copies_taken_total"] for n, m in metrics.items()}
        amended = sum(m["logdevice_rebuilding_copies_amended_total"]
                      for m in metrics.values())
        # Each record that named the lost node: one donor, one new copy, one amendment.
        assert donated == named
        assert sum(taken.values()) == donated
        assert amended == donated
        # Only the new copies' payloads were written.
        for n in survivors:
            grown = stored_bytes(cluster, n) - before[n]
            assert grown <= taken[n] * (PAD + 200), (n, grown, taken[n])
        assert_complete(client, acked)  # single copy delivery, and all-send-all
        report = check_report(cluster)
        assert report["summary"]["records"] == len(acked)
        assert report["summary"]["rebuilding"] == 0
        assert report["summary"]["under_replicated"] == 0
        assert copies_naming(cluster, lost) == 0
    cluster.stop_all()
    assert check_rebuilt_on_disk(cluster, acked, 3, survivors) == 0
