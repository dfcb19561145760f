"""ld.Client against real node processes: appends (sync, async, threads, processes),
bad input, tail/head/trim/find_time/data_size, failover and timeouts."""

from __future__ import annotations

import multiprocessing
import threading
import time

import pytest

import logdevice as ld
from logdevice.errors import (
    E,
    InvalidParamError,
    LogDeviceError,
    NotFoundError,
    TimedOutError,
    TooBigError,
)

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(120)]

MAX_PAYLOAD = 256 * 1024


@pytest.fixture(scope="module")
def cluster(module_cluster):
    return module_cluster(nodes=3, replication=2, logs=range(1, 41),
                          max_payload_size=MAX_PAYLOAD)


@pytest.fixture(scope="module")
def client(cluster):
    with ld.Client(cluster.config_path, timeout=10.0) as c:
        yield c


def now_ms() -> int:
    return time.time_ns() // 1_000_000


# ---------------------------------------------------------------------- appends


def test_sync_appends_increase(client):
    lsns = [client.append(1, b"record %d" % i) for i in range(100)]
    assert lsns == sorted(set(lsns))
    assert all(lsn > ld.LSN_INVALID for lsn in lsns)


def test_payload_kinds(client):
    a = client.append(2, "text is utf-8")
    b = client.append(2, bytearray(b"mutable"))
    c = client.append(2, memoryview(b"view"))
    d = client.append(2, b"")
    assert a < b < c < d


def test_append_async_futures_pipeline(client):
    t0 = time.monotonic()
    futs = [client.append_async(3, b"async %d" % i) for i in range(500)]
    lsns = [f.result(30) for f in futs]
    assert len(set(lsns)) == 500
    assert time.monotonic() - t0 < 20
    core = client.context.core
    conn = core.conns[core.routing.sequencer(3)]
    assert conn.connects == 1  # one connection carried them all


def test_threads_share_one_client(client):
    results: dict[int, list[int]] = {}

    def writer(k: int) -> None:
        results[k] = [client.append(4, b"t%d-%d" % (k, i)) for i in range(40)]

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(results) == [0, 1, 2, 3]
    for lsns in results.values():
        assert lsns == sorted(lsns)
    every = [x for lsns in results.values() for x in lsns]
    assert len(set(every)) == len(every) == 160


def _process_writer(config_path: str, log_id: int, n: int, tag: int) -> list[int]:
    with ld.Client(config_path, timeout=20.0) as c:
        return [c.append(log_id, b"p%d-%d" % (tag, i)) for i in range(n)]


def test_concurrent_writers_from_processes(cluster):
    ctx = multiprocessing.get_context("spawn")  # the parent has threads: no fork
    with ctx.Pool(3) as pool:
        parts = pool.starmap(_process_writer, [(str(cluster.config_path), 5, 60, k)
                                               for k in range(3)], chunksize=1)
    for lsns in parts:
        assert lsns == sorted(lsns) and len(set(lsns)) == len(lsns)
    every = [x for lsns in parts for x in lsns]
    assert len(set(every)) == len(every) == 180


# ---------------------------------------------------------------------- bad input


def test_unknown_log_is_notfound_before_sending(client):
    for bad in (0, 41, 10**9):
        with pytest.raises(NotFoundError) as ei:
            client.append(bad, b"x")
        assert ei.value.status == E.NOTFOUND
        with pytest.raises(NotFoundError):
            client.append_async(bad, b"x")
        with pytest.raises(NotFoundError):
            client.get_tail_lsn(bad)
    with pytest.raises(InvalidParamError):
        client.append("1", b"x")
    with pytest.raises(InvalidParamError):
        client.append(1, 12345)


def test_too_big(client):
    with pytest.raises(TooBigError) as ei:
        client.append(6, b"x" * (MAX_PAYLOAD + 1))
    assert ei.value.status == E.TOOBIG
    with pytest.raises(TooBigError):
        client.append_async(6, b"x" * (MAX_PAYLOAD + 1))
    assert client.append(6, b"x" * MAX_PAYLOAD) > 0  # the limit itself is fine


def test_bad_settings_and_closed_client(cluster):
    with pytest.raises(InvalidParamError):
        ld.Client(cluster.config_path, no_such_setting=1)
    with pytest.raises(InvalidParamError):
        ld.Client(cluster.config_path, timeout=0)
    c = ld.Client(cluster.config_path)
    assert c.append(7, b"x") > 0
    c.close()
    c.close()
    with pytest.raises(LogDeviceError) as ei:
        c.append(7, b"y")
    assert ei.value.status == E.SHUTDOWN


