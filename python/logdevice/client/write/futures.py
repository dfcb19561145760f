"""The futures a BufferedWriter hands out: one per payload, one per bulk call.

Every payload of a blob gets the blob's LSN, so a per-payload future need not be resolved
one by one: ``PayloadFuture`` answers from its blob's future, plus the payload's
``batch_offset`` (position in the blob).  Resolving a blob of 10,000 payloads is then one
``set_result``, not 10,000, and an ``append`` costs one small object instead of a full
``Future`` with its own condition variable.  It is still a ``concurrent.futures.Future``:
``result``, ``exception``, ``done``, ``add_done_callback`` and ``asyncio.wrap_future``
ask the blob's future.  ``concurrent.futures.wait`` and ``as_completed`` read a future's
state directly, not through its methods: the first time they touch a payload future it
becomes a complete ``Future`` (the base constructor runs then) that follows its blob.  The
payload futures of one blob that are followed so share one done callback on the blob, so
waiting on n of them adds one entry to the blob, not n.

``BatchFuture`` (from ``append_many``) is a real future that resolves once every blob
holding part of the batch has: its result is a uint64 array of LSNs, one per payload, and
``batch_offsets`` (known at once) says where each payload sits in its blob.
"""

from __future__ import annotations

import concurrent.futures
import functools
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["PayloadFuture", "BatchFuture", "Segment"]

Future = concurrent.futures.Future

# Blob future -> its payload futures that follow it (made complete, waiting for it).
_followers: weakref.WeakKeyDictionary[Future[int], list[PayloadFuture]] = \
    weakref.WeakKeyDictionary()
_followers_lock = threading.Lock()
# What a PayloadFuture sets itself; any other attribute asked of it is the base class's.
_OWN = frozenset({"_blob", "batch_offset", "_following"})


class PayloadFuture(Future):  # type: ignore[type-arg]
    """Future of one payload: resolves to its blob's LSN.

    Attributes
    ----------
    batch_offset : int
        The payload's position in its blob (what readers see as ``batch_offset``).
    """

    # The base constructor (a Condition per future) runs only when something reads the
    # base class's state directly (see the module docstring): made at creation, each
    # payload future would cost ~15x this one per append (measured).

    def __init__(self, blob: Future[int], batch_offset: int) -> None:
        self._blob = blob
        self.batch_offset = batch_offset

    def __getattr__(self, name: str) -> Any:
        # Reached only for attributes not set yet: the base class's state.
        if name in _OWN or name.startswith("__"):
            raise AttributeError(name)
        self._follow()
        return object.__getattribute__(self, name)

    def _follow(self) -> None:
        """Become a complete Future resolved with the blob (once)."""
        blob = self._blob
        with _followers_lock:
            if vars(self).get("_following"):
                return
            Future.__init__(self)
            self._following = True
            waiting = _followers.get(blob)
            first = waiting is None
            if waiting is None:
                waiting = _followers[blob] = []
            waiting.append(self)
        if first:  # runs at once, in this thread, if the blob is done already
            blob.add_done_callback(_resolve_followers)

    @property
    def blob_future(self) -> Future[int]:
        """The future of the whole blob."""
        return self._blob

    def __repr__(self) -> str:
        return f"<PayloadFuture batch_offset={self.batch_offset} blob={self._blob!r}>"

    def cancel(self) -> bool:
        return False  # a payload is part of a blob; LogDevice appends cannot be cancelled

    def cancelled(self) -> bool:
        return self._blob.cancelled()

    def running(self) -> bool:
        return self._blob.running()

    def done(self) -> bool:
        return self._blob.done()

    def result(self, timeout: float | None = None) -> int:
        return self._blob.result(timeout)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        return self._blob.exception(timeout)

    def add_done_callback(self, fn: Callable[[Future[int]], object]) -> None:
        self._blob.add_done_callback(lambda _blob: fn(self))

    def set_running_or_notify_cancel(self) -> bool:
        raise RuntimeError("a PayloadFuture is resolved by its BufferedWriter")

    def set_result(self, result: Any) -> None:
        raise RuntimeError("a PayloadFuture is resolved by its BufferedWriter")

    def set_exception(self, exception: BaseException | None) -> None:
        raise RuntimeError("a PayloadFuture is resolved by its BufferedWriter")


def _resolve_followers(blob: Future[int]) -> None:
    with _followers_lock:
        waiting = _followers.pop(blob, [])
    exc = concurrent.futures.CancelledError() if blob.cancelled() else blob.exception()
    if exc is not None:
        for payload in waiting:
            Future.set_exception(payload, exc)
    else:
        lsn = blob.result()
        for payload in waiting:
            Future.set_result(payload, lsn)


class Segment:
    """Payloads ``[start, start + count)`` of a bulk call went into the blob of
    ``blob`` at positions ``first_offset ...``."""

    __slots__ = ("blob", "start", "count", "first_offset")

    def __init__(self, blob: Future[int], start: int, count: int, first_offset: int) -> None:
        self.blob = blob
        self.start = start
        self.count = count
        self.first_offset = first_offset


class BatchFuture(Future):  # type: ignore[type-arg]
    """Future of an ``append_many`` call: a uint64 array of LSNs, one per payload.

    Fails with the first blob failure (other blobs of the batch may have been stored).

    Attributes
    ----------
    batch_offsets : numpy.ndarray
        uint32, each payload's position in its blob.
    """

    def __init__(self, segments: Sequence[Segment], total: int) -> None:
        super().__init__()
        self.batch_offsets: npt.NDArray[np.uint32] = np.empty(total, dtype=np.uint32)
        self._lsns = np.zeros(total, dtype=np.uint64)
        self._lock = threading.Lock()
        self._left = len(segments)
        for seg in segments:
            self.batch_offsets[seg.start:seg.start + seg.count] = np.arange(
                seg.first_offset, seg.first_offset + seg.count, dtype=np.uint32)
        if not segments:
            self.set_result(self._lsns)
            return
        for seg in segments:
            seg.blob.add_done_callback(functools.partial(self._on_blob, seg))

    def _on_blob(self, seg: Segment, blob: Future[int]) -> None:
        exc = blob.exception() if not blob.cancelled() else \
            concurrent.futures.CancelledError()
        with self._lock:
            if self.done():
                return
            if exc is not None:
                self.set_exception(exc)
                return
            self._lsns[seg.start:seg.start + seg.count] = blob.result()
            self._left -= 1
            if self._left == 0:
                self.set_result(self._lsns)
