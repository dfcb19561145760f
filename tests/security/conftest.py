"""A secured cluster for the attack tests: real TLS (certificates made with trustme), a
real ZooKeeper whose znodes the nodes lock to their own credential, and three principals:
``writer`` (append, read), ``viewer`` (read only) and ``admin`` (trim, admin).  The
cluster is shared by the tests of a module; tests that stop parts of it make their own.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

import logdevice as ld
from logdevice.local_cluster import LocalCluster
from logdevice.security import ConnectSecurity
from tests.cluster.conftest import Factory, _close, _make_factory

LOGS = range(1, 11)
SECURITY = {
    "principals": {"writer": {}, "viewer": {}, "admin": {}},
    "acl": {"append": ["writer"], "read": ["writer", "viewer"], "trim": ["admin"],
            "admin": ["admin"]},
}
_ROOTS = itertools.count()


@pytest.fixture(scope="module")
def secured_factory(tmp_path_factory: pytest.TempPathFactory, zk_server
                    ) -> Iterator[Factory]:
    """Factory of secured clusters on the session's ZooKeeper, for the module."""
    make, clusters = _make_factory(tmp_path_factory.mktemp("secured"))

    def secured(**kw) -> LocalCluster:
        kw.setdefault("epoch_store", zk_server.uri(f"/sec{os.getpid()}_{next(_ROOTS)}"))
        return make(tls=True, security=SECURITY, **kw)

    yield secured
    _close(clusters, failed=False)


@pytest.fixture(scope="module")
def cluster(secured_factory) -> LocalCluster:
    return secured_factory(nodes=3, replication=2, logs=LOGS)


def client_as(cluster: LocalCluster, name: str | None, **kw) -> ld.Client:
    """A client holding principal ``name``'s certificate (None: anonymous)."""
    creds = {}
    if name is not None:
        cert, key = cluster.client_cert(name)
        creds = {"tls_cert": str(cert), "tls_key": str(key)}
    kw.setdefault("timeout", 10.0)
    return cluster.client(**creds, **kw)


def security_of(cluster: LocalCluster, name: str) -> ConnectSecurity:
    """What a raw connection of principal ``name`` presents."""
    cert, key = cluster.client_cert(name)
    return ConnectSecurity.for_client(cluster.config, tls_cert=str(cert), tls_key=str(key))


def credentials(cluster: LocalCluster, name: str) -> list[str]:
    """Command-line options of the tools for principal ``name``."""
    cert, key = cluster.client_cert(name)
    return ["--tls-cert", str(cert), "--tls-key", str(key)]


def zk_root(cluster: LocalCluster) -> tuple[str, str]:
    """The ZooKeeper address and root znode of ``cluster``'s epoch store."""
    rest = cluster.config.epoch_store_uri.removeprefix("zookeeper:")
    hosts, _, root = rest.partition("/")
    return hosts, "/" + root


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")
