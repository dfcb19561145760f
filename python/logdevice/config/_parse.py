"""Validation of the JSON config into a ``Config``: everything is checked before any node
starts, and every problem raises ``InvalidConfigError`` naming the file and the field.

``Config.load`` and ``Config.from_dict`` call ``load_config`` / ``parse_config`` with the
class to build (any callable taking ``Config``'s fields), so this module needs only
``model``'s parts, not ``cluster``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any, TypeVar

from logdevice.config._fields import FieldError, Obj, check_int, check_list, check_str, join
from logdevice.config.location import Location, NodeLocationScope
from logdevice.config.model import (
    ACL_ACTIONS,
    ANONYMOUS,
    ANY_AUTHENTICATED,
    DEFAULT_ACL,
    DEFAULT_STORE_TIMEOUT_MS,
    LOGID_MIN,
    MAX_PAYLOAD_SIZE,
    ROLES,
    USER_LOGID_MAX,
    Acl,
    LogGroup,
    NodeConfig,
    PrincipalConfig,
    SecurityConfig,
    Settings,
    TlsConfig,
    Weights,
    ZooKeeperAuth,
)
from logdevice.config.replication import ReplicationProperty
from logdevice.epochstore.uri import parse_epoch_store_uri
from logdevice.errors import InvalidConfigError

#: The config class ``parse_config`` builds (``cluster.Config``).
ConfigT = TypeVar("ConfigT")

TOP_KEYS = ("cluster", "nodes", "logs", "epoch_store", "data_dir", "settings", "security")
NODE_KEYS = ("index", "host", "port", "admin_port", "location", "roles", "weights", "data_dir")
LOG_KEYS = ("name", "id", "replication", "nodeset_size", "scd", "sticky_copysets",
            "sticky_block_bytes", "sticky_block_ms", "backlog_retention_ms",
            "max_writes_in_flight", "store_timeout_ms", "acl")
SECURITY_KEYS = ("tls", "node_subjects", "node_secret", "node_secret_file", "principals", "acl",
                 "zookeeper", "insecure")
ZOOKEEPER_KEYS = ("auth_file", "operator")
_ZK_DIGEST_ID = re.compile(r"^[^:\s]+:[A-Za-z0-9+/]{27}=$")  # name:base64(sha1(name:password))
TLS_KEYS = ("cert", "key", "ca", "require_client_cert")
PRINCIPAL_KEYS = ("token", "token_file")
#: Shorter shared secrets are refused: a token is all it takes to act as its principal.
MIN_SECRET_LENGTH = 16
MAX_NODE_INDEX = 32767  # node_index_t is 16-bit signed in LogDevice
MAX_STORE_TIMEOUT_MS = 3_600_000
MAX_WRITES_IN_FLIGHT = 1_000_000
# Bounds of settings, (lo, hi) inclusive; ints default to (1, None).
SETTING_BOUNDS: dict[str, tuple[float | None, float | None]] = {
    "max_payload_size": (1, MAX_PAYLOAD_SIZE),
    "read_flow_control_threshold": (0.01, 1.0),
    "read_window_bytes": (0, None),
    "checker_interval_ms": (0, None),
    "checker_grace_period_ms": (0, None),
    "rebuilding_rate_bytes_per_s": (0, None),
    "rebuilding_append_share": (0.01, 1.0),
    "self_rebuild_grace_period_ms": (0, None),
    "max_rebuilding_fraction": (0.0, 1.0),
    "idempotence_window_ms": (0, None),
    "client_idle_timeout_ms": (0, None),
    "record_cache_bytes": (0, None),
    "sequencer_idle_ms": (0, None),
}
# Settings that take one of a few words.
SETTING_CHOICES: dict[str, tuple[str, ...]] = {
    "append_store_durability": ("memory", "async_write", "sync_write"),
}
_PRINCIPAL_NAME = re.compile(r"^[A-Za-z0-9_.@\-]{1,128}$")
_CLUSTER_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,127}$")
_HOST = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[0-9A-Fa-f:]*:[0-9A-Fa-f:.]*"
                   r"|[A-Za-z0-9]([A-Za-z0-9\-.]*[A-Za-z0-9])?)$")


def load_config(cls: Callable[..., ConfigT], path: str | os.PathLike[str]) -> ConfigT:
    """Read the config file ``path`` and validate it into a ``cls``."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise _error(path, "", f"cannot read the config file: {e}") from None
    try:
        d = json.loads(text)
    except json.JSONDecodeError as e:
        raise _error(path, "", f"not valid JSON at line {e.lineno} column {e.colno}: "
                               f"{e.msg}") from None
    except RecursionError:  # the decoder recurses once per nesting level
        raise _error(path, "", "not a usable config: arrays or objects nested too deeply"
                     ) from None
    return parse_config(cls, d, source=path, base_dir=path.resolve().parent)


