"""AppendSlots: the per-log in-flight limit shared by blobs (which wait for one slot)
and batches of single-record appends (which take what is free)."""

import asyncio

import pytest

from logdevice.client.write.append_slots import AppendSlots
from logdevice.errors import TimedOutError


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 10))


def test_batches_take_what_is_free_and_hear_when_slots_come_back():
    async def main():
        slots = AppendSlots(4)
        heard = []
        slots.listen(lambda: heard.append(slots.free))
        slots.take(3)
        assert slots.free == 1
        assert await slots.acquire(1.0) is False  # the last one, at once
        assert slots.free == 0
        slots.release(2)
        assert heard == [2] and slots.used == 2

    run(main())


def test_a_waiting_blob_is_served_before_batches():
    async def main():
        slots = AppendSlots(2)
        slots.take(2)
        waiter = asyncio.ensure_future(slots.acquire(5.0))
        await asyncio.sleep(0)
        assert slots.free == 0  # a blob is waiting: batches get nothing
        slots.release(1)
        assert await waiter is True
        assert slots.used == 2 and slots.free == 0

    run(main())


def test_a_wait_that_times_out_or_is_cancelled_leaves_the_count_right():
    async def main():
        slots = AppendSlots(1)
        slots.take(1)
        with pytest.raises(TimedOutError):
            await slots.acquire(0.01)
        cancelled = asyncio.ensure_future(slots.acquire(5.0))
        await asyncio.sleep(0)
        cancelled.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        assert slots.used == 1
        slots.release(1)
        assert slots.used == 0 and slots.free == 1
        # Granted in the same turn as the waiter is cancelled: either the caller got the
        # slot (and holds it) or it was handed back.
        slots.take(1)
        late = asyncio.ensure_future(slots.acquire(5.0))
        await asyncio.sleep(0)
        slots.release(1)  # grants it to the waiter
        late.cancel()
        try:
            held = int(await late)
        except asyncio.CancelledError:
            held = 0
        assert slots.used == held

    run(main())
