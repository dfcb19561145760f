"""The node's source of the runtime log groups: the epoch store itself.

``StoreLogsConfig`` is a ``logs_config.LogsConfigSource`` that reads the groups from the
epoch store (opened on first use, with the config's credential) and changes them there
(``create``, ``update``, ``remove``, validated against the config file like its own
``logs`` entries).  Only nodes (and the operator's tools) open the store; a client's
source reads the groups from a node, so it never loads this module.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from logdevice.config import Config, LogGroup
from logdevice.config.log_groups import add_group, change_group, drop_group, group_entry
from logdevice.epochstore import EpochStore, LogsConfigState
from logdevice.errors import E, LogDeviceError
from logdevice.logs_config import LogsConfigSource
from logdevice.security.store import open_cluster_store

__all__ = ["StoreLogsConfig"]


class StoreLogsConfig(LogsConfigSource):
    """A node's ``LogsConfigSource``: reads the epoch store, and changes the groups in it.

    Parameters
    ----------
    base : Config
    timeout : float
        Seconds an epoch store operation may take before TIMEDOUT.
    watch_file : bool
    """

    def __init__(self, base: Config, timeout: float = 10.0, *, watch_file: bool = False
                 ) -> None:
        super().__init__(base, self._read_store, watch_file=watch_file)
        self._timeout = timeout
        self._store: EpochStore | None = None
        self._store_lock = threading.Lock()
        self._closed = False

    def _open(self) -> EpochStore:
        with self._store_lock:
            if self._closed:
                raise LogDeviceError(E.SHUTDOWN, "the log groups source is closed")
            if self._store is None:
                self._store = open_cluster_store(self._base, timeout=self._timeout)
            return self._store

    def _read_store(self) -> LogsConfigState:
        return self._open().logs_config()

    # -- changes ------------------------------------------------------------------------
    def _change(self, fn: Callable[[tuple[Mapping[str, Any], ...]], Any]) -> None:
        self._open().update_logs_config(fn)
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
        with self._store_lock:
            self._closed = True
            if self._store is not None:
                self._store.close()
                self._store = None