def parse_config(cls: Callable[..., ConfigT], d: Mapping[str, Any],
                 source: str | os.PathLike[str] | None = None,
                 base_dir: str | os.PathLike[str] | None = None) -> ConfigT:
    """Validate ``d`` (the JSON form) into a ``cls``."""
    if base_dir is None:
        base_dir = Path(source).resolve().parent if source is not None else Path.cwd()
    try:
        return _parse(cls, d, Path(base_dir), None if source is None else str(source))
    except FieldError as e:
        raise _error(source, e.path, e.problem) from None
    except RecursionError:  # a value nested so deep that even describing it recurses
        raise _error(source, "", "not a usable config: arrays or objects nested too deeply"
                     ) from None


def _error(source: str | os.PathLike[str] | None, path: str, problem: str
           ) -> InvalidConfigError:
    where = str(source) if source is not None else "<config dict>"
    err = InvalidConfigError(message=f"{where}: {path}: {problem}" if path
                             else f"{where}: {problem}")
    err.field = path  # type: ignore[attr-defined]
    err.source = where  # type: ignore[attr-defined]
    return err


def _parse(cls: Callable[..., ConfigT], d: Any, base_dir: Path, source: str | None) -> ConfigT:
    top = Obj(d, "")
    top.done(TOP_KEYS)
    cluster = top.get_str("cluster", nonempty=True)
    if not _CLUSTER_NAME.match(cluster):
        raise FieldError("cluster", f"{cluster!r}: use 1-127 letters, digits, '_', '-', '.'")
    nodes = _parse_nodes(top.raw("nodes"))
    epoch_store = top.get_str("epoch_store", "file:epochs.sqlite", nonempty=True)
    try:
        store_uri = parse_epoch_store_uri(epoch_store, base_dir=base_dir)
    except ValueError as e:
        raise FieldError("epoch_store", getattr(e, "message", str(e))) from None
    hosts = sorted({n.host for n in nodes})
    if store_uri.scheme == "file" and len(hosts) > 1:
        # A SQLite file is one machine's: nodes elsewhere would each get their own copy
        # and hand out the same epochs.
        raise FieldError("epoch_store", f"{epoch_store!r} is a file on one machine, but the "
                                        f"nodes name {len(hosts)} hosts ({', '.join(hosts[:4])}"
                                        f"{', ...' if len(hosts) > 4 else ''}): use a "
                                        "shared store, 'zookeeper:host:port/root'")
    data_dir = top.get_str("data_dir", "data", nonempty=True)
    settings = _parse_settings(top.raw("settings", {}))
    raw_security = top.raw("security", None)
    insecure = _says_insecure(raw_security)
    security = None if raw_security is None or insecure else _parse_security(raw_security)
    if security is not None and store_uri.scheme == "zookeeper" and security.zookeeper is None:
        raise FieldError("security.zookeeper", "a secured cluster locks its ZooKeeper epoch "
                                               "store: give 'auth_file' (a file holding "
                                               "user:password that only nodes have)")
    logs = _parse_logs(top.raw("logs", []), nodes, security)
    return cls(cluster=cluster, nodes=nodes, logs=logs, epoch_store=epoch_store,
               data_dir=data_dir, settings=settings, security=security, insecure=insecure,
               base_dir=base_dir, source=source)


