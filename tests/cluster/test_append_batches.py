"""Single-record appends travel in APPEND_BATCH frames: what the sequencer does with a
batch (consecutive LSNs, a per-record outcome, refusals of the whole batch), and what
the client makes of it (order, linger, the byte limit, the in-flight limit, retries).
Every record acknowledged is then found on disk with its payload."""

from __future__ import annotations

import concurrent.futures

import numpy as np
import pytest

from ldcore.checksum import crc32c
from logdevice.errors import E, InvalidParamError, LogDeviceError
from logdevice.protocol import (
    AppendBatch,
    AppendedBatch,
    AppendedLogs,
    AppendFlag,
    AppendLogs,
    pack_payloads,
)
from tests.cluster.conftest import RawClient, check_acked_on_disk

pytestmark = pytest.mark.cluster


def _batch(request_id: int, log_id: int, payloads: list[bytes],
           checksums: list[int] | None = None, flags: int = 0) -> AppendBatch:
    offsets, buffer = pack_payloads(payloads)
    if checksums is not None:
        flags |= int(AppendFlag.CHECKSUM)
    return AppendBatch(request_id=request_id, log_id=log_id, flags=flags,
                       payload_offsets=offsets, payloads=buffer,
                       checksums=np.array(checksums or [], np.uint32))


@pytest.fixture(scope="module")
def cluster(module_cluster):
    return module_cluster(nodes=3, replication=2, logs=[1, 2, 3, 4])


def test_a_batch_gets_consecutive_lsns_and_an_outcome_per_record(cluster):
    payloads = [b"rec %d" % i for i in range(6)]
    sums = [crc32c(p) for p in payloads]
    sums[2] ^= 1  # damaged in transit
    with RawClient(cluster) as raw:
        raw.append(1, b"warm-up")
        owner = raw.owner(1)
        reply = raw.conn(owner).request(_batch(7, 1, payloads, sums), AppendedBatch)
    assert reply.request_id == 7 and reply.status == E.OK
    assert reply.statuses.tolist() == [E.OK, E.OK, E.CHECKSUM_MISMATCH, E.OK, E.OK, E.OK]
    assert "record 2" in reply.message and "checksum" in reply.message
    good = [i for i in range(6) if i != 2]
    lsns = reply.lsns[good].tolist()
    assert lsns == list(range(lsns[0], lsns[0] + 5)), lsns
    assert reply.lsns[2] == 0
    assert all(reply.timestamps[good] > 0)
    with cluster.client() as client:
        reader = client.create_reader()
        reader.start_reading(1, lsns[0], lsns[-1])
        got = [bytes(r.payload) for r in reader.read(10, timeout=10.0)
               if hasattr(r, "payload")]
    assert got == [payloads[i] for i in good]


def test_a_batch_the_node_cannot_take_is_refused_whole(cluster):
    with RawClient(cluster) as raw:
        owner = raw.owner(2)
        other = next(i for i in range(3) if i != owner)
        elsewhere = raw.conn(other).request(_batch(1, 2, [b"a", b"b"]), AppendedBatch)
        assert elsewhere.status == E.NOSEQUENCER and elsewhere.redirect_to == owner
        assert len(elsewhere.statuses) == 0
        blobs = raw.conn(owner).request(
            _batch(2, 2, [b"a"], flags=int(AppendFlag.BUFFERED_WRITER_BLOB)), AppendedBatch)
        assert blobs.status == E.INVALID_PARAM
        unknown = raw.conn(owner).request(_batch(3, 999, [b"a"]), AppendedBatch)
        assert unknown.status == E.NOTFOUND


def test_linger_and_the_byte_limit_shape_the_batches(cluster):
    # With a linger, 20 appends made at once wait for each other: one frame.  With a
    # byte limit of 250 and 100-byte payloads: two records per frame.
    payload = b"x" * 100
    with cluster.client(append_linger=2.0) as client:
        client.append(4, b"warm-up")
        before = client.stats["append_batches"]
        lsns = [f.result(30) for f in [client.append_async(4, payload) for _ in range(20)]]
        assert client.stats["append_batches"] - before == 1
        assert lsns == list(range(lsns[0], lsns[0] + 20))
    with cluster.client(append_linger=2.0, append_batch_bytes=250) as client:
        before = client.stats["append_batches"]
        lsns = [f.result(30) for f in [client.append_async(4, payload) for _ in range(20)]]
        assert client.stats["append_batches"] - before == 10
        assert lsns == sorted(lsns)
    # A linger longer than the appends' timeout: they leave in time, and are acknowledged.
    with cluster.client(timeout=4.0, append_linger=60.0) as client:
        assert client.append(4, payload) > lsns[-1]


def test_the_in_flight_limit_holds_records_back_in_order(local_cluster):
    # max_writes_in_flight 4: batches of at most 4 records, the rest wait in the client.
    cluster = local_cluster(nodes=2, replication=2, logs=[1], max_writes_in_flight=4)
    with cluster.client() as client:
        client.append(1, b"warm-up")
        before = dict(client.stats)
        futures = [client.append_async(1, b"p%d" % i) for i in range(40)]
        lsns = [f.result(30) for f in futures]
        stats = client.stats
    assert lsns == sorted(lsns) and len(set(lsns)) == 40
    assert stats["append_batches"] - before["append_batches"] >= 10
    assert stats["appends_waited"] > before["appends_waited"]


