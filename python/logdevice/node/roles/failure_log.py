"""``FailureLog``: how a task that runs again and again (a poll of the epoch store) says
that it fails: one warning when it starts failing, a reminder now and then while it keeps
failing, and one line when it works again.

During an outage of the store every poll fails at once (the store gives up after its own
timeout, then fails fast); a warning per poll would be several lines a second per node,
burying everything else in the log.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

__all__ = ["FailureLog"]


class FailureLog:
    """The log lines of one repeated task's failures.

    Parameters
    ----------
    logger : logging.Logger
    what : str
        What the task does, as the lines say it (``"N0: reading the event log"``).
    remind_every : float
        Seconds between warnings while the task keeps failing.
    clock : callable
        Seconds, monotonic.
    """

    def __init__(self, logger: logging.Logger, what: str, remind_every: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._log = logger
        self.what = what
        self.remind_every = remind_every
        self._clock = clock
        self._since: float | None = None  # when the failures began (None: it works)
        self._last = 0.0  # when the last warning went out
        self.failures = 0  # tries that failed since it last worked

    @property
    def failing(self) -> bool:
        return self._since is not None

    def failed(self, why: object) -> None:
        """A try failed (``why``: the exception or message)."""
        now = self._clock()
        self.failures += 1
        if self._since is None:
            self._since = self._last = now
            self._log.warning("%s: %s", self.what, why)
        elif now - self._last >= self.remind_every:
            self._last = now
            self._log.warning("%s: still failing after %.0f s (%d tries): %s", self.what,
                              now - self._since, self.failures, why)

    def succeeded(self) -> None:
        """A try worked."""
        if self._since is not None:
            self._log.info("%s: works again after %.0f s (%d failed tries)", self.what,
                           self._clock() - self._since, self.failures)
            self._since = None
        self.failures = 0
