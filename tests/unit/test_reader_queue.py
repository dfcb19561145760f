"""``ReaderQueue``: the hand-off between a reader's loop side and its readers (no sockets):
records and gaps come out in order, as objects or as columns, split anywhere; the bounds
hold the loop side back and a reader that makes room calls it back.  Threads and asyncio
tasks wait through the same logic (``gather``/``gather_async``, ``wait``/``wait_async``)."""

from __future__ import annotations

import asyncio
import threading
import time

import numpy as np
import pytest

from logdevice.client.read.batch import ReaderBatch
from logdevice.client.read.queue import ReaderQueue
from logdevice.readstream import ReadBatch
from logdevice.record_columns import RecordColumns
from logdevice.records import DataRecord, GapRecord, GapType
from tests.waiting import wait_until


def batch(log_id, lsns, gaps=(), bo=None):
    payloads = [b"L%d-%d" % (log_id, x) for x in lsns]
    offs = np.zeros(len(lsns) + 1, dtype=np.uint64)
    np.cumsum([len(p) for p in payloads], out=offs[1:])
    n = len(lsns)
    rows = RecordColumns(np.array(lsns, dtype=np.uint64), np.arange(n, dtype=np.int64),
                         np.zeros(n, dtype=np.uint32),
                         np.frombuffer(b"".join(payloads), dtype=np.uint8), offs,
                         None if bo is None else np.array(bo, np.uint32))
    return ReadBatch(log_id, rows,
                     [GapRecord(log_id, GapType.DATALOSS, lo, hi) for lo, hi in gaps])


def order(items):
    return [("g", i.lo, i.hi) if isinstance(i, GapRecord) else ("r", i.lsn, i.payload)
            for i in items]


def make(max_records=1000, max_bytes=1 << 20):
    calls = []
    q = ReaderQueue(max_records, max_bytes, lambda: calls.append(1))
    return q, calls


def gather(flavour, q, *args):
    """``q.gather(*args)`` from a thread, or ``q.gather_async(*args)`` from a task."""
    if flavour == "thread":
        return q.gather(*args)
    return asyncio.run(q.gather_async(*args))


def test_items_interleave_gaps_and_split_anywhere():
    q, _ = make()
    q.add_log(1)
    q.put(1, batch(1, [1, 2, 5, 9], gaps=[(3, 4), (6, 8), (10, 12)]))
    q.put(1, batch(1, [13]))
    want = [("r", 1, b"L1-1"), ("r", 2, b"L1-2"), ("g", 3, 4), ("r", 5, b"L1-5"),
            ("g", 6, 8), ("r", 9, b"L1-9"), ("g", 10, 12), ("r", 13, b"L1-13")]
    got = []
    for k in (1, 2, 1, 3, 5):
        got += order(q.take_items(k))
    assert got == want
    assert q.rows == q.gaps == q.nbytes == 0


@pytest.mark.parametrize("sizes", [[100], [1, 1, 1, 1, 1, 1], [2, 3, 100], [3, 1, 2]])
def test_batches_equal_items(sizes):
    q1, _ = make()
    q2, _ = make()
    for q in (q1, q2):
        q.add_log(1)
        q.add_log(2)
        q.put(1, batch(1, [1, 2, 5, 9], gaps=[(3, 4), (6, 8)]))
        q.put(2, batch(2, [7, 8], bo=[0, 1]))
        q.put(1, batch(1, [10, 11], gaps=[(12, 20)]))
    items = q1.take_items(100)
    parts = [q2.take_batch(k) for k in sizes] + [q2.take_batch(100)]
    b = ReaderBatch.concat(parts)
    assert [(d.log_id, d.lsn, d.payload, d.batch_offset) for d in b.records()] == [
        (d.log_id, d.lsn, bytes(d.payload), d.batch_offset) for d in items
        if isinstance(d, DataRecord)]
    assert b.gaps == [g for g in items if isinstance(g, GapRecord)]
    # Each part's gaps sit before the part's next row of the same log.
    for p in parts:
        for g in p.gaps:
            rows = p.lsns[p.log_ids == g.log_id]
            assert all(x < g.lo or x > g.hi for x in rows.tolist())
    assert b.offsets[0] == 0 and b.offsets[-1] == b.payloads.nbytes