def test_closing_the_client_fails_the_appends_it_still_holds(cluster):
    client = cluster.client(timeout=60.0, append_linger=30.0)
    futures = [client.append_async(4, b"held %d" % i) for i in range(3)]
    client.close()
    for f in futures:
        with pytest.raises(LogDeviceError) as info:
            f.result(10)
        assert info.value.status == E.SHUTDOWN
    with pytest.raises(LogDeviceError):
        client.append_async(4, b"after close")


def test_a_blocking_append_from_a_future_callback_is_refused(cluster):
    outcome: concurrent.futures.Future[BaseException | int] = concurrent.futures.Future()

    def callback(_f: concurrent.futures.Future[int]) -> None:
        try:
            outcome.set_result(client.append(4, b"from the loop"))
        except BaseException as exc:
            outcome.set_result(exc)

    with cluster.client() as client:
        client.append_async(4, b"first").add_done_callback(callback)
        refused = outcome.result(30)
    assert isinstance(refused, InvalidParamError) and "append_async" in str(refused)


def test_a_window_that_fills_mid_batch_refuses_the_rest_before_any_lsn(local_cluster):
    # Two nodes, R=2, window 4: with one node paused, the first four records of a batch
    # take the window and wait; the other six are refused SEQNOBUFS without an LSN.
    cluster = local_cluster(nodes=2, replication=2, logs=[1], max_writes_in_flight=4,
                            store_timeout_ms=[50, 200])
    with RawClient(cluster) as raw:
        raw.append(1, b"warm-up")
        owner = raw.owner(1)
        conn = raw.conn(owner)
        cluster.pause(1 - owner)
        try:
            conn.send(_batch(5, 1, [b"w%d" % i for i in range(10)]))
        finally:
            cluster.resume(1 - owner)
        reply = conn.recv(20.0)
    assert isinstance(reply, AppendedBatch) and reply.request_id == 5
    statuses = reply.statuses.tolist()
    assert statuses == [E.OK] * 4 + [E.SEQNOBUFS] * 6, statuses
    assert reply.lsns[4:].tolist() == [0] * 6
    first = int(reply.lsns[0])
    assert reply.lsns[:4].tolist() == list(range(first, first + 4))


def test_appends_to_several_logs_in_one_turn_share_a_frame_per_node(cluster):
    logs = [1, 2, 3, 4]  # three nodes: one of them sequences two of these logs at least
    with cluster.client() as client:
        for log in logs:
            client.append(log, b"warm-up")
        frames = client.stats["append_logs_frames"]
        futures: dict[int, list[concurrent.futures.Future[int]]] = {log: [] for log in logs}
        for i in range(40):  # interleaved: every turn has appends of several logs
            for log in logs:
                futures[log].append(client.append_async(log, b"log %d rec %d" % (log, i)))
        lsns = {log: [f.result(30) for f in fs] for log, fs in futures.items()}
        assert client.stats["append_logs_frames"] > frames
        for log in logs:
            assert lsns[log] == sorted(lsns[log]) and len(set(lsns[log])) == 40
            reader = client.create_reader()
            reader.start_reading(log, lsns[log][0], lsns[log][-1])
            got = [bytes(r.payload) for r in reader.read(100, timeout=10.0)
                   if hasattr(r, "payload")]
            assert got == [b"log %d rec %d" % (log, i) for i in range(40)], log


def test_each_part_of_an_append_logs_frame_is_answered_by_its_own_request_id(cluster):
    with RawClient(cluster) as raw:
        raw.append(1, b"warm-up")
        owner = raw.owner(1)
        frame = AppendLogs.of([(1, 0, 5000, [b"a", b"b"], None),
                               (999, 0, 5000, [b"c"], None)])  # a log of no group
        frame.request_id = 50
        frame.request_ids = np.array([51, 52], np.uint64)
        conn = raw.conn(owner)
        conn.send(frame)
        answers: dict[int, AppendedBatch] = {}
        while len(answers) < 2:
            msg = conn.recv(timeout=10)
            for reply in msg.parts() if isinstance(msg, AppendedLogs) else [msg]:
                answers[reply.request_id] = reply
    assert set(answers) == {51, 52}  # nothing answers the frame's own id
    assert answers[51].status == E.OK and answers[51].statuses.tolist() == [E.OK, E.OK]
    first, second = answers[51].lsns.tolist()
    assert second == first + 1
    assert answers[52].status == E.NOTFOUND


def test_appends_from_one_thread_keep_their_order_and_travel_together(cluster):
    n = 2000
    with cluster.client() as client:
        client.append(3, b"warm-up")
        before = client.stats["append_batches"]
        futures = [client.append_async(3, b"ordered %d" % i) for i in range(n)]
        lsns = [f.result(30) for f in futures]
        batches = client.stats["append_batches"] - before
    assert lsns == sorted(lsns) and len(set(lsns)) == n
    assert batches < n / 4, f"{batches} frames for {n} appends: no batching"
    # (Last in the module: it stops the shared cluster to open its LogsDBs.)
    cluster.stop_all()
    acked = {(3, lsn): b"ordered %d" % i for i, lsn in enumerate(lsns)}
    assert check_acked_on_disk(cluster, acked, 2)["records"] == n
