"""A client's runtime log groups: kept current, and changed through the client's API.

The client asks a node for the LogsConfig version (GET_METADATA) and stats its config
file (when it was loaded from one) every ``logs_config_poll_ms`` (a task on the client's
loop; the read itself runs in a worker thread) and adopts the new effective config when
either moved (groups changed, nodes added or removed).  A call naming a log the client
does not know reads once more before it fails with NOTFOUND (``refresh``), so a log
created by another process a moment ago works at once (except from the client's own loop
thread, where a blocking read cannot run: there it fails at once).  Changes are
ADMIN_REQUESTs to a node, which checks the ``admin`` ACL and writes the epoch store; the
client then reads the groups back.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from logdevice.client.metadata import ClusterMetadata
from logdevice.client.net.loop import LoopThread
from logdevice.config import Config, LogGroup
from logdevice.errors import E, LogDeviceError
from logdevice.logs_config import LogsConfigSource

T = TypeVar("T")

__all__ = ["ClientLogGroups"]

log = logging.getLogger("logdevice.client.log_groups")

_UNREACHABLE = frozenset({E.CONNFAILED, E.TIMEDOUT, E.CANCELLED, E.SHUTDOWN})
#: Reads of the groups after a change before the client gives up on seeing it.
_READ_BACK_TRIES = 10


class ClientLogGroups:
    """Polls the runtime log groups for one client and hands it each new config.

    Parameters
    ----------
    base : Config
        The client's config file.
    loop : LoopThread
        The client's loop (the poll task runs there).
    metadata : ClusterMetadata
        How the client asks nodes (reads bounded by ``timeout``).
    adopt : callable
        Called with each new effective config (from a worker thread).
    timeout : float
        Seconds a read of the groups may take.
    """

    def __init__(self, base: Config, loop: LoopThread, metadata: ClusterMetadata,
                 adopt: Callable[[Config], None], timeout: float = 10.0) -> None:
        self.source = LogsConfigSource(
            base, lambda: metadata.logs_config(timeout=timeout), watch_file=True)
        self._metadata = metadata
        self._loop = loop
        self._adopt = adopt
        self._lock = threading.Lock()
        self._exec = ThreadPoolExecutor(1, thread_name_prefix="logdevice-log-groups")
        self._stopped = threading.Event()
        self._interval = base.settings.logs_config_poll_ms / 1000
        loop.submit(self._poll_forever)

    async def _poll_forever(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._stopped.is_set():
            try:
                await loop.run_in_executor(self._exec, self.refresh)
            except RuntimeError:  # the executor was shut down: the client is closing
                return
            await asyncio.sleep(self._interval)

    def refresh(self) -> bool:
        """Read the runtime groups now (blocking); True if the config changed.  A store
        that cannot be read leaves the config as it is (logged)."""
        if self._loop.in_loop_thread():
            return False
        with self._lock:
            if self._stopped.is_set():
                return False
            try:
                config = self.source.poll()
            except LogDeviceError as exc:
                # An unreachable cluster is reported by the calls that need it; anything
                # else (a node refusing, say) is worth a warning here.
                level = logging.DEBUG if exc.status in _UNREACHABLE else logging.WARNING
                log.log(level, "cannot read the runtime log groups: %s", exc)
                return False
            if config is None:
                return False
            self._adopt(config)
            return True

    def run_blocking(self, fn: Callable[[], T]) -> concurrent.futures.Future[T]:
        """Run ``fn`` on the thread that reads the groups (its Future): for a check that
        may read them (an unknown log), made from an event loop that must not block."""
        return self._exec.submit(fn)

    def _changed(self, action: str, name: str, **fields: Any) -> None:
        """Send the change, then read the groups back until this client has them."""
        version = self._metadata.change_log_group(action, name, **fields)
        with self._lock:
            for _ in range(_READ_BACK_TRIES):
                config = self.source.poll()
                if config is not None:
                    self._adopt(config)
                if self.source.version >= version:
                    return
        raise LogDeviceError(E.TIMEDOUT, f"log group {name!r} was changed (LogsConfig "
                                         f"version {version}) but the nodes asked since "
                                         f"still show version {self.source.version}")

    def _group(self, name: str) -> LogGroup:
        for group in self.source.config.logs:
            if group.name == name:
                return group
        raise LogDeviceError(E.NOTFOUND, f"no log group {name!r} after the change")

    def create(self, name: str, lo: int, hi: int, attributes: Mapping[str, Any]) -> LogGroup:
        self._changed("create_log_group", name, lo=lo, hi=hi, attributes=attributes)
        return self._group(name)

    def update(self, name: str, changes: Mapping[str, Any]) -> LogGroup:
        self._changed("update_log_group", name, attributes=changes)
        return self._group(name)

    def remove(self, name: str) -> None:
        self._changed("remove_log_group", name)

    def close(self) -> None:
        self._stopped.set()
        self._exec.shutdown(wait=False)
