"""Per-log cluster calls for many logs at once, on the driver.

Planning asks every log for its trim point, tail, size estimate (and ``find_time``
answers).  Each is a blocking ``Client`` call of one round trip; made one after the
other, planning 10,000 logs costs 10,000s of round trips back to back.  ``fan_out`` runs
the per-log function of many logs from a bounded pool of threads over the one client:
the client's loop multiplexes their requests, so planning costs about
``len(logs) / FAN_OUT`` round trips of wall time.  Answers come back in the order of
the logs; the first error is raised (the other calls finish within their own timeouts).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

__all__ = ["fan_out", "FAN_OUT"]

T = TypeVar("T")

#: Per-log calls in flight at once.
FAN_OUT = 64


def fan_out(fn: Callable[[int], T], logs: Sequence[int], width: int = FAN_OUT) -> list[T]:
    """``[fn(log) for log in logs]``, up to ``width`` calls at a time."""
    if len(logs) <= 1 or width <= 1:
        return [fn(log_id) for log_id in logs]
    with ThreadPoolExecutor(min(width, len(logs)), thread_name_prefix="ld-plan") as pool:
        return list(pool.map(fn, logs))
