"""What the sequencer role keeps of each APPEND until it answers it.

``PendingAppend`` is one record being served: who asked, its payload until the answer
(STOREs may be resent), its deadline and, for a record of an APPEND_BATCH, where its
outcome goes in the batch's reply.  ``BatchReply`` is that reply: filled in record by
record, handed on as one APPENDED_BATCH (columns) once the last record has its outcome.
``PartAnswers`` sends the APPENDED_BATCHes of APPEND_LOGS parts as they come, those of a
loop turn together in one APPENDED_LOGS.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ldcore.storecols import reply_columns
from logdevice.errors import E
from logdevice.node.roles.role import NodeServices, Peer
from logdevice.protocol import AppendedBatch, AppendedLogs

__all__ = ["PendingAppend", "BatchReply", "PartAnswers"]


class PendingAppend:
    """An APPEND being served: who asked, and the payload until it is answered.  A record
    of an APPEND_BATCH answers into its batch's reply (``batch``, at ``index``)."""

    __slots__ = ("conn", "request_id", "log_id", "payload", "checksum", "producer", "t0",
                 "deadline", "batch", "index")

    def __init__(self, conn: Peer, request_id: int, log_id: int, payload: Any,
                 checksum: int, producer: tuple[int, int] = (0, 0), t0: float = 0.0,
                 deadline: float | None = None, batch: BatchReply | None = None,
                 index: int = 0) -> None:
        self.t0 = t0  # loop time it arrived (append latency)
        self.deadline = deadline  # loop time the client stops waiting (None: no timeout)
        self.conn = conn
        self.request_id = request_id
        self.log_id = log_id
        self.payload = payload
        self.checksum = checksum
        self.producer = producer  # an idempotent writer's (id, blob sequence number)
        self.batch = batch
        self.index = index


class BatchReply:
    """The APPENDED_BATCH of one APPEND_BATCH, filled in as its records get their outcome
    and given to ``send`` (the client's connection's, or ``PartAnswers``' for a part of an
    APPEND_LOGS) when the last one has."""

    __slots__ = ("send", "request_id", "statuses", "lsns", "timestamps", "left",
                 "redirect", "message")

    def __init__(self, send: Callable[[AppendedBatch], Any], request_id: int, n: int) -> None:
        self.send = send
        self.request_id = request_id
        # Lists while they fill (one record at a time), columns when sent.
        self.statuses: list[int] = [0] * n
        self.lsns: list[int] = [0] * n
        self.timestamps: list[int] = [0] * n
        self.left = n
        self.redirect: int | None = None
        self.message = ""

    def record(self, i: int, status: E, lsn: int = 0, timestamp: int = 0,
               redirect: int | None = None, message: str = "") -> None:
        self.statuses[i] = status
        self.lsns[i] = lsn
        self.timestamps[i] = timestamp
        if status != E.OK and not self.message:
            self.message = f"record {i}: {message or status.name}"
            self.redirect = redirect
        self.left -= 1
        if self.left == 0:
            statuses, lsns, timestamps = reply_columns(self.statuses, self.lsns,
                                                       self.timestamps)
            self.send(AppendedBatch(
                request_id=self.request_id, status=E.OK, statuses=statuses, lsns=lsns,
                timestamps=timestamps, redirect_to=self.redirect,
                message=self.message))


class PartAnswers:
    """The APPENDED_BATCHes answering APPEND_LOGS parts, each handed in as soon as its
    part has its outcome: those of one loop turn for one connection leave together in one
    APPENDED_LOGS (a lone one as itself), when the node writes the turn's output."""

    __slots__ = ("_node", "_out")

    def __init__(self, node: NodeServices) -> None:
        self._node = node
        self._out: dict[Peer, list[AppendedBatch]] = {}

    def send(self, conn: Peer, reply: AppendedBatch) -> None:
        if not self._out:
            self._node.before_flush(self._flush)
        self._out.setdefault(conn, []).append(reply)

    def _flush(self) -> None:
        out, self._out = self._out, {}
        for conn, replies in out.items():
            conn.send(replies[0] if len(replies) == 1 else AppendedLogs.of(replies))
