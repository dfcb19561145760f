"""Noticing a changed config file, and what of it a running process can adopt.

``ConfigFileWatch.changed`` stats the file (mtime and size); only when those moved does it
read the file, and only a different content hash makes it parse and validate it.  A file
that does not load (half-edited, invalid) is reported once and the old config kept.

``live_changes`` takes from a new config file what nodes and clients follow without a
restart: the node list and the file's log groups.  Everything else (settings, security,
the epoch store, the cluster name) keeps its value until the process restarts; the
returned notes say which sections differ.
"""

from __future__ import annotations

import hashlib
import logging
import os
from dataclasses import fields, replace
from pathlib import Path

from logdevice.config.cluster import Config
from logdevice.errors import LogDeviceError

__all__ = ["ConfigFileWatch", "live_changes", "LIVE_FIELDS"]

log = logging.getLogger("logdevice.config.watch")

#: What a running process adopts from a changed config file.
LIVE_FIELDS = ("nodes", "logs")
_IGNORED = ("base_dir", "source", "runtime_log_names")


def live_changes(old: Config, new: Config) -> tuple[Config, list[str]]:
    """``old`` with ``new``'s nodes and log groups; and the names of the other fields
    that differ (they need a restart)."""
    restart = [f.name for f in fields(Config)
               if f.name not in LIVE_FIELDS + _IGNORED
               and getattr(old, f.name) != getattr(new, f.name)]
    return replace(old, nodes=new.nodes, logs=new.logs), restart


class ConfigFileWatch:
    """Watches one config file.

    Parameters
    ----------
    path : path-like
        The config file (``Config.source`` of the loaded config).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._stamp = self._stat()
        self._digest = self._hash()

    def _stat(self) -> tuple[int, int] | None:
        try:
            st = self.path.stat()
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size)

    def _hash(self) -> bytes | None:
        try:
            return hashlib.sha256(self.path.read_bytes()).digest()
        except OSError:
            return None

    def changed(self) -> Config | None:
        """The file's config if its content changed since the last call (validated), else
        None.  A missing or invalid file is logged (once per content) and ignored."""
        stamp = self._stat()
        if stamp is None or stamp == self._stamp:
            return None
        self._stamp = stamp
        digest = self._hash()
        if digest is None or digest == self._digest:
            return None
        self._digest = digest
        try:
            return Config.load(self.path)
        except LogDeviceError as exc:
            log.warning("config file %s changed but does not load; keeping the config in "
                        "use: %s", self.path, exc.message)
            return None
