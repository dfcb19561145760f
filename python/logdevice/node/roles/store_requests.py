"""``StoreRequestRole``: the base of roles that answer clients from the epoch store.

Clients never open the epoch store; the roles that read or write it for them
(checkpoints and consumer groups, the cluster's metadata) each keep one store connection,
opened on first use, and one thread for the blocking store calls, so a slow store delays
their requests and nothing else on the node's loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from logdevice.epochstore import EpochStore
from logdevice.errors import E, LogDeviceError
from logdevice.node.roles.role import NodeServices, Peer, Role
from logdevice.security.store import open_cluster_store

__all__ = ["StoreRequestRole"]

log = logging.getLogger("logdevice.node.roles.store_requests")


class StoreRequestRole(Role):
    """A role whose requests are answered from the epoch store, in a thread of its own."""

    def __init__(self, node: NodeServices) -> None:
        super().__init__(node)
        self._exec = ThreadPoolExecutor(1, thread_name_prefix=self.name)
        self._store: EpochStore | None = None

    def close(self) -> None:
        self._exec.shutdown(wait=True)
        if self._store is not None:
            self._store.close()
            self._store = None

    def epoch_store(self) -> EpochStore:
        """The role's store connection (call it from the role's thread)."""
        if self._store is None:
            self._store = open_cluster_store(self.node.config)
        return self._store

    def answer(self, conn: Peer, work: Callable[[], Any], reply: Callable[[Any], Any],
               error: Callable[[E, str], Any],
               then: Callable[[Any], None] | None = None) -> None:
        """Run ``work()`` in the role's thread, then ``then(result)`` on the loop, and send
        ``reply(result)``; if either raised, ``error(status, message)`` instead."""
        def done(fut: Any) -> None:
            try:
                result = fut.result()
                if then is not None:
                    then(result)
            except LogDeviceError as exc:
                conn.send(error(exc.status, exc.message or str(exc)))
                return
            except Exception as exc:  # a bug must not leave the client waiting
                log.error("N%d: %s request failed", self.node.index, self.name, exc_info=exc)
                conn.send(error(E.FAILED, f"internal error: {type(exc).__name__}: {exc}"))
                return
            conn.send(reply(result))

        self.node.loop.run_in_executor(self._exec, work).add_done_callback(done)
