"""The epoch store as nodes (and the operator's tools) open it: with the config's
ZooKeeper credential.

Clients never open the epoch store.  With ``security.zookeeper`` in the config the
``zookeeper:`` store is opened authenticated and locks its znodes to that identity
(``epochstore.zookeeper``); the credential file (``user:password`` on its first line,
relative to the config's directory) is only on the nodes' machines.
"""

from __future__ import annotations

from logdevice.config import Config
from logdevice.epochstore import (
    EpochStore,
    ZooKeeperCredential,
    open_epoch_store,
    open_existing_epoch_store,
)
from logdevice.errors import InvalidConfigError
from logdevice.security.identity import read_secret

__all__ = ["zookeeper_credential", "open_cluster_store", "open_existing_cluster_store"]


def zookeeper_credential(config: Config) -> ZooKeeperCredential | None:
    """The credential of ``security.zookeeper`` (None without one).  Raises
    ``InvalidConfigError`` naming the field when the file cannot be read or is not
    ``user:password``."""
    zk = config.security.zookeeper if config.security is not None else None
    if zk is None:
        return None
    field = "security.zookeeper.auth_file"
    user, sep, password = read_secret(config, zk.auth_file, field).partition(":")
    if not sep or not user or not password:
        raise InvalidConfigError(message=f"{config.source or '<config dict>'}: {field}: "
                                         "expected user:password on the first line")
    return ZooKeeperCredential(user, password, zk.operator)


def open_cluster_store(config: Config, *, timeout: float = 10.0) -> EpochStore:
    """``open_epoch_store`` of ``config``'s store, with its ZooKeeper credential."""
    return open_epoch_store(config.epoch_store_uri, timeout=timeout,
                            auth=zookeeper_credential(config))


def open_existing_cluster_store(config: Config, *, timeout: float = 10.0
                                ) -> EpochStore | None:
    """``open_existing_epoch_store`` of ``config``'s store, with its credential."""
    return open_existing_epoch_store(config.epoch_store_uri, timeout=timeout,
                                     auth=zookeeper_credential(config))
