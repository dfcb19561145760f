"""Client calls answered by reading the log: ``is_log_empty`` and exact ``data_size``.

``is_log_empty``: a sequencer's tail alone can mislead (after a sequencer restart it
starts from the epoch store's tail record, which may be older than what was released).
So the client reads the log from past its trim point without payloads and stops at the
first data record (not empty) or once the read pointer has passed every released LSN
(empty; gaps such as bridges are not records).  "Every released LSN" is the highest of
the sequencer's tail and the release pointers that an f-majority of storage nodes
reported when the stream started.

``data_size``: ``find_time`` brackets the LSNs with timestamps in ``[start_ms, end_ms]``,
then the range is read (single copy delivery) and the payload bytes of the records
whose timestamps fall inside are added up, BufferedWriter payloads counted one by one.
Exact, at the price of reading the range; ``approximate_data_size`` is the cheap
storage-side estimate.

Both are coroutines on the client's loop (``ClientCalls`` runs them for ``Client`` and
``AsyncClient``); they read through an ``AsyncReader`` on that loop.
"""

from __future__ import annotations

import time
from typing import Protocol

import numpy as np

from logdevice.client.combine import HeadAttributes, TailAttributes
from logdevice.client.context import ClientContext
from logdevice.client.read.reader import AsyncReader
from logdevice.errors import TimedOutError
from logdevice.records import LSN_MAX, DataRecord, GapRecord

__all__ = ["LogCalls", "is_log_empty", "data_size"]

_POLL = 0.05


class LogCalls(Protocol):
    """What the queries need of the client's calls (``ClientCalls``): its context and
    the loop side of ``get_head_attributes``, ``get_tail_attributes`` and
    ``find_time``."""

    context: ClientContext

    async def head_on_loop(self, log_id: int, timeout: float) -> HeadAttributes: ...

    async def tail_on_loop(self, log_id: int, timeout: float) -> TailAttributes: ...

    async def find_time_on_loop(self, log_id: int, ms: int, timeout: float) -> int: ...


async def is_log_empty(calls: LogCalls, log_id: int, timeout: float) -> bool:
    """On the client's loop."""
    deadline = time.monotonic() + timeout
    trim = (await calls.head_on_loop(log_id, timeout)).trim_point
    tail = (await calls.tail_on_loop(log_id, max(0.1, deadline - time.monotonic()))
            ).last_released_real_lsn
    if trim >= LSN_MAX - 1:
        return True
    async with AsyncReader(calls.context, max_buffered_records=16) as r:
        r.without_payload()
        r.wait_only_when_no_data()
        await r.start_reading(log_id, trim + 1, LSN_MAX)
        pos = trim + 1
        while True:
            for item in await r.read(16, timeout=_POLL):
                if isinstance(item, DataRecord):
                    return False
                assert isinstance(item, GapRecord)
                pos = item.hi + 1
            released, sure = r.core.release_info(log_id)
            if sure and pos > max(tail, released):
                return True
            if time.monotonic() > deadline:
                raise TimedOutError(message=f"is_log_empty({log_id}): no answer within "
                                            f"{timeout:g} s (read up to {pos - 1})")


async def data_size(calls: LogCalls, log_id: int, start_ms: int, end_ms: int,
                    timeout: float) -> int:
    """On the client's loop."""
    deadline = time.monotonic() + timeout
    lo = await calls.find_time_on_loop(log_id, start_ms, timeout)
    hi = await calls.find_time_on_loop(log_id, end_ms + 1,
                                       max(0.1, deadline - time.monotonic())) - 1
    if lo > hi:
        return 0
    total = 0
    async with AsyncReader(calls.context) as r:
        await r.start_reading(log_id, lo, hi)
        while r.is_reading(log_id):  # read on, or rows of it still queued
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimedOutError(message=f"data_size({log_id}): the range was not read "
                                            f"within {timeout:g} s")
            b = await r.read_batch(1 << 16, timeout=min(left, 1.0))
            if len(b):
                sizes = np.diff(b.offsets.astype(np.int64))
                inside = (b.timestamps >= start_ms) & (b.timestamps <= end_ms)
                total += int(sizes[inside].sum())
    return total
