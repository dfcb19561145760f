"""Fixtures shared by the unit tests: a client of a cluster that is not running (nothing
listens on its ports; what such a client does without the network is what these test)."""

from __future__ import annotations

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
