"""Tails never go back: right after a failover the new sequencer answers GET_TAIL only
once recovery settled the earlier epochs, not from the epoch store's older tail; and a
sequencer whose log another node took over answers no tail from its own older epoch,
although nothing told it of the takeover."""

from __future__ import annotations

import itertools

import pytest

from ldcore import lsn as ldlsn
from logdevice.errors import E
from logdevice.placement import sequencer_for
from logdevice.protocol import AppendFlag, GetTail, Tail
from tests.cluster.conftest import RawClient

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


def test_a_sequencer_taken_over_without_knowing_answers_no_older_tail(local_cluster):
    # N0 sequences but stores nothing, so no seal of the takeover's recovery reaches it
    # (as for a node cut off while the others sealed its epoch): until it stores again
    # it holds an active sequencer of an epoch that is over.
    logs = range(1, 21)
    cluster = local_cluster(nodes=4, replication=2, logs=logs,
                            roles=[["sequencer"]] + [["sequencer", "storage"]] * 3)
    ids = itertools.count(1)
    with RawClient(cluster) as raw:
        weights = {s.node_index: s.weight for s in raw.view().sequencers}
        log_id = next(i for i in logs if sequencer_for(i, weights) == 0)

        def tail_at(node: int) -> Tail:
            reply: Tail = raw.conn(node).request(GetTail(request_id=next(ids),
                                                         log_id=log_id), Tail)
            return reply

        for i in range(5):
            old = raw.append(log_id, b"before %d" % i, node=0).lsn
        assert tail_at(0).lsn == old
        # A client that cannot reach N0 has N1 take the log over (NO_REDIRECT).
        taken = raw.append_once(1, log_id, b"taken over", flags=int(AppendFlag.NO_REDIRECT))
        assert taken.status == E.OK and ldlsn.epoch_of(taken.lsn) > ldlsn.epoch_of(old)
        # N1 answers once its recovery sealed N0's epoch on the storage nodes.
        newer = tail_at(1)
        assert newer.status == E.OK and newer.lsn >= taken.lsn
        stale = tail_at(0)
        assert not (stale.status == E.OK and stale.lsn < newer.lsn), \
            f"N0 answered tail {ldlsn.to_string(stale.lsn)} after N1 answered " \
            f"{ldlsn.to_string(newer.lsn)}"
        # N0 found out it was preempted, and by whom.
        assert (stale.status, stale.redirect_to) == (E.NOSEQUENCER, 1)
    with cluster.client(timeout=20.0) as client:
        assert client.get_tail_lsn(log_id) >= newer.lsn
