"""Appends keep succeeding while at least R storage nodes are up (R=3 on 5 nodes, two
down or restarting), and a burst far larger than the sequencer window is absorbed by
back-pressure instead of failing."""

from __future__ import annotations

import pytest

from logdevice.placement import sequencer_for

pytestmark = pytest.mark.cluster

LOG = 1


def test_appends_with_two_of_five_nodes_down(local_cluster):
    cluster = local_cluster(nodes=5, replication=3, logs=[LOG])
    client = cluster.client(timeout=30.0)
    seq = sequencer_for(LOG, cluster.config.sequencer_weights())
    others = [i for i in range(5) if i != seq]
    acked = {client.append(LOG, b"warm %d" % i) for i in range(20)}
    sent = 20
    # Rolling faults, never more than R - 1 = 2 nodes down at once: each step kills one
    # node and brings back the one killed two steps before.
    down: list[int] = []
    for step, victim in enumerate(others * 2):
        if len(down) == 2:
            back = down.pop(0)
            cluster.start(back)
        if victim in down:
            continue
        cluster.kill(victim)
        down.append(victim)
        futures = [client.append_async(LOG, b"step %d record %d" % (step, i))
                   for i in range(30)]
        acked |= {f.result(60) for f in futures}  # raises if any append failed
        acked |= {client.append(LOG, b"step %d sync %d" % (step, i)) for i in range(10)}
        sent += 40
    assert len(acked) == sent  # every append acknowledged, each with its own LSN
    client.close()


def test_burst_beyond_the_sequencer_window(local_cluster):
    cluster = local_cluster(nodes=3, replication=2, logs=[LOG], max_writes_in_flight=100)
    client = cluster.client(timeout=60.0)
    futures = [client.append_async(LOG, b"burst %d" % i) for i in range(20_000)]
    lsns = [f.result(120) for f in futures]
    assert len(set(lsns)) == 20_000
    client.close()
