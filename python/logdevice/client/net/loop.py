"""The client's own event loop, running in one background daemon thread.

Every network action of a client happens on this loop; user threads hand it work through
``submit`` (returns a ``concurrent.futures.Future``) or ``run`` (waits, bounded);
coroutines of other event loops ``await`` it through ``wait`` (no thread waits).
Submissions are queued and the loop is woken once per burst rather than once per call,
so a producer making many ``append_async`` calls does not pay a self-pipe write each.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import os
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from logdevice.errors import E, InvalidParamError, LogDeviceError, TimedOutError

__all__ = ["LoopThread", "LOOP_SLACK"]

log = logging.getLogger(__name__)
T = TypeVar("T")
CoroFn = Callable[..., Coroutine[Any, Any, Any]]

#: Added to a call's timeout when a caller waits for a coroutine that enforces that
#: timeout itself: it only catches a stuck loop.
LOOP_SLACK = 5.0


def new_loop(kind: str | None = None) -> asyncio.AbstractEventLoop:
    """A new event loop of ``kind``: "uvloop" (``InvalidParamError`` if it is not
    installed) or "asyncio"; None: ``LOGDEVICE_CLIENT_LOOP`` if set (same values), else
    uvloop when it is installed (the node runs on it too: a fifth to a quarter less CPU
    per append than asyncio's, measured), else asyncio's."""
    if kind is None:
        kind = os.environ.get("LOGDEVICE_CLIENT_LOOP") or None
    if kind not in (None, "uvloop", "asyncio"):
        raise InvalidParamError(message=f"event loop {kind!r}: expected uvloop or asyncio")
    if kind != "asyncio":
        try:
            import uvloop  # optional ("server" extra): asyncio's loop without it
        except ImportError:
            if kind == "uvloop":
                raise InvalidParamError(message="event loop uvloop asked for, but uvloop "
                                                "is not installed") from None
        else:
            return uvloop.new_event_loop()  # type: ignore[no-any-return]
    return asyncio.new_event_loop()


class LoopFuture(concurrent.futures.Future[Any]):
    """The future of a coroutine submitted to a ``LoopThread``; ``task`` is its asyncio
    task once the loop started it (``run`` cancels that on a timeout)."""

    task: asyncio.Task[Any] | None = None


class LoopThread:
    """An asyncio loop in a daemon thread.

    Parameters
    ----------
    name : str
        The thread's name.
    kind : str, optional
        "uvloop" or "asyncio" (see ``new_loop``; None: the default choice).
    """

    def __init__(self, name: str = "logdevice-client", kind: str | None = None) -> None:
        self.loop = new_loop(kind)
        self.loop.set_exception_handler(self._on_loop_error)
        self._lock = threading.Lock()
        self._inbox: list[tuple[LoopFuture, CoroFn, tuple[Any, ...]]] = []
        self._wake_scheduled = False
        self._stopped = False
        self._ready = threading.Event()
        self.thread = threading.Thread(target=self._main, name=name, daemon=True)
        self.thread.start()
        self._ready.wait()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._ready.set)
        try:
            self.loop.run_forever()
        finally:
            self._ready.set()

    @staticmethod
    def _on_loop_error(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        # A request whose caller gave up may fail later with nobody listening: not news.
        exc = context.get("exception")
        if isinstance(exc, LogDeviceError):
            return
        log.error("client loop: %s", context.get("message"), exc_info=exc)

    def in_loop_thread(self) -> bool:
        return threading.get_ident() == self.thread.ident

    # ------------------------------------------------------------------ hand-off

    def submit(self, fn: CoroFn, *args: Any) -> LoopFuture:
        """Run ``fn(*args)`` (a coroutine function) on the loop; its Future.

        Once the coroutine started, ``cancel()`` on the future has no effect (as for
        LogDevice's appends: what was sent may still land).
        """
        fut = LoopFuture()
        with self._lock:
            if self._stopped:
                raise LogDeviceError(E.SHUTDOWN, "the client is closed")
            self._inbox.append((fut, fn, args))
            wake = not self._wake_scheduled
            self._wake_scheduled = True
        if wake:
            self.loop.call_soon_threadsafe(self._drain)
        return fut

    def call_soon(self, fn: Callable[..., Any], *args: Any) -> None:
        """Call ``fn(*args)`` on the loop thread (from any thread)."""
        if self.in_loop_thread():
            self.loop.call_soon(fn, *args)
        else:
            self.loop.call_soon_threadsafe(fn, *args)

    def _drain(self) -> None:
        with self._lock:
            items, self._inbox = self._inbox, []
            self._wake_scheduled = False
        for fut, fn, args in items:
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                task = self.loop.create_task(fn(*args))
            except BaseException as exc:  # fn raised before returning a coroutine
                fut.set_exception(exc)
                continue
            task.add_done_callback(functools.partial(_copy_outcome, fut))
            fut.task = task

    def run(self, fn: CoroFn, *args: Any, timeout: float) -> Any:
        """Run ``fn(*args)`` on the loop and wait for it, at most ``timeout`` seconds.

        The coroutine should enforce its own deadline; this bound is a safety net that
        turns a stuck call into ``TimedOutError`` (and cancels it).
        """
        if self.in_loop_thread():
            raise InvalidParamError(
                message="a blocking client call from the client's own loop thread (a future "
                        "callback) would deadlock; use the *_async form there")
        fut = self.submit(fn, *args)
        try:
            return fut.result(timeout)
        except TimeoutError:
            if fut.done() and not fut.cancelled():
                raise  # the coroutine's own TimedOutError
            raise self._give_up(fut, timeout) from None

    async def wait(self, fn: CoroFn, *args: Any, timeout: float) -> Any:
        """``run`` for a coroutine of another event loop: awaits ``fn(*args)`` on this
        loop through its future (``asyncio.wrap_future``), so no thread waits for it.
        Bounded and cancelled as ``run``; cancelling the awaiting task leaves the call
        running, as an append that was sent."""
        fut = self.submit(fn, *args)
        wrapped = asyncio.wrap_future(fut)
        done, _ = await asyncio.wait({wrapped}, timeout=timeout)
        if not done:
            raise self._give_up(fut, timeout)
        return wrapped.result()

    def _give_up(self, fut: LoopFuture, timeout: float) -> TimedOutError:
        """A call not answered within ``timeout``: cancel it, and the error to raise."""
        if not fut.cancel() and fut.task is not None:  # started: cancel the task
            self.loop.call_soon_threadsafe(fut.task.cancel)
        return TimedOutError(message=f"no answer within {timeout:g} s")

    # ------------------------------------------------------------------ shutdown

    def stop(self, shutdown: CoroFn | None = None, timeout: float = 5.0) -> None:
        """Run ``shutdown()`` on the loop, cancel remaining tasks, stop and join."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            items, self._inbox = self._inbox, []
        for fut, _fn, _args in items:
            if fut.set_running_or_notify_cancel():
                fut.set_exception(LogDeviceError(E.SHUTDOWN, "the client was closed"))
        if self.in_loop_thread():
            raise InvalidParamError(message="close the client from another thread")
        if self.thread.is_alive():
            done = asyncio.run_coroutine_threadsafe(self._shutdown(shutdown), self.loop)
            try:
                done.result(timeout)
            except (TimeoutError, concurrent.futures.CancelledError):
                log.warning("client loop did not shut down within %s s", timeout)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout)
        if not self.thread.is_alive():
            self.loop.close()

    async def _shutdown(self, shutdown: CoroFn | None) -> None:
        if shutdown is not None:
            try:
                await shutdown()
            except Exception:
                log.exception("client shutdown step failed")
        me = asyncio.current_task()
        tasks = [t for t in asyncio.all_tasks() if t is not me]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=1.0)


def _copy_outcome(fut: concurrent.futures.Future[Any], task: asyncio.Task[Any]) -> None:
    if fut.done():
        return
    if task.cancelled():
        fut.set_exception(LogDeviceError(E.CANCELLED, "cancelled"))
        return
    exc = task.exception()
    if exc is not None:
        fut.set_exception(exc)
    else:
        fut.set_result(task.result())

