"""``BufferedWriter``: many small payloads per log batched into one record per APPEND.

Payloads are buffered per log (``batching.Batcher``) until a size, count or time trigger
cuts the batch; the batch is encoded into one blob (``ldcore.codec``, zstd kept only if
it shrinks it) by the writer's encoder thread and sent by the client's loop as one APPEND
flagged ``BUFFERED_WRITER_BLOB``.  Every payload of the blob resolves to the blob's LSN;
readers tell them apart by ``batch_offset``.

Threads: producers call ``append``/``append_many`` from any thread (a lock guards the
batches); one encoder thread per writer compresses blobs in the order batches were cut
(so zstd does not stall the loop, and the GIL is released while it runs); the client's
loop thread sends, retries and resolves futures, and runs the time trigger.

Modes:

- ``"independent"``: every blob is sent as soon as it is encoded; many may be in flight
  per log (a retried one may then land after blobs cut after it).
- ``"one_at_a_time"``: per log, the next blob is sent only when the previous one is
  finished (acknowledged, or failed after its retries): blobs of a log get increasing
  LSNs in the order they were cut, retries included.

Failures with a retryable status (``retry.WRITER_RETRYABLE``: NOSEQUENCER, SEQNOBUFS,
TIMEDOUT, OVERLOADED, CONNFAILED, PEER_CLOSED, ...) are retried up to ``retries`` times
with exponential backoff; others (or the last one) fail every payload of the blob.  A
retried blob is the same blob (the writer's id and the blob's sequence number are in its
header), so the sequencer answers it with its first attempt's LSN if that attempt was
stored, also after any number of sequencer failovers (``sequencer.writer_recall``).

Order: in both modes a log's blobs are written to the wire in the order they were cut
(``send_order``), so they get LSNs in that order unless one of them failed and was
retried while later ones were already on their way.

Memory: bytes buffered plus bytes in flight are counted against ``memory_limit_bytes``;
beyond it ``append`` waits (``block=True``) or raises ``NoBufsError`` (E.NOBUFS).
"""

from __future__ import annotations

import asyncio
import collections
import queue
import secrets
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypedDict

import numpy as np

from ldcore.checksum import crc32c
from logdevice import validate
from logdevice.backoff import ExponentialBackoff
from logdevice.client.context import ClientContext, HasContext, context_of
from logdevice.client.net.retry import JITTER, WRITER_RETRYABLE
from logdevice.client.write.batching import (
    BLOB_OVERHEAD,
    PER_PAYLOAD_OVERHEAD,
    Batch,
    Batcher,
    MemoryBudget,
    encode_batch,
    payload_offsets,
)
from logdevice.client.write.futures import BatchFuture, PayloadFuture
from logdevice.client.write.payloads import as_byte_view, as_payload
from logdevice.errors import E, InvalidParamError, LogDeviceError, error_for
from logdevice.protocol import AppendFlag

__all__ = ["BufferedWriter", "BufferedWriterKwargs", "MODES"]

MODES = ("independent", "one_at_a_time")
_STOP = object()


class BufferedWriterKwargs(TypedDict, total=False):
    """The keyword options of ``Client.create_buffered_writer``
    (``**options: Unpack[BufferedWriterKwargs]``): the keyword parameters of
    ``BufferedWriter``, by name and type (a unit test keeps the two the same).  Their
    meaning and defaults are documented on ``BufferedWriter``; any other name is refused
    with ``InvalidParamError`` listing these."""

    size_trigger: int | None
    time_trigger: float | None
    count_trigger: int | None
    compression: str | None
    compression_level: int
    mode: Literal["independent", "one_at_a_time"] | str
    retries: int
    backoff: float | tuple[float, float]
    memory_limit_bytes: int | None
    block: bool
    writer_id: int | None


#: The names ``BufferedWriterKwargs`` allows.
OPTION_NAMES = frozenset(BufferedWriterKwargs.__annotations__)


