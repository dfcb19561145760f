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

Both wait an ``ExponentialBackoff`` between tries, each delay drawn from the upper half of
its range (``JITTER``).
"""

from __future__ import annotations

from logdevice.errors import E

__all__ = ["ROUTING_RETRYABLE", "REFUSAL_RETRYABLE", "WRITER_RETRYABLE", "JITTER"]

#: The jitter of the client's retry delays: each is drawn from ``[d/2, d]``.
JITTER = 0.5

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
