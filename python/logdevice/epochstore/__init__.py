"""The epoch store: per-log epochs, metadata history and the event log, with
compare-and-set semantics.

``open_epoch_store(uri)`` picks the backend from the URI: ``file:`` is the embedded SQLite
store (``FileEpochStore``, one machine); ``zookeeper:`` is ``ZooKeeperEpochStore`` (kazoo),
for clusters across machines.  Both implement the same ``EpochStore`` contract (``base``)
over the value types of ``records``, changed by the pure functions of ``transitions``.

Clients use the value types (a node's metadata replies decode into them) but never open a
store, so importing this package loads neither ``EpochStore`` nor a backend: those (and
``open_epoch_store``, in ``backends``) load on first use of their name.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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
from logdevice.epochstore.uri import EpochStoreURI, parse_epoch_store_uri
from logdevice.shards import AuthoritativeStatus

if TYPE_CHECKING:
    from logdevice.epochstore.backends import open_epoch_store, open_existing_epoch_store
    from logdevice.epochstore.base import EpochStore
    from logdevice.epochstore.sqlite import FileEpochStore
    from logdevice.epochstore.zookeeper import ZooKeeperCredential, ZooKeeperEpochStore

#: The names loaded on first use, and their modules.
_LAZY = {"open_epoch_store": "logdevice.epochstore.backends",
         "open_existing_epoch_store": "logdevice.epochstore.backends",
         "EpochStore": "logdevice.epochstore.base",
         "FileEpochStore": "logdevice.epochstore.sqlite",
         "ZooKeeperEpochStore": "logdevice.epochstore.zookeeper",
         "ZooKeeperCredential": "logdevice.epochstore.zookeeper"}


def __getattr__(name: str) -> Any:
    """A name of ``_LAZY``, imported now (PEP 562)."""
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


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
