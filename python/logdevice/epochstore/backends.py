"""Opening an epoch store: the backend its URI names.

``file:`` is the embedded SQLite store (``sqlite.FileEpochStore``), ``zookeeper:`` the
shared one (``zookeeper.ZooKeeperEpochStore``).  Only nodes and the operator's tools open
a store, so the package loads this module (and with it the backends) on first use of
``open_epoch_store``.
"""

from __future__ import annotations

import os

from logdevice.epochstore.base import EpochStore
from logdevice.epochstore.sqlite import FileEpochStore
from logdevice.epochstore.uri import parse_epoch_store_uri
from logdevice.epochstore.zookeeper import ZooKeeperCredential, ZooKeeperEpochStore

__all__ = ["open_epoch_store", "open_existing_epoch_store"]


def open_epoch_store(uri: str, *, base_dir: str | os.PathLike[str] | None = None,
                     timeout: float = 10.0, auth: ZooKeeperCredential | None = None
                     ) -> EpochStore:
    """Open the epoch store named by ``uri``.

    Parameters
    ----------
    uri : str
        ``file:/abs/path/epochs.sqlite`` (a relative path is taken relative to
        ``base_dir``, else the current directory) or ``zookeeper:host:port/root``.
    timeout : float
        Seconds an operation may wait for the store before TIMEDOUT.
    auth : ZooKeeperCredential, optional
        For ``zookeeper:``: authenticate with it and lock every znode to it (see
        ``ZooKeeperEpochStore``).

    Raises
    ------
    InvalidParamError
        The URI is malformed.
    LogDeviceError
        NOTSUPPORTED: ``zookeeper:`` without kazoo installed.
    """
    parsed = parse_epoch_store_uri(uri, base_dir=base_dir)
    if parsed.scheme == "file":
        assert parsed.path is not None
        return FileEpochStore(parsed.path, timeout=timeout)
    return ZooKeeperEpochStore(parsed, timeout=timeout, auth=auth)


def open_existing_epoch_store(uri: str, *, timeout: float = 10.0,
                              auth: ZooKeeperCredential | None = None) -> EpochStore | None:
    """The store named by ``uri`` if it can already hold something, else None.

    For readers and checks that must not create a store: a ``file:`` store whose file does
    not exist (a cluster that never activated a log, or a client on another machine) is
    None; a ``zookeeper:`` store is always opened (it is shared by design).
    """
    parsed = parse_epoch_store_uri(uri)
    if parsed.scheme == "file" and (parsed.path is None or not parsed.path.exists()):
        return None
    return open_epoch_store(parsed.uri, timeout=timeout, auth=auth)
