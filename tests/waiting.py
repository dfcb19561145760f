"""Bounded waits on a condition: the one way tests wait for something to happen.

A test that sleeps a fixed time and then looks is flaky on a loaded machine and slow on a
quiet one; these poll the real condition instead and fail with ``message`` once
``timeout`` has passed.  The predicate may itself assert (a thread still alive, no errors
so far): its AssertionError ends the wait at once.  ``message`` may be a callable, called
only on timeout, so that it can describe the state the wait gave up in.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

Message = str | Callable[[], object]


def _timed_out(message: Message, timeout: float) -> AssertionError:
    text = message() if callable(message) else message
    return AssertionError(f"{text} (not within {timeout:g} s)")


def wait_until(predicate: Callable[[], T], timeout: float, interval: float = 0.05,
               message: Message = "the condition") -> T:
    """``predicate()`` again every ``interval`` s until it is true; its true value.
    AssertionError with ``message`` if it is still false after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        left = deadline - time.monotonic()
        if left <= 0:
            raise _timed_out(message, timeout)
        time.sleep(min(interval, left))


async def async_wait_until(predicate: Callable[[], T], timeout: float,
                           interval: float = 0.001, message: Message = "the condition") -> T:
    """``wait_until`` on an event loop: the loop runs other tasks between the looks."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = predicate()
        if value:
            return value
        left = deadline - loop.time()
        if left <= 0:
            raise _timed_out(message, timeout)
        await asyncio.sleep(min(interval, left))


def innermost_function(thread: threading.Thread) -> str | None:
    """The name of the function the thread runs now (its innermost Python frame; a thread
    blocked in C, on a lock or a queue, shows the Python function that called it), or
    None once it has ended.  For "the thread has got as far as it can": e.g. ``"wait"``,
    a thread waiting on a ``threading.Condition``."""
    frame = sys._current_frames().get(thread.ident) if thread.ident is not None else None
    return frame.f_code.co_name if frame is not None else None
