"""The client's CPU per single-record append, against redis-py's per XADD.

Every benchmark here is timed in CPU seconds of this process (``time.process_time``:
all its threads, the client's loop thread included; the servers run in processes of
their own), so the table compares what one append costs the client, not the round trip.

- ``append``: ``Client.append`` of 100 B records one after the other to a LocalCluster
  (1 node, R=1): each record travels alone in its frame, the case of a service that
  appends now and then;
- ``append_with_reader``: the same while a reader of this client tails the log with
  ``read_batch`` (CPU of the append and of the delivery);
- the reference: redis-py ``XADD`` of the same records one after the other to a
  redis-server (AOF everysec), also synchronous.

    PYTHONPATH=python:src .venv/bin/python -m pytest benchmarks/test_client_append.py
"""

from __future__ import annotations

import threading
import time

import pytest
from peers_systems import redis_server

from logdevice.client import Client
from logdevice.local_cluster import LocalCluster
from logdevice.records import LSN_MAX

N = 400  # appends per round
PAYLOAD = b"x" * 100
GROUP = "client CPU per single-record append"


def _info(benchmark, reference=False):
    benchmark.extra_info.update(items=N, unit="records", reference=reference)


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    root = tmp_path_factory.mktemp("client-append")
    with LocalCluster(nodes=1, replication=1, logs=range(1, 3), root=root,
                      log_level="WARNING") as cluster, \
            Client(cluster.config_path, timeout=30.0) as c:
        for _ in range(100):
            c.append(1, PAYLOAD)
        yield c


@pytest.fixture(scope="module")
def redis_client(tmp_path_factory):
    redis = pytest.importorskip("redis")
    with redis_server(tmp_path_factory.mktemp("redis")) as (port, _pid):
        r = redis.Redis(port=port)
        yield r
        r.close()


def _appends(client):
    def run():
        for _ in range(N):
            client.append(1, PAYLOAD)
    return run


@pytest.mark.benchmark(group=GROUP, timer=time.process_time)
def test_append(benchmark, client):
    _info(benchmark)
    benchmark.pedantic(_appends(client), rounds=5, warmup_rounds=1)


@pytest.mark.benchmark(group=GROUP, timer=time.process_time)
def test_append_with_reader(benchmark, client):
    _info(benchmark)
    stop = threading.Event()
    delivered = [0]

    def tail():
        with client.create_reader() as r:
            r.wait_only_when_no_data()
            r.start_reading(2, client.get_tail_lsn(2) + 1, LSN_MAX)
            while not stop.is_set():
                delivered[0] += len(r.read_batch(10_000, timeout=0.1))

    t = threading.Thread(target=tail, daemon=True)
    t.start()

    def run():
        for _ in range(N):
            client.append(2, PAYLOAD)

    try:
        benchmark.pedantic(run, rounds=5, warmup_rounds=1)
        deadline = time.monotonic() + 30
        while delivered[0] < 6 * N and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        stop.set()
        t.join(30)
    assert delivered[0] == 6 * N


@pytest.mark.benchmark(group=GROUP, timer=time.process_time)
def test_redis_xadd_reference(benchmark, redis_client):
    _info(benchmark, reference=True)

    def run():
        for _ in range(N):
            redis_client.xadd("s", {"p": PAYLOAD})

    benchmark.pedantic(run, rounds=5, warmup_rounds=1)
