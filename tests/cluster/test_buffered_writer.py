"""BufferedWriter against real node processes: blob LSNs and batch offsets, bulk appends,
triggers, memory limit (NOBUFS / back-pressure), ONE_AT_A_TIME order while the window is full,
close and shutdown."""

from __future__ import annotations

import contextlib
import threading
import time

import numpy as np
import pytest

import logdevice as ld
from logdevice.client import BatchFuture, PayloadFuture
from logdevice.errors import E, InvalidParamError, LogDeviceError, NoBufsError, TooBigError

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def cluster(module_cluster):
    # a small sequencer window, so the client has to hold appends back for real
    return module_cluster(nodes=3, replication=2, logs=range(1, 41), max_writes_in_flight=8,
                          max_payload_size=1024 * 1024)


@pytest.fixture(scope="module")
def client(cluster):
    with ld.Client(cluster.config_path, timeout=10.0) as c:
        yield c


def test_payload_futures_share_the_blob_lsn_with_distinct_offsets(client):
    with client.create_buffered_writer(count_trigger=10, time_trigger=None) as w:
        futs = [w.append(1, b"payload %d" % i) for i in range(30)]
        assert all(isinstance(f, PayloadFuture) for f in futs)
        lsns = [f.result(20) for f in futs]
    by_blob: dict[int, list[int]] = {}
    for f, lsn in zip(futs, lsns, strict=True):
        by_blob.setdefault(lsn, []).append(f.batch_offset)
    assert len(by_blob) == 3
    assert all(sorted(offs) == list(range(10)) for offs in by_blob.values())
    assert w.stats["blobs"] == 3 and w.stats["payloads"] == 30


def test_append_many_list_and_buffer_forms(client):
    w = client.create_buffered_writer(size_trigger=50_000, time_trigger=None)
    payloads = [b"%06d" % i + b"x" * 94 for i in range(2000)]  # 100 B each: 200 kB
    f1 = w.append_many(2, payloads)
    buf = b"".join(payloads)
    offsets = np.arange(0, len(buf) + 1, 100, dtype=np.uint64)
    f2 = w.append_many(2, (buf, offsets))
    assert isinstance(f1, BatchFuture)
    w.flush()
    a, b = f1.result(30), f2.result(30)
    assert a.dtype == np.uint64 and len(a) == len(b) == 2000
    assert len(set(a.tolist()) | set(b.tolist())) >= 8  # 400 kB in 50 kB blobs
    # payloads of one blob have distinct offsets 0..k-1
    for lsns, offs in ((a, f1.batch_offsets), (b, f2.batch_offsets)):
        for lsn in set(lsns.tolist()):
            o = np.sort(offs[lsns == lsn])
            assert o[0] >= 0 and np.all(np.diff(o.astype(np.int64)) == 1)
    w.close()


def test_time_trigger_sends_without_flush(client):
    with client.create_buffered_writer(size_trigger=None, time_trigger=0.05) as w:
        t0 = time.monotonic()
        f = w.append(3, b"soon")
        assert f.result(10) > 0
        assert time.monotonic() - t0 < 5
        g = w.append(3, b"again")  # the timer re-arms for later batches
        assert g.result(10) > f.result()


def test_nobufs_without_blocking_then_room_again(client):
    w = client.create_buffered_writer(size_trigger=None, time_trigger=None,
                                      memory_limit_bytes=1000, block=False)
    futs = [w.append(4, b"m" * 100) for _ in range(10)]
    with pytest.raises(NoBufsError) as ei:
        w.append(4, b"m" * 100)
    assert ei.value.status == E.NOBUFS
    assert w.flush(wait=True, timeout=20)
    assert len({f.result(0) for f in futs}) == 1
    again = w.append(4, b"m" * 100)
    w.flush()
    assert again.result(20) > 0
    w.close()


def test_blocking_memory_limit_applies_back_pressure(client):
    w = client.create_buffered_writer(size_trigger=4000, time_trigger=None,
                                      memory_limit_bytes=10_000, block=True)
    peak = 0
    futs = []
    for i in range(500):
        futs.append(w.append(5, b"%04d" % i + b"z" * 96))
        peak = max(peak, w.buffered_bytes)
    w.flush()
    lsns = [f.result(30) for f in futs]
    assert peak <= 10_000
    assert len(set(lsns)) >= 500 * 100 // 4000
    w.close()


