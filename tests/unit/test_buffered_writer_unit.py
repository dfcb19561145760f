"""BufferedWriter pure parts: batching triggers, bulk cuts, memory accounting, blob
layout through the codec, payload/batch futures.  No sockets, no loop."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import random
import threading
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ldcore import codec
from logdevice.client.write.batching import (
    BLOB_OVERHEAD,
    PER_PAYLOAD_OVERHEAD,
    Batcher,
    MemoryBudget,
    encode_batch,
    payload_offsets,
)
from logdevice.client.write.futures import BatchFuture, PayloadFuture, Segment
from logdevice.errors import E, LogDeviceError, NoBufsError
from tests.waiting import innermost_function, wait_until


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def batcher(**kw) -> Batcher:
    args = dict(size_trigger=None, count_trigger=None, time_trigger=None,
                max_blob_size=1 << 20, clock=FakeClock())
    args.update(kw)
    return Batcher(**args)


def decode(blob: bytes) -> list[bytes]:
    buf, off = codec.decode(blob)
    return [bytes(buf[off[i]:off[i + 1]]) for i in range(len(off) - 1)]


# ---------------------------------------------------------------------- triggers


def test_size_trigger_cuts_once_reached_and_offsets_count_up():
    b = batcher(size_trigger=100)
    futs = []
    for _ in range(9):
        f, ready = b.add(1, b"x" * 10)
        futs.append(f)
        assert ready == []
    f, ready = b.add(1, b"x" * 10)  # 100 bytes: reached
    futs.append(f)
    assert len(ready) == 1 and ready[0].count == 10 and ready[0].nbytes == 100
    assert [f.batch_offset for f in futs] == list(range(10))
    assert all(f.blob_future is ready[0].future for f in futs)
    assert b.pending(1) is None


def test_count_trigger_and_logs_are_independent():
    b = batcher(count_trigger=3)
    assert b.add(1, b"a")[1] == [] and b.add(2, b"b")[1] == []
    assert b.add(1, b"a")[1] == []
    (batch,) = b.add(1, b"a")[1]
    assert batch.log_id == 1 and batch.count == 3
    assert b.pending(2).count == 1


def test_time_trigger_due_in_start_order():
    clock = FakeClock()
    b = batcher(time_trigger=0.5, clock=clock)
    b.add(7, b"a")
    clock.t += 0.2
    b.add(3, b"b")
    assert b.next_deadline() == pytest.approx(100.5)
    assert b.due() == []
    clock.t += 0.3
    due = b.due()
    assert [x.log_id for x in due] == [7]
    clock.t += 0.2
    assert [x.log_id for x in b.due()] == [3]
    assert b.next_deadline() is None


def test_blob_cap_cuts_before_the_payload_that_would_overflow():
    cap = 1000
    b = batcher(max_blob_size=cap)
    big = b"z" * 300
    ready_all = []
    for _ in range(10):
        _, ready = b.add(1, big)
        ready_all += ready
    for batch in ready_all:
        assert batch.blob_size_bound <= cap
        assert len(encode_batch(batch, compression="none")) <= cap
    assert sum(x.count for x in ready_all) + b.pending(1).count == 10


def test_cut_all_is_in_start_order():
    b = batcher()
    for log in (5, 2, 9):
        b.add(log, b"p")
    assert [x.log_id for x in b.cut_all()] == [5, 2, 9]
    assert b.buffered_logs == 0


# ---------------------------------------------------------------------- bulk adds


def _cuts_single(sizes, **kw):
    b = batcher(**kw)
    cuts = []
    for s in sizes:
        _, ready = b.add(1, b"q" * s)
        cuts += [x.count for x in ready]
    rest = b.pending(1)
    return cuts, rest.count if rest else 0


def _cuts_many(sizes, as_buffer, **kw):
    b = batcher(**kw)
    payloads = [bytes([i % 251]) * s for i, s in enumerate(sizes)]
    offsets = payload_offsets(payloads)
    if as_buffer:
        segs, ready = b.add_many(1, None, offsets, b"".join(payloads))
    else:
        segs, ready = b.add_many(1, payloads, offsets)
    rest = b.pending(1)
    return [x.count for x in ready], rest.count if rest else 0, segs, ready, payloads


@settings(max_examples=60)
@given(sizes=st.lists(st.integers(0, 400), max_size=60),
       size_trigger=st.one_of(st.none(), st.integers(1, 2000)),
       count_trigger=st.one_of(st.none(), st.integers(1, 20)),
       as_buffer=st.booleans())
def test_add_many_cuts_like_repeated_add(sizes, size_trigger, count_trigger, as_buffer):
    kw = dict(size_trigger=size_trigger, count_trigger=count_trigger, max_blob_size=2000)
    want = _cuts_single(sizes, **kw)
    cuts, rest, segs, ready, payloads = _cuts_many(sizes, as_buffer, **kw)
    assert (cuts, rest) == want
    # segments cover the input in order; each blob decodes to its payloads
    assert [s.start for s in segs] == list(np.cumsum([0] + [s.count for s in segs])[:-1])
    got = [p for batch in ready for p in decode(encode_batch(batch, compression="none"))]
    assert got == payloads[:len(got)]


def test_add_many_after_single_appends_continues_offsets():
    b = batcher(size_trigger=50)
    f0, _ = b.add(1, b"a" * 10)
    payloads = [b"b" * 10] * 7
    segs, ready = b.add_many(1, payloads, payload_offsets(payloads))
    assert f0.batch_offset == 0
    assert (segs[0].first_offset, segs[0].count) == (1, 4)  # 10 + 4*10 = 50: cut
    assert (segs[1].first_offset, segs[1].count) == (0, 3)
    assert decode(encode_batch(ready[0], compression="none")) == [b"a" * 10] + [b"b" * 10] * 4


# ---------------------------------------------------------------------- blob layout


def test_mixed_parts_encode_in_order_and_zstd_only_when_smaller():
    b = batcher()
    b.add(1, b"one")
    many = [b"two", b"three"]
    b.add_many(1, many, payload_offsets(many))
    buf = b"fourfive"
    b.add_many(1, None, np.array([0, 4, 8], dtype=np.uint64), buf)
    b.add(1, b"six")
    (batch,) = b.cut_all()
    blob = encode_batch(batch)
    assert decode(blob) == [b"one", b"two", b"three", b"four", b"five", b"six"]
    assert codec.decode_count(blob) == 6

    text = batcher()
    for i in range(200):
        text.add(1, b'{"level":"info","msg":"request served","id":%d}' % i)
    (tb,) = text.cut_all()
    z, raw = encode_batch(tb, compression="zstd"), encode_batch(tb, compression="none")
    assert len(z) < len(raw) and z[1] & 0x07 == codec.COMPRESSION_ZSTD
    noise = batcher()
    noise.add(1, os.urandom(3000))
    (nb,) = noise.cut_all()
    blob = encode_batch(nb, compression="zstd")
    assert blob[1] & 0x07 == codec.COMPRESSION_NONE  # zstd did not shrink it: dropped


def test_blob_overhead_bounds_hold():
    b = batcher()
    sizes = [0, 1, 127, 128, 16383, 16384, 70000]
    for s in sizes:
        b.add(1, b"\x01" * s)
    (batch,) = b.cut_all()
    assert len(encode_batch(batch, compression="none")) <= (
        sum(sizes) + PER_PAYLOAD_OVERHEAD * len(sizes) + BLOB_OVERHEAD)


# ---------------------------------------------------------------------- memory


def test_memory_budget_nobufs_and_accounting():
    m = MemoryBudget(100)
    m.acquire(60, block=False)
    m.acquire(40, block=False)
    with pytest.raises(NoBufsError) as ei:
        m.acquire(1, block=False)
    assert ei.value.status == E.NOBUFS
    m.release(100)
    assert m.used == 0
    m.acquire(500, block=False)  # nothing in use: an oversized request is admitted
    assert m.used == 500


def test_memory_budget_blocks_until_release_and_flushes_first():
    m = MemoryBudget(100)
    m.acquire(100, block=False)
    flushed = threading.Event()
    got = threading.Event()

    def producer():
        m.acquire(50, block=True, on_wait=flushed.set)
        got.set()

    t = threading.Thread(target=producer)
    t.start()
    assert flushed.wait(5)
    assert not got.wait(0.1)
    m.release(60)
    assert got.wait(5)
    t.join(5)
    assert m.used == 90


def test_memory_budget_close_wakes_waiters_and_idle_wait():
    m = MemoryBudget(10)
    m.acquire(10, block=False)
    err = []

    def waiter():
        try:
            m.acquire(5, block=True)
        except LogDeviceError as exc:
            err.append(exc.status)

    t = threading.Thread(target=waiter)
    t.start()
    wait_until(lambda: innermost_function(t) == "wait", 5, 0.001,
               "the waiter never blocked on the budget's condition")
    m.close(LogDeviceError(E.SHUTDOWN, "closed"))
    t.join(5)
    assert err == [E.SHUTDOWN]
    m2 = MemoryBudget(None)
    m2.add_batches(2)
    assert not m2.wait_idle(0.01)
    m2.release(0, 2)
    assert m2.wait_idle(0.01)


# ---------------------------------------------------------------------- futures


class _Blob(concurrent.futures.Future):  # type: ignore[type-arg]
    """A blob future that lists the done callbacks it has not run yet (``waiters``):
    what waits on it."""

    def __init__(self) -> None:
        super().__init__()
        self.waiters: list[object] = []

    def add_done_callback(self, fn: Callable[[concurrent.futures.Future[int]], object]
                          ) -> None:
        if not self.done():
            self.waiters.append(fn)
        super().add_done_callback(fn)

    def set_result(self, result: int) -> None:
        super().set_result(result)
        self.waiters.clear()


def test_payload_future_delegates_to_the_blob():
    blob = _Blob()
    a, b = PayloadFuture(blob, 0), PayloadFuture(blob, 1)
    seen = []
    a.add_done_callback(lambda f: seen.append((f.batch_offset, f.result())))
    assert not a.done() and not a.cancel()
    done, not_done = concurrent.futures.wait([a, b], timeout=0.01)
    assert not done and len(not_done) == 2
    threading.Timer(0.05, blob.set_result, (42,)).start()
    done, not_done = concurrent.futures.wait([a, b], timeout=5)
    assert done == {a, b} and not not_done
    assert a.result() == b.result() == 42 and seen == [(0, 42)]
    assert set(concurrent.futures.as_completed([a, b], timeout=1)) == {a, b}
    assert blob.waiters == []
    with pytest.raises(RuntimeError):
        a.set_result(1)

    async def via_asyncio():
        return await asyncio.wrap_future(b)

    assert asyncio.run(via_asyncio()) == 42


def test_payload_futures_of_a_blob_share_one_waiter_entry():
    # wait/as_completed over n payload futures of a blob install one entry on the blob,
    # not n of them; it goes once the blob is done.
    blob = _Blob()
    futs = [PayloadFuture(blob, i) for i in range(1000)]
    concurrent.futures.wait(futs, timeout=0)
    assert len(blob.waiters) == 1
    blob.set_result(7)
    assert blob.waiters == []
    assert sorted(f.batch_offset for f in concurrent.futures.as_completed(futs, timeout=5)) \
        == list(range(1000))


def test_payload_future_exception():
    blob: concurrent.futures.Future[int] = concurrent.futures.Future()
    f = PayloadFuture(blob, 3)
    blob.set_exception(LogDeviceError(E.SEQNOBUFS, "full"))
    assert f.exception().status == E.SEQNOBUFS
    with pytest.raises(LogDeviceError):
        f.result()


def test_batch_future_gathers_lsns_across_blobs():
    b1: concurrent.futures.Future[int] = concurrent.futures.Future()
    b2: concurrent.futures.Future[int] = concurrent.futures.Future()
    bf = BatchFuture([Segment(b1, 0, 3, 5), Segment(b2, 3, 2, 0)], 5)
    assert list(bf.batch_offsets) == [5, 6, 7, 0, 1]
    b2.set_result(200)
    assert not bf.done()
    b1.set_result(100)
    assert list(bf.result(1)) == [100, 100, 100, 200, 200]
    b3: concurrent.futures.Future[int] = concurrent.futures.Future()
    bad = BatchFuture([Segment(b3, 0, 1, 0)], 1)
    b3.set_exception(LogDeviceError(E.TIMEDOUT, "x"))
    assert bad.exception(1).status == E.TIMEDOUT
    assert len(BatchFuture([], 0).result(0)) == 0


def test_many_payload_futures_resolve_with_one_set_result():
    rng = random.Random(1)
    b = batcher(size_trigger=10_000)
    futs, batches = [], []
    for _ in range(1000):
        f, ready = b.add(rng.randint(1, 3), b"p" * 50)
        futs.append(f)
        batches += ready
    batches += b.cut_all()
    for i, batch in enumerate(batches):
        batch.future.set_result(1000 + i)
    assert all(f.done() for f in futs)
    assert len({f.result() for f in futs}) == len(batches) == 6  # 3 full + 3 partial


# ---------------------------------------------------------------------- ldwrite input


@pytest.mark.parametrize("data,final,lines,used", [
    (b"a\nbb\n\nccc", False, [b"a", b"bb", b""], 6),
    (b"a\nbb\n\nccc", True, [b"a", b"bb", b"", b"ccc"], 9),
    (b"no newline", False, [], 0),
    (b"", True, [], 0),
    (b"\n\n", True, [b"", b""], 2),
])
def test_ldwrite_split_lines(data, final, lines, used):
    from logdevice.tools.ldwrite import split_lines

    body, offsets, consumed = split_lines(data, final=final)
    got = [body[offsets[i]:offsets[i + 1]].tobytes() for i in range(len(offsets) - 1)]
    assert (got, consumed) == (lines, used)


def test_loglines_are_fixed_size_json():
    import json

    from logdevice.tools.loglines import generate

    buf, offsets = generate(10, 50, 100)
    assert len(buf) == 5000 and list(offsets[:3]) == [0, 100, 200]
    lines = [json.loads(buf[i * 100:(i + 1) * 100].tobytes()) for i in range(50)]
    assert lines[0]["req"] == "000010" and len({ln["msg"] for ln in lines}) > 10
