"""Many logs in one round trip: ``Client.log_summaries`` (GET_LOG_SUMMARIES to each
storage node, GET_TAILS to each sequencer node) says what the per-log calls say, and
``Client.record_rows`` (GET_RECORD_ROWS) counts the rows of BufferedWriter blobs."""

from __future__ import annotations

import time

import pytest

from logdevice.errors import NotFoundError
from logdevice.records import LSN_OLDEST

pytestmark = pytest.mark.cluster

LOGS = list(range(1, 41))


@pytest.fixture(scope="module")
def cluster(module_cluster):
    return module_cluster(nodes=3, replication=2, logs=LOGS)


def test_summaries_of_many_logs_match_the_per_log_calls(cluster):
    client = cluster.client(timeout=20.0)
    t0 = int(time.time() * 1000)
    futs = [client.append_async(log_id, b"r%d" % k)
            for log_id in LOGS[:30] for k in range(log_id % 5 + 1)]
    last = {}
    for f, log_id in zip(futs, [x for x in LOGS[:30] for _ in range(x % 5 + 1)],
                         strict=True):
        last[log_id] = max(last.get(log_id, 0), f.result(30))
    client.trim(3, last[3] - 1)
    t_mid = int(time.time() * 1000)
    for log_id in LOGS[:30]:
        last[log_id] = client.append(log_id, b"late")  # after t_mid

    found = client.log_summaries(LOGS, find_times=[t0, t_mid, t_mid + 3_600_000])
    assert [s.log_id for s in found] == LOGS
    for s in found:
        head = client.get_head_attributes(s.log_id)
        tail = client.get_tail_lsn(s.log_id)
        assert s.trim_point == head.trim_point
        # right after the appends were acknowledged: the sequencers' tails count
        assert s.last_released == tail
        assert s.last_released == last.get(s.log_id, s.last_released)
        assert s.find_time == tuple(client.find_time(s.log_id, t)
                                    for t in (t0, t_mid, t_mid + 3_600_000))
        size = client.approximate_data_size(s.log_id, 0, 2**62)
        if s.trim_point:  # counted from the first record left, not the partition's start
            assert 0 < s.est_bytes <= size
        else:
            assert s.est_bytes == size
        if s.log_id in last:
            assert 0 < s.first_timestamp <= s.last_timestamp
            assert s.est_bytes > 0
        else:  # never written
            assert (s.last_released, s.est_bytes, s.first_timestamp) == (0, 0, 0)
            assert s.find_time == (LSN_OLDEST,) * 3
    # Storage side only: the release pointers, released LSNs no later than the tails.
    bare = client.log_summaries(LOGS, tails=False)
    for s, b in zip(found, bare, strict=True):
        assert b.last_released <= s.last_released
    with pytest.raises(NotFoundError):
        client.log_summaries([1, 10_000])
    client.close()


def test_summaries_cost_one_request_per_node_not_per_log(cluster):
    client = cluster.client(timeout=20.0)
    for log_id in LOGS:
        client.append(log_id, b"x")
    client.log_summaries(LOGS[:1])  # routing and metadata settle first
    before = client.stats
    client.log_summaries(LOGS)
    after = client.stats
    storage = after["storage_requests"] - before["storage_requests"]
    sequencer = after["sequencer_requests"] - before["sequencer_requests"]
    assert storage == len(cluster.config.storage_nodes())
    # one GET_TAILS per sequencer node, maybe a redirect round: never one per log
    assert 1 <= sequencer <= 2 * len(cluster.config.nodes) < len(LOGS)
    # the per-log calls, for comparison: one storage request per node and log
    for log_id in LOGS:
        client.get_head_attributes(log_id)
    assert client.stats["storage_requests"] - after["storage_requests"] == \
        len(LOGS) * len(cluster.config.storage_nodes())
    client.close()


def test_record_rows_counts_the_rows_of_blobs(cluster):
    client = cluster.client(timeout=20.0)
    log_id = LOGS[-1]
    w = client.create_buffered_writer(time_trigger=None, size_trigger=None,
                                      count_trigger=100)
    futs = [w.append(log_id, b"p%d" % i) for i in range(350)]
    w.flush()
    lsns = sorted({f.result(30) for f in futs})
    single = client.append(log_id, b"one")
    tail = client.get_tail_lsn(log_id)
    # (other tests of the module wrote to the log before the blobs)
    found = client.record_rows({log_id: (lsns[0], tail)})[log_id]
    assert found.next_lsn == tail + 1
    assert found.lsns.tolist() == [*lsns, single]
    assert found.rows.tolist() == [100, 100, 100, 50, 1]
    # A limit: each node stops once its rows pass it; complete below next_lsn.
    part = client.record_rows({log_id: (lsns[0], tail)}, max_rows=150)[log_id]
    assert part.lsns.tolist() == [x for x in lsns if x < part.next_lsn]
    assert part.rows.sum() > 150 or part.next_lsn == tail + 1
    client.close()
