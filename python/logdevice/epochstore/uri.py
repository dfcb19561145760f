"""Epoch store URIs: ``file:<path>`` (embedded SQLite) and ``zookeeper:<hosts>/<root>``.

``file:/abs/epochs.sqlite``, ``file:///abs/epochs.sqlite`` and ``file:epochs.sqlite``
(relative to a base directory, the config file's) are all accepted.  ZooKeeper URIs name
one or more ``host:port`` pairs and an optional root znode:
``zookeeper:zk1:2181,zk2:2181/logdevice/mycluster`` (root defaults to ``/logdevice``).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from logdevice.errors import InvalidParamError

SCHEMES = ("file", "zookeeper")
DEFAULT_ZK_ROOT = "/logdevice"
_HOST = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9]([A-Za-z0-9\-.]*[A-Za-z0-9])?)$")
_ZNODE = re.compile(r"^(/[A-Za-z0-9_.\-]+)+$")


@dataclass(frozen=True, slots=True)
class EpochStoreURI:
    """A parsed epoch store URI; ``uri`` is its canonical, absolute spelling."""

    scheme: str
    path: Path | None = None  # file: the SQLite file, absolute
    hosts: tuple[tuple[str, int], ...] = ()  # zookeeper: the ensemble
    root: str = ""  # zookeeper: the root znode

    @property
    def uri(self) -> str:
        if self.scheme == "file":
            return f"file:{self.path}"
        return "zookeeper:" + ",".join(f"{h}:{p}" for h, p in self.hosts) + self.root


def _bad(uri: str, why: str) -> InvalidParamError:
    return InvalidParamError(message=f"bad epoch store URI {uri!r}: {why} (expected "
                                     "'file:/path/epochs.sqlite' or 'zookeeper:host:port/root')")


def parse_epoch_store_uri(uri: str, base_dir: str | os.PathLike[str] | None = None
                          ) -> EpochStoreURI:
    """Parse ``uri``; a relative ``file:`` path is taken relative to ``base_dir`` (else the
    current directory).  ``InvalidParamError`` (a ``ValueError``) when malformed."""
    if not isinstance(uri, str):
        raise _bad(str(uri), "not a string")
    scheme, sep, rest = uri.partition(":")
    if not sep or scheme not in SCHEMES:
        raise _bad(uri, f"unknown scheme {scheme!r}" if sep else "no scheme")
    if scheme == "file":
        if rest.startswith("//"):
            authority, slash, path = rest[2:].partition("/")
            if authority not in ("", "localhost") or not slash:
                raise _bad(uri, "a file: URI with '//' must be 'file:///absolute/path'")
            rest = "/" + path
        if not rest or rest.endswith("/") or "\0" in rest:
            raise _bad(uri, "needs a file path")
        path_ = Path(rest)
        if not path_.is_absolute():
            path_ = Path(base_dir if base_dir is not None else os.getcwd()) / path_
        return EpochStoreURI("file", path=Path(os.path.abspath(path_)))
    hosts_part, slash, root = rest.partition("/")
    root = "/" + root if slash else DEFAULT_ZK_ROOT
    root = root.rstrip("/") or "/"
    if root != "/" and not _ZNODE.match(root):
        raise _bad(uri, f"bad root znode {root!r}")
    if not hosts_part:
        raise _bad(uri, "no ZooKeeper host")
    hosts = []
    for item in hosts_part.split(","):
        host, colon, port = item.rpartition(":")
        if not colon or not _HOST.match(host) or not port.isdigit() or not (
                0 < int(port) < 65536):
            raise _bad(uri, f"{item!r} is not host:port")
        hosts.append((host, int(port)))
    return EpochStoreURI("zookeeper", hosts=tuple(hosts), root=root)
