"""GET_TAILS: the tails of many logs asked of one sequencer node in one request.

The sequencer role answers each log exactly as it answers GET_TAIL (activation, waiting
for recovery, the seal check; see ``sequencer_role``): it hands each log's request to
its GET_TAIL path with a ``TailBatch`` as the connection.  The batch stands in for the
client's connection (the ``Peer`` interface, everything but ``send`` delegated), keeps
each log's TAIL and, once every log has its answer, sends one TAILS on the real
connection.  A log's answer is matched by its position in the request, which the
per-log requests carry as their ``request_id``.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import numpy as np

from logdevice.errors import E
from logdevice.node.roles.role import Peer
from logdevice.protocol import GetTails, Tail, Tails
from logdevice.security import Principal

__all__ = ["TailBatch"]


class TailBatch:
    """Collects the TAIL of each log of one GET_TAILS; ``Peer`` towards the role."""

    def __init__(self, conn: Peer, msg: GetTails) -> None:
        self.conn = conn
        self.id: int = conn.id
        self.peer_role: str | None = conn.peer_role
        self.peer_node: int | None = conn.peer_node
        self.attrs: dict[str, Any] = conn.attrs
        self.request_id = msg.request_id
        self.log_ids = msg.log_ids
        n = len(msg.log_ids)
        self.statuses = np.full(n, int(E.TIMEDOUT), np.uint16)
        self.lsns = np.zeros(n, np.uint64)
        self.timestamps = np.zeros(n, np.int64)
        self.redirect_to = np.full(n, -1, np.int64)
        self._answered = np.zeros(n, bool)
        self._left = n
        if not n:
            self._finish()

    # -- Peer, as the sequencer role sees it (the connection's, but for ``send``) -------
    @property
    def closed(self) -> bool:
        return self.conn.closed

    @closed.setter
    def closed(self, value: bool) -> None:
        self.conn.closed = value

    @property
    def principal(self) -> Principal | None:
        return self.conn.principal

    def send(self, msg: Any) -> bool:
        """A log's TAIL (its ``request_id`` is the log's position in the request)."""
        if not isinstance(msg, Tail):
            return self.conn.send(msg)
        i = msg.request_id
        if not 0 <= i < len(self._answered) or self._answered[i]:
            return True
        self._answered[i] = True
        self.statuses[i] = int(msg.status)
        self.lsns[i] = msg.lsn
        self.timestamps[i] = msg.timestamp
        if msg.redirect_to is not None:
            self.redirect_to[i] = msg.redirect_to
        self._left -= 1
        if self._left == 0:
            self._finish()
        return True

    def send_many(self, msgs: Collection[Any]) -> bool:
        return all([self.send(m) for m in msgs])

    def close(self) -> None:
        self.conn.close()

    def pause_reading(self, reason: str) -> None:
        self.conn.pause_reading(reason)

    def resume_reading(self, reason: str) -> None:
        self.conn.resume_reading(reason)

    # -- the batch's answer --------------------------------------------------------------
    def _finish(self) -> None:
        self.conn.send(Tails(request_id=self.request_id, status=E.OK, log_ids=self.log_ids,
                             statuses=self.statuses, lsns=self.lsns,
                             timestamps=self.timestamps, redirect_to=self.redirect_to))