def check_option_names(options: Mapping[str, object]) -> None:
    """``InvalidParamError`` naming the known options unless every name of ``options`` is
    one of ``BufferedWriterKwargs``."""
    for name in options:
        if name not in OPTION_NAMES:
            raise InvalidParamError(message=f"unknown buffered writer option {name!r} "
                                            f"(known: {', '.join(sorted(OPTION_NAMES))})")


class BufferedWriter:
    """Batches appends per log; made by ``client.create_buffered_writer(...)``.

    Parameters
    ----------
    client : Client or ClientContext
        The client to append through (``client.create_buffered_writer`` hands its
        context).  When the client closes, what the writer did not get acknowledged fails
        with E.SHUTDOWN.
    size_trigger : int or None
        Send a log's batch once it holds this many payload bytes (default 1 MB).
    time_trigger : float or None
        Send a log's batch at most this many seconds after its first payload (default
        0.05).  None: only size/count triggers and ``flush``.
    count_trigger : int or None
        Send a log's batch once it holds this many payloads (default None).
    compression : {"zstd", "none"}
        Blob compression; zstd is kept only if it makes the blob smaller.
    compression_level : int
        zstd level (default 1).
    mode : {"independent", "one_at_a_time"}
    retries : int
        Retries of a blob after a retryable failure (default 3).
    backoff : float or (float, float)
        Initial (and maximum) delay between retries, seconds (default (0.05, 2.0)).
    memory_limit_bytes : int or None
        Limit on buffered + in-flight payload bytes (default 256 MiB; None: no limit).
    block : bool
        Over the memory limit, ``append`` waits (True) or raises ``NoBufsError``.
    writer_id : int or None
        The writer's id in every blob header (1 .. 2**64 - 1; default: random).  A writer
        that repeats another's work (a rerun of a failed task) may take the same id:
        blob n of the rerun is then recognised as blob n of the first run and answered
        with its LSN, not stored again, as long as the blobs are cut the same way
        (``time_trigger=None`` and the same payloads, calls and ``flush`` points).  A
        blob n with other contents is refused (INVALID_PARAM): never give one id to two
        writers of different data.
    """

    def __init__(self, client: HasContext | ClientContext, *, size_trigger: int | None = 1_000_000,
                 time_trigger: float | None = 0.05, count_trigger: int | None = None,
                 compression: str | None = "zstd", compression_level: int = 1,
                 mode: Literal["independent", "one_at_a_time"] | str = "independent",
                 retries: int = 3, backoff: float | tuple[float, float] = (0.05, 2.0),
                 memory_limit_bytes: int | None = 256 * 1024 * 1024,
                 block: bool = True, writer_id: int | None = None) -> None:
        mode = str(mode).lower()
        if mode not in MODES:
            raise InvalidParamError(message=f"mode must be one of {MODES}, got {mode!r}")
        compression = "none" if compression is None else str(compression).lower()
        if compression not in ("zstd", "none"):
            raise InvalidParamError(message=f"compression must be 'zstd' or 'none', "
                                            f"got {compression!r}")
        for name, v in (("size_trigger", size_trigger), ("count_trigger", count_trigger),
                        ("memory_limit_bytes", memory_limit_bytes)):
            if v is not None:
                validate.count(v, name, minimum=1)
        validate.optional_timeout(time_trigger, "time_trigger")
        if writer_id is not None and (isinstance(writer_id, bool) or not isinstance(
                writer_id, int) or not 0 < writer_id < 2**64):
            raise InvalidParamError(message=f"writer_id must be an int in 1 .. 2**64 - 1, "
                                            f"got {writer_id!r}")
        validate.count(retries, "retries")
        lo, hi = (backoff, max(backoff, 2.0)) if isinstance(backoff, int | float) else backoff
        if not 0 <= lo <= hi:
            raise InvalidParamError(message=f"backoff must satisfy 0 <= initial <= max, "
                                            f"got {backoff!r}")
        ctx = context_of(client)
        ctx.check_open()
        self._ctx = ctx
        self.mode = mode
        self.compression = compression
        self.compression_level = compression_level
        self.retries = retries
        self.backoff = (float(lo), float(hi))
        self.block = block
        self.max_blob_size = ctx.settings.max_payload_size
        self._batcher = Batcher(size_trigger=size_trigger, count_trigger=count_trigger,
                                time_trigger=time_trigger, max_blob_size=self.max_blob_size)
        self._budget = MemoryBudget(memory_limit_bytes)
        self._lock = threading.Lock()
        self._closed: LogDeviceError | None = None  # no more appends
        self._aborted: LogDeviceError | None = None  # client closing: fail what is left
        self._loop = ctx.loop
        # encoder thread: batches in cut order
        self._encode_q: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._encoder = threading.Thread(target=self._encode_main, daemon=True,
                                         name="logdevice-bw-encoder")
        self._encoder.start()
        # loop side
        self._timer: asyncio.TimerHandle | None = None
        self._timer_armed = False  # guarded by _lock: a timer is (being) scheduled
        self._waiting: dict[int, collections.deque[Batch]] = {}  # one_at_a_time queues
        self._busy: set[int] = set()  # one_at_a_time: logs with a blob in flight
        self._tasks: set[asyncio.Task[None]] = set()
        # Goes into every blob's header with the blob's sequence number, so the sequencer
        # recognises a retried blob and does not store it twice.
        self.writer_id = secrets.randbits(64) | 1 if writer_id is None else writer_id
        self.stats = {"blobs": 0, "payloads": 0, "retries": 0, "failed_blobs": 0,
                      "blob_bytes": 0, "payload_bytes": 0}
        ctx.on_close(self._abort)

    @property
    def client(self) -> HasContext | None:
        """The ``Client`` this writer appends through (None once it was collected; the
        writer keeps working with the client's context)."""
        return self._ctx.client  # type: ignore[no-any-return]

    @property
    def buffered_bytes(self) -> int:
        """Payload bytes buffered or in flight: what ``memory_limit_bytes`` bounds."""
        return self._budget.used

    def __repr__(self) -> str:
        return (f"<BufferedWriter {self.mode} {self._budget.used} B buffered/in flight, "
                f"{self._budget.batches} batches>")

    # ------------------------------------------------------------------ producer side

    def _check(self, log_id: int) -> None:
        if self._closed is not None:
            raise self._closed
        self._ctx.log_group(log_id)

    def append(self, log_id: int, payload: Any) -> PayloadFuture:
        """Buffer one payload for ``log_id``.

        Returns
        -------
        PayloadFuture
            Resolves to the LSN of the blob the payload travels in; ``.batch_offset``
            is its position there.

        Raises
        ------
        NotFoundError, TooBigError, InvalidParamError
            Bad input.
        NoBufsError
            Over the memory limit with ``block=False``.
        """
        self._check(log_id)
        data = as_payload(payload)
        n = len(data)
        if n + PER_PAYLOAD_OVERHEAD + BLOB_OVERHEAD > self.max_blob_size:
            raise error_for(E.TOOBIG, f"payload of {n} bytes does not fit a blob of at most "
                                      f"{self.max_blob_size} bytes")
        self._acquire(n)
        with self._lock:
            if self._closed is not None:
                self._budget.release(n)
                raise self._closed
            fut, ready = self._batcher.add(log_id, data)
            self._dispatch_locked(ready)
        return fut

    def append_many(self, log_id: int, payloads: Sequence[Any] | tuple[Any, Any]
                    ) -> BatchFuture:
        """Buffer many payloads for ``log_id`` in one call.

        Parameters
        ----------
        payloads : list of bytes, or ``(buffer, offsets)``
            The payloads, or one buffer holding them back to back with n + 1 integer
            boundaries (payload i is ``buffer[offsets[i]:offsets[i + 1]]``); the buffer
            is copied, so it may be reused at once.

        Returns
        -------
        BatchFuture
            Resolves to a uint64 numpy array with each payload's LSN (the LSN of the blob
            it went into); ``.batch_offsets`` holds each payload's position in its blob.
            Fails with the first failing blob's error.
        """
        self._check(log_id)
        buffer: Any = None
        items: Sequence[bytes] | None = None
        if isinstance(payloads, tuple) and len(payloads) == 2 and not isinstance(
                payloads[1], bytes | bytearray | str | memoryview):
            buffer, raw_offsets = payloads
            signed = np.ascontiguousarray(raw_offsets, dtype=np.int64)
            buffer = as_byte_view(buffer, "buffer")
            size = buffer.nbytes
            if signed.ndim != 1 or len(signed) == 0 or signed[0] != 0 or \
                    signed[-1] != size or bool(np.any(np.diff(signed) < 0)):
                raise InvalidParamError(message="offsets must be n + 1 non-decreasing "
                                                "boundaries from 0 to len(buffer)")
            offsets = signed.astype(np.uint64)
        else:
            items = list(payloads)
            if not all(type(p) is bytes for p in items):
                items = [as_payload(p) for p in items]
            offsets = payload_offsets(items)
        n = len(offsets) - 1
        if n:
            biggest = int(np.max(np.diff(offsets)))
            if biggest + PER_PAYLOAD_OVERHEAD + BLOB_OVERHEAD > self.max_blob_size:
                raise error_for(E.TOOBIG, f"a payload of {biggest} bytes does not fit a blob "
                                          f"of at most {self.max_blob_size} bytes")
        total = int(offsets[-1])
        self._acquire(total)
        with self._lock:
            if self._closed is not None:
                self._budget.release(total)
                raise self._closed
            segments, ready = self._batcher.add_many(log_id, items, offsets, buffer)
            self._dispatch_locked(ready)
        return BatchFuture(segments, n)

    def _acquire(self, n: int) -> None:
        block = self.block
        if block and self._loop.in_loop_thread():
            block = False  # waiting there would stop the loop that frees memory
        self._budget.acquire(n, block=block, on_wait=self._flush_nowait)

    def _flush_nowait(self) -> None:
        self.flush()

    def flush(self, wait: bool = False, timeout: float | None = None) -> bool:
        """Send every buffered batch now.

        Parameters
        ----------
        wait : bool
            Also wait until every batch cut so far has finished (acknowledged or failed).
        timeout : float, optional
            Bound on that wait (seconds).

        Returns
        -------
        bool
            False if the wait timed out.
        """
        with self._lock:
            self._dispatch_locked(self._batcher.cut_all())
        if wait:
            return self._budget.wait_idle(timeout)
        return True

    def _dispatch_locked(self, ready: list[Batch]) -> None:
        if ready:
            self._budget.add_batches(len(ready))
            for b in ready:
                self._encode_q.put(b)
        if self._batcher.time_trigger is not None and not self._timer_armed \
                and self._batcher.buffered_logs:
            self._timer_armed = True
            self._loop.call_soon(self._arm_timer)

    # ------------------------------------------------------------------ encoder thread

    def _encode_main(self) -> None:
        q = self._encode_q
        while True:
            b = q.get()
            if b is _STOP:
                return
            if self._aborted is not None:
                if not b.future.done():
                    b.future.set_exception(self._aborted)
                continue
            try:
                b.blob = encode_batch(b, compression=self.compression,
                                      level=self.compression_level,
                                      producer=(self.writer_id, b.seq + 1))
            except Exception as exc:  # a codec bug must not kill the thread silently
                err = LogDeviceError(E.BADPAYLOAD, f"could not encode the batch: {exc}")
                self._loop.call_soon(self._finish, b, None, err)
                continue
            b.parts = []  # the blob holds the bytes now
            try:
                self._loop.call_soon(self._on_encoded, b)
            except RuntimeError:  # the loop is gone (client closed)
                return

    # ------------------------------------------------------------------ loop side

    def _arm_timer(self) -> None:
        with self._lock:
            deadline = self._batcher.next_deadline()
            if deadline is None or self._closed is not None:
                self._timer_armed = False
                return
        loop = self._loop.loop
        delay = max(0.0, deadline - self._batcher.clock())
        self._timer = loop.call_at(loop.time() + delay, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        with self._lock:
            self._timer_armed = False
            self._dispatch_locked(self._batcher.due())

    def _on_encoded(self, b: Batch) -> None:
        if self._aborted is not None:
            self._finish(b, None, self._aborted)
            return
        if self.mode == "one_at_a_time":
            if b.log_id in self._busy:
                self._waiting.setdefault(b.log_id, collections.deque()).append(b)
                return
            self._busy.add(b.log_id)
        self._start(b)

    def _start(self, b: Batch) -> None:
        task = self._loop.loop.create_task(self._send(b))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, b: Batch) -> None:
        ctx = self._ctx
        blob = b.blob
        assert blob is not None
        flags = int(AppendFlag.BUFFERED_WRITER_BLOB)
        checksum = 0
        if ctx.settings.append_checksum:
            flags |= int(AppendFlag.CHECKSUM)
            checksum = crc32c(blob)
        backoff = ExponentialBackoff(*self.backoff, jitter=JITTER)
        try:
            while True:
                b.attempts += 1
                try:
                    reply = await ctx.core.append(b.log_id, blob, flags, checksum,
                                                  ctx.timeout)
                except LogDeviceError as exc:
                    if exc.status in WRITER_RETRYABLE and b.attempts <= self.retries \
                            and self._aborted is None:
                        self.stats["retries"] += 1
                        await asyncio.sleep(backoff.next_delay())
                        continue
                    self._finish(b, None, exc)
                    return
                self._finish(b, int(reply.lsn), None)
                return
        except asyncio.CancelledError:
            self._finish(b, None, LogDeviceError(E.SHUTDOWN, "the client was closed"))
            raise

    def _finish(self, b: Batch, lsn: int | None, exc: BaseException | None) -> None:
        if not b.future.done():
            if exc is None:
                b.future.set_result(lsn)  # type: ignore[arg-type]
            else:
                b.future.set_exception(exc)
        st = self.stats
        if exc is None:
            st["blobs"] += 1
            st["payloads"] += b.count
            st["payload_bytes"] += b.nbytes
            st["blob_bytes"] += len(b.blob or b"")
        else:
            st["failed_blobs"] += 1
        b.blob = None
        self._budget.release(b.nbytes, 1)
        if self.mode == "one_at_a_time" and b.log_id in self._busy:
            q = self._waiting.get(b.log_id)
            if q and self._aborted is not None:
                del self._waiting[b.log_id]
                for other in q:
                    self._finish(other, None, self._aborted)
                q = None
            if q:
                self._start(q.popleft())
                if not q:
                    del self._waiting[b.log_id]
            else:
                self._busy.discard(b.log_id)

    # ------------------------------------------------------------------ closing

    def close(self, timeout: float | None = None) -> bool:
        """Send what is buffered, wait until everything finished, then refuse appends.

        Returns False if ``timeout`` (seconds) passed first; unfinished blobs keep going
        until the client closes.
        """
        with self._lock:
            if self._closed is None:
                self._closed = LogDeviceError(E.SHUTDOWN, "the BufferedWriter is closed")
                self._dispatch_locked(self._batcher.cut_all())
        idle = self._budget.wait_idle(timeout)
        self._encode_q.put(_STOP)
        return idle

    def _abort(self, exc: LogDeviceError) -> None:
        """The client is closing: fail everything not yet acknowledged with ``exc``."""
        with self._lock:
            self._closed = self._aborted = exc
            pending = self._batcher.cut_all()
        self._budget.close(exc)
        for b in pending:
            if not b.future.done():
                b.future.set_exception(exc)
        # Let the encoder finish its current blob: its hand-off to the loop then runs
        # before the loop's shutdown step, which cancels (and so fails) every send.
        self._encode_q.put(_STOP)
        if self._encoder.is_alive() and threading.current_thread() is not self._encoder:
            self._encoder.join(5.0)

        def fail_waiting() -> None:  # on the loop: _waiting belongs to it
            waiting = list(self._waiting.values())
            self._waiting.clear()
            for q in waiting:
                for b in q:
                    self._finish(b, None, exc)

        try:
            self._loop.call_soon(fail_waiting)
        except RuntimeError:
            fail_waiting()

    def __enter__(self) -> BufferedWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
