"""Readers against real node processes: read back what was written (SCD and all-send-all
give the same sequence), tailing readers started before, during and after writes, blobs,
read_batch == read, trim gaps, the reader's calls and options, AsyncReader."""

from __future__ import annotations

import asyncio
import threading
import time

import numpy as np
import pytest

import logdevice as ld
from logdevice.errors import E, InvalidParamError, LogDeviceError, NotFoundError
from tests.waiting import wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]

N_RECORDS = 3000


@pytest.fixture(scope="module")
def cluster(module_cluster):
    return module_cluster(nodes=3, replication=2, logs=range(1, 31))


@pytest.fixture(scope="module")
def client(cluster):
    with ld.Client(cluster.config_path, timeout=20.0) as c:
        yield c


def write(client, log_id: int, n: int, prefix: bytes = b"r", burst: int = 200) -> list[int]:
    """Append ``n`` records (pipelined in bursts); their LSNs in payload order."""
    lsns = [client.append(log_id, prefix + b"-0")]  # activates the sequencer
    for a in range(1, n, burst):
        futs = [client.append_async(log_id, prefix + b"-%d" % i)
                for i in range(a, min(n, a + burst))]
        lsns += [f.result(30) for f in futs]
    return lsns


def received_stood_still(reader, seconds: float):
    """A predicate: true once ``reader.stats.records_received`` is above 0 and has not
    changed for ``seconds``."""
    last = [-1, time.monotonic()]

    def still() -> bool:
        now, count = time.monotonic(), reader.stats.records_received
        if count != last[0]:
            last[:] = [count, now]
            return False
        return count > 0 and now - last[1] >= seconds
    return still


def drain(reader, expect_records: int, timeout: float = 60.0) -> list:
    """Read until ``expect_records`` data records arrived (gaps kept too)."""
    out: list = []
    got = 0
    deadline = time.monotonic() + timeout
    while got < expect_records:
        left = deadline - time.monotonic()
        assert left > 0, f"only {got} of {expect_records} records within {timeout} s"
        items = reader.read(expect_records - got + 10, timeout=min(left, 1.0))
        out += items
        got += sum(isinstance(i, ld.DataRecord) for i in items)
    return out


def records(items) -> list[tuple[int, bytes, int]]:
    return [(i.lsn, bytes(i.payload), i.batch_offset) for i in items
            if isinstance(i, ld.DataRecord)]


def gaps(items) -> list[ld.GapRecord]:
    return [i for i in items if isinstance(i, ld.GapRecord)]


@pytest.fixture(scope="module")
def log1(client):
    """Log 1 holds N_RECORDS plain records."""
    lsns = write(client, 1, N_RECORDS)
    return lsns, [b"r-%d" % i for i in range(N_RECORDS)]


def read_all(client, log_id, until, *, scd=True, **options):
    with client.create_reader(**options) as r:
        if not scd:
            r.force_no_single_copy_delivery()
        r.start_reading(log_id, ld.LSN_OLDEST, until)
        items = list(r)
        stats = r.stats
        assert not r.is_reading(log_id)
    return items, stats


def read_all_every_copy(client, log_id, until, copies, **options):
    """``read_all`` in all-send-all, taking a window's worth of items at a time and,
    before the next, waiting (bounded) until ``copies`` copies per record delivered
    arrived: the read does not end before a slower node's copies come."""
    with client.create_reader(**options) as r:
        r.force_no_single_copy_delivery()
        r.start_reading(log_id, ld.LSN_OLDEST, until)
        items: list = []
        while r.is_reading(log_id):
            items += r.read(options["buffer_size"], timeout=10)
            delivered = sum(isinstance(i, ld.DataRecord) for i in items)
            want = copies * delivered
            wait_until(lambda want=want: r.stats.records_received >= want, 30, 0.01,
                       lambda want=want: f"{r.stats.records_received} of {want} copies")
        stats = r.stats
    return items, stats


