"""The client tools' waiting and back lines (``logdevice.tools.health``; probing real
ports: tests/integration/test_tool_health.py)."""

from __future__ import annotations

import io

import pytest

from logdevice.errors import E, LogDeviceError, error_for
from logdevice.tools.health import RetryDelay, Waiting, is_away


def test_the_waiting_line_once_per_wait_and_the_back_line_only_after_it():
    out = io.StringIO()
    w = Waiting("ldtail", file=out)
    assert not w.back("log 1: reading again")  # not waiting: nothing to say
    assert w.away("log 1: waiting") and w.waiting and w.since is not None
    assert not w.away("log 1: waiting")  # the same wait: not again
    assert not w.away(lambda: pytest.fail("a line not printed is not made"))
    assert w.back("log 1: reading again") and not w.waiting
    assert not w.back("log 1: reading again")
    assert w.away("log 1: waiting")  # a new wait
    assert out.getvalue() == ("ldtail: log 1: waiting\nldtail: log 1: reading again\n"
                              "ldtail: log 1: waiting\n")  # plain text: no escape codes


def test_quiet_prints_nothing_but_keeps_the_state():
    out = io.StringIO()
    w = Waiting("ldwrite", quiet=True, file=out)
    assert w.away("waiting") and w.waiting
    assert w.back("back") and not w.waiting
    assert out.getvalue() == ""


def test_through_a_piped_rich_console_no_markup_and_no_colour():
    from logdevice.cli import console

    out = io.StringIO()
    w = Waiting("ldwrite", console=console(file=out))
    w.away("waiting for the cluster 'x': [bold]not markup[/bold]")
    assert out.getvalue() == "ldwrite: waiting for the cluster 'x': [bold]not markup[/bold]\n"


def test_what_counts_as_away_and_the_retry_delays():
    assert is_away(error_for(E.CONNFAILED)) and is_away(error_for(E.PEER_CLOSED))
    assert is_away(error_for(E.TIMEDOUT))
    assert not is_away(error_for(E.ACCESS)) and not is_away(LogDeviceError(E.NOTFOUND))
    assert not is_away(ConnectionRefusedError())
    d = RetryDelay()
    assert [d.next_delay() for _ in range(6)] == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0]
    d.reset()
    assert d.next_delay() == 0.5
