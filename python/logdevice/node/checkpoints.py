"""The checkpoints role: consumers' checkpoints, read and written through any node.

A client may not reach the epoch store (a ``file:`` store lives on the cluster's
machine); every node does.  GET_CHECKPOINTS and SET_CHECKPOINTS are answered with
CHECKPOINTS carrying the consumer's checkpoints (after the change, for a SET), the epoch
store work done in a thread of this role's own.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from logdevice.epochstore import EpochStore, open_epoch_store
from logdevice.epochstore.checkpoints import load_checkpoints, store_checkpoints, validate_name
from logdevice.errors import E, LogDeviceError
from logdevice.node.role import Peer, Role
from logdevice.protocol import Checkpoints, GetCheckpoints, SetCheckpoints

log = logging.getLogger("logdevice.node.checkpoints")


def _reply(request_id: int, name: str, positions: Mapping[int, tuple[int, int]]
           ) -> Checkpoints:
    logs = sorted(positions)
    return Checkpoints(request_id=request_id, status=E.OK, name=name,
                       log_ids=np.array(logs, np.uint64),
                       lsns=np.array([positions[k][0] for k in logs], np.uint64),
                       batch_offsets=np.array([positions[k][1] for k in logs], np.uint32))


class CheckpointsRole(Role):
    name = "checkpoints"

    def __init__(self, node: Any) -> None:
        super().__init__(node)
        self._exec = ThreadPoolExecutor(1, thread_name_prefix="checkpoints")
        self._store: EpochStore | None = None

    def handlers(self) -> Mapping[type, Any]:
        return {GetCheckpoints: self._on_get, SetCheckpoints: self._on_set}

    def close(self) -> None:
        self._exec.shutdown(wait=True)
        if self._store is not None:
            self._store.close()
            self._store = None

    def _epoch_store(self) -> EpochStore:
        if self._store is None:
            self._store = open_epoch_store(self.node.config.epoch_store_uri)
        return self._store

    def _run(self, conn: Peer, request_id: int, name: str, work: Any) -> None:
        def done(fut: Any) -> None:
            exc = fut.exception()
            if exc is None:
                conn.send(_reply(request_id, name, fut.result()))
                return
            if not isinstance(exc, LogDeviceError):
                log.error("checkpoints of %r failed", name, exc_info=exc)
            conn.send(Checkpoints(request_id=request_id, name=name,
                                  status=getattr(exc, "status", E.FAILED), message=str(exc)))

        self.node.loop.run_in_executor(self._exec, work).add_done_callback(done)

    def _on_get(self, conn: Peer, msg: GetCheckpoints) -> None:
        self._run(conn, msg.request_id, msg.name,
                  lambda: load_checkpoints(self._epoch_store(), validate_name(msg.name)))

    def _on_set(self, conn: Peer, msg: SetCheckpoints) -> None:
        positions = {log_id: (lsn, off) for log_id, lsn, off in zip(
            msg.log_ids.tolist(), msg.lsns.tolist(), msg.batch_offsets.tolist(),
            strict=True)}
        bad = [log_id for log_id in positions if not self.node.config.has_log(log_id)]
        if bad:
            conn.send(Checkpoints(request_id=msg.request_id, name=msg.name,
                                  status=E.NOTFOUND,
                                  message=f"logs not in the config: {bad[:10]}"))
            return
        self._run(conn, msg.request_id, msg.name,
                  lambda: store_checkpoints(self._epoch_store(), validate_name(msg.name),
                                            positions))
