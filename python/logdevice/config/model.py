"""The cluster config's value types: ``Config``, ``NodeConfig``, ``LogGroup``, ``Settings``.

All are frozen; a ``Config`` is built only through ``Config.load`` / ``Config.from_dict``
(see ``_parse``), which validate everything first, so code holding a ``Config`` can trust
it.  ``to_dict`` gives back the JSON form; ``from_dict(to_dict())`` is an equal config.
"""

from __future__ import annotations

import bisect
import json
import os
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from logdevice.config.location import Location
from logdevice.config.replication import ReplicationProperty
from logdevice.errors import NotFoundError

ROLES = ("sequencer", "storage")

#: User log ids are 1 .. USER_LOGID_MAX.
LOGID_MIN = 1
USER_LOGID_MAX = 2**62 - 1 - 1000
MAX_PAYLOAD_SIZE = 32 * 1024 * 1024
#: What a log group's ACL grants, action by action.
ACL_ACTIONS = ("append", "read", "trim", "admin")
#: ACL entries that are not principal names: any authenticated principal; anyone at all.
ANY_AUTHENTICATED = "*"
ANONYMOUS = "anonymous"


@dataclass(frozen=True, slots=True)
class Weights:
    """Relative share of sequencers (placement) and of new copies (copyset selection).
    A storage weight of 0 keeps the node readable but gives it no new records."""

    sequencer: float = 1.0
    storage: float = 1.0


@dataclass(frozen=True, slots=True)
class NodeConfig:
    index: int
    host: str
    port: int
    admin_port: int | None = None
    location: Location = field(default_factory=Location)
    roles: frozenset[str] = frozenset(ROLES)
    weights: Weights = field(default_factory=Weights)
    data_dir: str | None = None  # as written; Config.node_data_dir resolves it

    @property
    def name(self) -> str:
        return f"N{self.index}"

    @property
    def address(self) -> tuple[str, int]:
        return (self.host, self.port)

    @property
    def is_sequencer(self) -> bool:
        return "sequencer" in self.roles

    @property
    def is_storage(self) -> bool:
        return "storage" in self.roles

    @property
    def sequencer_weight(self) -> float:
        """The sequencer weight, 0 when the node has no sequencer role."""
        return self.weights.sequencer if self.is_sequencer else 0.0

    @property
    def storage_weight(self) -> float:
        """The storage weight, 0 when the node has no storage role."""
        return self.weights.storage if self.is_storage else 0.0

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"index": self.index, "host": self.host, "port": self.port}
        if self.admin_port is not None:
            d["admin_port"] = self.admin_port
        d["location"] = str(self.location)
        d["roles"] = [r for r in ROLES if r in self.roles]
        d["weights"] = {"sequencer": self.weights.sequencer, "storage": self.weights.storage}
        if self.data_dir is not None:
            d["data_dir"] = self.data_dir
        return d


@dataclass(frozen=True, slots=True)
class Acl:
    """Who may do what to a log group's logs, by principal name.

    ``"*"`` is any authenticated principal, ``"anonymous"`` also admits connections that
    did not authenticate.  An action left ``None`` in a log group's ACL takes the cluster's
    default (``security.acl``).
    """

    append: tuple[str, ...] | None = None  # APPEND (single appends and BufferedWriter blobs)
    read: tuple[str, ...] | None = None  # read streams, GET_TAIL, GET_HEAD, FIND_TIME, DATA_SIZE
    trim: tuple[str, ...] | None = None  # TRIM
    admin: tuple[str, ...] | None = None  # the checker's record availability; cluster-wide: ldshell

    def names(self, action: str) -> tuple[str, ...] | None:
        """The principals granted ``action`` (one of ``ACL_ACTIONS``), None if not set."""
        names: tuple[str, ...] | None = getattr(self, action)
        return names

    def over(self, default: Acl) -> Acl:
        """This ACL with the actions it leaves unset taken from ``default``."""
        return Acl(**{a: self.names(a) if self.names(a) is not None else default.names(a)
                      for a in ACL_ACTIONS})

    def to_dict(self) -> dict[str, list[str]]:
        return {a: list(names) for a in ACL_ACTIONS if (names := self.names(a)) is not None}


#: Without an ACL of its own a log group grants every action to every authenticated
#: principal (and nothing to anonymous connections).
DEFAULT_ACL = Acl(append=(ANY_AUTHENTICATED,), read=(ANY_AUTHENTICATED,),
                  trim=(ANY_AUTHENTICATED,), admin=(ANY_AUTHENTICATED,))


