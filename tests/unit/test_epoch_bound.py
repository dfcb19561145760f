"""EpochBound: the epochs a storage node accepts are the ones the epoch store issued,
read again when a request names a newer one, by a read that starts after the request."""

from __future__ import annotations

import asyncio
import threading

from logdevice.errors import TimedOutError
from logdevice.node.roles.epoch_bound import EpochBound
from tests.waiting import innermost_function, wait_until


def test_a_read_in_flight_before_the_epoch_was_issued_does_not_decide():
    async def main():
        loop = asyncio.get_running_loop()
        issued = {7: 1}
        reading, release = threading.Event(), threading.Event()

        def read_epochs(log_ids: list[int]) -> dict[int, int]:
            value = {n: issued[n] for n in log_ids}  # what the store says when it starts
            reading.set()
            release.wait(5)
            return value

        bound = EpochBound(loop, read_epochs)
        try:
            first = asyncio.ensure_future(bound.refresh(7))
            assert await loop.run_in_executor(None, reading.wait, 5)
            issued[7] = 2  # a sequencer activates epoch 2 while that read is out
            store_of_epoch_2 = asyncio.ensure_future(bound.admits_fresh(7, 2))
            forged = asyncio.ensure_future(bound.admits_fresh(7, 3))
            # One turn of the loop: both tasks run to their wait on the read in flight
            # (they have nothing else to wait for first).
            await asyncio.sleep(0)
            release.set()
            assert await asyncio.wait_for(first, 5) == 1
            assert await asyncio.wait_for(store_of_epoch_2, 5) is True
            assert await asyncio.wait_for(forged, 5) is False  # never issued
            assert bound.admits(7, 2) and not bound.admits(7, 3)
        finally:
            bound.close()

    asyncio.run(main())


def test_known_epochs_pass_without_reading_the_store():
    async def main():
        reads = []

        def read_epochs(log_ids: list[int]) -> dict[int, int]:
            reads.extend(log_ids)
            return {n: 4 for n in log_ids}

        bound = EpochBound(asyncio.get_running_loop(), read_epochs)
        try:
            assert await bound.admits_fresh(1, 4) is True
            assert await bound.admits_fresh(1, 3) is True
            assert reads == [1]  # the second was within what the first read learned
        finally:
            bound.close()

    asyncio.run(main())


def test_a_read_that_ended_before_its_callbacks_ran_is_not_taken_as_fresh():
    # A read answers "epoch 1" and ends; before the loop has run its callbacks, the epoch
    # store issues epoch 2 and a STORE of epoch 2 asks.  It must be decided by a new read,
    # not by the one that ended (nor by a stale copy of what that one learned).
    async def main():
        loop = asyncio.get_running_loop()
        issued = {7: 1}
        answered = threading.Event()

        def read_epochs(log_ids: list[int]) -> dict[int, int]:
            value = {n: issued[n] for n in log_ids}
            answered.set()
            return value

        bound = EpochBound(loop, read_epochs)
        try:
            first = asyncio.ensure_future(bound.refresh(7))
            await asyncio.sleep(0)  # the read starts
            assert answered.wait(5)
            # Block the loop until the worker has handed the answer over (it is back in
            # its executor's loop, waiting for work): no callback of it runs before the
            # call below.
            worker = next(t for t in threading.enumerate() if t.name.startswith("epoch-bound"))
            wait_until(lambda: innermost_function(worker) == "_worker", 5, 0.001,
                       "the store's thread never finished the read")
            issued[7] = 2
            assert await asyncio.wait_for(bound.admits_fresh(7, 2), 5) is True
            assert await first == 1
        finally:
            bound.close()

    asyncio.run(main())


def test_reads_that_queue_behind_one_in_the_store_go_together():
    async def main():
        loop = asyncio.get_running_loop()
        batches = []
        release = threading.Event()

        def read_epochs(log_ids: list[int]) -> dict[int, int]:
            batches.append(sorted(log_ids))
            release.wait(5)
            return {n: 1 for n in log_ids if n != 13}  # the store does not know log 13

        bound = EpochBound(loop, read_epochs)
        try:
            first = asyncio.ensure_future(bound.admits_fresh(1, 1))
            await asyncio.sleep(0)  # log 1's read is in the store
            rest = [asyncio.ensure_future(bound.admits_fresh(n, 1)) for n in range(2, 15)]
            again = asyncio.ensure_future(bound.fresh(1))  # must not join the read out
            await asyncio.sleep(0)
            release.set()
            assert await asyncio.wait_for(first, 5) is True
            got = await asyncio.wait_for(asyncio.gather(*rest), 5)
            assert got == [n != 13 for n in range(2, 15)]
            assert await asyncio.wait_for(again, 5) == 1
            assert batches == [[1], list(range(1, 15))]  # two reads for fifteen requests
        finally:
            bound.close()

    asyncio.run(main())


def test_a_failed_read_fails_every_log_it_held_and_the_next_read_runs():
    async def main():
        loop = asyncio.get_running_loop()
        calls = []
        release = threading.Event()

        def read_epochs(log_ids: list[int]) -> dict[int, int]:
            calls.append(sorted(log_ids))
            if len(calls) == 1:
                release.wait(5)
            elif len(calls) == 2:
                raise TimedOutError(message="store unreachable")
            return {n: 2 for n in log_ids}

        bound = EpochBound(loop, read_epochs)
        try:
            first = asyncio.ensure_future(bound.fresh(9))
            await asyncio.sleep(0)  # log 9's read is in the store
            queued = asyncio.gather(bound.fresh(1), bound.fresh(2), return_exceptions=True)
            await asyncio.sleep(0)
            release.set()
            assert await asyncio.wait_for(first, 5) == 2
            got = await asyncio.wait_for(queued, 5)
            assert all(isinstance(r, TimedOutError) for r in got)
            assert not bound.admits(1, 1)  # nothing learned from the failed read
            assert await asyncio.wait_for(bound.fresh(2), 5) == 2 and bound.admits(2, 2)
            assert calls == [[9], [1, 2], [2]]
        finally:
            bound.close()

    asyncio.run(main())
