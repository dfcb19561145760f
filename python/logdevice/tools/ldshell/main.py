"""``ldshell``: look inside a cluster, check it, trim logs.

    ldshell --config cluster.json status [--json]
    ldshell --config cluster.json sequencers [--json]
    ldshell --config cluster.json logs [--logs 1,2,10-20] [--json]
    ldshell --config cluster.json logs create|update|remove NAME [--range LO..HI] [...]
    ldshell --config cluster.json info 2 [--json]
    ldshell --config cluster.json check [--logs ...] [--json] [--report PATH]
    ldshell --config cluster.json trim LOG LSN
    ldshell --config cluster.json drain NODE | undrain NODE | mark-unrecoverable NODE
    ldshell --config cluster.json rebuilding [--json] | rebuilding abort NODE
    ldshell --config cluster.json query "SELECT node, alive FROM nodes" [--json]
    ldshell --config cluster.json                # interactive prompt

On a cluster with a ``security`` section, ``--tls-cert``/``--tls-key`` or ``--token``
(``$LOGDEVICE_TOKEN``) say who ldshell is: its principal needs ``admin`` (node
questions, the checker) and ``trim`` rights.

``check`` exits 0 when the cluster is clean, 1 on violations, 2 when it could not run.
Other commands exit 2 on errors.  ``--json`` output is one JSON document on stdout;
progress and errors go to stderr.  The interactive prompt keeps a history in
``~/.ldshell_history`` and completes commands, table names and node indices.
"""

from __future__ import annotations

import argparse
import cmd
import contextlib
import os
import shlex
import sys
from collections.abc import Sequence

from ldcore.lsn import parse as parse_lsn
from logdevice.cli import add_credentials, add_version, credentials, missing_extra
from logdevice.errors import InvalidConfigError, InvalidParamError, LogDeviceError
from logdevice.tools.ldshell import commands, log_groups
from logdevice.tools.ldshell.context import ShellContext
from logdevice.tools.ldshell.tables import TABLES, TableOptions

__all__ = ["main", "parse_logs", "Shell"]

HISTORY = os.path.expanduser("~/.ldshell_history")


def parse_logs(text: str) -> list[int]:
    """``"1,2,10-20"`` -> [1, 2, 10, ..., 20]."""
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            if "-" in part:
                a, b = part.split("-", 1)
                out.extend(range(int(a), int(b) + 1))
            else:
                out.append(int(part))
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a log list: {text!r} (e.g. 1,2,10-20)"
                                             ) from None
    return out