def test_one_at_a_time_keeps_order_across_retries(client):
    # Fill log 6's window (8) with plain appends so the writer's blobs get SEQNOBUFS.
    noise = [client.append_async(6, b"noise") for _ in range(8)]
    w = client.create_buffered_writer(count_trigger=5, time_trigger=None,
                                      mode="one_at_a_time", retries=50, backoff=(0.005, 0.05))
    flood_stop = threading.Event()

    def flood():
        while not flood_stop.is_set():
            fs = [client.append_async(6, b"noise") for _ in range(8)]
            for f in fs:
                with contextlib.suppress(LogDeviceError):
                    f.result(10)

    t = threading.Thread(target=flood)
    t.start()
    try:
        futs = [w.append(6, b"ordered %d" % i) for i in range(200)]
        w.flush()
        lsns = [f.result(60) for f in futs]
    finally:
        flood_stop.set()
        t.join(30)
    for f in noise:
        with contextlib.suppress(LogDeviceError):
            f.result(10)
    assert lsns == sorted(lsns)
    assert len(set(lsns)) == 40
    w.close()
    assert w.stats["failed_blobs"] == 0
    # The window was full at times (the client held appends back): order still held.
    assert client.stats["appends_waited"] > 0


def test_independent_mode_absorbs_a_full_window(client):
    w = client.create_buffered_writer(count_trigger=1, time_trigger=None, retries=100,
                                      backoff=(0.005, 0.05))
    fut = w.append_many(7, [b"i%d" % i for i in range(200)])  # 200 blobs, window of 8
    lsns = fut.result(60).tolist()
    assert len(set(lsns)) == 200
    assert w.stats["failed_blobs"] == 0  # a full window is back-pressure, not an error
    w.close()


def test_many_threads_one_writer(client):
    w = client.create_buffered_writer(size_trigger=2000)
    out: dict[int, list[PayloadFuture]] = {}

    def producer(k: int) -> None:
        out[k] = [w.append(8 + k % 2, b"thread %d rec %d" % (k, i)) for i in range(300)]

    threads = [threading.Thread(target=producer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert w.close(timeout=60)
    futs = [f for fs in out.values() for f in fs]
    assert len(futs) == 1200 and all(f.done() and f.exception() is None for f in futs)
    assert w.stats["payloads"] == 1200


def test_bad_input_and_close(client):
    w = client.create_buffered_writer()
    with pytest.raises(ld.LogDeviceError) as ei:
        w.append(999, b"x")
    assert ei.value.status == E.NOTFOUND
    with pytest.raises(TooBigError):
        w.append(10, b"x" * (1024 * 1024))
    with pytest.raises(InvalidParamError):
        w.append_many(10, (b"abc", np.array([0, 2], dtype=np.uint64)))
    with pytest.raises(InvalidParamError):
        client.create_buffered_writer(mode="sometimes")
    f = w.append(10, b"last one")
    assert w.close(timeout=20)
    assert f.result(0) > 0
    with pytest.raises(LogDeviceError) as ei:
        w.append(10, b"after close")
    assert ei.value.status == E.SHUTDOWN


def test_client_close_fails_what_is_buffered(cluster):
    c = ld.Client(cluster.config_path)
    w = c.create_buffered_writer(size_trigger=None, time_trigger=None)
    f = w.append(11, b"never sent")
    c.close()
    exc = f.exception(10)
    assert isinstance(exc, LogDeviceError) and exc.status == E.SHUTDOWN


def test_retried_blob_is_stored_once(local_cluster):
    """A blob whose APPEND times out at the client (a storage node is paused, so the
    sequencer cannot finish it) is retried; the retry reaches the same sequencer, which
    answers it with the first attempt's LSN: every payload is in the log exactly once."""
    from logdevice.placement import sequencer_for
    from tests.cluster.conftest import read_back

    cluster = local_cluster(nodes=2, replication=2, logs=[1])
    seq = sequencer_for(1, cluster.config.sequencer_weights())
    with ld.Client(cluster.config_path, timeout=0.5) as client:
        w = client.create_buffered_writer(count_trigger=10, time_trigger=None, retries=40,
                                          backoff=(0.05, 0.2))
        warm = w.append(1, b"warm-up")
        w.flush()
        assert warm.result(10)
        cluster.pause(1 - seq)  # every copyset needs it: stores wait
        try:
            futs = [w.append(1, b"payload %d" % i) for i in range(50)]
            w.flush()
            deadline = time.monotonic() + 10
            while w.stats["retries"] < 5 and time.monotonic() < deadline:
                time.sleep(0.05)  # polls a condition; bounded
            assert w.stats["retries"] >= 5, "the appends never timed out"
        finally:
            cluster.resume(1 - seq)
        lsns = [f.result(30) for f in futs]
        w.close()
    assert len(set(lsns)) == 5  # five blobs of ten payloads
    cluster.stop_all()
    stored = read_back(cluster, [1])
    blobs = {lsn for (_, lsn), copies in stored.items()}
    assert set(lsns) <= blobs
    assert len(blobs) == 6, f"blobs stored more than once: {sorted(blobs)}"
