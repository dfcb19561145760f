"""``Config``: a whole cluster config, as ``Config.load`` / ``Config.from_dict`` validate it.

A ``Config`` is built only through those two (``_parse`` checks everything first), so
code holding one can trust it; its parts are the value types of ``model``.  ``to_dict``
gives back the JSON form; ``from_dict(to_dict())`` is an equal config.
"""

from __future__ import annotations

import bisect
import json
import os
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from logdevice.config._parse import load_config, parse_config
from logdevice.config.model import LogGroup, NodeConfig, SecurityConfig, Settings, check_disjoint
from logdevice.epochstore.uri import parse_epoch_store_uri
from logdevice.errors import NotFoundError

__all__ = ["Config"]


@dataclass(frozen=True)
class Config:
    """A validated cluster config.  Build with ``Config.load`` or ``Config.from_dict``."""

    cluster: str
    nodes: tuple[NodeConfig, ...]
    logs: tuple[LogGroup, ...]
    epoch_store: str = "file:epochs.sqlite"  # as written; see epoch_store_uri
    data_dir: str = "data"  # as written; see data_root
    settings: Settings = field(default_factory=Settings)
    security: SecurityConfig | None = None  # None: no authentication, no ACLs
    insecure: bool = False  # ``"security": {"insecure": true}``: no security, on purpose
    # Where relative paths are resolved: the config file's directory.
    base_dir: Path = field(default_factory=Path.cwd, compare=False)
    source: str | None = field(default=None, compare=False)
    # Names of the groups of ``logs`` that come from the epoch store's LogsConfig (created
    # at runtime), not from the file: ``to_dict`` leaves them out.
    runtime_log_names: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        by_index = {n.index: n for n in self.nodes}
        order = sorted(range(len(self.logs)), key=lambda i: self.logs[i].lo)
        object.__setattr__(self, "_by_index", by_index)
        object.__setattr__(self, "_log_los", [self.logs[i].lo for i in order])
        object.__setattr__(self, "_log_order", [self.logs[i] for i in order])
        # The node lists the write path asks for on every activation, made once.
        storage = tuple(sorted((n for n in self.nodes if n.is_storage), key=lambda n: n.index))
        object.__setattr__(self, "_storage", storage)
        object.__setattr__(self, "_writable", tuple(n for n in storage if n.weights.storage > 0))
        object.__setattr__(self, "_sequencers", tuple(
            sorted((n for n in self.nodes if n.is_sequencer), key=lambda n: n.index)))

    # -- loading and saving -------------------------------------------------------------
    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Config:
        """Read and validate a config file; ``InvalidConfigError`` names field and file."""
        return load_config(cls, path)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], source: str | os.PathLike[str] | None = None,
                  base_dir: str | os.PathLike[str] | None = None) -> Config:
        """Validate ``d`` (the JSON form).  ``source`` names the file in errors and, unless
        ``base_dir`` is given, its directory anchors relative paths (else the cwd)."""
        return parse_config(cls, d, source=source, base_dir=base_dir)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "cluster": self.cluster,
            "nodes": [n.to_dict() for n in self.nodes],
            "logs": [g.to_dict() for g in self.file_logs],
            "epoch_store": self.epoch_store,
            "data_dir": self.data_dir,
        }
        settings = self.settings.to_dict()
        if settings:
            d["settings"] = settings
        if self.security is not None:
            d["security"] = self.security.to_dict()
        elif self.insecure:
            d["security"] = {"insecure": True}
        return d

    @property
    def file_logs(self) -> tuple[LogGroup, ...]:
        """The log groups written in the config file (``logs`` less the runtime ones)."""
        return tuple(g for g in self.logs if g.name not in self.runtime_log_names)

    @property
    def runtime_logs(self) -> tuple[LogGroup, ...]:
        """The log groups created at runtime (the epoch store's LogsConfig)."""
        return tuple(g for g in self.logs if g.name in self.runtime_log_names)

    def with_log_groups(self, groups: tuple[LogGroup, ...]) -> Config:
        """This config's file groups plus the runtime ``groups`` (replacing any runtime
        groups it had), as a new ``Config``.

        Raises
        ------
        LogDeviceError
            EXISTS when a group's name or id range is taken by another group (the message
            names both ranges).
        """
        check_disjoint(self.file_logs, groups)
        return replace(self, logs=self.file_logs + tuple(groups),
                       runtime_log_names=frozenset(g.name for g in groups))

    def dump(self, path: str | os.PathLike[str]) -> Path:
        """Write the config as JSON to ``path`` atomically (a reader never sees half)."""
        path = Path(path)
        text = json.dumps(self.to_dict(), indent=2) + "\n"
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(text)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return path

    # -- lookups ------------------------------------------------------------------------
    def node(self, index: int) -> NodeConfig:
        """The node with this index; ``NotFoundError`` if there is none."""
        try:
            return self._by_index[index]  # type: ignore[attr-defined,no-any-return]
        except KeyError:
            raise NotFoundError(message=f"node {index} is not in the config of cluster "
                                        f"{self.cluster!r}") from None

    def has_node(self, index: int) -> bool:
        return index in self._by_index  # type: ignore[attr-defined]

    def storage_nodes(self) -> tuple[NodeConfig, ...]:
        """Nodes with the storage role (weight 0 included), by index."""
        return self._storage  # type: ignore[attr-defined,no-any-return]

    def writable_storage_nodes(self) -> tuple[NodeConfig, ...]:
        """Storage nodes with a storage weight above 0: those that take new copies."""
        return self._writable  # type: ignore[attr-defined,no-any-return]

    def sequencer_nodes(self) -> tuple[NodeConfig, ...]:
        """Nodes with the sequencer role, by index."""
        return self._sequencers  # type: ignore[attr-defined,no-any-return]

    def sequencer_weights(self) -> dict[int, float]:
        """node index -> sequencer weight, the input of ``placement.sequencer_for``."""
        return {n.index: n.weights.sequencer for n in self.sequencer_nodes()}

    def log_group(self, log_id: int) -> LogGroup:
        """The log group holding ``log_id``; ``NotFoundError`` for a log not configured."""
        los: list[int] = self._log_los  # type: ignore[attr-defined]
        i = bisect.bisect_right(los, log_id) - 1
        if i >= 0 and isinstance(log_id, int):
            group: LogGroup = self._log_order[i]  # type: ignore[attr-defined]
            if log_id <= group.hi:
                return group
        raise NotFoundError(message=f"log {log_id} is not in the config of cluster "
                                    f"{self.cluster!r}")

    def has_log(self, log_id: int) -> bool:
        try:
            self.log_group(log_id)
        except NotFoundError:
            return False
        return True

    def log_ids(self) -> Iterator[int]:
        """Every configured log id, ascending (ranges can be large: iterate lazily)."""
        for group in self._log_order:  # type: ignore[attr-defined]
            yield from group.ids

    def nodeset_size(self, group: LogGroup) -> int:
        """The effective nodeset size of ``group``: its ``nodeset_size`` capped at the
        number of writable storage nodes (all of them when not set)."""
        available = len(self.writable_storage_nodes())
        return available if group.nodeset_size is None else min(group.nodeset_size, available)

    # -- paths --------------------------------------------------------------------------
    def resolve_path(self, path: str) -> Path:
        """A path as written in the config, relative ones taken from its directory."""
        return (self.base_dir / path).resolve()

    @property
    def data_root(self) -> Path:
        return (self.base_dir / self.data_dir).resolve()

    def node_data_dir(self, index: int) -> Path:
        """Where node ``index`` keeps its data: its ``data_dir`` or ``<data_dir>/N<index>``."""
        node = self.node(index)
        if node.data_dir is not None:
            return (self.base_dir / node.data_dir).resolve()
        return self.data_root / f"N{index}"

    @property
    def epoch_store_uri(self) -> str:
        """The epoch store URI with a ``file:`` path made absolute."""
        return parse_epoch_store_uri(self.epoch_store, base_dir=self.base_dir).uri