def _says_insecure(raw: Any) -> bool:
    """Whether the security section is ``{"insecure": true}``: no security, on purpose."""
    if not isinstance(raw, dict) or "insecure" not in raw:
        return False
    if raw["insecure"] is not True:
        raise FieldError("security.insecure", "only true is meaningful (leave it out, or "
                                              "give the security settings instead)")
    if len(raw) > 1:
        raise FieldError("security.insecure", "an insecure cluster has no other security "
                                              "settings")
    return True


# -- nodes ---------------------------------------------------------------------------------
def _parse_nodes(raw: Any) -> tuple[NodeConfig, ...]:
    items = check_list(raw, "nodes")
    if not items:
        raise FieldError("nodes", "needs at least one node")
    nodes: list[NodeConfig] = []
    index_at: dict[int, int] = {}
    addr_at: dict[tuple[str, int], str] = {}
    for i, item in enumerate(items):
        p = join("nodes", i)
        node = _parse_node(Obj(item, p))
        if node.index in index_at:
            raise FieldError(join(p, "index"), f"duplicate node index {node.index} "
                                               f"(also nodes[{index_at[node.index]}])")
        index_at[node.index] = i
        for key, port in (("port", node.port), ("admin_port", node.admin_port)):
            if port is None:
                continue
            where = join(p, key)
            if (node.host, port) in addr_at:
                raise FieldError(where, f"{node.host}:{port} is already used by "
                                        f"{addr_at[(node.host, port)]}")
            addr_at[(node.host, port)] = where
        nodes.append(node)
    for role in ROLES:
        if not any(role in n.roles for n in nodes):
            raise FieldError("nodes", f"no node has the {role} role")
    return tuple(nodes)


def _parse_node(o: Obj) -> NodeConfig:
    o.done(NODE_KEYS)
    index = o.get_int("index", lo=0, hi=MAX_NODE_INDEX)
    host = o.get_str("host", nonempty=True)
    if not _HOST.match(host):
        raise FieldError(o.path_of("host"), f"{host!r} is not a host name or IP address")
    port = o.get_int("port", lo=1, hi=65535)
    admin_port = o.get_int("admin_port", None, lo=1, hi=65535)
    try:
        location = Location.parse(o.get_str("location", ""))
    except FieldError as e:
        raise FieldError(o.path_of("location"), e.problem) from None
    roles_raw = check_list(o.raw("roles", list(ROLES)), o.path_of("roles"))
    roles: set[str] = set()
    for j, r in enumerate(roles_raw):
        rp = join(o.path_of("roles"), j)
        if check_str(r, rp) not in ROLES:
            raise FieldError(rp, f"unknown role {r!r} (roles: {', '.join(ROLES)})")
        if r in roles:
            raise FieldError(rp, f"role {r!r} listed twice")
        roles.add(r)
    if not roles:
        raise FieldError(o.path_of("roles"), "needs at least one role")
    w = Obj(o.raw("weights", {}), o.path_of("weights"))
    w.done(ROLES)
    weights = Weights(sequencer=w.get_float("sequencer", 1.0, lo=0.0),
                      storage=w.get_float("storage", 1.0, lo=0.0))
    data_dir = o.get_str("data_dir", None, nonempty=True)
    return NodeConfig(index=index, host=host, port=port, admin_port=admin_port,
                      location=location, roles=frozenset(roles), weights=weights,
                      data_dir=data_dir)


# -- logs ----------------------------------------------------------------------------------
def _parse_logs(raw: Any, nodes: tuple[NodeConfig, ...],
                security: SecurityConfig | None) -> tuple[LogGroup, ...]:
    items = check_list(raw, "logs")
    groups: list[LogGroup] = []
    name_at: dict[str, int] = {}
    for i, item in enumerate(items):
        p = join("logs", i)
        group = _parse_log_group(Obj(item, p), nodes, security)
        if group.name in name_at:
            raise FieldError(join(p, "name"), f"duplicate log group name {group.name!r} "
                                              f"(also logs[{name_at[group.name]}])")
        name_at[group.name] = i
        groups.append(group)
    order = sorted(range(len(groups)), key=lambda i: (groups[i].lo, i))
    for a, b in zip(order, order[1:], strict=False):
        if groups[b].lo <= groups[a].hi:
            later, earlier = max(a, b), min(a, b)
            g, h = groups[later], groups[earlier]
            raise FieldError(join(join("logs", later), "id"),
                             f"log ids {g.lo}..{g.hi} overlap logs[{earlier}] "
                             f"({h.name!r}, {h.lo}..{h.hi})")
    return tuple(groups)