def check_in_order(items, log_id):
    """Items of one log cover LSNs in increasing order without overlap."""
    pos = 0
    for it in items:
        assert it.log_id == log_id
        if isinstance(it, ld.GapRecord):
            assert it.lo >= pos and it.hi >= it.lo, (it, pos)
            pos = it.hi + 1
        else:
            assert it.lsn >= pos or (it.lsn == pos - 1 and it.batch_offset > 0), (it, pos)
            pos = it.lsn + 1


# ---------------------------------------------------------------------------- read back


def test_read_back_scd_and_all_send_all_identical(client, log1):
    lsns, payloads = log1
    # A window of a fixed 512 LSNs (six slides over the log) keeps every node's stream
    # in step, so all-send-all receives each record from every copy holder; the reader
    # waits for them before it takes the next window (a loaded machine may hold a node
    # back long enough for the read to end without its copies).
    scd_items, scd_stats = read_all(client, 1, lsns[-1], buffer_size=512)
    asa_items, asa_stats = read_all_every_copy(client, 1, lsns[-1], copies=1.6,
                                               buffer_size=512)
    assert records(scd_items) == [(lsn, p, 0) for lsn, p in zip(lsns, payloads, strict=True)]
    assert scd_items == asa_items  # records and gaps alike
    check_in_order(scd_items, 1)
    # Before the first record: one gap (nothing was ever written in epoch 0).
    first = gaps(scd_items)
    assert first and first[0].lo == 1 and first[0].type == ld.GapType.BRIDGE
    assert all(g.type == ld.GapType.BRIDGE for g in first)
    # Single copy delivery: each record came about once; all-send-all: about R times.
    assert scd_stats.records_received < 1.2 * N_RECORDS
    assert asa_stats.records_received > 1.5 * N_RECORDS
    assert scd_stats.checksum_failures == asa_stats.checksum_failures == 0


def test_read_a_subrange_and_until(client, log1):
    lsns, payloads = log1
    lo, hi = lsns[100], lsns[199]
    with client.create_reader() as r:
        r.start_reading(1, lo, hi)
        items = list(r)
    assert records(items) == [(lsn, p, 0) for lsn, p in
                              zip(lsns[100:200], payloads[100:200], strict=True)]
    assert not gaps(items)


def test_read_batch_equals_read(client, log1):
    lsns, _ = log1
    items, _ = read_all(client, 1, lsns[-1])
    with client.create_reader(buffer_size=128) as r:
        r.start_reading(1, ld.LSN_OLDEST, lsns[-1])
        batches = []
        while r.is_reading(1) or True:
            b = r.read_batch(700, timeout=10)
            if not len(b) and not b.gaps:
                break
            assert len(b) <= 700
            batches.append(b)
    rows = [rec for b in batches for rec in b.records()]
    assert [(d.lsn, d.payload) for d in rows] == [(i.lsn, i.payload) for i in items
                                                  if isinstance(i, ld.DataRecord)]
    assert [g for b in batches for g in b.gaps] == gaps(items)
    b = batches[1]
    assert b.lsns.dtype == np.uint64 and b.timestamps.dtype == np.int64
    assert b.batch_offsets.dtype == np.uint32 and b.offsets.dtype == np.uint64
    assert b.offsets[0] == 0 and b.offsets[-1] == b.payloads.nbytes
    assert (b.log_ids == 1).all()


def test_to_arrow_shares_payload_bytes(client, log1):
    import pyarrow as pa  # a test dependency (pyproject: test extra)
    lsns, payloads = log1
    with client.create_reader() as r:
        r.start_reading(1, lsns[0], lsns[499])
        b = r.read_batch(500, timeout=10)
    assert len(b) == 500
    rb = b.to_arrow()
    assert rb.num_rows == 500
    assert rb.schema.field("payload").type == pa.binary()
    assert rb.column("payload").to_pylist() == payloads[:500]
    assert rb.column("lsn").to_numpy().tolist() == lsns[:500]
    # The payload column's data buffer is the batch's own memory.
    data = rb.column("payload").buffers()[2]
    assert data.address == b.payloads.ctypes.data
    assert b.to_arrow(large_binary=True).schema.field("payload").type == pa.large_binary()


