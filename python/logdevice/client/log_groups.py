"""A client's runtime log groups: kept current, and changed through the client's API.

The client reads the LogsConfig version and stats its config file (when it was loaded
from one) every ``logs_config_poll_ms`` (a task on the client's loop; the read itself
runs in a worker thread) and adopts the new effective config when either moved (groups
changed, nodes added or removed).  A call naming a log the client does not know reads once more
before it fails with NOTFOUND (``refresh``), so a log created by another process a moment
ago works at once.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from logdevice.client.loop import LoopThread
from logdevice.config import Config, LogGroup
from logdevice.errors import LogDeviceError
from logdevice.logs_config import LogsConfigSource

__all__ = ["ClientLogGroups"]

log = logging.getLogger("logdevice.client.log_groups")


class ClientLogGroups:
    """Polls the runtime log groups for one client and hands it each new config.

    Parameters
    ----------
    base : Config
        The client's config file.
    loop : LoopThread
        The client's loop (the poll task runs there).
    adopt : callable
        Called with each new effective config (from a worker thread).
    timeout : float
        Seconds an epoch store operation may take.
    """

    def __init__(self, base: Config, loop: LoopThread, adopt: Callable[[Config], None],
                 timeout: float = 10.0) -> None:
        self.source = LogsConfigSource(base, timeout=timeout, watch_file=True)
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
        with self._lock:
            if self._stopped.is_set():
                return False
            try:
                config = self.source.poll()
            except LogDeviceError as exc:
                log.warning("cannot read the runtime log groups: %s", exc)
                return False
            if config is None:
                return False
            self._adopt(config)
            return True

    def _changed(self, fn: Callable[[], Any]) -> Any:
        with self._lock:
            out = fn()
            self._adopt(self.source.config)
            return out

    def create(self, name: str, lo: int, hi: int, attributes: Mapping[str, Any]) -> LogGroup:
        return self._changed(lambda: self.source.create(name, lo, hi, attributes))  # type: ignore[no-any-return]

    def update(self, name: str, changes: Mapping[str, Any]) -> LogGroup:
        return self._changed(lambda: self.source.update(name, changes))  # type: ignore[no-any-return]

    def remove(self, name: str) -> None:
        self._changed(lambda: self.source.remove(name))

    def close(self) -> None:
        self._stopped.set()
        self._exec.shutdown(wait=False)
        with self._lock:
            self.source.close()
