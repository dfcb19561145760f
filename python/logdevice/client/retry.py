"""Which failures are worth retrying, and how long to wait before the next try.

Two layers retry, for different reasons:

- routing (``Client``): the request never reached the log's sequencer (no sequencer
  there yet, connection refused or closed); the client refreshes its cluster view and
  tries again until its timeout.  ``ROUTING_RETRYABLE``.  An APPEND the sequencer
  refused before giving it an LSN (window full, no copyset now, a newer sequencer) was
  not stored anywhere, so it is retried the same way.  ``REFUSAL_RETRYABLE``.
- BufferedWriter: the sequencer got the blob but could not take it now (window full,
  overloaded, timed out, ...); the writer retries the whole APPEND a bounded number of
  times with exponential backoff.  ``WRITER_RETRYABLE``.

Sans-I/O: ``Backoff`` returns delays; the caller sleeps.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from logdevice.errors import E

__all__ = ["ROUTING_RETRYABLE", "REFUSAL_RETRYABLE", "WRITER_RETRYABLE", "Backoff"]

ROUTING_RETRYABLE: frozenset[E] = frozenset(
    {E.NOSEQUENCER, E.CONNFAILED, E.PEER_CLOSED, E.PEER_UNAVAILABLE, E.SHUTDOWN}
)

REFUSAL_RETRYABLE: frozenset[E] = frozenset(
    {E.SEQNOBUFS, E.OVERLOADED, E.DISABLED, E.NOSPC, E.AGAIN, E.PREEMPTED, E.SEQSYSLIMIT,
     E.SHUTDOWN, E.REBUILDING}
)

WRITER_RETRYABLE: frozenset[E] = ROUTING_RETRYABLE | frozenset(
    {E.TIMEDOUT, E.PREEMPTED, E.SEQNOBUFS, E.OVERLOADED, E.AGAIN, E.SEQSYSLIMIT, E.NOSPC,
     E.DISABLED, E.REBUILDING, E.CANCELLED}
)


class Backoff:
    """Exponential backoff with jitter: ``initial * 2**k`` capped at ``maximum``.

    Each delay is drawn uniformly from ``[d/2, d]`` so that many clients retrying the
    same failure do not come back in lock step.

    Parameters
    ----------
    initial, maximum : float
        Seconds.
    rng : callable, optional
        ``() -> float in [0, 1)``; injected so tests are deterministic.
    """

    __slots__ = ("initial", "maximum", "attempt", "_rng")

    def __init__(self, initial: float, maximum: float,
                 rng: Callable[[], float] = random.random) -> None:
        if initial < 0 or maximum < initial:
            raise ValueError(f"backoff needs 0 <= initial <= maximum, got {initial}, {maximum}")
        self.initial = initial
        self.maximum = maximum
        self.attempt = 0
        self._rng = rng

    def next_delay(self) -> float:
        """The delay before the next attempt (and count this attempt)."""
        d = min(self.maximum, self.initial * (2.0 ** self.attempt))
        self.attempt += 1
        return d * (0.5 + 0.5 * self._rng())
