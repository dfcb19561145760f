"""``ldshell logs create|update|remove``: log groups created, changed and removed at runtime.

    ldshell --config cluster.json logs create events --range 1000..1999 --replication 2
    ldshell --config cluster.json logs update events --replication 3 --backlog-retention-ms 86400000
    ldshell --config cluster.json logs update events --set acl='{"append": ["ingest"]}'
    ldshell --config cluster.json logs remove events

Each change is a request to a node, which checks that ldshell's principal holds
``admin`` and writes the groups to the epoch store (LogsConfig); nodes and clients pick
them up without a restart.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import IO, Any

from logdevice.config.log_groups import ATTRIBUTES
from logdevice.tools.ldshell.context import ShellContext

__all__ = ["add_parsers", "run", "ACTIONS"]

ACTIONS = ("create", "update", "remove")
EXIT_OK = 0


def _range(text: str) -> tuple[int, int]:
    lo, sep, hi = text.partition("..")
    try:
        return (int(lo), int(hi)) if sep else (int(lo), int(lo))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected LO..HI or one id") from None


def _replication(text: str) -> Any:
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected copies (2) or JSON ({{\"rack\": 2, \"node\": 3}})") from None
    return value


def _setting(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"{text!r}: expected KEY=VALUE (VALUE as JSON)")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value  # a bare word


def _attribute_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--replication", type=_replication, default=None,
                   help="copies per record: N or JSON like '{\"rack\": 2, \"node\": 3}'")
    p.add_argument("--nodeset-size", type=int, default=None)
    p.add_argument("--scd", dest="scd", action="store_true", default=None,
                   help="single copy delivery (default)")
    p.add_argument("--no-scd", dest="scd", action="store_false")
    p.add_argument("--sticky-copysets", dest="sticky_copysets", action="store_true",
                   default=None)
    p.add_argument("--no-sticky-copysets", dest="sticky_copysets", action="store_false")
    p.add_argument("--backlog-retention-ms", type=int, default=None)
    p.add_argument("--max-writes-in-flight", type=int, default=None)
    p.add_argument("--set", dest="settings", type=_setting, action="append", default=[],
                   metavar="KEY=VALUE",
                   help=f"any attribute, VALUE as JSON ({', '.join(ATTRIBUTES)}); "
                        "null puts the default back (update)")


def add_parsers(logs_parser: argparse.ArgumentParser) -> None:
    """``create``, ``update`` and ``remove`` under ``ldshell logs``."""
    sub = logs_parser.add_subparsers(dest="logs_action", required=False)
    p = sub.add_parser("create", help="create a log group at runtime")
    p.add_argument("name")
    p.add_argument("--range", dest="id_range", type=_range, required=True, metavar="LO..HI")
    _attribute_options(p)
    p = sub.add_parser("update", help="change a runtime log group's attributes")
    p.add_argument("name")
    _attribute_options(p)
    p = sub.add_parser("remove", help="remove a runtime log group (its records stay)")
    p.add_argument("name")


def _attributes(args: argparse.Namespace) -> dict[str, Any]:
    attrs = {k: getattr(args, k) for k in ("replication", "nodeset_size", "scd",
                                            "sticky_copysets", "backlog_retention_ms",
                                            "max_writes_in_flight")
             if getattr(args, k) is not None}
    attrs.update(args.settings)
    return attrs


def run(ctx: ShellContext, args: argparse.Namespace, out: IO[str] | None = None) -> int:
    """Carry out ``ldshell logs <action>`` (output to ``out``, default stdout)."""
    out = out if out is not None else sys.stdout
    with ctx.client() as client:
        groups = client.context.log_groups
        if args.logs_action == "create":
            lo, hi = args.id_range
            group = groups.create(args.name, lo, hi, _attributes(args))
            out.write(f"log group {group.name!r} created: logs {group.lo}..{group.hi}, "
                      f"replication {group.replication} (version {groups.source.version})\n")
        elif args.logs_action == "update":
            group = groups.update(args.name, _attributes(args))
            out.write(f"log group {group.name!r} updated: {json.dumps(group.to_dict())} "
                      f"(version {groups.source.version})\n")
        else:
            groups.remove(args.name)
            out.write(f"log group {args.name!r} removed (its records stay until trimmed "
                      f"or expired; version {groups.source.version})\n")
    return EXIT_OK