def _parse_id_range(raw: Any, path: str) -> tuple[int, int]:
    if isinstance(raw, str):
        lo_s, sep, hi_s = raw.partition("..")
        if not sep or not lo_s.strip().isdigit() or not hi_s.strip().isdigit():
            raise FieldError(path, f"{raw!r}: expected an id, [lo, hi] or 'lo..hi'")
        bounds = [int(lo_s), int(hi_s)]
    elif isinstance(raw, list | tuple):
        if len(raw) != 2:
            raise FieldError(path, f"expected [lo, hi], got {len(raw)} items")
        bounds = [check_int(v, join(path, k)) for k, v in enumerate(raw)]
    else:
        lo = check_int(raw, path)
        bounds = [lo, lo]
    for v in bounds:
        if not LOGID_MIN <= v <= USER_LOGID_MAX:
            raise FieldError(path, f"log id {v} is out of range: user logs are "
                                   f"{LOGID_MIN}..{USER_LOGID_MAX}")
    if bounds[0] > bounds[1]:
        raise FieldError(path, f"range {bounds[0]}..{bounds[1]} is empty (lo > hi)")
    return bounds[0], bounds[1]


def _parse_log_group(o: Obj, nodes: tuple[NodeConfig, ...],
                     security: SecurityConfig | None) -> LogGroup:
    o.done(LOG_KEYS)
    lo, hi = _parse_id_range(o.raw("id"), o.path_of("id"))
    name = o.get_str("name", f"log_{lo}" if lo == hi else f"logs_{lo}_{hi}", nonempty=True)
    rep_raw = o.raw("replication")
    rep_path = o.path_of("replication")
    rep = ReplicationProperty.parse(rep_raw, rep_path)
    _check_placement(rep, rep_raw, rep_path, nodes)
    nodeset_size = o.get_int("nodeset_size", None, lo=1)
    if nodeset_size is not None and nodeset_size < rep.replication_factor:
        raise FieldError(o.path_of("nodeset_size"), f"{nodeset_size} is smaller than the "
                         f"replication factor {rep.replication_factor}")
    timeouts = check_list(o.raw("store_timeout_ms", list(DEFAULT_STORE_TIMEOUT_MS)),
                          o.path_of("store_timeout_ms"))
    if len(timeouts) != 2:
        raise FieldError(o.path_of("store_timeout_ms"), "expected [initial, max] in ms")
    t_lo, t_hi = (check_int(v, join(o.path_of("store_timeout_ms"), k), 1, MAX_STORE_TIMEOUT_MS)
                  for k, v in enumerate(timeouts))
    if t_lo > t_hi:
        raise FieldError(o.path_of("store_timeout_ms"), f"initial {t_lo} > max {t_hi}")
    acl = None
    if o.raw("acl", None) is not None:
        if security is None:  # an ACL nobody enforces must not look like protection
            raise FieldError(o.path_of("acl"), "ACLs need a top-level 'security' section "
                                               "(without one every peer may do everything)")
        acl = _parse_acl(o.raw("acl"), o.path_of("acl"), security.principals)
    group = LogGroup(
        name=name, lo=lo, hi=hi, replication=rep, nodeset_size=nodeset_size,
        scd=o.get_bool("scd", True),
        sticky_copysets=o.get_bool("sticky_copysets", False),
        sticky_block_bytes=o.get_int("sticky_block_bytes", 32 * 1024 * 1024, lo=1),
        sticky_block_ms=o.get_int("sticky_block_ms", 10 * 60 * 1000, lo=1),
        backlog_retention_ms=o.get_int("backlog_retention_ms", None, lo=1),
        max_writes_in_flight=o.get_int("max_writes_in_flight", 1000, lo=1, hi=MAX_WRITES_IN_FLIGHT),
        store_timeout_ms=(t_lo, t_hi),
        acl=acl,
    )
    return group


