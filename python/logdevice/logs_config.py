"""Log groups created, changed and removed at runtime (LogDevice's LogsConfig).

The groups live in the epoch store as one versioned document (``EpochStore.logs_config``,
changed by compare-and-set); a process's effective config is its config file plus these
groups (``Config.with_log_groups``).  ``LogsConfigSource`` follows them: ``poll`` reads the
version (one small read, through ``read``) and, when it moved, gives the new effective
config.  With ``watch_file`` the same poll also notices a changed config file and adopts
its nodes and log groups (``config.watch``): membership changes without a restart.

Only nodes open the epoch store: ``logs_config_store.StoreLogsConfig`` is the node's
source, which reads the store and also changes the groups (``create``, ``update``,
``remove``, validated against the config file like its own ``logs`` entries).  A
client's source reads the groups from a node (GET_METADATA), and sends its changes to a
node (ADMIN_REQUEST), which checks the ``admin`` ACL before it writes.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from logdevice.config import Config
from logdevice.config.log_groups import parse_groups
from logdevice.config.watch import ConfigFileWatch, live_changes
from logdevice.epochstore import LogsConfigState

__all__ = ["LogsConfigSource"]

log = logging.getLogger("logdevice.logs_config")


class LogsConfigSource:
    """The config file's config plus the runtime log groups that ``read`` returns.

    Thread-safe and blocking (``poll`` calls ``read``): nodes and clients call it from a
    worker thread.

    Parameters
    ----------
    base : Config
        The config file as loaded (its ``logs`` are the file's groups).
    read : callable () -> LogsConfigState or None
        Reads the stored groups (None: there is no store yet, so no groups).
    watch_file : bool
        Also follow the config file.
    """

    def __init__(self, base: Config, read: Callable[[], LogsConfigState | None], *,
                 watch_file: bool = False) -> None:
        self._base = base
        self._read = read
        self._config = base
        self._version = 0
        self._entries: tuple[Mapping[str, Any], ...] = ()  # the stored groups
        self._dirty = False  # the base changed since the effective config was built
        self._lock = threading.Lock()
        self._watch = (ConfigFileWatch(base.source) if watch_file and base.source is not None
                       else None)

    @property
    def config(self) -> Config:
        """The effective config as of the last ``poll``."""
        return self._config

    @property
    def version(self) -> int:
        """The LogsConfig version the effective config was built from (0: none yet)."""
        return self._version

    def poll(self) -> Config | None:
        """Read the runtime groups (and, with ``watch_file``, look at the config file); the
        new effective config if either changed since the last poll, else None.  Groups
        that no longer fit the config file (say, a replication the nodes cannot satisfy)
        are left out with a warning."""
        with self._lock:
            self._follow_file()
            state = self._read()
            if state is not None and state.version != self._version:
                self._entries, self._version = state.groups, state.version
                self._dirty = True
            if not self._dirty:
                return None
            groups, problems = parse_groups(self._entries, self._base, strict=False)
            for problem in problems:
                log.warning("runtime log group left out: %s", problem)
            self._config = self._base.with_log_groups(groups)
            self._dirty = False
            return self._config

    def _follow_file(self) -> None:
        """Adopt the nodes and log groups of a changed config file."""
        new = self._watch.changed() if self._watch is not None else None
        if new is None:
            return
        base, restart = live_changes(self._base, new)
        if restart:
            log.warning("config file %s: %s changed; that takes a restart", new.source,
                        ", ".join(restart))
        if base != self._base:
            log.info("config file %s: adopting its nodes (%s) and log groups", new.source,
                     ", ".join(f"N{n.index}" for n in base.nodes))
            self._base = base
            self._dirty = True

