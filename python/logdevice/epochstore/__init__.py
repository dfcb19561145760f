"""The epoch store: per-log epochs, metadata history and the event log, with
compare-and-set semantics.

``open_epoch_store(uri)`` picks the backend from the URI: ``file:`` is the embedded SQLite
store (``FileEpochStore``, one machine); ``zookeeper:`` is ``ZooKeeperEpochStore`` (kazoo),
for clusters across machines.  Both implement the same ``EpochStore`` contract (``base``)
over the value types of ``records``, changed by the pure functions of ``transitions``.
"""

from __future__ import annotations

import os

from logdevice.epochstore.base import EpochStore
from logdevice.epochstore.events import (
    EVENT_TYPES,
    SHARD_ABORT_REBUILD,
    SHARD_ACK_REBUILT,
    SHARD_IS_REBUILT,
    SHARD_NEEDS_REBUILD,
    SHARD_REBUILD_DEFERRED,
    SHARD_UNRECOVERABLE,
    RebuildingSet,
    ShardStatusFold,
    StatusHistory,
)
from logdevice.epochstore.outcome import EpochOutcome
from logdevice.epochstore.records import (
    EPOCH_INVALID,
    EPOCH_MAX,
    EPOCH_MIN,
    EpochMetadata,
    LogEpochState,
    LogsConfigState,
    TailRecord,
    VersionMismatchError,
)
from logdevice.epochstore.sqlite import FileEpochStore
from logdevice.epochstore.uri import EpochStoreURI, parse_epoch_store_uri
from logdevice.epochstore.zookeeper import ZooKeeperCredential, ZooKeeperEpochStore
from logdevice.shards import AuthoritativeStatus


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


__all__ = [
    "open_epoch_store",
    "open_existing_epoch_store",
    "EpochStore",
    "FileEpochStore",
    "LogEpochState",
    "LogsConfigState",
    "EpochMetadata",
    "TailRecord",
    "EpochOutcome",
    "VersionMismatchError",
    "AuthoritativeStatus",
    "ShardStatusFold",
    "StatusHistory",
    "RebuildingSet",
    "EpochStoreURI",
    "parse_epoch_store_uri",
    "ZooKeeperEpochStore",
    "ZooKeeperCredential",
    "EPOCH_INVALID",
    "EPOCH_MIN",
    "EPOCH_MAX",
    "EVENT_TYPES",
    "SHARD_NEEDS_REBUILD",
    "SHARD_UNRECOVERABLE",
    "SHARD_IS_REBUILT",
    "SHARD_ACK_REBUILT",
    "SHARD_ABORT_REBUILD",
    "SHARD_REBUILD_DEFERRED",
]