def _scope_path(rep_raw: Any, rep_path: str, scope: NodeLocationScope, copies: int) -> str:
    """Path of the replication entry responsible for ``scope``'s requirement."""
    if not isinstance(rep_raw, Mapping):
        return rep_path
    if scope.config_name in rep_raw:
        return join(rep_path, scope.config_name)
    # An implied NODE requirement comes from the smallest scope that asks for that many.
    listed = [NodeLocationScope.from_config_name(k) for k in rep_raw]
    return join(rep_path, min(s for s in listed if rep_raw[s.config_name] == copies).config_name)


def _check_placement(rep: ReplicationProperty, rep_raw: Any, rep_path: str,
                     nodes: tuple[NodeConfig, ...]) -> None:
    """Can a copyset honouring the replication property be chosen from these nodes?"""
    writable = [n for n in nodes if n.is_storage and n.weights.storage > 0]
    r = rep.replication_factor
    if r > len(writable):
        raise FieldError(_scope_path(rep_raw, rep_path, NodeLocationScope.NODE, r),
                         f"{r} copies need {r} storage nodes but the config has "
                         f"{len(writable)} (storage role, storage weight > 0)")
    for scope, copies in rep.requirements:
        if scope == NodeLocationScope.NODE or copies <= 1:
            continue
        path = _scope_path(rep_raw, rep_path, scope, copies)
        domains = set()
        for n in writable:
            d = n.location.domain(scope)
            if d is None:
                raise FieldError(path, f"spreading copies across {scope.config_name}s needs a "
                                       f"{scope.config_name} label on every storage node; node "
                                       f"{n.index} has location {str(n.location)!r}")
            domains.add(d)
        if len(domains) < copies:
            raise FieldError(path, f"needs {copies} {scope.config_name}s but the storage nodes "
                                   f"are in {len(domains)}: {', '.join(sorted(domains))}")


# -- settings ------------------------------------------------------------------------------
def _parse_settings(raw: Any) -> Settings:
    o = Obj(raw, "settings")
    known = [f.name for f in fields(Settings)]
    o.done(known)
    defaults = Settings()
    values: dict[str, Any] = {}
    for name in known:
        default = getattr(defaults, name)
        lo, hi = SETTING_BOUNDS.get(name, (1, None))
        if isinstance(default, str):
            value = o.get_str(name, default)
            if value not in SETTING_CHOICES[name]:
                raise FieldError(o.path_of(name), f"must be one of "
                                 f"{', '.join(SETTING_CHOICES[name])}, got {value!r}")
            values[name] = value
        elif isinstance(default, float):
            values[name] = o.get_float(name, default, lo=lo, hi=hi)
        else:
            values[name] = o.get_int(name, default, lo=None if lo is None else int(lo),
                                 hi=None if hi is None else int(hi))
    s = Settings(**values)
    if not s.heartbeat_interval_ms < s.suspect_timeout_ms <= s.dead_timeout_ms:
        raise FieldError("settings.suspect_timeout_ms",
                         f"need heartbeat_interval_ms ({s.heartbeat_interval_ms}) < "
                         f"suspect_timeout_ms ({s.suspect_timeout_ms}) <= dead_timeout_ms "
                         f"({s.dead_timeout_ms})")
    return s


