"""Where a reader reads a log from: the nodeset, replication and authoritative status.

The epoch store keeps each log's metadata history (from which epoch on which nodeset
and replication property wrote).  A reader of ``[from_lsn, until_lsn]`` reads from the
union of the nodesets of every epoch in that range, with the smallest replication among
them (a gap needs "nothing here" answers from enough nodes that every copyset of every
epoch meets one of them; the smallest R is the conservative choice).  Nodes' authoritative
status comes from the epoch store's event log.

The client reaches the epoch store when the config names a ZooKeeper store, or a ``file:``
store that exists on this machine (the embedded SQLite store of a local cluster).
Otherwise, when the store does not answer in time, or when the log has no history yet, it
reads from every storage node in the config, all taken as fully authoritative; a store
that timed out is not asked again for ``STORE_RETRY_AFTER`` seconds, so streams started
during an epoch store outage do not each wait for it.  The
placement is fixed when a stream starts: a nodeset change during a tailing read is not
picked up.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from ldcore.lsn import epoch_of
from logdevice.config import Config
from logdevice.epochstore import open_existing_epoch_store
from logdevice.errors import LogDeviceError

__all__ = ["ReadPlacement", "PlacementSource"]

#: Seconds a store that failed to answer is left alone (config placement meanwhile).
STORE_RETRY_AFTER = 10.0


@dataclass(frozen=True)
class ReadPlacement:
    """What one read stream reads from.

    Attributes
    ----------
    nodeset : tuple of int
        Storage nodes that may hold copies in the range.
    replication : int or dict
        Replication property for gap detection (``{"node": 2}``, ``{"rack": 2, ...}``).
    authoritative : dict node -> AuthoritativeStatus value
        Nodes that are not fully authoritative (others are).
    locations : dict node -> config Location
        For f-majority across failure domains.
    source : str
        ``"epoch store"`` or ``"config"``.
    """

    nodeset: tuple[int, ...]
    replication: Any
    authoritative: dict[int, int] = field(default_factory=dict)
    locations: dict[int, Any] = field(default_factory=dict)
    source: str = "config"

    @property
    def replication_factor(self) -> int:
        rep = self.replication
        return int(rep) if isinstance(rep, int) else max(int(v) for v in rep.values())


class PlacementSource:
    """Looks up read placements for one client (thread-safe; the epoch store is opened on
    first use and kept)."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self._lock = threading.Lock()
        self._store: Any = None
        self._tried = False
        self._skip_until = 0.0  # monotonic time before which the store is not asked

    def _failed(self) -> None:
        self._skip_until = time.monotonic() + STORE_RETRY_AFTER

    def _epoch_store(self) -> Any:
        with self._lock:
            if time.monotonic() < self._skip_until:
                return None
            if self._tried:
                return self._store
            self._tried = True
            try:
                self._store = open_existing_epoch_store(self.config.epoch_store_uri,
                                                        timeout=2.0)
            except (LogDeviceError, OSError, ValueError):
                self._store = None
            return self._store

    def statuses(self) -> dict[int, int] | None:
        """Every node the event log says is not fully authoritative (None: no store)."""
        store = self._epoch_store()
        if store is None:
            return None
        try:
            return {int(n): int(s) for n, s in store.shard_statuses().items()}
        except LogDeviceError:
            self._failed()
            return None

    def authoritative(self, nodes: tuple[int, ...]) -> dict[int, int]:
        """Nodes of ``nodes`` the event log says are not fully authoritative."""
        wanted = set(nodes)
        return {n: s for n, s in (self.statuses() or {}).items() if n in wanted}

    def placement(self, log_id: int, from_lsn: int, until_lsn: int) -> ReadPlacement:
        """The placement for reading ``[from_lsn, until_lsn]`` of ``log_id``."""
        config = self.config
        group = config.log_group(log_id)
        locations = {n.index: n.location for n in config.nodes}
        store = self._epoch_store()
        state = None
        if store is not None:
            try:
                state = store.get(log_id)
            except LogDeviceError:
                self._failed()
        if state is not None and state.history:
            lo_e, hi_e = int(epoch_of(from_lsn)), int(epoch_of(until_lsn))
            hist = state.history
            used = [m for i, m in enumerate(hist)
                    if m.first_epoch <= hi_e
                    and (i + 1 == len(hist) or hist[i + 1].first_epoch > lo_e)]
            if not used:  # the range lies before the first entry: nothing was written
                used = [hist[0]]
            nodes = sorted({n for m in used for n in m.nodeset if config.has_node(n)})
            if nodes:
                reps = {tuple(sorted(m.replication.items())) for m in used}
                if len(reps) == 1:
                    replication: Any = dict(used[0].replication)
                else:
                    replication = {"node": min(m.replication_factor for m in used)}
                replication = _fit(replication, len(nodes))
                nodeset = tuple(nodes)
                return ReadPlacement(nodeset, replication, self.authoritative(nodeset),
                                     locations, "epoch store")
        nodeset = tuple(n.index for n in config.storage_nodes())
        replication = _fit(group.replication.to_dict(), len(nodeset))
        return ReadPlacement(nodeset, replication, self.authoritative(nodeset), locations,
                             "config")

    def close(self) -> None:
        with self._lock:
            if self._store is not None:
                with contextlib.suppress(Exception):
                    self._store.close()
            self._store = None


def _fit(replication: dict[str, int], n: int) -> dict[str, int]:
    """Cap node-level copies at the nodeset size (a tiny test cluster may be smaller than
    a log's replication: the sequencer then cannot write at all, but reading must not
    fail on it)."""
    out = dict(replication)
    if "node" in out:
        out["node"] = max(1, min(out["node"], n))
    return out