def test_bounds_hold_the_producer_and_room_calls_back():
    q, calls = make(max_records=10)
    q.add_log(1)
    assert q.room() == 10
    q.put(1, batch(1, list(range(1, 11))))
    assert q.room() == 0
    assert q.hold() is False and q.starved  # full: wait for the reader
    q.take_items(3)
    assert calls == []  # 7 rows left: more than half full
    q.take_items(3)
    assert calls == [1] and not q.starved
    q.take_items(10)
    assert calls == [1]
    assert q.hold() is True  # room already: the loop side polls at once


def test_discard_and_done():
    q, _ = make()
    q.add_log(1)
    q.add_log(2)
    q.put(1, batch(1, [1, 2]))
    q.put(2, batch(2, [1]))
    q.discard_log(1)
    assert order(q.take_items(10)) == [("r", 1, b"L2-1")]
    q.put(1, batch(1, [3]))  # a stopped log's late delivery is dropped
    assert q.rows == 0
    q.log_done(2)
    t0 = time.monotonic()
    q.wait(5, False, None)  # nothing is being read: no wait
    assert time.monotonic() - t0 < 1


@pytest.mark.parametrize("flavour", ["thread", "task"])
def test_gather_takes_more_than_the_queue_holds(flavour):
    q, _ = make(max_records=4)
    q.add_log(1)

    def producer():
        for a in range(1, 41, 4):
            wait_until(lambda: q.room() >= 4, 10, 0.001, "the reader never made room")
            q.put(1, batch(1, list(range(a, a + 4))))
        q.log_done(1)

    t = threading.Thread(target=producer)
    t.start()
    parts = gather(flavour, q, 40, False, 10, q.take_items_part)
    t.join()
    assert [d.lsn for p in parts for d in p] == list(range(1, 41))


@pytest.mark.parametrize("flavour", ["thread", "task"])
def test_gather_timeout_and_any_data(flavour):
    q, _ = make()
    q.add_log(1)
    t0 = time.monotonic()
    assert [x for p in gather(flavour, q, 5, False, 0.1, q.take_items_part) for x in p] == []
    assert 0.08 < time.monotonic() - t0 < 2
    q.put(1, batch(1, [1]))
    parts = gather(flavour, q, 5, True, None, q.take_items_part)  # what is there
    assert [d.lsn for p in parts for d in p] == [1]


def test_threads_and_tasks_wait_alike():
    """One put wakes a waiting thread and a waiting task; waits that time out leave no
    waiter behind."""
    q, _ = make()
    q.add_log(1)
    woke: list[tuple[str, float]] = []
    t0 = time.monotonic()

    def thread_waits():
        q.wait(1, False, 10)
        woke.append(("thread", time.monotonic() - t0))

    async def task_waits():
        await q.wait_async(1, False, 10)
        woke.append(("task", time.monotonic() - t0))

    t = threading.Thread(target=thread_waits)
    t.start()
    threading.Timer(0.2, q.put, (1, batch(1, [1]))).start()
    asyncio.run(task_waits())
    t.join(10)
    assert sorted(w for w, _ in woke) == ["task", "thread"]
    assert all(0.15 < dt < 5 for _, dt in woke), woke
    q.take_items(1)
    q.wait(1, False, 0.02)
    asyncio.run(q.wait_async(1, False, 0.02))
    assert q.waiters == []


def test_a_finished_log_has_more_until_its_records_are_taken():
    """The stream reaching until_lsn does not end the log for the application while
    what it delivered still waits (``Reader.is_reading`` loops lost their tail)."""
    q, _ = make()
    q.add_log(1)
    q.add_log(2)
    q.put(1, batch(1, [1, 2, 3]))
    q.log_done(1)
    assert q.has_more(1) and q.has_more(2)
    assert order(q.take_items(2)) == [("r", 1, b"L1-1"), ("r", 2, b"L1-2")]
    assert q.has_more(1)
    assert order(q.take_items(5)) == [("r", 3, b"L1-3")]
    assert not q.has_more(1) and q.has_more(2)
    q.discard_log(2)
    assert not q.has_more(2)
