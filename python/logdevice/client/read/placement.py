"""Where a reader reads a log from: the nodeset, replication and authoritative status.

The epoch store keeps each log's metadata history (from which epoch on which nodeset
and replication property wrote); clients never open it, they ask a node
(``ClusterMetadata``).  A reader of ``[from_lsn, until_lsn]`` reads from the union of the
nodesets of every epoch in that range, with the smallest replication among them (a gap
needs "nothing here" answers from enough nodes that every copyset of every epoch meets
one of them; the smallest R is the conservative choice).  Nodes' authoritative status
comes from the event log, through a node as well.

A log with no history was never written: it is read from every storage node in the
config.  When no node can say what the history is (none answers, or their epoch store
does not), the read does not start: ``placement`` raises the status (TIMEDOUT, ...)
after the client's timeout, rather than guess a placement in which a wiped or
rebuilding node's "nothing here" could count toward a DATALOSS gap.  The placement is
looked up again when a stream reaches an epoch newer than the lookup saw (its nodeset may
differ: ``ReadPlacement.known_epoch``); the stream then restarts from where it is with
the new placement.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from ldcore.lsn import epoch_of
from logdevice.client.metadata import ClusterMetadata, LogHistory
from logdevice.config import Config
from logdevice.errors import E, LogDeviceError, error_for

__all__ = ["ReadPlacement", "PlacementSource"]


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
    known_epoch : int or None
        The log's newest epoch when the placement was looked up: later epochs may use
        other nodes, so a read stream does not decide gaps in them before a new lookup
        (0: the log had no epoch yet; None: no limit, the placement is a guess anyway).
    """

    nodeset: tuple[int, ...]
    replication: Any
    authoritative: dict[int, int] = field(default_factory=dict)
    locations: dict[int, Any] = field(default_factory=dict)
    source: str = "config"
    known_epoch: int | None = None

    @cached_property  # (STARTs to every node of every log's stream carry it)
    def replication_factor(self) -> int:
        rep = self.replication
        return int(rep) if isinstance(rep, int) else max(int(v) for v in rep.values())


