"""Log groups created at runtime (LogsConfig): validation and edits, without I/O.

The epoch store keeps the runtime groups as a list of JSON objects, each in the form of
an entry of the config file's ``logs`` (``{"name", "id", "replication", ...}``).  The
functions here check such a list against the file's config (its nodes, security section
and log groups) and compute the list after a create, an update or a remove; the caller
wraps them in the store's compare-and-set.  A group's name and id range must not be
taken by another group, runtime or from the file: EXISTS names both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from logdevice.config._fields import FieldError, Obj
from logdevice.config._parse import LOG_KEYS, _parse_log_group
from logdevice.config.cluster import Config
from logdevice.config.model import LogGroup, check_disjoint
from logdevice.errors import InvalidParamError, LogDeviceError, NotFoundError

__all__ = ["ATTRIBUTES", "parse_groups", "check_disjoint", "group_entry", "add_group",
           "change_group", "drop_group", "affects_sequencer"]

#: What ``create_log_group`` / ``update_log_group`` may set, besides name and id range.
ATTRIBUTES = tuple(k for k in LOG_KEYS if k not in ("name", "id"))
#: What a sequencer is built from: a change to any of these starts a new epoch.
SEQUENCER_FIELDS = ("replication", "nodeset_size", "sticky_copysets", "sticky_block_bytes",
                    "sticky_block_ms", "max_writes_in_flight", "store_timeout_ms")


def _parse_entry(entry: Any, base: Config, where: str) -> LogGroup:
    if not isinstance(entry, Mapping) or "name" not in entry:
        raise InvalidParamError(message=f"{where}: a log group is an object with a name, "
                                        f"got {entry!r}")
    try:
        return _parse_log_group(Obj(dict(entry), where), base.nodes, base.security)
    except FieldError as e:
        raise InvalidParamError(message=str(e)) from None


def parse_groups(entries: Sequence[Any], base: Config, *, strict: bool = True
                 ) -> tuple[tuple[LogGroup, ...], list[str]]:
    """The runtime groups of ``entries`` (the stored JSON form), checked against ``base``.

    Parameters
    ----------
    entries : sequence of dict
        The epoch store's LogsConfig groups.
    base : Config
        The config file: its nodes, security section and log groups.
    strict : bool
        Raise on the first bad group (INVALID_PARAM, EXISTS); with False, leave bad groups
        out and say why in the returned problems (a node must keep running when a group
        no longer fits its config, e.g. after nodes were removed).

    Returns
    -------
    (groups, problems)
    """
    groups: list[LogGroup] = []
    problems: list[str] = []
    for i, entry in enumerate(entries):
        try:
            group = _parse_entry(entry, base, f"logs_config[{i}]")
            check_disjoint(base.file_logs, (*groups, group))
        except LogDeviceError as exc:
            if strict:
                raise
            problems.append(exc.message)
            continue
        groups.append(group)
    return tuple(groups), problems


def group_entry(name: str, lo: int, hi: int, attributes: Mapping[str, Any]) -> dict[str, Any]:
    """The stored form of a new group; INVALID_PARAM names an unknown attribute and lists
    the valid ones."""
    unknown = sorted(set(attributes) - set(ATTRIBUTES))
    if unknown:
        raise InvalidParamError(message=f"unknown log group attribute(s) {', '.join(unknown)}; "
                                        f"valid: {', '.join(ATTRIBUTES)}")
    if not isinstance(name, str) or not name:
        raise InvalidParamError(message=f"a log group name is a non-empty string, got {name!r}")
    for what, v in (("lo", lo), ("hi", hi)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise InvalidParamError(message=f"{what} must be a log id (int), got {v!r}")
    entry: dict[str, Any] = {"name": name, "id": [lo, hi]}
    entry.update({k: _jsonable(v) for k, v in attributes.items() if v is not None})
    return entry


def _jsonable(value: Any) -> Any:
    if hasattr(value, "to_config"):  # a ReplicationProperty
        return value.to_config()
    if hasattr(value, "to_dict"):  # an Acl
        return value.to_dict()
    if isinstance(value, tuple):
        return list(value)
    return value


def add_group(entries: Sequence[Mapping[str, Any]], base: Config,
              entry: Mapping[str, Any]) -> tuple[list[dict[str, Any]], LogGroup]:
    """``entries`` with ``entry`` added, and the new group (INVALID_PARAM, EXISTS)."""
    current, _ = parse_groups(entries, base, strict=False)
    group = _parse_entry(entry, base, f"log group {entry.get('name')!r}")
    check_disjoint(base.file_logs, (*current, group))
    return [dict(e) for e in entries] + [dict(entry)], group


def _find(entries: Sequence[Mapping[str, Any]], base: Config, name: str) -> int:
    for i, e in enumerate(entries):
        if e.get("name") == name:
            return i
    if any(g.name == name for g in base.file_logs):
        raise InvalidParamError(message=f"log group {name!r} is defined in the config file: "
                                        "change it there")
    raise NotFoundError(message=f"no log group named {name!r} was created at runtime")


def change_group(entries: Sequence[Mapping[str, Any]], base: Config, name: str,
                 changes: Mapping[str, Any]) -> tuple[list[dict[str, Any]], LogGroup]:
    """``entries`` with group ``name``'s attributes changed (a value None goes back to
    the default), and the group after the change."""
    unknown = sorted(set(changes) - set(ATTRIBUTES))
    if unknown:
        raise InvalidParamError(message=f"unknown log group attribute(s) {', '.join(unknown)}; "
                                        f"valid: {', '.join(ATTRIBUTES)}")
    i = _find(entries, base, name)
    entry = dict(entries[i])
    for k, v in changes.items():
        if v is None:
            entry.pop(k, None)
        else:
            entry[k] = _jsonable(v)
    group = _parse_entry(entry, base, f"log group {name!r}")
    rest = [dict(e) for j, e in enumerate(entries) if j != i]
    others, _ = parse_groups(rest, base, strict=False)
    check_disjoint(base.file_logs, (*others, group))
    out = [dict(e) for e in entries]
    out[i] = entry
    return out, group


def drop_group(entries: Sequence[Mapping[str, Any]], base: Config,
               name: str) -> list[dict[str, Any]]:
    """``entries`` without group ``name`` (NOTFOUND if it is not a runtime group)."""
    i = _find(entries, base, name)
    return [dict(e) for j, e in enumerate(entries) if j != i]


def affects_sequencer(old: LogGroup, new: LogGroup) -> bool:
    """Whether a sequencer built for ``old`` must start a new epoch to follow ``new``."""
    return any(getattr(old, f) != getattr(new, f) for f in SEQUENCER_FIELDS)
