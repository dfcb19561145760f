"""Tails never go back: right after a failover the new sequencer answers GET_TAIL only
once recovery settled the earlier epochs, not from the epoch store's older tail."""

from __future__ import annotations

import pytest

from logdevice.placement import sequencer_for

pytestmark = pytest.mark.cluster

LOG = 1


@pytest.mark.parametrize("failovers", [1, 2])
def test_tail_after_failover_is_not_older(local_cluster, failovers):
    cluster = local_cluster(nodes=4, replication=2, logs=[LOG])
    client = cluster.client(timeout=20.0)
    tail = 0
    for round_ in range(failovers):
        for i in range(20):
            tail = client.append(LOG, b"round %d record %d" % (round_, i))
        assert client.get_tail_lsn(LOG) == tail
        victim = sequencer_for(LOG, {i: 1.0 for i in cluster.running()})
        cluster.kill(victim)
        # A client that has never seen the log: its first GET_TAIL activates the next
        # sequencer, which then recovers the old epoch.
        fresh = cluster.client(timeout=20.0)
        seen = fresh.get_tail_lsn(LOG)
        assert seen >= tail, f"tail went back from {tail} to {seen}"
        assert fresh.is_log_empty(LOG) is False
        # Reading up to that tail works and delivers the last acknowledged record.
        reader = fresh.create_reader()
        reader.start_reading(LOG, until_lsn=seen)
        items = []
        for _ in range(100):
            items += reader.read(100, timeout=0.5)
            if items and getattr(items[-1], "lsn", getattr(items[-1], "hi", 0)) >= seen:
                break
        assert any(getattr(i, "lsn", None) == tail for i in items)
        fresh.close()
        cluster.start(victim)
        cluster.wait_alive(range(4), timeout=20.0)
    client.close()