@dataclass(frozen=True, slots=True)
class TlsConfig:
    """TLS on every connection (paths are relative to the config file)."""

    cert: str  # the nodes' certificate chain (PEM): served, and shown to peers as a client
    key: str  # the private key of ``cert`` (PEM)
    ca: str  # the CA certificates (PEM) that sign node and client certificates
    require_client_cert: bool = False  # refuse connections without a client certificate

    def to_dict(self) -> dict[str, Any]:
        return {"cert": self.cert, "key": self.key, "ca": self.ca,
                "require_client_cert": self.require_client_cert}


@dataclass(frozen=True, slots=True)
class PrincipalConfig:
    """A principal clients may authenticate as: by a client certificate whose subject CN
    is ``name``, or by sending its token in HELLO."""

    name: str  # the name ACLs use (and the CN of its client certificates)
    token: str | None = None  # shared secret that authenticates as this principal
    token_file: str | None = None  # ... or a file holding it (first line)

    def to_dict(self) -> dict[str, str]:
        d = {}
        if self.token is not None:
            d["token"] = self.token
        if self.token_file is not None:
            d["token_file"] = self.token_file
        return d


@dataclass(frozen=True, slots=True)
class SecurityConfig:
    """The config's ``security`` section: with it, connections authenticate and log group
    ACLs apply; without it, every peer may do everything (local dev clusters)."""

    tls: TlsConfig | None = None  # TLS on every connection; None: plain TCP
    node_subjects: tuple[str, ...] = ()  # client-certificate CNs that identify nodes
    node_secret: str | None = None  # nodes' shared secret, sent in HELLO (with or without TLS)
    node_secret_file: str | None = None  # ... or a file holding it (first line)
    principals: tuple[PrincipalConfig, ...] = ()  # ``{name: {token...}}``, ``{}``: cert only
    acl: Acl = DEFAULT_ACL  # log groups without one; its admin: ldshell's node questions too

    def principal(self, name: str) -> PrincipalConfig | None:
        for p in self.principals:
            if p.name == name:
                return p
        return None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {}
        if self.tls is not None:
            d["tls"] = self.tls.to_dict()
        if self.node_subjects:
            d["node_subjects"] = list(self.node_subjects)
        if self.node_secret is not None:
            d["node_secret"] = self.node_secret
        if self.node_secret_file is not None:
            d["node_secret_file"] = self.node_secret_file
        if self.principals:
            d["principals"] = {p.name: p.to_dict() for p in self.principals}
        d["acl"] = self.acl.to_dict()
        return d


#: First store wave's timeout and cap, ms.  LogDevice starts at 10 ms; Python nodes doing
#: group commit on shared cores answer a healthy STORE in a few ms but with a long tail, and
#: a premature second wave costs an extra copy and breaks sticky blocks.
DEFAULT_STORE_TIMEOUT_MS = (100, 60_000)


@dataclass(frozen=True, slots=True)
class LogGroup:
    """A range of log ids ``[lo, hi]`` (inclusive) sharing attributes."""

    name: str
    lo: int
    hi: int
    replication: ReplicationProperty
    nodeset_size: int | None = None  # None: every storage node
    scd: bool = True
    sticky_copysets: bool = False
    sticky_block_bytes: int = 32 * 1024 * 1024
    sticky_block_ms: int = 10 * 60 * 1000
    backlog_retention_ms: int | None = None  # None: keep forever (until trimmed)
    max_writes_in_flight: int = 1000
    store_timeout_ms: tuple[int, int] = DEFAULT_STORE_TIMEOUT_MS
    acl: Acl | None = None  # who may append, read, trim, administer (needs ``security``)

    def __contains__(self, log_id: object) -> bool:
        return isinstance(log_id, int) and self.lo <= log_id <= self.hi

    @property
    def ids(self) -> range:
        return range(self.lo, self.hi + 1)

    @property
    def replication_factor(self) -> int:
        return self.replication.replication_factor

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "name": self.name,
            "id": self.lo if self.lo == self.hi else [self.lo, self.hi],
            "replication": self.replication.to_config(),
        }
        if self.nodeset_size is not None:
            d["nodeset_size"] = self.nodeset_size
        d["scd"] = self.scd
        d["sticky_copysets"] = self.sticky_copysets
        d["sticky_block_bytes"] = self.sticky_block_bytes
        d["sticky_block_ms"] = self.sticky_block_ms
        if self.backlog_retention_ms is not None:
            d["backlog_retention_ms"] = self.backlog_retention_ms
        d["max_writes_in_flight"] = self.max_writes_in_flight
        d["store_timeout_ms"] = list(self.store_timeout_ms)
        if self.acl is not None:
            d["acl"] = self.acl.to_dict()
        return d