def test_buffered_writer_blobs_read_back_one_record_per_payload(client):
    log = 2
    client.append(log, b"first")
    w = client.create_buffered_writer(size_trigger=20_000, time_trigger=0.05)
    payloads = [b"bw-%05d-" % i + b"x" * (i % 50) for i in range(5000)]
    fut = w.append_many(log, payloads)
    w.flush()
    blob_lsns = fut.result(30)
    w.close()
    until = int(blob_lsns[-1])
    for scd in (True, False):
        items, _ = read_all(client, log, until, scd=scd)
        recs = records(items)
        assert recs[0][1] == b"first" and recs[0][2] == 0
        got = recs[1:]
        assert [p for _, p, _ in got] == payloads
        assert [lsn for lsn, _, _ in got] == blob_lsns.tolist()
        assert [bo for _, _, bo in got] == fut.batch_offsets.tolist()
        assert len(set(blob_lsns.tolist())) > 1  # several blobs
    with client.create_reader() as r:
        r.start_reading(log, ld.LSN_OLDEST, until)
        rows = 0
        while True:
            b = r.read_batch(1000, timeout=10)
            if not len(b) and not b.gaps:
                break
            rows += len(b)
    assert rows == 5001


# ---------------------------------------------------------------------------- tailing


def test_readers_before_during_and_after_writes_see_the_same(client):
    log = 3
    client.append(log, b"start")  # activate; readers start after this record
    tail = client.get_tail_lsn(log)
    n = 1500
    before = client.create_reader()
    before.start_reading(log, tail + 1)
    lsns: list[int] = []
    started = threading.Event()

    def writer() -> None:
        for a in range(0, n, 100):
            futs = [client.append_async(log, b"t-%d" % i) for i in range(a, a + 100)]
            lsns.extend(f.result(30) for f in futs)
            if a == 500:
                started.set()
            time.sleep(0.01)

    t = threading.Thread(target=writer)
    t.start()
    assert started.wait(30)
    during = client.create_reader()
    during.start_reading(log, tail + 1)
    t.join(60)
    assert len(lsns) == n
    after = client.create_reader()
    after.start_reading(log, tail + 1, lsns[-1])
    expect = [(lsn, b"t-%d" % i, 0) for i, lsn in enumerate(lsns)]
    results = []
    for r in (before, during, after):
        items = drain(r, n)
        results.append(items)
        assert records(items) == expect
        assert all(g.type == ld.GapType.BRIDGE for g in gaps(items))
        r.close()
    assert results[0] == results[1] == results[2]


def test_tailing_reader_gets_new_records_promptly(client):
    log = 4
    client.append(log, b"x")
    with client.create_reader() as r:
        r.wait_only_when_no_data()
        r.start_reading(log, client.get_tail_lsn(log) + 1)
        assert r.read(10, timeout=0.3) == []  # nothing yet: returns at the timeout
        for i in range(5):
            t0 = time.monotonic()
            lsn = client.append(log, b"tail-%d" % i)
            items = r.read(10, timeout=5)
            assert records(items) == [(lsn, b"tail-%d" % i, 0)]
            assert time.monotonic() - t0 < 2.0
        assert r.is_connection_healthy(log)


def test_several_readers_tailing_one_log_each_get_every_record(client):
    """Streams of one log waiting for its next release on a node wake together, and one
    that closes leaves the others waiting."""
    log = 6
    client.append(log, b"x")
    tail = client.get_tail_lsn(log)
    readers = [client.create_reader() for _ in range(3)]
    try:
        for r in readers:
            r.wait_only_when_no_data()
            r.start_reading(log, tail + 1)
        for i in range(4):
            if i == 2:
                readers.pop(0).close()
            lsn = client.append(log, b"tail-%d" % i)
            for r in readers:
                assert records(r.read(10, timeout=5)) == [(lsn, b"tail-%d" % i, 0)]
    finally:
        for r in readers:
            r.close()


# ---------------------------------------------------------------------------- gaps