class PlacementSource:
    """Looks up read placements for one client, from its nodes (coroutines on the
    client's loop).

    Parameters
    ----------
    config : Config
        The client's effective config (the client replaces it as it changes).
    metadata : ClusterMetadata
        How the client asks nodes.
    """

    def __init__(self, config: Config, metadata: ClusterMetadata) -> None:
        self.config = config
        self._metadata = metadata
        self._nodes_of: Config | None = None  # the config _locations and _storage are of
        self._locations: dict[int, Any] = {}
        self._storage: tuple[int, ...] = ()

    async def statuses(self) -> dict[int, int] | None:
        """Every node the event log says is not fully authoritative (None: no node could
        say)."""
        try:
            statuses, _since = await self._metadata.read_shard_statuses()
        except LogDeviceError:
            return None
        return {n: int(s) for n, s in statuses.items()}

    async def placement(self, log_id: int, from_lsn: int, until_lsn: int) -> ReadPlacement:
        """The placement for reading ``[from_lsn, until_lsn]`` of ``log_id``.

        Raises
        ------
        LogDeviceError
            No node could give the log's metadata (TIMEDOUT when none answered in time,
            or the status a node answered with).  A principal that may not read the log
            (ACCESS) gets the config's placement instead: the nodes refuse its streams,
            which the reader turns into an ACCESS gap.
        """
        return (await self.placements([(log_id, from_lsn, until_lsn)]))[0]

    async def placements(self, reads: Sequence[tuple[int, int, int]]) -> list[ReadPlacement]:
        """``placement`` of each ``(log_id, from_lsn, until_lsn)``, from one metadata
        request for all the logs (a few, for thousands) and, at the same time, one for
        the nodes' status."""
        ids = list(dict.fromkeys(log_id for log_id, _, _ in reads))
        for log_id in ids:
            self.config.log_group(log_id)  # NOTFOUND before asking anyone
        shared: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        try:
            states, (statuses, _since) = await asyncio.gather(
                self._metadata.read_log_histories(ids), self._metadata.read_shard_statuses())
        except LogDeviceError as exc:
            if exc.status == E.ACCESS and len(ids) > 1:  # which log? ask one by one
                return [await self.placement(*r) for r in reads]
            if exc.status != E.ACCESS:
                what = (f"log {ids[0]}: cannot read its metadata" if len(ids) == 1
                        else f"{len(ids)} logs: cannot read their metadata")
                raise error_for(exc.status, f"{what}, so the read does not start: "
                                            f"{exc.message}") from None
            # the principal may not read the log: its streams are refused anyway
            return [replace(self._place(log_id, lo, hi, None, {}, shared), known_epoch=None)
                    for log_id, lo, hi in reads]
        return [self._place(log_id, lo, hi, states.get(log_id), statuses, shared)
                for log_id, lo, hi in reads]

    def _place(self, log_id: int, from_lsn: int, until_lsn: int,
               state: LogHistory | None, statuses: Mapping[int, Any],
               shared: dict[tuple[Any, ...], tuple[Any, ...]]) -> ReadPlacement:
        """``shared``: what logs of one lookup with the same group and the same metadata
        in the range have in common, worked out for the first of them."""
        config = self.config
        group = config.log_group(log_id)
        if self._nodes_of is not config:  # the same for every log: made once per config
            self._locations = {n.index: n.location for n in config.nodes}
            self._storage = tuple(n.index for n in config.storage_nodes())
            self._nodes_of = config
        used: tuple[Any, ...] = ()
        hist = state.history if state is not None else ()
        if len(hist) == 1:  # (most logs) its one entry, whatever the range
            used = hist
        elif hist:
            lo_e, hi_e = int(epoch_of(from_lsn)), int(epoch_of(until_lsn))
            used = tuple(m for i, m in enumerate(hist)
                         if m.first_epoch <= hi_e
                         and (i + 1 == len(hist) or hist[i + 1].first_epoch > lo_e))
            if not used:  # the range lies before the first entry: nothing was written
                used = (hist[0],)
        key = (id(group), used)
        common = shared.get(key)
        if common is None:
            common = shared[key] = self._common(group, used, statuses)
        nodeset, replication, authoritative, source = common
        # (the reader updates each stream's authoritative map in place: one map per log)
        return ReadPlacement(nodeset, replication, dict(authoritative), self._locations,
                             source, state.epoch if state is not None else 0)

    def _common(self, group: Any, used: tuple[Any, ...], statuses: Mapping[int, Any]
                ) -> tuple[tuple[int, ...], dict[str, int], dict[int, int], str]:
        """Nodeset, replication, authoritative map and source for a group's log whose
        range used the metadata ``used``."""
        config = self.config
        nodeset = self._storage
        replication: Any = group.replication.to_dict()
        source = "config"
        if used:
            nodes = sorted({n for m in used for n in m.nodeset if config.has_node(n)})
            if nodes:
                reps = {tuple(sorted(m.replication.items())) for m in used}
                replication = dict(used[0].replication) if len(reps) == 1 else \
                    {"node": min(m.replication_factor for m in used)}
                nodeset, source = tuple(nodes), "epoch store"
        wanted = set(nodeset)
        authoritative = {n: int(s) for n, s in statuses.items() if n in wanted}
        return nodeset, _fit(replication, len(nodeset)), authoritative, source


def _fit(replication: dict[str, int], n: int) -> dict[str, int]:
    """Cap node-level copies at the nodeset size (a tiny test cluster may be smaller than
    a log's replication: the sequencer then cannot write at all, but reading must not
    fail on it)."""
    out = dict(replication)
    if "node" in out:
        out["node"] = max(1, min(out["node"], n))
    return out