# -- security ------------------------------------------------------------------------------
def _parse_security(raw: Any) -> SecurityConfig:
    o = Obj(raw, "security")
    o.done(SECURITY_KEYS)
    tls = None
    if o.raw("tls", None) is not None:
        t = Obj(o.raw("tls"), "security.tls")
        t.done(TLS_KEYS)
        tls = TlsConfig(cert=t.get_str("cert", nonempty=True), key=t.get_str("key", nonempty=True),
                        ca=t.get_str("ca", nonempty=True),
                        require_client_cert=t.get_bool("require_client_cert", False))
    subjects_path = o.path_of("node_subjects")
    subjects = tuple(check_str(v, join(subjects_path, i), nonempty=True)
                     for i, v in enumerate(check_list(o.raw("node_subjects", []), subjects_path)))
    if subjects and tls is None:
        raise FieldError(subjects_path, "node certificates need 'tls' (or use "
                                        "node_secret_file)")
    node_secret_file = o.get_str("node_secret_file", None, nonempty=True)
    if o.raw("node_secret", None) is not None:
        raise FieldError(o.path_of("node_secret"), "the node secret may not be in the config "
                                                   "file every client reads: put it in a file "
                                                   "only nodes have ('node_secret_file'), or "
                                                   "use node certificates ('node_subjects')")
    if not subjects and node_secret_file is None:
        raise FieldError("security", "nodes could not authenticate each other: give "
                                     "'node_subjects' (with 'tls': the CNs of node "
                                     "certificates) or 'node_secret_file'")
    principals = _parse_principals(o.raw("principals", {}), subjects)
    acl = DEFAULT_ACL
    if o.raw("acl", None) is not None:
        acl = _parse_acl(o.raw("acl"), o.path_of("acl"), principals).over(DEFAULT_ACL)
    zookeeper = None
    if o.raw("zookeeper", None) is not None:
        z = Obj(o.raw("zookeeper"), "security.zookeeper")
        z.done(ZOOKEEPER_KEYS)
        operator = z.get_str("operator", None, nonempty=True)
        if operator is not None and not _ZK_DIGEST_ID.match(operator):
            raise FieldError(z.path_of("operator"), "expected name:base64(sha1(name:password))"
                                                    ", as ZooKeeper's digest scheme spells it")
        zookeeper = ZooKeeperAuth(auth_file=z.get_str("auth_file", nonempty=True),
                                  operator=operator)
    return SecurityConfig(tls=tls, node_subjects=subjects, node_secret_file=node_secret_file,
                          principals=principals, acl=acl, zookeeper=zookeeper)


def _check_secret(value: str, path: str) -> None:
    if len(value) < MIN_SECRET_LENGTH:
        raise FieldError(path, f"a shared secret needs at least {MIN_SECRET_LENGTH} "
                               f"characters, got {len(value)}")


def _parse_principals(raw: Any, node_subjects: tuple[str, ...]
                      ) -> tuple[PrincipalConfig, ...]:
    o = Obj(raw, "security.principals")
    out: list[PrincipalConfig] = []
    token_of: dict[str, str] = {}
    for name in o.value:
        p = o.path_of(name)
        if not _PRINCIPAL_NAME.match(name) or name in (ANY_AUTHENTICATED, ANONYMOUS):
            raise FieldError(p, f"{name!r} is not a principal name: use 1-128 letters, digits,"
                                f" '_', '-', '.', '@' (not {ANONYMOUS!r})")
        if name in node_subjects:
            raise FieldError(p, f"{name!r} is also in node_subjects: its certificates would "
                                "be nodes'")
        entry = Obj(o.raw(name), p)
        entry.done(PRINCIPAL_KEYS)
        token = entry.get_str("token", None)
        token_file = entry.get_str("token_file", None, nonempty=True)
        if token is not None and token_file is not None:
            raise FieldError(entry.path_of("token_file"), "give token or token_file, not both")
        if token is not None:
            _check_secret(token, entry.path_of("token"))
            if token in token_of:
                raise FieldError(entry.path_of("token"), f"is also {token_of[token]!r}'s token")
            token_of[token] = name
        out.append(PrincipalConfig(name=name, token=token, token_file=token_file))
    return tuple(out)


def _parse_acl(raw: Any, path: str, principals: tuple[PrincipalConfig, ...]) -> Acl:
    o = Obj(raw, path)
    o.done(ACL_ACTIONS)
    known = {p.name for p in principals} | {ANY_AUTHENTICATED, ANONYMOUS}
    grants: dict[str, tuple[str, ...] | None] = {}
    for action in ACL_ACTIONS:
        value = o.raw(action, None)
        if value is None:
            grants[action] = None
            continue
        names = []
        for i, name in enumerate(check_list(value, o.path_of(action))):
            where = join(o.path_of(action), i)
            if check_str(name, where) not in known:
                raise FieldError(where, f"{name!r} is not a principal of security.principals "
                                        f"(nor {ANY_AUTHENTICATED!r} or {ANONYMOUS!r})")
            names.append(name)
        grants[action] = tuple(names)
    return Acl(**grants)