def _lsn(text: str) -> int:
    try:
        return int(parse_lsn(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an LSN: {text!r}") from None


def _commands_parser(top: bool = True) -> argparse.ArgumentParser:
    """The command line; ``top=False``: the same commands without the global options (what
    the interactive prompt parses)."""
    p = argparse.ArgumentParser(prog="ldshell" if top else "",
                                description=__doc__.split("\n\n")[0])
    if top:
        add_version(p)
        p.add_argument("--config", default=os.environ.get("LOGDEVICE_CONFIG"),
                       metavar="PATH", help="cluster config (default: $LOGDEVICE_CONFIG)")
        p.add_argument("--timeout", type=float, default=5.0, help="seconds per node call")
        add_credentials(p)
    sub = p.add_subparsers(dest="command")
    s = sub.add_parser("status", help="nodes, their status, sequencers")
    s.add_argument("--json", action="store_true")
    s = sub.add_parser("sequencers", help="per log: its sequencer node and epoch")
    s.add_argument("--json", action="store_true")
    s = sub.add_parser("logs", help="log groups and per-log trim point, tail, records; "
                                    "logs create|update|remove: runtime log groups")
    s.add_argument("--logs", type=parse_logs, default=None)
    s.add_argument("--json", action="store_true")
    log_groups.add_parsers(s)
    s = sub.add_parser("info", help="one node")
    s.add_argument("node", type=int)
    s.add_argument("--json", action="store_true")
    s = sub.add_parser("check", help="run the cluster checker (exit 0 clean, 1 violations, "
                                     "2 could not run)")
    s.add_argument("--logs", type=parse_logs, default=None)
    s.add_argument("--json", action="store_true")
    s.add_argument("--report", metavar="PATH", help="also write the JSON report there")
    s.add_argument("--recheck-delay", type=float, default=2.0,
                   help="seconds before nodes that did not answer are asked again")
    s.add_argument("--down-grace-ms", type=int, default=None,
                   help="a silent node the cluster holds dead for less than this is down, "
                        "not a violation (default: the self_rebuild_grace_period_ms "
                        "setting, or checker_grace_period_ms when that is 0)")
    s = sub.add_parser("trim", help="trim a log up to an LSN")
    s.add_argument("log", type=int)
    s.add_argument("lsn", type=_lsn)
    s.add_argument("--force", action="store_true",
                   help="trim past the log's tail too (records not written yet; needs admin)")
    s = sub.add_parser("drain", help="move a node's records elsewhere; it takes no new "
                                     "ones (then it can leave the config)")
    s.add_argument("node", type=int)
    s = sub.add_parser("mark-unrecoverable", help="a node's data is gone for good: the "
                                                  "others re-replicate its records")
    s.add_argument("node", type=int)
    s = sub.add_parser("undrain", help="a drained (or draining) node takes new records "
                                       "again")
    s.add_argument("node", type=int)
    s = sub.add_parser("rebuilding", help="the rebuilding set, each node's progress, and "
                                          "why dead nodes wait (abort N: stop rebuilding N)")
    s.add_argument("--json", action="store_true")
    s.add_argument("action", nargs="?", choices=["abort"],
                   help="abort the rebuilding of NODE (it is down; readers count on its "
                        "copies again)")
    s.add_argument("node", nargs="?", type=int)
    s = sub.add_parser("query", help="SQL over the cluster's tables (DuckDB)")
    s.add_argument("sql")
    s.add_argument("--json", action="store_true")
    s.add_argument("--logs", type=parse_logs, default=None,
                   help="logs the record tables cover (default: all)")
    s.add_argument("--from", dest="lo", type=_lsn, default=1)
    s.add_argument("--until", dest="hi", type=_lsn, default=None)
    s.add_argument("--max-records", type=int, default=100_000)
    sub.add_parser("tables", help="the tables query knows")
    return p


def run(ctx: ShellContext, args: argparse.Namespace) -> int:
    c = args.command
    if c == "status":
        return commands.status(ctx, args.json)
    if c == "sequencers":
        return commands.sequencers(ctx, args.json)
    if c == "logs" and getattr(args, "logs_action", None):
        return log_groups.run(ctx, args)
    if c == "logs":
        return commands.logs(ctx, TableOptions(logs=args.logs), args.json)
    if c == "info":
        return commands.info(ctx, args.node, args.json)
    if c == "check":
        return commands.check(ctx, args.logs, args.json, args.report, args.recheck_delay,
                              down_grace_ms=args.down_grace_ms)
    if c == "trim":
        return commands.trim(ctx, args.log, args.lsn, force=args.force)
    if c in ("drain", "mark-unrecoverable"):
        return commands.rebuild(ctx, args.node, "drain" if c == "drain" else "unrecoverable")
    if c == "undrain":
        return commands.cancel_rebuild(ctx, args.node, undrain=True)
    if c == "rebuilding" and args.action == "abort":
        if args.node is None:
            raise InvalidParamError(message="rebuilding abort needs a node")
        return commands.cancel_rebuild(ctx, args.node, undrain=False)
    if c == "rebuilding":
        return commands.rebuilding(ctx, args.json)
    if c == "query":
        opts = TableOptions(logs=args.logs, lo=args.lo, hi=args.hi,
                            max_records=args.max_records)
        return commands.query(ctx, args.sql, opts, args.json)
    if c == "tables":
        return commands.tables()
    raise AssertionError(c)


class Shell(cmd.Cmd):
    """The interactive prompt: every subcommand, with history and completion."""

    intro = "ldshell: type help or a command (status, logs, info N, check, query SQL, ...)"

    def __init__(self, ctx: ShellContext, parser: argparse.ArgumentParser) -> None:
        super().__init__()
        self.ctx = ctx
        self.parser = parser
        self.prompt = f"ldshell({ctx.config.cluster})> "

    def _run(self, line: str) -> None:
        try:
            args = self.parser.parse_args(shlex.split(line))
        except SystemExit:  # argparse already printed the problem
            return
        except ValueError as exc:
            print(f"ldshell: {exc}")
            return
        if args.command is None:
            return
        try:
            self.ctx.forget()  # fresh views for every command
            run(self.ctx, args)
        except LogDeviceError as exc:
            print(f"ldshell: {exc}")

    def default(self, line: str) -> None:
        word = line.split()[0] if line.split() else ""
        if word in ("quit", "exit", "EOF"):
            return
        self._run(line)

    def do_quit(self, arg: str) -> bool:
        """Leave ldshell."""
        return True

    do_exit = do_quit

    def do_EOF(self, arg: str) -> bool:  # noqa: N802 (cmd's name for Ctrl-D)
        print()
        return True

    def emptyline(self) -> bool:
        return False

    def do_help(self, arg: str) -> None:
        self.parser.print_help()

    def completenames(self, text: str, *ignored: object) -> list[str]:
        names = ["status", "sequencers", "logs", "info", "check", "trim", "query", "tables", "quit"]
        return [n for n in names if n.startswith(text)]

    def completedefault(self, text: str, line: str, begidx: int, endidx: int) -> list[str]:
        word = line.split()[0] if line.split() else ""
        if word == "info":
            return [str(n.index) for n in self.ctx.config.nodes
                    if str(n.index).startswith(text)]
        if word == "query":
            keywords = list(TABLES) + ["SELECT", "FROM", "WHERE", "GROUP", "BY", "ORDER",
                                       "LIMIT", "COUNT(*)"]
            return [k for k in keywords if k.lower().startswith(text.lower())]
        return []


def _interactive(ctx: ShellContext) -> int:
    try:
        import readline  # interactive only: importing it changes input()
    except ImportError:  # pragma: no cover (no readline on this platform)
        readline = None  # type: ignore[assignment]
    if readline is not None:
        with contextlib.suppress(OSError):
            readline.read_history_file(HISTORY)
        readline.set_history_length(1000)
    sub = _commands_parser(top=False)
    try:
        Shell(ctx, sub).cmdloop()
    except KeyboardInterrupt:
        print()
    finally:
        if readline is not None:
            with contextlib.suppress(OSError):
                readline.write_history_file(HISTORY)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    try:  # tables are Arrow, printed through rich; metrics are parsed with prometheus-client
        import prometheus_client  # noqa: F401
        import pyarrow  # noqa: F401
        import rich  # noqa: F401
    except ImportError as exc:
        raise missing_extra("ldshell", "cli", exc) from None
    parser = _commands_parser()
    args = parser.parse_args(argv)
    if not args.config:
        parser.error("--config is required (or set LOGDEVICE_CONFIG)")
    try:
        ctx = ShellContext(args.config, timeout=args.timeout)
    except InvalidConfigError as exc:
        print(f"ldshell: invalid config: {exc.message}", file=sys.stderr)
        return commands.EXIT_FAILED
    try:
        ctx.authenticate(**credentials(args))
    except LogDeviceError as exc:
        print(f"ldshell: {exc.message}", file=sys.stderr)
        return commands.EXIT_FAILED
    try:
        if args.command is None:
            return _interactive(ctx)
        return run(ctx, args)
    except LogDeviceError as exc:
        print(f"ldshell: {exc}", file=sys.stderr)
        return commands.EXIT_FAILED
    except BrokenPipeError:
        return 0
    finally:
        ctx.close()


if __name__ == "__main__":
    sys.exit(main())