def test_wrong_cluster_name_is_refused(cluster, tmp_path):
    import json

    doc = json.loads(cluster.config_path.read_text())
    doc["cluster"] = "someone-else"
    path = tmp_path / "other.json"
    path.write_text(json.dumps(doc))
    with ld.Client(path, timeout=5.0) as c:
        t0 = time.monotonic()
        with pytest.raises(LogDeviceError) as ei:
            c.append(1, b"x")
        assert ei.value.status == E.ACCESS
        assert time.monotonic() - t0 < 2.0  # refused at once, not retried to the timeout


def test_client_dropped_without_close_stops_its_thread(cluster):
    import gc

    c = ld.Client(cluster.config_path)
    c.append(8, b"x")
    thread = c.context.loop.thread
    del c
    gc.collect()
    thread.join(5)
    assert not thread.is_alive()


# ---------------------------------------------------------------------- tail, head, trim, time


def test_tail_head_trim_find_time_round_trip(client):
    log = 10
    assert client.is_log_empty(log)
    assert client.get_tail_lsn(log) == ld.LSN_INVALID
    assert client.find_time(log, now_ms()) == ld.LSN_OLDEST

    t_start = now_ms()
    first = [client.append(log, b"a" * 100) for _ in range(20)]
    time.sleep(0.02)
    t_mid = now_ms()
    time.sleep(0.02)
    second = [client.append(log, b"b" * 100) for _ in range(20)]
    t_end = now_ms()

    tail = client.get_tail_attributes(log)
    assert tail.last_released_real_lsn == second[-1]
    assert t_mid <= tail.last_timestamp <= t_end + 1
    assert client.get_tail_lsn(log) == second[-1]
    assert not client.is_log_empty(log)

    assert client.find_time(log, t_start - 60_000) == first[0]
    assert client.find_time(log, t_mid) == second[0]
    assert client.find_time(log, t_end + 60_000) == second[-1] + 1

    assert client.data_size(log, t_start - 1000, t_end + 1000) == 40 * 100  # exact
    approx = client.approximate_data_size(log, t_start - 1000, t_end + 1000)
    assert 40 * 100 <= approx <= 40 * 100 * 3  # stored sizes, headers included
    assert client.data_size(log, t_end + 60_000, t_end + 120_000) == 0

    head = client.get_head_attributes(log)
    assert head.trim_point == ld.LSN_INVALID
    assert t_start <= head.trim_point_timestamp <= t_mid

    client.trim(log, first[-1])
    head = client.get_head_attributes(log)
    assert head.trim_point == first[-1]
    assert t_mid <= head.trim_point_timestamp <= t_end + 1
    assert not client.is_log_empty(log)

    client.trim(log, second[-1])
    assert client.get_head_attributes(log).trim_point == second[-1]
    assert client.is_log_empty(log)
    with pytest.raises(InvalidParamError):
        client.trim(log, -1)


# ---------------------------------------------------------------------- failures


def test_sequencer_node_killed_appends_move_on(local_cluster):
    cluster = local_cluster(nodes=3, replication=2, logs=range(1, 11))
    with ld.Client(cluster.config_path, timeout=15.0) as c:
        before = c.append(1, b"before")
        owner = c.context.core.routing.sequencer(1)
        futs = [c.append_async(1, b"inflight %d" % i) for i in range(50)]
        cluster.kill(owner)
        for f in futs:  # each either landed or says why (it may be stored: no retry)
            try:
                f.result(30)
            except LogDeviceError as exc:
                assert exc.status in (E.PEER_CLOSED, E.PREEMPTED, E.TIMEDOUT), exc
        after = c.append(1, b"after")
        assert after > before
        assert c.context.core.routing.sequencer(1) != owner
        assert after >> 32 > before >> 32  # a new sequencer: a new epoch


def test_every_node_paused_times_out_within_bound(local_cluster):
    cluster = local_cluster(nodes=3, replication=2, logs=range(1, 11))
    warm = ld.Client(cluster.config_path, timeout=1.5, connect_timeout=0.5)
    try:
        warm.append(1, b"connected first")
        for i in range(3):
            cluster.pause(i)
        for c in (warm, ld.Client(cluster.config_path, timeout=1.5, connect_timeout=0.5)):
            t0 = time.monotonic()
            with pytest.raises(TimedOutError) as ei:
                c.append(1, b"nobody listens")
            took = time.monotonic() - t0
            assert ei.value.status == E.TIMEDOUT
            assert 1.4 <= took <= 4.0, took
            t0 = time.monotonic()
            with pytest.raises(LogDeviceError) as ei:
                c.get_head_attributes(1)
            assert ei.value.status in (E.TIMEDOUT, E.CONNFAILED)
            assert time.monotonic() - t0 <= 4.0
            if c is not warm:
                c.close()
        for i in range(3):
            cluster.resume(i)
        cluster.wait_ready()
        assert warm.append(1, b"back", timeout=15.0) > 0
    finally:
        warm.close()


