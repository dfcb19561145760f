"""The node's view of the runtime log groups and its config file, adopted live.

Every ``logs_config_poll_ms`` the role reads the LogsConfig version (one small read, in
its own thread) and stats the config file; when either moved (a group created, changed or
removed; nodes added or removed in the file), the node adopts the new effective config
(``Node.set_config``), and every role sees ``on_config_change``.  Before the port opens,
one read makes a restarted node know the groups created while it was down.

A request naming a log this node does not know yet (created a moment ago, before our
next poll) is not refused at once: the handler asks ``after_fresh_read`` to run it again
after a read of the store that started after the request arrived (a read already in
flight may predate the creation), and only then answers NOTFOUND.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from logdevice.logs_config_store import StoreLogsConfig
from logdevice.node.roles.failure_log import FailureLog
from logdevice.node.roles.role import NodeServices, Role

log = logging.getLogger("logdevice.node.logs_config")


class LogsConfigRole(Role):
    """Polls the runtime log groups and swaps the node's config when they change."""

    name = "logs_config"

    def __init__(self, node: NodeServices) -> None:
        super().__init__(node)
        self.source = StoreLogsConfig(node.config, watch_file=True)
        self._exec = ThreadPoolExecutor(1, thread_name_prefix="logs-config")
        self._reading: asyncio.Future[None] | None = None  # the read in flight
        self._next: asyncio.Future[None] | None = None  # a read to start after it
        self._poller: asyncio.Task[None] | None = None
        self._stopping = False
        self._failures = FailureLog(log, f"N{node.index}: reading the runtime log groups")

    async def start(self) -> None:
        await self.fresh()
        self._poller = self.node.loop.create_task(self._poll_forever(), name="logs-config")

    async def stop(self) -> None:
        self._stopping = True
        if self._poller is not None:
            self._poller.cancel()

    def close(self) -> None:
        self._exec.shutdown(wait=True)
        self.source.close()

    async def _poll_forever(self) -> None:
        interval = self.node.config.settings.logs_config_poll_ms / 1000
        while not self._stopping:
            await asyncio.sleep(interval)
            await self.fresh()

    # -- reads ------------------------------------------------------------------------------
    def fresh(self) -> asyncio.Future[None]:
        """A future done when a read of the store that starts now or later has been
        adopted (never fails: a read that fails is logged and the config kept)."""
        if self._reading is None:
            self._reading = self._start_read()
            return self._reading
        if self._next is None:
            self._next = self.node.loop.create_future()
        return self._next

    def after_fresh_read(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (on the loop) once ``fresh()`` is done."""
        self.fresh().add_done_callback(lambda _f: callback())

    def _start_read(self) -> asyncio.Future[None]:
        task = self.node.loop.create_task(self._read_once())
        task.add_done_callback(self._read_done)
        return task

    def _read_done(self, _task: asyncio.Future[None]) -> None:
        self._reading = None
        waiting, self._next = self._next, None
        if waiting is None:
            return
        self._reading = nxt = self._start_read()

        def resolve(_f: asyncio.Future[None]) -> None:
            if not waiting.done():
                waiting.set_result(None)

        nxt.add_done_callback(resolve)

    async def _read_once(self) -> None:
        if self._stopping:
            return
        try:
            config = await self.node.loop.run_in_executor(self._exec, self.source.poll)
        except Exception as exc:  # an unreachable store: keep the config, try again later
            self._failures.failed(exc)
            return
        self._failures.succeeded()
        if config is not None and not self._stopping:
            log.info("N%d: runtime log groups at version %d: %s", self.node.index,
                     self.source.version,
                     ", ".join(f"{g.name} ({g.lo}..{g.hi})" for g in config.runtime_logs)
                     or "none")
            self.node.set_config(config)
