"""Settings shared by every test layer."""

import itertools
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from logdevice.local_zookeeper import LocalZooKeeper

# Two shared cores: wall-clock deadlines would make property tests flaky, not stricter.
settings.register_profile(
    "default",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("thorough", parent=settings.get_profile("default"), max_examples=1000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
_ZK_ROOTS = itertools.count()


# -- a real ZooKeeper ------------------------------------------------------------------------
# One server for the session (tests take a fresh root znode each); tests that stop or
# restart ZooKeeper get their own from ``zookeeper_factory``.
@pytest.fixture(scope="session")
def zk_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalZooKeeper]:
    with LocalZooKeeper(root=tmp_path_factory.mktemp("zookeeper")) as zk:
        yield zk


@pytest.fixture
def zk_uri(zk_server: LocalZooKeeper, request: pytest.FixtureRequest) -> str:
    """A ``zookeeper:`` epoch store URI on the session's server, under a root no other test
    uses."""
    return zk_server.uri(f"/t{os.getpid()}_{next(_ZK_ROOTS)}")


@pytest.fixture
def zookeeper_factory(tmp_path: Path) -> Iterator[Callable[..., LocalZooKeeper]]:
    """Factory of ZooKeeper servers that live for one test (stop/start them at will)."""
    servers: list[LocalZooKeeper] = []
    counter = itertools.count()

    def make(**kw: Any) -> LocalZooKeeper:
        kw.setdefault("root", tmp_path / f"zk{next(counter)}")
        zk = LocalZooKeeper(**kw)
        servers.append(zk)
        return zk

    yield make
    for zk in servers:
        zk.close()


@pytest.fixture
def keep_signal_handlers() -> Iterator[None]:
    """Puts the SIGINT and SIGTERM handlers back after a test whose code installs its own."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    yield
    for s, h in saved.items():
        signal.signal(s, h)