def test_cluster_away_fails_with_connfailed_not_timeout(local_cluster):
    """Every node down: calls fail with CONNFAILED after ``unreachable_timeout`` (here
    1 s) instead of waiting out their 60 s timeout; when the cluster is back they work."""
    cluster = local_cluster(nodes=3, replication=2, logs=[1])
    with ld.Client(cluster.config_path, timeout=60.0, unreachable_timeout=1.0) as client:
        client.append(1, b"before")
        cluster.stop_all()
        for call in (lambda: client.append(1, b"away"), lambda: client.get_tail_lsn(1),
                     lambda: client.find_time(1, 0)):
            with pytest.raises(ld.ConnectionFailedError) as ei:
                call()
            assert ei.value.status == ld.E.CONNFAILED
            assert "reachable" in str(ei.value) or "CONNFAILED" in str(ei.value)
        for i in range(3):
            cluster.start(i)
        assert client.append(1, b"back") > 0


def test_async_client(local_cluster):
    import asyncio

    cluster = local_cluster(nodes=3, replication=2, logs=[1])

    async def main() -> list[bytes]:
        async with ld.AsyncClient(cluster.config_path, timeout=20.0) as client:
            lsns = await asyncio.gather(*(client.append(1, b"a%d" % i) for i in range(50)))
            assert len(set(lsns)) == 50
            assert await client.get_tail_lsn(1) >= max(lsns)
            assert not await client.is_log_empty(1)
            with pytest.raises(ld.NotFoundError):
                await client.append(999, b"x")
            reader = client.create_reader()
            await reader.start_reading(1, until_lsn=max(lsns))
            got = [bytes(r.payload) async for r in reader if isinstance(r, ld.DataRecord)]
            await reader.aclose()
            return got

    assert sorted(asyncio.run(main())) == sorted(b"a%d" % i for i in range(50))


def test_async_client_calls_wait_in_no_thread(cluster):
    """AsyncClient awaits its calls on the client's loop: with the default executor of
    the caller's loop refusing work, many calls in flight at once all complete, and so
    does a reader's start (its metadata lookup) and a read."""
    import asyncio
    import concurrent.futures

    class NoThreads(concurrent.futures.ThreadPoolExecutor):
        used = 0

        def submit(self, *args, **kwargs):
            NoThreads.used += 1
            raise RuntimeError("an AsyncClient call asked for an executor thread")

    log_id = 35

    async def main() -> tuple[list, bytes]:
        client = ld.AsyncClient(cluster.config_path, timeout=20.0)
        asyncio.get_running_loop().set_default_executor(NoThreads())
        lsn = await client.append(log_id, b"first")
        calls = [client.get_tail_lsn(log_id) for _ in range(100)]
        calls += [client.find_time(log_id, 0) for _ in range(20)]
        calls += [client.get_head_attributes(log_id) for _ in range(20)]
        calls += [client.is_log_empty(log_id) for _ in range(3)]
        answers = await asyncio.wait_for(asyncio.gather(*calls), 60)
        reader = client.create_reader()
        await reader.start_reading(log_id, lsn, lsn)
        got = [item async for item in reader]
        await reader.aclose()
        client.client.close()  # AsyncClient.close hands the blocking close to a thread
        return answers, got[0].payload

    answers, payload = asyncio.run(main())
    assert NoThreads.used == 0
    assert len(answers) == 143 and payload == b"first"


@pytest.mark.parametrize("event_loop", ["asyncio", "uvloop"])
def test_either_event_loop_appends_batches_and_reads(cluster, event_loop):
    pytest.importorskip("uvloop")
    log_id = 30 if event_loop == "asyncio" else 31
    with ld.Client(cluster.config_path, timeout=10.0, event_loop=event_loop) as c:
        first = c.append(log_id, b"alone")
        futs = [c.append_async(log_id, b"burst %d" % i) for i in range(300)]
        lsns = [f.result(30) for f in futs]
        assert lsns == sorted(lsns) and lsns[0] > first  # in the order they were made
        assert c.stats["append_batches"] < 301  # the burst travelled in shared frames
        with c.create_reader() as r:
            r.start_reading(log_id, first, lsns[-1])
            got = [rec.payload for rec in r]
        assert got == [b"alone"] + [b"burst %d" % i for i in range(300)]
