"""The parts of a cluster config: ``NodeConfig``, ``LogGroup``, ``Settings``, the
``security`` section's types, and ``check_disjoint`` (log groups' names and id ranges).

All are frozen; ``_parse`` builds them while validating a config, and ``cluster.Config``
(the whole config) holds them.  ``to_dict`` gives back each one's JSON form.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from typing import Any

from logdevice.config.location import Location
from logdevice.config.replication import ReplicationProperty
from logdevice.errors import E, LogDeviceError

ROLES = ("sequencer", "storage")

#: User log ids are 1 .. USER_LOGID_MAX.
LOGID_MIN = 1
USER_LOGID_MAX = 2**62 - 1 - 1000
#: A log id with this bit set names the metadata log of the data log without it.
METADATA_LOG_BIT = 1 << 63
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


#: Without an ACL of its own a log group grants append and read to every authenticated
#: principal, trim and admin to nobody (name who may in ``security.acl`` or the group's
#: own ACL), and nothing to anonymous connections.
DEFAULT_ACL = Acl(append=(ANY_AUTHENTICATED,), read=(ANY_AUTHENTICATED,), trim=(), admin=())


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
class ZooKeeperAuth:
    """How nodes authenticate to a ZooKeeper epoch store, and whom its znodes admit."""

    auth_file: str  # "user:password" on its first line (only nodes have this file)
    operator: str | None = None  # "name:base64(sha1(name:password))": also admitted

    def to_dict(self) -> dict[str, str]:
        d = {"auth_file": self.auth_file}
        if self.operator is not None:
            d["operator"] = self.operator
        return d


@dataclass(frozen=True, slots=True)
class SecurityConfig:
    """The config's ``security`` section: with it, connections authenticate and log group
    ACLs apply; without it, every peer may do everything (local dev clusters)."""

    tls: TlsConfig | None = None  # TLS on every connection; None: plain TCP
    node_subjects: tuple[str, ...] = ()  # client-certificate CNs that identify nodes
    # A file holding the nodes' shared secret (first line), sent in HELLO; only nodes have
    # it (an inline secret would be in the file every client reads).
    node_secret_file: str | None = None
    principals: tuple[PrincipalConfig, ...] = ()  # ``{name: {token...}}``, ``{}``: cert only
    acl: Acl = DEFAULT_ACL  # log groups without one; its admin: ldshell's node questions too
    zookeeper: ZooKeeperAuth | None = None  # the nodes' ZooKeeper credential

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
        if self.node_secret_file is not None:
            d["node_secret_file"] = self.node_secret_file
        if self.principals:
            d["principals"] = {p.name: p.to_dict() for p in self.principals}
        d["acl"] = self.acl.to_dict()
        if self.zookeeper is not None:
            d["zookeeper"] = self.zookeeper.to_dict()
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
    store_timeout_ms: tuple[int, int] = DEFAULT_STORE_TIMEOUT_MS  # store waves; longer if busy
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
    read_window_bytes: int = 4 << 20  # the window grows (<= 32x) to hold this; 0: fixed
    read_flow_control_threshold: float = 0.7  # slide the window past this fraction
    gap_grace_period_ms: int = 100  # before an incomplete authoritative gap
    scd_timeout_ms: int = 5_000  # a silent node goes on the known-down list
    scd_all_send_all_timeout_ms: int = 10_000  # stuck this long in SCD: all-send-all
    store_graylist_ms: int = 5_000  # a node that timed out a wave is avoided this long
    store_blacklist_ms: int = 10_000  # a node that answered an error is avoided this long
    # A sequencer with nothing in flight that took no append for this long gives back its
    # window (it resumes in the same epoch on the next append; 0: never).  Waking costs
    # only a few allocations, no epoch and no I/O, so this need not be long: just long
    # enough that a log in steady use does not sleep between its appends.
    sequencer_idle_ms: int = 30_000
    # When a storage node answers STORED: "memory" (written to RocksDB's memtable, no
    # write-ahead log: lost if the node crashes), "async_write" (in the write-ahead log,
    # not fsynced: survives a process crash, not a power loss) or "sync_write" (the WAL
    # is fsynced first, once per group commit: survives a power loss).
    append_store_durability: str = "async_write"
    partition_duration_ms: int = 900_000  # LogsDB starts a new time partition this often
    partition_size_limit_bytes: int = 512 << 20  # ... or once the newest holds this much
    retention_interval_ms: int = 60_000  # how often a node drops partitions nobody needs
    # Bytes a storage node keeps of the records it just stored, per log the newest, so
    # tailing readers are served from memory (0: every read goes to the store).
    record_cache_bytes: int = 32 << 20
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
    # While appends come in, rebuilding takes at most this share of a node's time, in
    # small slices (appends keep their latency); at full speed when appends are idle.
    # 1.0: never yield.
    rebuilding_append_share: float = 0.25
    # Self-initiated rebuilding: a storage node the cluster has held dead this long is
    # rebuilt without its participation (0: never), unless more than this fraction of the
    # storage nodes (at least one node) are down or being rebuilt already.
    self_rebuild_grace_period_ms: int = 600_000
    max_rebuilding_fraction: float = 0.25
    # A sequencer that takes a log over recognises retried BufferedWriter blobs whose
    # first attempt it did not see, if the first attempt is at most this old (it asks
    # the storage nodes which writers' blobs they hold this far back; 0: it does not,
    # and a retry whose first attempt's acknowledgement was lost is stored again).
    idempotence_window_ms: int = 900_000
    frame_timeout_ms: int = 30_000  # a frame half-sent and then stalled this long: close
    max_connections: int = 4_096  # inbound connections a node holds; more are closed at once
    max_connections_per_principal: int = 1_024  # of those, one principal's (nodes: no limit)
    client_idle_timeout_ms: int = 600_000  # a client silent this long, no stream open: close
    max_buffered_input_bytes: int = 512 << 20  # half-received frames, all clients: beyond, close
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


def _describe(group: LogGroup, runtime: bool) -> str:
    where = "created at runtime" if runtime else "of the config file"
    return f"log group {group.name!r} (ids {group.lo}..{group.hi}, {where})"


def check_disjoint(fixed: Iterable[LogGroup], groups: Iterable[LogGroup]) -> None:
    """Refuse (EXISTS) a name or an id range of ``groups`` that is taken by another group
    of ``groups`` or of ``fixed`` (the config file's groups)."""
    tagged = [(g, False) for g in fixed] + [(g, True) for g in groups]
    names: dict[str, tuple[LogGroup, bool]] = {}
    for g, runtime in tagged:
        if g.name in names:
            raise LogDeviceError(E.EXISTS, f"the name {g.name!r} is taken: "
                                           f"{_describe(*names[g.name])}")
        names[g.name] = (g, runtime)
    ordered = sorted(tagged, key=lambda t: t[0].lo)
    for (a, a_rt), (b, b_rt) in zip(ordered, ordered[1:], strict=False):
        if b.lo <= a.hi:
            new, old = ((b, b_rt), (a, a_rt)) if b_rt else ((a, a_rt), (b, b_rt))
            raise LogDeviceError(E.EXISTS, f"{_describe(*new)} overlaps {_describe(*old)}")