def test_trimmed_range_is_one_trim_gap(client):
    log = 5
    lsns = write(client, log, 600)
    client.trim(log, lsns[299])
    for scd in (True, False):
        items, _ = read_all(client, log, lsns[-1], scd=scd)
        trims = [g for g in gaps(items) if g.type == ld.GapType.TRIM]
        assert len(trims) == 1
        assert (trims[0].lo, trims[0].hi) == (1, lsns[299])
        assert records(items) == [(lsn, b"r-%d" % i, 0) for i, lsn in
                                  enumerate(lsns) if i >= 300]
        assert items[0] == trims[0]
    # Starting inside the trimmed range: the gap starts there.
    with client.create_reader() as r:
        r.start_reading(log, lsns[100], lsns[310])
        items = list(r)
    assert items[0] == ld.GapRecord(log, ld.GapType.TRIM, lsns[100], lsns[299])
    assert [i.lsn for i in items[1:]] == lsns[300:311]


# ---------------------------------------------------------------------------- API


def test_read_semantics_count_timeout_and_wait_only_when_no_data(client, log1):
    lsns, _ = log1
    with client.create_reader() as r:
        r.start_reading(1, lsns[0], lsns[49])
        assert r.read(0) == []
        first = r.read(10)  # blocks for 10
        assert len(first) == 10
        t0 = time.monotonic()
        rest = r.read(100)  # fewer than 100 left: returns once the log is done
        assert len(rest) == 40 and time.monotonic() - t0 < 5
        assert r.read(5, timeout=None) == []  # nothing being read: no wait
    with client.create_reader() as r:
        r.start_reading(1, lsns[0])  # tailing: until LSN_MAX
        got = drain(r, N_RECORDS)
        assert len(records(got)) == N_RECORDS
        t0 = time.monotonic()
        assert r.read(5, timeout=0.2) == []
        assert 0.15 < time.monotonic() - t0 < 2
        assert r.read(5, timeout=0) == []
        r.wait_only_when_no_data()
        lsn = client.append(1, b"one more")
        items = r.read(1000)  # returns with what there is
        assert records(items) == [(lsn, b"one more", 0)]


def test_several_logs_max_logs_and_stop_reading(client, log1):
    lsns, _ = log1
    other = write(client, 6, 200, prefix=b"six")
    with client.create_reader(max_logs=2) as r:
        r.start_reading(1, lsns[0], lsns[299])
        r.start_reading(6, other[0], other[-1])
        with pytest.raises(LogDeviceError) as ei:
            r.start_reading(7)
        assert ei.value.status == E.TOOMANY
        items = list(r)
        by_log = {1: [], 6: []}
        for it in items:
            by_log[it.log_id].append(it)
        assert [i.lsn for i in by_log[1]] == lsns[:300]
        assert [i.lsn for i in by_log[6]] == other
        batch_logs = set()
        r.start_reading(1, lsns[0], lsns[99])
        r.start_reading(6, other[0], other[99])
        while True:
            b = r.read_batch(10_000, timeout=10)
            if not len(b):
                break
            batch_logs |= set(b.log_ids.tolist())
        assert batch_logs == {1, 6}
    with client.create_reader(max_logs=1) as r:
        r.start_reading(1, lsns[0])
        assert r.is_reading(1)
        assert len(r.read(5)) == 5
        r.stop_reading(1)
        assert not r.is_reading(1)
        assert r.read(5, timeout=0.1) == []
        with pytest.raises(NotFoundError):
            r.stop_reading(1)
        with pytest.raises(NotFoundError):
            r.is_connection_healthy(1)
        # Restarting a log replaces its stream.
        r.start_reading(1, lsns[10], lsns[19])
        r.start_reading(1, lsns[20], lsns[24])
        assert [i.lsn for i in r] == lsns[20:25]


