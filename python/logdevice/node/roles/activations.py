"""Sequencer activations, batched on their way to the epoch store.

Touching many logs for the first time (a service that writes one log per user, a
restart) activates many sequencers at once, and one epoch-store write per activation
(a SQLite commit, a ZooKeeper round trip) would cap activations at a few hundred a
second.  ``ActivationBatcher`` sends the activations that arrive while a batch is in the
store together as the next batch (``EpochStore.activate_many``: one transaction, or one
``multi`` per 500 logs), and answers each waiting activation when its batch lands.  A
lone activation still goes at once: nothing waits for a batch to fill.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any

from logdevice.epochstore import EpochMetadata, EpochStore, LogEpochState
from logdevice.errors import LogDeviceError

__all__ = ["ActivationBatcher", "Activated"]

#: (epoch, the log's new state, shard statuses: filled when some log of the batch needs
#: recovery, which counts authoritative status the way readers do)
Activated = tuple[int, LogEpochState, dict[int, Any]]

#: activations per epoch-store call
MAX_BATCH = 2000


class ActivationBatcher:
    """Queues activations and runs them in batches in ``executor`` (one thread: the
    role's epoch-store thread), one batch at a time."""

    def __init__(self, loop: asyncio.AbstractEventLoop, executor: Executor,
                 store: Callable[[], EpochStore],
                 needs_statuses: Callable[[LogEpochState], bool]) -> None:
        self._loop = loop
        self._executor = executor
        self._store = store
        self._needs_statuses = needs_statuses
        self._queued: list[tuple[int, EpochMetadata, asyncio.Future[Activated]]] = []
        self._in_store = False

    def activate(self, log_id: int, metadata: EpochMetadata) -> asyncio.Future[Activated]:
        """The log's next epoch with ``metadata``: resolves to ``Activated``, or fails
        with the error this log's activation (or the whole batch's store call) met."""
        fut: asyncio.Future[Activated] = self._loop.create_future()
        self._queued.append((log_id, metadata, fut))
        if not self._in_store:
            self._send()
        return fut

    def _send(self) -> None:
        batch, self._queued = self._queued[:MAX_BATCH], self._queued[MAX_BATCH:]
        self._in_store = True
        requests = [(log_id, md) for log_id, md, _ in batch]
        done = self._loop.run_in_executor(self._executor, self._activate_blocking, requests)
        done.add_done_callback(lambda f: self._landed(batch, f))

    def _activate_blocking(self, requests: list[tuple[int, EpochMetadata]]) -> Any:
        store = self._store()
        results = store.activate_many(requests)
        wanted = any(not isinstance(r, LogDeviceError) and self._needs_statuses(r[1])
                     for r in results)
        return results, (store.shard_statuses() if wanted else {})

    def _landed(self, batch: list[tuple[int, EpochMetadata, asyncio.Future[Activated]]],
                done: asyncio.Future[Any]) -> None:
        self._in_store = False
        failed = done.exception() if not done.cancelled() else asyncio.CancelledError()
        if failed is not None:
            for _, _, fut in batch:
                if not fut.done():
                    fut.set_exception(failed)
        else:
            results, statuses = done.result()
            for (_, _, fut), r in zip(batch, results, strict=True):
                if fut.done():
                    continue
                if isinstance(r, LogDeviceError):
                    fut.set_exception(r)
                else:
                    fut.set_result((r[0], r[1], statuses))
        if self._queued:
            self._send()
