"""Runs the sequencer role's writer recalls (``sequencer.writer_recall``) on the node.

The sequencer role asks ``knows_writers(seq)`` before it takes an idempotent blob; if
not, it holds the blob and calls ``recall(seq)``.  This sends GET_WRITER_BLOBS to the
storage nodes, feeds the WRITER_BLOBS answers and its timer to the state machine, and
once a recall is done puts the blobs into the role's ``ProducerTable`` and hands the log
back (``on_recalled``) so the held blobs are served.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from logdevice.errors import E
from logdevice.protocol import GetWriterBlobs, WriterBlobs
from logdevice.sequencer.producers import ProducerTable
from logdevice.sequencer.writer_recall import Recalled, SendGetWriterBlobs, WriterRecalls

if TYPE_CHECKING:
    from logdevice.node.roles.role import NodeServices, Peer
    from logdevice.sequencer.sequencer import Sequencer

log = logging.getLogger("logdevice.node.sequencer")

__all__ = ["WriterRecallDriver"]


class WriterRecallDriver:
    """One node's writer recalls (see the module docstring)."""

    def __init__(self, node: NodeServices, producers: ProducerTable,
                 on_recalled: Callable[[int], None]) -> None:
        self.node = node
        settings = node.config.settings
        self.window_ms = settings.idempotence_window_ms
        self.recalls = WriterRecalls(ask_timeout=settings.dead_timeout_ms / 1000,
                                     clock=node.loop.time)
        self._producers = producers
        self._on_recalled = on_recalled
        self._known: dict[int, int] = {}  # log -> epoch whose sequencer recalled its writers
        self._timer: tuple[float, asyncio.TimerHandle] | None = None

    def knows_writers(self, seq: Sequencer) -> bool:
        """Whether ``seq`` may take idempotent blobs: it recalled the log's writers, or
        there is nothing to recall (the log's first epoch; the window is off)."""
        return seq.epoch <= 1 or self.window_ms <= 0 \
            or self._known.get(seq.log_id) == seq.epoch

    def recall(self, seq: Sequencer) -> None:
        """Start recalling the writers of ``seq``'s log (unless already under way)."""
        nodes = [n.index for n in self.node.config.storage_nodes()]
        since_ms = int(time.time() * 1000) - self.window_ms
        self._run(self.recalls.start(seq.log_id, seq.epoch, nodes, seq.replication.r,
                                     since_ms))

    def forget(self, log_id: int) -> None:
        """The log's sequencer went away."""
        self.recalls.cancel(log_id)
        self._known.pop(log_id, None)

    def on_reply(self, conn: Peer, msg: WriterBlobs) -> None:
        node = conn.peer_node if conn.peer_node is not None else msg.node_index
        self._run(self.recalls.on_reply(
            msg.request_id, node, msg.status, msg.lsns.tolist(), msg.producers.tolist(),
            msg.seqs.tolist(), msg.timestamps.tolist(), msg.checksums.tolist()))

    def stop(self) -> None:
        if self._timer is not None:
            self._timer[1].cancel()
            self._timer = None

    def _run(self, actions: list) -> None:
        for a in actions:
            if type(a) is SendGetWriterBlobs:
                if not self.node.send_to_node(a.node, GetWriterBlobs(
                        request_id=a.request_id, log_id=a.log_id, epoch=a.epoch,
                        since_ms=a.since_ms)):
                    self._run(self.recalls.on_reply(a.request_id, a.node, E.CONNFAILED))
            elif type(a) is Recalled:
                self._recalled(a)
        self._arm()

    def _recalled(self, done: Recalled) -> None:
        for producer, seq, lsn, ts, checksum in done.blobs:
            self._producers.remember(done.log_id, producer, seq, lsn, ts, checksum)
        self._known[done.log_id] = done.epoch
        if done.blobs:
            log.info("log %d epoch %d: %d blobs of idempotent writers recalled from the "
                     "storage nodes", done.log_id, done.epoch, len(done.blobs))
        self._on_recalled(done.log_id)

    def _arm(self) -> None:
        deadline = self.recalls.next_deadline()
        if deadline is None:
            return
        armed = self._timer
        if armed is not None:
            if armed[0] <= deadline:
                return
            armed[1].cancel()
        self._timer = (deadline, self.node.loop.call_at(deadline, self._on_timer))

    def _on_timer(self) -> None:
        self._timer = None
        self._run(self.recalls.on_timer())