def test_start_reading_many_logs_at_once(client):
    written = {log_id: write(client, log_id, 5, prefix=b"m%d" % log_id)
               for log_id in range(20, 26)}
    with client.create_reader(max_logs=6) as r:
        with pytest.raises(LogDeviceError) as ei:  # seven do not fit: none starts
            r.start_reading_many(range(20, 27))
        assert ei.value.status == E.TOOMANY and not any(r.is_reading(n)
                                                        for n in range(20, 27))
        with pytest.raises(NotFoundError):  # one unknown log: none starts
            r.start_reading_many([20, 12345])
        r.start_reading_many([])  # nothing to start, nothing asked
        assert not r.is_reading(20)
        r.start_reading_many(range(20, 26), until_lsn=max(max(v) for v in written.values()))
        by_log: dict[int, list[bytes]] = {}
        for it in r:
            if isinstance(it, ld.DataRecord):
                by_log.setdefault(it.log_id, []).append(bytes(it.payload))
        assert by_log == {n: [b"m%d-%d" % (n, i) for i in range(5)] for n in range(20, 26)}
        # Restarting some of them with others replaces their streams.
        r.start_reading_many([20, 21], written[20][3], written[20][3])
        at = written[22][4]
        r.start_reading_many([21, 22], at, at)
        got = sorted((it.log_id, bytes(it.payload)) for it in r
                     if isinstance(it, ld.DataRecord))
        assert got == [(20, b"m20-3")] + [(n, b"m%d-%d" % (n, written[n].index(at)))
                                          for n in (21, 22) if at in written[n]]


async def _start_many_async(client, logs):
    async with client.create_async_reader(max_logs=len(logs)) as r:
        await r.start_reading_many(logs)
        return sorted(n for n in logs if r.is_reading(n))


def test_async_reader_starts_many_logs(client):
    assert asyncio.run(_start_many_async(client, [27, 28, 29])) == [27, 28, 29]


def test_bad_input(client):
    with client.create_reader() as r:
        with pytest.raises(NotFoundError):
            r.start_reading(12345)
        with pytest.raises(InvalidParamError):
            r.start_reading(1, 10, 5)
        with pytest.raises(InvalidParamError):
            r.read(-1)
        with pytest.raises(InvalidParamError):
            r.read(1, timeout=-1)
    with pytest.raises(InvalidParamError):
        client.create_reader(max_logs=0)
    with pytest.raises(InvalidParamError):
        client.create_reader(bogus=1)
    r = client.create_reader()
    r.close()
    with pytest.raises(LogDeviceError) as ei:
        r.read(1)
    assert ei.value.status == E.SHUTDOWN


def test_without_payload(client, log1):
    lsns, _ = log1
    with client.create_reader() as r:
        r.without_payload()
        r.start_reading(1, lsns[0], lsns[99])
        items = list(r)
    assert [i.lsn for i in items] == lsns[:100]
    assert all(i.payload == b"" for i in items)


def test_back_pressure_bounds_the_queue(client, log1):
    lsns, _ = log1
    with client.create_reader(buffer_size=64, max_buffered_records=100) as r:
        r.start_reading(1, lsns[0], lsns[-1])
        # The reader does not read: wait until the nodes have stopped sending (the count
        # received stood still for 0.5 s).  Sending stops when the reader's buffer and its
        # window are full, not after a time: a count that stood still only because the
        # machine was slow would go on and break the bounds below, which is what they test.
        wait_until(received_stood_still(r, 0.5), 30, 0.1, "the nodes never stopped sending")
        q = r.core.queue
        assert q.rows <= 100 + 64
        assert r.stats.records_received < 600
        # More than the queue holds: read() takes what comes until it has them all.
        items = r.read(N_RECORDS)
    assert [i.lsn for i in items] == lsns
    with client.create_reader(buffer_size=64, max_buffered_records=100) as r:
        r.start_reading(1, lsns[0], lsns[-1])
        b = r.read_batch(N_RECORDS)
    assert b.lsns.tolist() == lsns and b.records()[7].payload == b"r-7"


# ---------------------------------------------------------------------------- asyncio


