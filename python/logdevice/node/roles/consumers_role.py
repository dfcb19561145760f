"""The consumers role: checkpoints and consumer groups, served by any node.

A client may not reach the epoch store (a ``file:`` store lives on the cluster's
machine); every node does.  GET_CHECKPOINTS and SET_CHECKPOINTS are answered with
CHECKPOINTS carrying the consumer's checkpoints (after the change, for a SET);
GROUP_HEARTBEAT with GROUP_ASSIGNMENT, the logs the member reads now.  With security on,
a consumer name or group belongs to the principal that first used it: another principal
gets ACCESS (the request gate has already checked ``read`` on the logs named).  The epoch
store work runs in a thread of this role's own (``StoreRequestRole``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from logdevice.epochstore.checkpoints import load_checkpoints, store_checkpoints, validate_name
from logdevice.epochstore.groups import heartbeat
from logdevice.errors import E
from logdevice.node.roles.role import Peer
from logdevice.node.roles.store_requests import StoreRequestRole
from logdevice.protocol import (
    Checkpoints,
    GetCheckpoints,
    GroupAssignment,
    GroupHeartbeat,
    SetCheckpoints,
)


def _reply(request_id: int, name: str, positions: Mapping[int, tuple[int, int]]
           ) -> Checkpoints:
    logs = sorted(positions)
    return Checkpoints(request_id=request_id, status=E.OK, name=name,
                       log_ids=np.array(logs, np.uint64),
                       lsns=np.array([positions[k][0] for k in logs], np.uint64),
                       batch_offsets=np.array([positions[k][1] for k in logs], np.uint32))


def _owner(conn: Peer) -> str | None:
    """Whose consumer names a request may use: the client's principal (None without
    security, or for a node: not checked)."""
    who = conn.principal
    return None if who is None or who.is_node else who.name


class ConsumersRole(StoreRequestRole):
    name = "consumers"

    def handlers(self) -> Mapping[type, Any]:
        return {GetCheckpoints: self._on_get, SetCheckpoints: self._on_set,
                GroupHeartbeat: self._on_heartbeat}

    def _run_checkpoints(self, conn: Peer, request_id: int, name: str, work: Any) -> None:
        self.answer(conn, work, lambda r: _reply(request_id, name, r),
                    lambda st, why: Checkpoints(request_id=request_id, name=name, status=st,
                                                message=why))

    def _on_get(self, conn: Peer, msg: GetCheckpoints) -> None:
        self._run_checkpoints(
            conn, msg.request_id, msg.name,
            lambda: load_checkpoints(self.epoch_store(), validate_name(msg.name),
                                     _owner(conn)))

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
        self._run_checkpoints(conn, msg.request_id, msg.name,
                              lambda: store_checkpoints(self.epoch_store(),
                                                        validate_name(msg.name), positions,
                                                        _owner(conn)))

    def _on_heartbeat(self, conn: Peer, msg: GroupHeartbeat) -> None:
        logs = msg.log_ids.tolist()
        bad = [log_id for log_id in logs if not self.node.config.has_log(log_id)]
        if bad or not logs:
            conn.send(GroupAssignment(request_id=msg.request_id, status=E.NOTFOUND,
                                      message=f"logs not in the config: {bad[:10]}"))
            return
        now_ms = int(time.time() * 1000)
        self.answer(conn,
                    lambda: heartbeat(self.epoch_store(), msg.group, msg.member, logs, now_ms,
                                      msg.session_ms, msg.leave, _owner(conn)),
                    lambda r: GroupAssignment(request_id=msg.request_id, status=E.OK,
                                              generation=r[0],
                                              log_ids=np.array(r[1], np.uint64)),
                    lambda st, why: GroupAssignment(request_id=msg.request_id, status=st,
                                                    message=why))
