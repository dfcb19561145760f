"""Log groups created, changed and removed at runtime (LogDevice's LogsConfig).

The groups live in the epoch store as one versioned document (``EpochStore.logs_config``,
changed by compare-and-set); a process's effective config is its config file plus these
groups (``Config.with_log_groups``).  ``LogsConfigSource`` is the blocking side shared by
nodes and clients: ``poll`` reads the version (one small read) and, when it moved, gives
the new effective config; ``create``, ``update`` and ``remove`` change the document,
validated against the config file like its own ``logs`` entries.  With ``watch_file`` the
same poll also notices a changed config file and adopts its nodes and log groups
(``config.watch``): membership changes without a restart.

Whoever can write the epoch store can change the log groups: with security on, keep the
epoch store on a trusted network (it is not covered by TLS or ACLs).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from logdevice.config import Config, LogGroup
from logdevice.config.log_groups import (
    add_group,
    change_group,
    drop_group,
    group_entry,
    parse_groups,
)
from logdevice.config.watch import ConfigFileWatch, live_changes
from logdevice.epochstore import EpochStore, open_epoch_store, open_existing_epoch_store
from logdevice.errors import E, LogDeviceError

__all__ = ["LogsConfigSource"]

log = logging.getLogger("logdevice.logs_config")


class LogsConfigSource:
    """The config file's config plus the runtime log groups of its epoch store.

    Thread-safe and blocking (every method may read or write the epoch store): nodes and
    clients call it from a worker thread.

    Parameters
    ----------
    base : Config
        The config file as loaded (its ``logs`` are the file's groups).
    timeout : float
        Seconds an epoch store operation may take before TIMEDOUT.
    """

    def __init__(self, base: Config, timeout: float = 10.0, *, watch_file: bool = False
                 ) -> None:
        self._base = base
        self._config = base
        self._version = 0
        self._entries: tuple[Mapping[str, Any], ...] = ()  # the stored groups
        self._dirty = False  # the base changed since the effective config was built
        self._timeout = timeout
        self._store: EpochStore | None = None
        self._lock = threading.Lock()
        self._closed = False
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

    def _open(self, create: bool) -> EpochStore | None:
        if self._closed:
            raise LogDeviceError(E.SHUTDOWN, "the log groups source is closed")
        if self._store is None:
            uri = self._base.epoch_store_uri
            self._store = (open_epoch_store(uri, timeout=self._timeout) if create
                           else open_existing_epoch_store(uri, timeout=self._timeout))
        return self._store

    def poll(self) -> Config | None:
        """Read the runtime groups (and, with ``watch_file``, look at the config file); the
        new effective config if either changed since the last poll, else None.  A store
        that does not exist yet (a ``file:`` store no node created) has no groups.  Groups
        that no longer fit the config file (say, a replication the nodes cannot satisfy)
        are left out with a warning."""
        with self._lock:
            self._follow_file()
            store = self._open(create=False)
            if store is not None:
                state = store.logs_config()
                if state.version != self._version:
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

    # -- changes ------------------------------------------------------------------------
    def _change(self, fn: Callable[[tuple[Mapping[str, Any], ...]], Any]) -> None:
        with self._lock:
            store = self._open(create=True)
            assert store is not None
            store.update_logs_config(fn)
        self.poll()

    def create(self, name: str, lo: int, hi: int, attributes: Mapping[str, Any]) -> LogGroup:
        """Add a group (INVALID_PARAM for bad attributes, EXISTS for a taken name or an
        overlapping range); returns it."""
        entry = group_entry(name, lo, hi, attributes)
        made: list[LogGroup] = []

        def fn(groups: tuple[Mapping[str, Any], ...]) -> list[dict[str, Any]]:
            out, group = add_group(groups, self._base, entry)
            made[:] = [group]
            return out

        self._change(fn)
        return made[0]

    def update(self, name: str, changes: Mapping[str, Any]) -> LogGroup:
        """Change a runtime group's attributes (None: back to the default); returns the
        group after the change.  NOTFOUND for an unknown group, INVALID_PARAM for one of
        the config file."""
        made: list[LogGroup] = []

        def fn(groups: tuple[Mapping[str, Any], ...]) -> list[dict[str, Any]]:
            out, group = change_group(groups, self._base, name, changes)
            made[:] = [group]
            return out

        self._change(fn)
        return made[0]

    def remove(self, name: str) -> None:
        """Remove a runtime group (its records stay until trimmed or expired)."""
        self._change(lambda groups: drop_group(groups, self._base, name))

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._store is not None:
                self._store.close()
                self._store = None
