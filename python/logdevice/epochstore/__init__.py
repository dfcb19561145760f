"""The epoch store: per-log epochs, metadata history and the event log, with
compare-and-set semantics (REFERENCE.md §A5, §A6, §A10).

``open_epoch_store(uri)`` picks the backend from the URI: ``file:`` is the embedded SQLite
store (``FileEpochStore``); ``zookeeper:`` will be a kazoo-based store implementing the
same ``EpochStore`` interface.
"""

from __future__ import annotations

import os

from logdevice.epochstore.base import (
    EPOCH_INVALID,
    EPOCH_MAX,
    EPOCH_MIN,
    EpochMetadata,
    EpochStore,
    LogEpochState,
    TailRecord,
    VersionMismatchError,
)
from logdevice.epochstore.events import (
    EVENT_TYPES,
    SHARD_ABORT_REBUILD,
    SHARD_ACK_REBUILT,
    SHARD_IS_REBUILT,
    SHARD_NEEDS_REBUILD,
    SHARD_UNRECOVERABLE,
    ShardStatusFold,
)
from logdevice.epochstore.outcome import EpochOutcome
from logdevice.epochstore.sqlite import FileEpochStore
from logdevice.epochstore.uri import EpochStoreURI, parse_epoch_store_uri
from logdevice.errors import E, LogDeviceError
from logdevice.shards import AuthoritativeStatus


class BackendNotAvailableError(LogDeviceError, NotImplementedError):
    """The URI names a backend this build does not have yet."""

    status = E.PROTONOSUPPORT


def open_epoch_store(uri: str, *, base_dir: str | os.PathLike[str] | None = None,
                     timeout: float = 10.0) -> EpochStore:
    """Open the epoch store named by ``uri``.

    Parameters
    ----------
    uri : str
        ``file:/abs/path/epochs.sqlite`` (a relative path is taken relative to
        ``base_dir``, else the current directory) or ``zookeeper:host:port/root``.
    timeout : float
        Seconds an operation may wait for the store before TIMEDOUT.

    Raises
    ------
    InvalidParamError
        The URI is malformed.
    BackendNotAvailableError
        ``zookeeper:`` (status PROTONOSUPPORT): that backend is not built yet.
    """
    parsed = parse_epoch_store_uri(uri, base_dir=base_dir)
    if parsed.scheme == "file":
        assert parsed.path is not None
        return FileEpochStore(parsed.path, timeout=timeout)
    raise BackendNotAvailableError(message=f"the zookeeper: epoch store backend is not "
                                           f"available yet (asked for {parsed.uri}); use a "
                                           "file: URI for the embedded SQLite store")


__all__ = [
    "open_epoch_store",
    "EpochStore",
    "FileEpochStore",
    "LogEpochState",
    "EpochMetadata",
    "TailRecord",
    "EpochOutcome",
    "VersionMismatchError",
    "BackendNotAvailableError",
    "AuthoritativeStatus",
    "ShardStatusFold",
    "EpochStoreURI",
    "parse_epoch_store_uri",
    "EPOCH_INVALID",
    "EPOCH_MIN",
    "EPOCH_MAX",
    "EVENT_TYPES",
    "SHARD_NEEDS_REBUILD",
    "SHARD_UNRECOVERABLE",
    "SHARD_IS_REBUILT",
    "SHARD_ACK_REBUILT",
    "SHARD_ABORT_REBUILD",
]
