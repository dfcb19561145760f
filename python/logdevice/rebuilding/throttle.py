"""A byte-rate limit for donors: how long to wait before sending the next batch.

A token bucket: ``rate`` bytes a second, up to one second's worth saved up.  Time is
passed in (monotonic seconds), so the pacing is testable without sleeping.
"""

from __future__ import annotations

__all__ = ["ByteRate"]


class ByteRate:
    """``rate`` bytes per second; 0 or less means no limit."""

    def __init__(self, rate: float, now: float) -> None:
        self.rate = float(rate)
        self._tokens = max(self.rate, 0.0)
        self._at = now

    def take(self, nbytes: int, now: float) -> float:
        """Spend ``nbytes``; the seconds to wait before sending them (0: at once)."""
        if self.rate <= 0:
            return 0.0
        self._tokens = min(self.rate, self._tokens + (now - self._at) * self.rate)
        self._at = now
        self._tokens -= nbytes
        return 0.0 if self._tokens >= 0 else -self._tokens / self.rate
