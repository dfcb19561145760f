"""StallReport: a blocked event loop leaves the stacks in the log, a turning one nothing."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from logdevice.node.stall_report import StallReport


def hold_the_loop(seconds: float) -> None:
    time.sleep(seconds)  # the stall under test: a callback that blocks the loop


def report_of(path: Path, after: float, seconds: float,
              then: Callable[[], None] | None = None) -> str:
    """Run a loop for ``seconds`` under a StallReport of ``after`` seconds writing to
    ``path`` (calling ``then`` on the loop first); what it wrote."""
    async def main() -> None:
        with path.open("w") as f:
            report = StallReport(asyncio.get_running_loop(), after, file=f)
            report.start()
            try:
                if then is not None:
                    then()
                await asyncio.sleep(seconds)
            finally:
                report.stop()

    asyncio.run(main())
    return path.read_text()


def test_a_stall_dumps_the_stack_that_holds_the_loop_once(tmp_path):
    text = report_of(tmp_path / "stderr", 0.2, 0.3, then=lambda: hold_the_loop(0.9))
    assert text.count("Timeout (0:00:00.200000)!") == 1, text
    assert "in hold_the_loop" in text


def test_a_turning_loop_reports_nothing(tmp_path):
    # A generous period: a busy test machine may hold any loop back for a moment.
    assert report_of(tmp_path / "stderr", 1.0, 2.5) == ""


def test_the_period_must_be_positive():
    loop = asyncio.new_event_loop()
    try:
        with pytest.raises(ValueError):
            StallReport(loop, 0)
    finally:
        loop.close()
