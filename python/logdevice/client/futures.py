"""The futures a BufferedWriter hands out: one per payload, one per bulk call.

Every payload of a blob gets the blob's LSN, so a per-payload future need not be resolved
one by one: ``PayloadFuture`` is a thin view of its blob's future plus the payload's
``batch_offset`` (position in the blob).  Resolving a blob of 10,000 payloads is then one
``set_result``, not 10,000, and an ``append`` costs one small object instead of a full
``Future`` with its own condition variable.  It is still a ``concurrent.futures.Future``:
``result``, ``exception``, ``done``, ``add_done_callback``, ``concurrent.futures.wait``,
``as_completed`` and ``asyncio.wrap_future`` all work (they see the blob's state).

``BatchFuture`` (from ``append_many``) is a real future that resolves once every blob
holding part of the batch has: its result is a uint64 array of LSNs, one per payload, and
``batch_offsets`` (known at once) says where each payload sits in its blob.
"""

from __future__ import annotations

import concurrent.futures
import functools
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["PayloadFuture", "BatchFuture", "Segment"]

Future = concurrent.futures.Future


class PayloadFuture(Future):  # type: ignore[type-arg]
    """Future of one payload: resolves to its blob's LSN.

    Attributes
    ----------
    batch_offset : int
        The payload's position in its blob (what readers see as ``batch_offset``).
    """

    # The base class's __init__ (a Condition per future) is deliberately not called: all
    # state is the blob future's.  ``_condition``/``_state``/``_waiters`` are read by
    # ``concurrent.futures.wait`` and ``as_completed``, which have no public hook.  With
    # public methods only, each payload future would be a real one resolved from the blob
    # (add_done_callback): made so at creation, ~15x the cost of this one per append;
    # made so when first waited on, ~10x the time of ``wait`` and a Condition (~1.6 KB)
    # per payload future waited on (measured).

    def __init__(self, blob: Future[int], batch_offset: int) -> None:
        self._blob = blob
        self.batch_offset = batch_offset

    @property
    def _condition(self) -> threading.Condition:  # type: ignore[override]
        return self._blob._condition  # type: ignore[attr-defined,no-any-return]

    @property
    def _state(self) -> str:  # type: ignore[override]
        return self._blob._state  # type: ignore[attr-defined,no-any-return]

    @property
    def _waiters(self) -> _WaiterList:  # type: ignore[override]
        return _WaiterList(self)

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


class _Forward:
    """A waiter of ``concurrent.futures.wait`` or ``as_completed`` installed on a blob on
    behalf of the payload futures of that blob the call waits for: it reports each of
    them, not the blob.  One per call and blob, so adding or removing a payload future
    costs the same however many of the blob's payloads the call waits for."""

    __slots__ = ("waiter", "payloads")

    def __init__(self, waiter: Any) -> None:
        self.waiter = waiter
        self.payloads: dict[int, PayloadFuture] = {}  # id -> payload future

    def add_result(self, _future: Any) -> None:
        for payload in self.payloads.values():
            self.waiter.add_result(payload)

    def add_exception(self, _future: Any) -> None:
        for payload in self.payloads.values():
            self.waiter.add_exception(payload)

    def add_cancelled(self, _future: Any) -> None:
        for payload in self.payloads.values():
            self.waiter.add_cancelled(payload)


class _WaiterList:
    """``payload._waiters``: what ``wait``/``as_completed`` append to and remove from
    (under ``payload._condition``, the blob's)."""

    __slots__ = ("payload",)

    def __init__(self, payload: PayloadFuture) -> None:
        self.payload = payload

    def _forward(self, waiter: Any) -> tuple[list[Any], _Forward | None]:
        waiters: list[Any] = self.payload._blob._waiters  # type: ignore[attr-defined]
        for w in waiters:  # one per call waiting on the blob or on payloads of it
            if isinstance(w, _Forward) and w.waiter is waiter:
                return waiters, w
        return waiters, None

    def append(self, waiter: Any) -> None:
        waiters, forward = self._forward(waiter)
        if forward is None:
            forward = _Forward(waiter)
            waiters.append(forward)
        forward.payloads[id(self.payload)] = self.payload

    def remove(self, waiter: Any) -> None:
        waiters, forward = self._forward(waiter)
        if forward is None or forward.payloads.pop(id(self.payload), None) is None:
            raise ValueError("waiter not installed")
        if not forward.payloads:
            waiters.remove(forward)


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
