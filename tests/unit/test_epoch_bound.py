"""EpochBound: the epochs a storage node accepts are the ones the epoch store issued,
read again when a request names a newer one, by a read that starts after the request."""

from __future__ import annotations

import asyncio
import threading
import time

from logdevice.node.epoch_bound import EpochBound


def test_a_read_in_flight_before_the_epoch_was_issued_does_not_decide():
    async def main():
        loop = asyncio.get_running_loop()
        issued = {7: 1}
        reading, release = threading.Event(), threading.Event()

        def read_epoch(log_id: int) -> int:
            value = issued[log_id]  # what the store says when the read starts
            reading.set()
            release.wait(5)
            return value

        bound = EpochBound(loop, read_epoch)
        try:
            first = asyncio.ensure_future(bound.refresh(7))
            assert await loop.run_in_executor(None, reading.wait, 5)
            issued[7] = 2  # a sequencer activates epoch 2 while that read is out
            store_of_epoch_2 = asyncio.ensure_future(bound.admits_fresh(7, 2))
            forged = asyncio.ensure_future(bound.admits_fresh(7, 3))
            await asyncio.sleep(0.05)  # both wait on the read in flight
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

        def read_epoch(log_id: int) -> int:
            reads.append(log_id)
            return 4

        bound = EpochBound(asyncio.get_running_loop(), read_epoch)
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

        def read_epoch(log_id: int) -> int:
            value = issued[log_id]
            answered.set()
            return value

        bound = EpochBound(loop, read_epoch)
        try:
            first = asyncio.ensure_future(bound.refresh(7))
            await asyncio.sleep(0)  # the read starts
            assert answered.wait(5)
            # Block the loop a moment: the worker hands the answer over, but no callback
            # of it runs before the call below.
            time.sleep(0.05)
            issued[7] = 2
            assert await asyncio.wait_for(bound.admits_fresh(7, 2), 5) is True
            assert await first == 1
        finally:
            bound.close()

    asyncio.run(main())