def test_async_reader(client, log1):
    lsns, payloads = log1

    async def main() -> tuple[list, list, int]:
        async with client.create_async_reader(max_logs=2) as r:
            await r.start_reading(1, lsns[0], lsns[999])
            items = [item async for item in r]
            await r.start_reading(1, lsns[0], lsns[199])
            batch_rows = 0
            while True:
                b = await r.read_batch(64, timeout=10)
                if not len(b):
                    break
                batch_rows += len(b)
            r.wait_only_when_no_data()
            await r.start_reading(8)
            assert await r.read(10, timeout=0.2) == []
            lsn = await asyncio.to_thread(client.append, 8, b"async")
            got: list = []
            while not records(got):  # a BRIDGE gap up to epoch 1 may come first
                more = await r.read(10, timeout=10)
                assert more
                got += more
            assert all(isinstance(g, ld.GapRecord) for g in got[:-1])
            assert await r.is_connection_healthy(8)
            await r.stop_reading(8)
            return items, got + [lsn], batch_rows

    items, got, rows = asyncio.run(main())
    assert records(items) == [(lsn, p, 0) for lsn, p in
                              zip(lsns[:1000], payloads[:1000], strict=True)]
    assert records(got[:-1]) == [(got[-1], b"async", 0)]
    assert rows == 200


# ---------------------------------------------------------------------------- client calls


def test_find_time_is_exact_at_record_level(client):
    log = 9
    lsns = []
    for i in range(80):
        lsns.append(client.append(log, b"ft-%d" % i))
        time.sleep(0.002 if i % 7 else 0.02)  # timestamps spread unevenly over time
    with client.create_reader() as r:
        r.start_reading(log, lsns[0], lsns[-1])
        recs = [i for i in r if isinstance(i, ld.DataRecord)]
    assert [d.lsn for d in recs] == lsns
    stamps = [d.timestamp for d in recs]
    assert stamps == sorted(stamps) and len(set(stamps)) > 40
    for d in recs:
        first_at = min(x.lsn for x in recs if x.timestamp >= d.timestamp)
        assert client.find_time(log, d.timestamp) == first_at
        assert client.find_time(log, d.timestamp + 1) == min(
            [x.lsn for x in recs if x.timestamp > d.timestamp] or [lsns[-1] + 1])
    assert client.find_time(log, stamps[0] - 10_000) == lsns[0]


def test_data_size_is_exact(client):
    log = 10
    t0 = int(time.time() * 1000)
    plain = [client.append(log, b"z" * (10 + i)) for i in range(30)]
    w = client.create_buffered_writer(size_trigger=10_000, time_trigger=0.02)
    blob = w.append_many(log, [b"q" * 7] * 1000)
    w.flush()
    blob.result(30)
    w.close()
    t1 = int(time.time() * 1000) + 1
    assert client.data_size(log, t0 - 1000, t1) == sum(10 + i for i in range(30)) + 7000
    with client.create_reader() as r:
        r.start_reading(log, plain[0], plain[-1])
        recs = [i for i in r if isinstance(i, ld.DataRecord)]
    a, b = recs[5].timestamp, recs[14].timestamp
    inside = sum(len(d.payload) for d in recs if a <= d.timestamp <= b)
    assert client.data_size(log, a, b) == inside
    assert client.data_size(log, t1 + 60_000, t1 + 120_000) == 0


def test_is_log_empty(client):
    log = 11
    assert client.is_log_empty(log)
    lsns = [client.append(log, b"e-%d" % i) for i in range(5)]
    assert not client.is_log_empty(log)
    client.trim(log, lsns[3])
    assert not client.is_log_empty(log)
    client.trim(log, lsns[4])
    assert client.is_log_empty(log)


def test_dropped_reader_stops_its_streams(client, log1):
    import gc
    import weakref

    lsns, _ = log1
    r = client.create_reader()
    r.start_reading(1, lsns[0])
    assert len(r.read(5, timeout=10)) == 5
    core, ref = r.core, weakref.ref(r)
    del r
    gc.collect()
    wait_until(lambda: not core.streams, 5, message="the dropped reader's streams went on")
    assert ref() is None and not core.streams
