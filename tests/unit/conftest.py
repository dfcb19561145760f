"""Fixtures shared by the unit tests: a client of a cluster that is not running (nothing
listens on its ports; what such a client does without the network is what these test)."""

from __future__ import annotations

import socket

import pytest

from logdevice.client import Client
from logdevice.config import make_local_config


@pytest.fixture
def config(tmp_path):
    return make_local_config(3, 2, range(1, 5), root=tmp_path, ports=[1, 2, 3])


@pytest.fixture
def client(config):
    with Client(config, timeout=1.0) as c:
        yield c



_NETWORK_FAMILIES = (socket.AF_INET, socket.AF_INET6)


@pytest.fixture(autouse=True)
def no_network_sockets(monkeypatch):
    """tests/unit runs without the network: a test that opens an AF_INET/AF_INET6 socket
    (a node, ZooKeeper, a client that connects) belongs in tests/integration.  Unix
    sockets (the socketpair of asyncio's own loop) are fine.  The socket is refused where
    it is made, and the test fails at teardown too, in case the code that made it (a loop
    thread, a retry) swallowed the error."""
    opened: list[str] = []
    real_init = socket.socket.__init__

    def guarded_init(self, family=-1, *args, **kwargs):
        real_init(self, family, *args, **kwargs)
        if self.family in _NETWORK_FAMILIES:
            self.close()
            opened.append(repr(self.family))
            raise AssertionError(f"a unit test opened a network socket ({self.family!r}): "
                                 "it belongs in tests/integration")

    monkeypatch.setattr(socket.socket, "__init__", guarded_init)
    yield
    if opened:
        pytest.fail(f"a unit test opened network sockets ({', '.join(opened)}): "
                    "it belongs in tests/integration")
