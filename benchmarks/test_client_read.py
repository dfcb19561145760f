"""A tailing reader's client side, per record: the read stream and the reader's queue.

What the client's loop does with each RECORDS frame of a tail (``ReadStream.on_records``,
``poll_batch``, ``ReaderQueue.put``) and what ``Reader.read_batch`` then does
(``ReaderQueue.take_batch``), without sockets: 64 records of 100 B, as 64 frames of one
record each from the three nodes of an SCD stream in turn (a tail at 1,000 records/s:
every record alone), against the reference of the same 64 records in one frame (a
backlog).  Timed in CPU seconds of this process.  The ratio is what delivering records
one at a time costs over delivering them in bulk.

    PYTHONPATH=python:src .venv/bin/python -m pytest benchmarks/test_client_read.py
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from logdevice.client.read.queue import ReaderQueue
from logdevice.readstream import ReadStream
from logdevice.records import LSN_MAX

RECORDS = 64
SIZE = 100
GROUP = "tailing reader, client side, 64 records"


def _info(benchmark, reference=False):
    benchmark.extra_info.update(items=RECORDS, unit="records", reference=reference)


class Tail:
    """A started SCD stream over nodes 0-2 and its reader queue."""

    def __init__(self) -> None:
        self.rs = ReadStream(1, 1, LSN_MAX, nodeset=[0, 1, 2], replication=2, scd=True,
                             buffer_size=512, window_bytes=4 << 20)
        for node in (0, 1, 2):
            self.rs.on_started(node, 0, self.rs.filter_version)
        self.rs.take_actions()
        self.queue = ReaderQueue(262_144, 64 << 20)
        self.queue.add_log(1)
        self.next = 1

    def frame(self, node: int, n: int) -> None:
        """A RECORDS of ``n`` records from ``node``, then what the loop does after it."""
        rs = self.rs
        rs.on_records(node, np.arange(self.next, self.next + n, dtype=np.uint64),
                      np.zeros(n, np.int64), np.zeros(n, np.uint32),
                      np.zeros(n * SIZE, np.uint8),
                      np.arange(0, (n + 1) * SIZE, SIZE, dtype=np.uint64), rs.filter_version)
        self.next += n
        rs.take_actions()
        self.queue.put(1, rs.poll_batch(self.queue.room()))
        rs.take_actions()
        rs.next_deadline()


@pytest.mark.benchmark(group=GROUP, timer=time.process_time)
def test_one_record_per_frame(benchmark):
    _info(benchmark)
    tail = Tail()

    def run():
        for i in range(RECORDS):
            tail.frame(i % 3, 1)
            assert len(tail.queue.take_batch(10_000)) == 1

    benchmark(run)


@pytest.mark.benchmark(group=GROUP, timer=time.process_time)
def test_one_frame_of_all_records_reference(benchmark):
    _info(benchmark, reference=True)
    tail = Tail()

    def run():
        tail.frame(0, RECORDS)
        assert len(tail.queue.take_batch(10_000)) == RECORDS

    benchmark(run)


def test_read_stream_keeps_up():
    """(Not timed.)  The stream hands out every record once, in order."""
    tail = Tail()
    got = []
    for i in range(3 * RECORDS):
        tail.frame(i % 3, 1)
        got += tail.queue.take_batch(10_000).lsns.tolist()
    assert got == list(range(1, 3 * RECORDS + 1))
