"""The chaos runs' network namespaces: cuts are silent and healable, a node always
reaches itself, and nothing is left behind, even by a run that was killed."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from tests.chaos.netns import HUB, Network, netns_unavailable, remove_leftovers

pytestmark = pytest.mark.skipif(netns_unavailable() is not None,
                                reason=str(netns_unavailable()))

# Node 1 listens on its address; the probe connects from node ``i`` (or the hub).
LISTEN = ("import socket, sys, time; s = socket.socket(); s.bind((sys.argv[1], 7000)); "
          "s.listen(8); print('up', flush=True); time.sleep(120)")
CONNECT = ("import socket, sys\n"
           "s = socket.socket(); s.settimeout(1.0)\n"
           "try:\n    s.connect((sys.argv[1], int(sys.argv[2]))); print('ok')\n"
           "except OSError as e:\n    print(type(e).__name__)\n")


def _reach(net: Network, i: int, host: str, port: int) -> str:
    done = subprocess.run([*net.node_command(i), sys.executable, "-c", CONNECT, host,
                           str(port)], capture_output=True, text=True, timeout=30)
    return done.stdout.strip()


def test_cuts_heal_and_the_namespaces_go():
    net = Network.create(3)
    server = hub_listener = None
    try:
        net.enter_hub()
        hub_listener = socket.create_server((HUB, 0))
        hub_port = hub_listener.getsockname()[1]
        server = subprocess.Popen([*net.node_command(1), sys.executable, "-c", LISTEN,
                                   net.node_hosts[1]], stdout=subprocess.PIPE, text=True)
        assert server.stdout is not None and server.stdout.readline().strip() == "up"
        n1 = net.node_hosts[1]
        assert _reach(net, 0, n1, 7000) == "ok"
        assert _reach(net, 0, HUB, hub_port) == "ok"

        net.cut_peers(0, [1])
        assert _reach(net, 0, n1, 7000) == "TimeoutError"  # dropped, not refused
        assert _reach(net, 0, HUB, hub_port) == "ok"  # clients and ZooKeeper stay
        assert _reach(net, 2, n1, 7000) == "ok"
        net.heal()
        assert _reach(net, 0, n1, 7000) == "ok"

        net.cut_port(0, hub_port)
        assert _reach(net, 0, HUB, hub_port) == "TimeoutError"
        assert _reach(net, 0, n1, 7000) == "ok"
        net.heal(0)

        net.isolate(1)
        assert _reach(net, 0, n1, 7000) == "TimeoutError"
        assert _reach(net, 1, n1, 7000) == "ok"  # itself, over loopback
        net.heal(1)
        assert _reach(net, 0, n1, 7000) == "ok"
    finally:
        if hub_listener is not None:
            hub_listener.close()
        net.close()
        if server is not None:
            server.wait(10)  # killed with its namespace
            assert server.stdout is not None
            server.stdout.close()
    assert net.namespaces_left() == []


def test_a_killed_runs_namespaces_are_removed_by_the_next():
    maker = subprocess.Popen(
        [sys.executable, "-c", "import time; from tests.chaos.netns import Network; "
         "Network.create(2); print('made', flush=True); time.sleep(120)"],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(
            [os.getcwd(), os.environ.get("PYTHONPATH", "")])})
    try:
        assert maker.stdout is not None and maker.stdout.readline().strip() == "made"
        orphan = Network(2)
        orphan.tag = f"ldchaos{maker.pid}"
        assert len(orphan.namespaces_left()) == 3
        assert remove_leftovers() == []  # its maker still runs: not a leftover
    finally:
        maker.send_signal(signal.SIGKILL)
        maker.wait(10)
        assert maker.stdout is not None
        maker.stdout.close()
    deadline = time.monotonic() + 10
    while orphan.namespaces_left() and time.monotonic() < deadline:
        remove_leftovers()
    assert orphan.namespaces_left() == []
