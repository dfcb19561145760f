"""Pacing rebuilding: a byte-rate limit for donors (:class:`ByteRate`) and its yielding
to appends on every node (:class:`AppendYield`).

``ByteRate`` is a token bucket: ``rate`` bytes a second, up to one second's worth saved
up.  Time is passed in (monotonic seconds), so the pacing is testable without sleeping.
"""

from __future__ import annotations

__all__ = ["AppendYield", "ByteRate"]


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


class AppendYield:
    """How much of a node rebuilding takes while appends come in.

    ``saw(stores, now)`` is told a counter of the STOREs the node has written for appends
    (its group committer's); when it moved within the last ``quiet_s`` seconds, appends
    are *active*.  Rebuilding then works in slices of at most ``slice_bytes`` (a STORE
    never waits long behind one) and, after a slice of work that took t seconds, waits
    t * (1 - share) / share: it takes at most ``share`` of the time, appends the rest.
    With appends idle, or ``share`` >= 1, it neither slices nor waits.  Time is passed in
    (monotonic seconds), so the policy is testable without sleeping.
    """

    def __init__(self, share: float, now: float, *, quiet_s: float = 0.25,
                 slice_bytes: int = 256 << 10, max_pause_s: float = 0.5) -> None:
        self.share = float(share)
        self.quiet_s = quiet_s
        self._slice = slice_bytes
        self.max_pause_s = max_pause_s
        self._stores = -1
        self._moved_at = now - quiet_s  # idle until a STORE is seen

    @property
    def enabled(self) -> bool:
        return self.share < 1.0

    def saw(self, stores: int, now: float) -> None:
        """The committer's STORE counter now."""
        if stores != self._stores:
            if self._stores >= 0:
                self._moved_at = now
            self._stores = stores

    def active(self, now: float) -> bool:
        """Are appends coming in (rebuilding yields)?"""
        return self.enabled and now - self._moved_at < self.quiet_s

    def slice_bytes(self, default: int, now: float) -> int:
        """Bytes of one unit of rebuilding work now (``default`` when not yielding)."""
        return min(default, self._slice) if self.active(now) else default

    def pause(self, worked_s: float, now: float) -> float:
        """Seconds to wait after a unit of work that took ``worked_s`` (0: go on)."""
        if not self.active(now) or worked_s <= 0:
            return 0.0
        return min(worked_s * (1.0 - self.share) / max(self.share, 1e-3), self.max_pause_s)
