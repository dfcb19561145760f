"""Say so when the node's event loop stops turning.

A node whose loop is blocked answers nobody: its peers' failure detectors call it dead
once the stall passes their ``dead_after``, and every append and read it serves waits.
``StallReport`` arms faulthandler's watchdog (a C thread that runs while the loop and the
GIL's holder do not) from the loop a few times per period; a turn that comes more than
``after`` seconds late leaves every thread's stack on stderr (the node's log), headed
``Timeout (H:MM:SS)!``, once per stall.  That names the callback that held the loop.
"""

from __future__ import annotations

import asyncio
import faulthandler
import sys
from typing import TextIO

__all__ = ["StallReport"]


class StallReport:
    """Dump the stacks when ``loop`` has not turned for ``after`` seconds.

    Parameters
    ----------
    loop : asyncio event loop
    after : float
        Seconds of stall before the dump (> 0).
    file : text file with a file descriptor
        Where the stacks go (default: stderr).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, after: float,
                 file: TextIO | None = None) -> None:
        if not after > 0:
            raise ValueError(f"stall report period must be > 0, not {after!r}")
        self.loop = loop
        self.after = after
        self.file = file if file is not None else sys.stderr
        self._rearm: asyncio.TimerHandle | None = None

    def start(self) -> None:
        self._arm()

    def _arm(self) -> None:
        # Re-arming replaces the pending dump; one that fired is not repeated until the
        # loop turns again.
        faulthandler.dump_traceback_later(self.after, repeat=False, file=self.file)
        self._rearm = self.loop.call_later(self.after / 4, self._arm)

    def stop(self) -> None:
        if self._rearm is not None:
            self._rearm.cancel()
            self._rearm = None
        faulthandler.cancel_dump_traceback_later()
