"""A node's start-up check that it shares its epoch store with its peers.

Every epoch store records, at its first use, the cluster it belongs to and a random id
(``EpochStore.cluster_identity``).  Two nodes that name "the same" store but reach
different ones (each machine with its own copy of ``file:epochs.sqlite``) would each hand
out epoch 1 and overwrite each other's acknowledged records.  So before it serves, a node
reads its store's id, sends it in a HELLO to every peer that answers, and refuses to start
if a peer says the ids differ; running nodes refuse such a peer's HELLO too (``check_hello``).
Peers that do not answer are skipped: the first node of a cluster starts alone.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor

from logdevice.config import Config
from logdevice.errors import E, LogDeviceError
from logdevice.protocol.probe import NodeConnection
from logdevice.security import ConnectSecurity
from logdevice.security.store import open_cluster_store

__all__ = ["check_store_identity", "read_store_identity", "peers_refusing",
           "StoreMismatchError"]

log = logging.getLogger("logdevice.node.store_identity")


class StoreMismatchError(LogDeviceError):
    """A peer uses an epoch store with another identity."""

    status = E.INVALID_CONFIG


def read_store_identity(config: Config, timeout: float = 10.0) -> str:
    """The identity of the epoch store ``config`` names (recorded at its first use)."""
    with open_cluster_store(config, timeout=timeout) as store:
        return store.cluster_identity(config.cluster)


def peers_refusing(config: Config, index: int, store_id: str,
                   timeout: float = 2.0) -> list[str]:
    """HELLO every other node with ``store_id``; the refusals that say the epoch stores
    differ (one message per such peer).  The HELLO says "client": a probe must not look
    like node ``index``'s link to its peers."""
    security = ConnectSecurity.for_node(config)

    def ask(node_index: int) -> str | None:
        node = config.node(node_index)
        try:
            NodeConnection(node.address, config.cluster, timeout=timeout,
                           store_id=store_id, security=security).close()
        except LogDeviceError as exc:
            if exc.status == E.INVALID_CONFIG:
                return f"N{node_index} ({node.host}:{node.port}): {exc.message}"
        except OSError:
            pass
        return None

    peers = [n.index for n in config.nodes if n.index != index]
    if not peers:
        return []
    with ThreadPoolExecutor(min(16, len(peers)), thread_name_prefix="store-id") as pool:
        return [r for r in pool.map(ask, peers) if r is not None]


def check_store_identity(config: Config, index: int, timeout: float = 10.0) -> str:
    """Read the store's identity and check it against the peers'; returns the identity.

    Raises ``StoreMismatchError`` when a peer uses another store, ``LogDeviceError``
    (TIMEDOUT...) when the store cannot be read.
    """
    store_id = read_store_identity(config, timeout)
    refusals = peers_refusing(config, index, store_id)
    if refusals:
        raise StoreMismatchError(message=f"this node's epoch store {config.epoch_store_uri} "
                                         f"(identity {store_id}) is not its peers': "
                                         + "; ".join(refusals))
    log.info("N%d: epoch store %s, identity %s", index, config.epoch_store_uri, store_id)
    return store_id