@dataclass(frozen=True, slots=True)
class Settings:
    """Cluster-wide tunables (the config's ``settings`` object; every key optional).

    To add one: add a field with its default here and, if it needs bounds, a line in
    ``_parse.SETTING_BOUNDS``.
    """

    heartbeat_interval_ms: int = 100  # gossip between nodes
    suspect_timeout_ms: int = 1_000  # no heartbeat for this long: suspect
    dead_timeout_ms: int = 3_000  # no heartbeat for this long: dead
    connect_timeout_ms: int = 2_000
    max_payload_size: int = MAX_PAYLOAD_SIZE  # bytes; larger appends get TOOBIG
    read_window_size: int = 512  # client read buffer / window, in records (LSNs)
    read_flow_control_threshold: float = 0.7  # slide the window past this fraction
    gap_grace_period_ms: int = 100  # before an incomplete authoritative gap
    scd_timeout_ms: int = 5_000  # a silent node goes on the known-down list
    scd_all_send_all_timeout_ms: int = 10_000  # stuck this long in SCD: all-send-all
    store_graylist_ms: int = 5_000  # a node that timed out a wave is avoided this long
    store_blacklist_ms: int = 10_000  # a node that answered an error is avoided this long
    # When a storage node answers STORED: "memory" (written to RocksDB's memtable, no
    # write-ahead log: lost if the node crashes), "async_write" (in the write-ahead log,
    # not fsynced: survives a process crash, not a power loss) or "sync_write" (the WAL
    # is fsynced first, once per group commit: survives a power loss).
    append_store_durability: str = "async_write"
    partition_duration_ms: int = 900_000  # LogsDB starts a new time partition this often
    partition_size_limit_bytes: int = 512 << 20  # ... or once the newest holds this much
    retention_interval_ms: int = 60_000  # how often a node drops partitions nobody needs
    # Records/s a storage node reads from its copyset index to answer the checker; a
    # check never takes more, so it cannot starve appends or reads.
    checker_records_per_second: int = 5_000_000
    # Periodic checks run by one node at a time (0: off), and the grace period after which
    # records still under-replicated are a progress violation.
    checker_interval_ms: int = 0
    checker_grace_period_ms: int = 600_000
    # Rebuilding: bytes/s each donor sends (0: as fast as it can), how often nodes read
    # the event log, and the records a donor handles per batch.
    rebuilding_rate_bytes_per_s: int = 0
    rebuilding_poll_ms: int = 500
    rebuilding_batch_records: int = 8192
    frame_timeout_ms: int = 30_000  # a frame half-sent and then stalled this long: close
    logs_config_poll_ms: int = 1_000  # how often nodes and clients read the runtime log groups

    def to_dict(self, only_changed: bool = True) -> dict[str, Any]:
        """The settings as JSON; by default only those that differ from the defaults."""
        default = _DEFAULT_SETTINGS
        return {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if not only_changed or getattr(self, f.name) != getattr(default, f.name)
        }


_DEFAULT_SETTINGS = Settings()


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

    # -- loading and saving -------------------------------------------------------------
    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Config:
        """Read and validate a config file; ``InvalidConfigError`` names field and file."""
        from logdevice.config._parse import load_config

        return load_config(path)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], source: str | os.PathLike[str] | None = None,
                  base_dir: str | os.PathLike[str] | None = None) -> Config:
        """Validate ``d`` (the JSON form).  ``source`` names the file in errors and, unless
        ``base_dir`` is given, its directory anchors relative paths (else the cwd)."""
        from logdevice.config._parse import parse_config

        return parse_config(d, source=source, base_dir=base_dir)

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
        from logdevice.config.log_groups import check_disjoint

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
        return tuple(sorted((n for n in self.nodes if n.is_storage), key=lambda n: n.index))

    def writable_storage_nodes(self) -> tuple[NodeConfig, ...]:
        """Storage nodes with a storage weight above 0: those that take new copies."""
        return tuple(n for n in self.storage_nodes() if n.weights.storage > 0)

    def sequencer_nodes(self) -> tuple[NodeConfig, ...]:
        """Nodes with the sequencer role, by index."""
        return tuple(sorted((n for n in self.nodes if n.is_sequencer), key=lambda n: n.index))

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
        from logdevice.epochstore.uri import parse_epoch_store_uri

        return parse_epoch_store_uri(self.epoch_store, base_dir=self.base_dir).uri
