"""BufferedWriter bookkeeping without I/O: per-log batches, triggers, memory, blob bytes.

- ``Batcher``: payloads in, ready ``Batch``es out.  A log's batch is cut when its
  payload bytes reach ``size_trigger``, its count reaches ``count_trigger``, its age
  reaches ``time_trigger`` (``due(now)``), or when the next payload would make the blob
  larger than ``max_blob_size`` (then the batch is cut *before* it).  Bulk adds
  (``add_many``) are cut with ``np.searchsorted`` over cumulative sizes: no per-payload
  Python work beyond what the caller's list already costs.
- ``MemoryBudget``: bytes buffered + in flight against a limit; ``acquire`` either waits
  or raises ``NoBufsError``.
- ``encode_batch``: a batch's parts into one blob with ``ldcore.codec``.

Not thread safe: the BufferedWriter calls the ``Batcher`` under its lock.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ldcore import codec
from logdevice.client.write.futures import PayloadFuture, Segment
from logdevice.errors import E, LogDeviceError, NoBufsError

__all__ = ["Batch", "Batcher", "MemoryBudget", "encode_batch", "BLOB_OVERHEAD",
           "PER_PAYLOAD_OVERHEAD"]

# Upper bounds on what the codec adds: header (magic, flags, crc, count varint, size
# varint) and one length varint per payload (5 bytes holds lengths below 32 GiB).
BLOB_OVERHEAD = 32
PER_PAYLOAD_OVERHEAD = 5

# A part: payloads as a list of bytes, or (buffer, offsets) with offsets[0] == 0.
Part = list[bytes] | tuple[bytes, npt.NDArray[np.uint64]]


class Batch:
    """Payloads of one log that travel as one blob (one APPEND)."""

    __slots__ = ("log_id", "parts", "count", "nbytes", "future", "deadline", "seq",
                 "blob", "attempts")

    def __init__(self, log_id: int, future: concurrent.futures.Future[int],
                 deadline: float | None, seq: int) -> None:
        self.log_id = log_id
        self.parts: list[Part] = []
        self.count = 0
        self.nbytes = 0  # payload bytes (what the memory budget counts)
        self.future = future  # resolves to the blob's LSN
        self.deadline = deadline  # time trigger (clock), None if none
        self.seq = seq  # order in which batches were cut (per writer)
        self.blob: bytes | None = None  # set by encode
        self.attempts = 0

    def __repr__(self) -> str:
        return f"<Batch log={self.log_id} #{self.seq} {self.count} payloads {self.nbytes} B>"

    @property
    def blob_size_bound(self) -> int:
        return self.nbytes + PER_PAYLOAD_OVERHEAD * self.count + BLOB_OVERHEAD

    def add_one(self, payload: bytes) -> int:
        """Append a payload; its batch offset."""
        parts = self.parts
        if parts and type(parts[-1]) is list:
            parts[-1].append(payload)
        else:
            parts.append([payload])
        off = self.count
        self.count += 1
        self.nbytes += len(payload)
        return off


class Batcher:
    """Per-log batches and their triggers.

    Parameters
    ----------
    size_trigger : int or None
        Cut a log's batch once it holds this many payload bytes.
    count_trigger : int or None
        Cut once it holds this many payloads.
    time_trigger : float or None
        Cut once its first payload is this many seconds old (see ``due``).
    max_blob_size : int
        Hard cap on the encoded blob (the cluster's max payload size).
    clock : callable
        Monotonic seconds.
    """

    def __init__(self, *, size_trigger: int | None, count_trigger: int | None,
                 time_trigger: float | None, max_blob_size: int,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.size_trigger = size_trigger if size_trigger is not None else 1 << 62
        self.count_trigger = count_trigger if count_trigger is not None else 1 << 62
        self.time_trigger = time_trigger
        self.max_blob_size = max_blob_size
        self.clock = clock
        self._pending: dict[int, Batch] = {}
        self._seq = itertools.count()

    # ------------------------------------------------------------------ state

    @property
    def buffered_logs(self) -> int:
        return len(self._pending)

    def pending(self, log_id: int) -> Batch | None:
        return self._pending.get(log_id)

    def next_deadline(self) -> float | None:
        """The earliest time trigger among buffered batches (None: nothing timed)."""
        deadlines = [b.deadline for b in self._pending.values() if b.deadline is not None]
        return min(deadlines) if deadlines else None

    # ------------------------------------------------------------------ adding

    def _open(self, log_id: int) -> Batch:
        b = self._pending.get(log_id)
        if b is None:
            deadline = None if self.time_trigger is None else self.clock() + self.time_trigger
            b = Batch(log_id, concurrent.futures.Future(), deadline, next(self._seq))
            self._pending[log_id] = b
        return b

    def _triggered(self, b: Batch) -> bool:
        return b.nbytes >= self.size_trigger or b.count >= self.count_trigger

    def add(self, log_id: int, payload: bytes) -> tuple[PayloadFuture, list[Batch]]:
        """Buffer one payload; its future and the batches this cut (in order)."""
        ready: list[Batch] = []
        b = self._pending.get(log_id)
        if b is not None and b.count and (
                b.blob_size_bound + len(payload) + PER_PAYLOAD_OVERHEAD > self.max_blob_size):
            ready.append(self._pending.pop(log_id))
            b = None
        if b is None:
            b = self._open(log_id)
        fut = PayloadFuture(b.future, b.add_one(payload))
        if self._triggered(b):
            ready.append(self._pending.pop(log_id))
        return fut, ready

    def add_many(self, log_id: int, payloads: Sequence[bytes] | None,
                 offsets: npt.NDArray[np.uint64], buffer: Any = None
                 ) -> tuple[list[Segment], list[Batch]]:
        """Buffer many payloads at once: either ``payloads`` (a list of bytes, with
        ``offsets`` their n + 1 cumulative boundaries) or ``buffer`` with ``offsets``
        (payload i = ``buffer[offsets[i]:offsets[i+1]]``; the bytes are copied here).

        Returns the segments (which blob each run of payloads went to, for the batch's
        future) and the batches this cut, in order.
        """
        n = len(offsets) - 1
        segments: list[Segment] = []
        ready: list[Batch] = []
        mv = memoryview(buffer).cast("B") if buffer is not None else None
        # bound[j]: blob bytes that payloads [0, j) add, length varints included
        bound = offsets + np.arange(n + 1, dtype=np.uint64) * np.uint64(PER_PAYLOAD_OVERHEAD)
        i = 0
        while i < n:
            b = self._open(log_id)
            base_bytes = int(offsets[i])
            base_bound = int(bound[i])
            # most payloads that fit under the blob cap
            room = self.max_blob_size - b.blob_size_bound
            k_max = int(np.searchsorted(bound[i + 1:], base_bound + room, side="right"))
            if k_max == 0:
                if b.count:
                    ready.append(self._pending.pop(log_id))
                    continue
                k_max = 1  # a single payload over the cap: the caller checked its size
            # fewest payloads that reach the size trigger
            need = self.size_trigger - b.nbytes
            k_size = int(np.searchsorted(offsets[i + 1:], base_bytes + need, side="left")) + 1
            k = min(n - i, k_max, k_size, self.count_trigger - b.count)
            segments.append(Segment(b.future, i, k, b.count))
            end_bytes = int(offsets[i + k])
            if mv is not None:
                rel = (offsets[i:i + k + 1] - np.uint64(base_bytes)).astype(np.uint64)
                b.parts.append((bytes(mv[base_bytes:end_bytes]), rel))
            else:
                assert payloads is not None
                b.parts.append(list(payloads[i:i + k]))
            b.count += k
            b.nbytes += end_bytes - base_bytes
            i += k
            if self._triggered(b) or k == k_max and i < n:
                ready.append(self._pending.pop(log_id))
        return segments, ready

    # ------------------------------------------------------------------ cutting

    def due(self, now: float | None = None) -> list[Batch]:
        """Cut every batch whose time trigger has passed, oldest first."""
        if self.time_trigger is None:
            return []
        now = self.clock() if now is None else now
        logs = [k for k, b in self._pending.items() if b.deadline is not None and
                b.deadline <= now]
        out = [self._pending.pop(k) for k in logs]
        out.sort(key=lambda b: b.seq)
        return out

    def cut_all(self) -> list[Batch]:
        """Cut every buffered batch (``flush``), in the order they were started."""
        out = sorted(self._pending.values(), key=lambda b: b.seq)
        self._pending.clear()
        return out


def payload_offsets(payloads: Sequence[Any]) -> npt.NDArray[np.uint64]:
    """n + 1 cumulative boundaries of a list of bytes."""
    n = len(payloads)
    offsets = np.zeros(n + 1, dtype=np.uint64)
    if n:
        np.cumsum(np.fromiter(map(len, payloads), dtype=np.uint64, count=n), out=offsets[1:])
    return offsets


def encode_batch(batch: Batch, *, compression: str = "zstd", level: int = 1,
                 producer: tuple[int, int] | None = None) -> bytes:
    """The batch's payloads as one ``ldcore.codec`` blob (zstd kept only if smaller),
    with ``producer`` (writer id, blob sequence number) in its header when given."""
    parts = batch.parts
    lists = [p for p in parts if isinstance(p, list)]
    if len(lists) == len(parts):
        flat: list[bytes] = lists[0] if len(lists) == 1 else list(
            itertools.chain.from_iterable(lists))
        return codec.encode(flat, compression=compression, level=level, producer=producer)
    bufs: list[bytes] = []
    offs: list[npt.NDArray[np.uint64]] = []
    base = 0
    for p in parts:
        if isinstance(p, list):
            off = payload_offsets(p)
            buf = b"".join(p)
        else:
            buf, off = p
        offs.append(off[:-1] + np.uint64(base))
        bufs.append(buf)
        base += len(buf)
    offsets = np.concatenate(offs + [np.array([base], dtype=np.uint64)])
    data = np.frombuffer(b"".join(bufs), dtype=np.uint8)
    return codec.encode((data, offsets), compression=compression, level=level,
                        producer=producer)


class MemoryBudget:
    """Bytes buffered + in flight, against ``limit`` (None: unlimited).

    A request that does not fit waits (``block``) or raises ``NoBufsError``.  When
    nothing is in use any single request fits, so a payload larger than the limit is not
    refused forever.  Also counts unfinished batches so ``wait_idle`` can wait for them.
    """

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.used = 0
        self.batches = 0  # cut and not yet finished
        self.cond = threading.Condition()
        self.closed: BaseException | None = None

    def fits(self, n: int) -> bool:
        return self.limit is None or self.used == 0 or self.used + n <= self.limit

    def try_acquire(self, n: int) -> bool:
        with self.cond:
            if self.closed is not None:
                raise self.closed
            if self.fits(n):
                self.used += n
                return True
            return False

    def acquire(self, n: int, *, block: bool, on_wait: Callable[[], None] | None = None,
                timeout: float | None = None) -> None:
        """Take ``n`` bytes.  ``on_wait`` runs (unlocked) once before waiting, so the
        caller can flush what it buffered and let in-flight bytes drain."""
        if self.try_acquire(n):
            return
        if not block:
            raise NoBufsError(message=f"BufferedWriter memory limit: {self.used} B in use, "
                                      f"{n} B more would exceed {self.limit} B")
        if on_wait is not None:
            on_wait()
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.cond:
            while True:
                if self.closed is not None:
                    raise self.closed
                if self.fits(n):
                    self.used += n
                    return
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise LogDeviceError(E.TIMEDOUT, "waited too long for BufferedWriter memory")
                self.cond.wait(remaining)

    def release(self, n: int, batches: int = 0) -> None:
        with self.cond:
            self.used -= n
            self.batches -= batches
            self.cond.notify_all()

    def add_batches(self, k: int) -> None:
        with self.cond:
            self.batches += k

    def wait_idle(self, timeout: float | None) -> bool:
        """Wait until no batch is unfinished; False on timeout."""
        with self.cond:
            return self.cond.wait_for(lambda: self.batches <= 0, timeout)

    def close(self, exc: BaseException) -> None:
        with self.cond:
            self.closed = exc
            self.cond.notify_all()
