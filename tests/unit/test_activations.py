"""Sequencer activations go to the epoch store in batches: the ones that arrive while a
batch is in the store go together as the next one (a real SQLite store, the role's
one-thread executor)."""

import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest

from logdevice.epochstore import EpochMetadata, FileEpochStore
from logdevice.errors import E, LogDeviceError
from logdevice.node.roles.activations import ActivationBatcher

MD = EpochMetadata(0, (0, 1, 2), {"node": 2})


class CountingStore(FileEpochStore):
    """The SQLite store, noting the size of each ``activate_many`` batch."""

    def __init__(self, path):
        super().__init__(path)
        self.batches = []
        self.status_reads = 0

    def shard_statuses(self):
        self.status_reads += 1
        return super().shard_statuses()

    def activate_many(self, requests):
        self.batches.append(len(requests))
        return super().activate_many(requests)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 30))


def test_activations_that_queue_behind_a_batch_go_together(tmp_path):
    store = CountingStore(tmp_path / "epochs.sqlite")
    with ThreadPoolExecutor(1) as ex:
        async def main():
            b = ActivationBatcher(asyncio.get_running_loop(), ex, lambda: store,
                                  lambda state: False)
            futs = [b.activate(log_id, MD) for log_id in range(1, 51)]
            return await asyncio.gather(*futs)

        got = run(main())
    assert [epoch for epoch, _, _ in got] == [1] * 50
    assert [state.log_id for _, state, _ in got] == list(range(1, 51))
    assert store.batches == [1, 49]  # the first went alone, at once
    assert store.get(50).epoch == 1
    store.close()


def test_one_log_refused_and_statuses_read_once_for_a_batch_needing_recovery(tmp_path):
    store = CountingStore(tmp_path / "epochs.sqlite")
    store.activate(2, MD)
    with ThreadPoolExecutor(1) as ex:
        async def main():
            b = ActivationBatcher(asyncio.get_running_loop(), ex, lambda: store,
                                  lambda state: state.epoch > 1)
            first = b.activate(1, MD)
            second = [b.activate(2, MD), b.activate(3, None)]  # 3: no metadata, refused
            return await asyncio.gather(first, *second, return_exceptions=True)

        one, two, three = run(main())
    assert one[0] == 1 and two[0] == 2
    assert store.status_reads == 1  # for the second batch only: epoch 2 needs recovery
    assert isinstance(three, LogDeviceError) and three.status == E.INVALID_PARAM
    assert store.get(3) is None
    store.close()


def test_a_store_failure_fails_every_activation_of_the_batch(tmp_path):
    store = CountingStore(tmp_path / "epochs.sqlite")
    store.close()
    with ThreadPoolExecutor(1) as ex:
        async def main():
            b = ActivationBatcher(asyncio.get_running_loop(), ex, lambda: store,
                                  lambda state: False)
            return await asyncio.gather(*(b.activate(n, MD) for n in (1, 2, 3)),
                                        return_exceptions=True)

        got = run(main())
    assert all(isinstance(r, LogDeviceError) and r.status == E.SHUTDOWN for r in got)


@pytest.mark.parametrize("n", [1, 2])
def test_nothing_waits_for_a_batch_to_fill(tmp_path, n):
    store = CountingStore(tmp_path / "epochs.sqlite")
    with ThreadPoolExecutor(1) as ex:
        async def main():
            b = ActivationBatcher(asyncio.get_running_loop(), ex, lambda: store,
                                  lambda state: False)
            for log_id in range(1, n + 1):  # one after the other: each goes alone
                await b.activate(log_id, MD)

        run(main())
    assert store.batches == [1] * n
    store.close()
