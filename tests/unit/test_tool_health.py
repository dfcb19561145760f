"""The client tools' waiting and back lines (``logdevice.tools.health``)."""

from __future__ import annotations

import io
import socket

import pytest

from logdevice.config import make_local_config
from logdevice.errors import E, LogDeviceError, error_for
from logdevice.tools.health import RetryDelay, Waiting, cluster_line, is_away, probe_nodes


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


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_probe_nodes_and_the_cluster_line(tmp_path):
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        ports = [listening.getsockname()[1], _closed_port()]
        config = make_local_config(2, 1, [1], root=tmp_path, ports=ports,
                                   admin_ports=[_closed_port(), _closed_port()],
                                   cluster="probe")
        assert probe_nodes(config) == "N0: accepts connections, N1: connection refused"
        assert probe_nodes(config, limit=1) == "N0: accepts connections, ... (1 more)"
        assert cluster_line(config, error_for(E.CONNFAILED)) == (
            "waiting for the cluster 'probe': no node reachable "
            "(N0: accepts connections, N1: connection refused)")
        assert cluster_line(config, error_for(E.TIMEDOUT)).startswith(
            "waiting for the cluster 'probe': no answer in time (")


def test_what_counts_as_away_and_the_retry_delays():
    assert is_away(error_for(E.CONNFAILED)) and is_away(error_for(E.PEER_CLOSED))
    assert is_away(error_for(E.TIMEDOUT))
    assert not is_away(error_for(E.ACCESS)) and not is_away(LogDeviceError(E.NOTFOUND))
    assert not is_away(ConnectionRefusedError())
    d = RetryDelay()
    assert [d.next_delay() for _ in range(6)] == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0]
    d.reset()
    assert d.next_delay() == 0.5
