"""ldshell's commands: each takes the shell context and its arguments, prints, and
returns an exit code (0 ok; ``check``: 0 clean, 1 violations, 2 could not run; other
commands: 2 when they could not run)."""

from __future__ import annotations

import base64
import json
import re
import sys
from collections.abc import Callable
from decimal import Decimal
from typing import IO, Any

from ldcore.lsn import to_string as lsn_str
from logdevice.checker.driver import CheckOptions, run_check
from logdevice.cli import console as tool_console
from logdevice.errors import LogDeviceError
from logdevice.rebuilding.explain import explain_waits
from logdevice.tools.ldshell.context import ShellContext
from logdevice.tools.ldshell.tables import TABLES, TableOptions, build

__all__ = ["status", "sequencers", "logs", "info", "check", "trim", "query", "tables",
           "rebuild", "rebuilding", "EXIT_FAILED"]

EXIT_OK = 0
EXIT_FAILED = 2


def _jsonable(value: Any) -> Any:
    if isinstance(value, Decimal):  # DuckDB's sum() of integers is a 128-bit decimal
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, bytes | bytearray | memoryview):
        raw = bytes(value)
        try:
            return raw.decode()
        except UnicodeDecodeError:
            return "base64:" + base64.b64encode(raw).decode()
    return str(value)


def _dump(obj: Any, out: IO[str]) -> None:
    out.write(json.dumps(obj, default=_jsonable) + "\n")


def _print_table(table: Any, title: str | None, out: IO[str]) -> None:
    """An Arrow table as a rich table (people) ."""
    from rich.table import Table  # optional ("cli" extra): main() checks it

    t = Table(title=title, show_lines=False)
    for name in table.column_names:
        t.add_column(name, overflow="fold")
    for row in table.to_pylist():
        t.add_row(*("" if v is None else str(_jsonable(v)) if isinstance(
            v, bytes | bytearray | memoryview) else str(v) for v in row.values()))
    tool_console(file=out).print(t)


def _emit(table: Any, as_json: bool, title: str, out: IO[str]) -> None:
    if as_json:
        _dump(table.to_pylist(), out)
    else:
        _print_table(table, title, out)


def status(ctx: ShellContext, as_json: bool = False, out: IO[str] = sys.stdout) -> int:
    """Nodes (roles, answering, alive, authoritative status) and sequencers (epochs)."""
    nodes = build("nodes", ctx, TableOptions())
    seqs = build("sequencers", ctx, TableOptions())
    if as_json:
        _dump({"cluster": ctx.config.cluster, "nodes": nodes.to_pylist(),
               "sequencers": seqs.to_pylist()}, out)
        return EXIT_OK
    _print_table(nodes, f"cluster {ctx.config.cluster}: nodes", out)
    per_node: dict[Any, list[int]] = {}
    for row in seqs.to_pylist():
        per_node.setdefault(row["node"], []).append(row["epoch"])
    import pyarrow as pa  # optional ("cli" extra)

    summary = pa.Table.from_pylist(
        [{"node": n, "logs": len(e), "max_epoch": max(e)} for n, e in sorted(
            per_node.items(), key=lambda kv: -1 if kv[0] is None else kv[0])],
        schema=pa.schema([("node", "int64"), ("logs", "int64"), ("max_epoch", "int64")]))
    _print_table(summary, "sequencers", out)
    return EXIT_OK


def sequencers(ctx: ShellContext, as_json: bool = False, out: IO[str] = sys.stdout) -> int:
    """Per log: the node that should sequence it (placement over live nodes), its epoch."""
    _emit(build("sequencers", ctx, TableOptions()), as_json, "sequencers", out)
    return EXIT_OK


def logs(ctx: ShellContext, opts: TableOptions, as_json: bool = False,
         out: IO[str] = sys.stdout) -> int:
    """Log groups, and per log: replication, trim point, tail, records and copies."""
    table = build("logs", ctx, opts)
    if as_json:
        _dump({"log_groups": build("log_groups", ctx, opts).to_pylist(),
               "logs": table.to_pylist()}, out)
        return EXIT_OK
    _print_table(build("log_groups", ctx, opts), "log groups", out)
    _print_table(table, "logs", out)
    return EXIT_OK


def info(ctx: ShellContext, node: int, as_json: bool = False,
         out: IO[str] = sys.stdout) -> int:
    """One node: its config, what it answers, its status, a few of its metrics."""
    if not ctx.config.has_node(node):
        print(f"ldshell: node {node} is not in the config", file=sys.stderr)
        return EXIT_FAILED
    row = next(r for r in build("nodes", ctx, TableOptions()).to_pylist()
               if r["node"] == node)
    view = ctx.views().get(node)
    row["sees_alive"] = sorted(view.alive) if view is not None else None
    metrics = {}
    text = ctx.metrics_text(node)
    if text is not None:
        from prometheus_client.parser import text_string_to_metric_families  # optional

        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                if not s.labels and s.name.endswith(("_total", "_bytes", "_streams")):
                    metrics[s.name] = s.value
    row["metrics"] = metrics
    if as_json:
        _dump(row, out)
        return EXIT_OK
    import pyarrow as pa  # optional ("cli" extra)

    flat = [{"key": k, "value": json.dumps(v, default=str) if isinstance(v, dict | list)
             else str(v)} for k, v in row.items() if k != "metrics"]
    flat += [{"key": k, "value": f"{v:g}"} for k, v in sorted(metrics.items())]
    _print_table(pa.Table.from_pylist(flat), f"N{node}", out)
    return EXIT_OK


def check(ctx: ShellContext, logs_: list[int] | None, as_json: bool = False,
          report_path: str | None = None, recheck_delay: float = 2.0,
          out: IO[str] = sys.stdout, err: IO[str] = sys.stderr,
          down_grace_ms: int | None = None) -> int:
    """Run the checker; 0 clean, 1 violations, 2 could not run."""
    def say(text: str) -> None:
        err.write(f"ldshell check: {text}\n")
        err.flush()

    report = run_check(ctx.config, CheckOptions(logs=logs_, timeout=ctx.timeout,
                                                recheck_delay=recheck_delay, on_event=say,
                                                security=ctx.security,
                                                down_grace_ms=down_grace_ms))
    data = report.to_json()
    if report_path:
        with open(report_path, "w") as f:
            json.dump(data, f, indent=1)
    if as_json:
        _dump(data, out)
        return report.exit_code
    import pyarrow as pa  # optional ("cli" extra)

    for e in report.errors:
        err.write(f"ldshell check: could not run: {e}\n")
    counts = pa.Table.from_pylist([{"category": c, "violations": n}
                                   for c, n in data["violations"].items()])
    _print_table(counts, f"checked {data['summary']['logs']} log(s), "
                         f"{data['summary']['records']} record(s) in {data['seconds']} s", out)
    if data["down_nodes"]:
        out.write("down within the grace period (not violations): " + ", ".join(
            f"N{n} ({ms / 1000:.1f} s)" for n, ms in data["down_nodes"].items()) + "\n")
    if data["details"]:
        rows = [{"category": d["category"], "kind": d["kind"], "log": d["log_id"],
                 "lsn_lo": lsn_str(d["lsn_lo"]), "lsn_hi": lsn_str(d["lsn_hi"]),
                 "records": d["records"], "nodes_missing": d["nodes_missing"],
                 "copysets": d.get("copysets", [])} for d in data["details"][:200]]
        _print_table(pa.Table.from_pylist(rows), "violations", out)
    left_out = data["details_left_out"] + max(0, len(data["details"]) - 200)
    if left_out:
        out.write(f"{left_out} more violation run(s) not listed\n")
    return report.exit_code


def trim(ctx: ShellContext, log_id: int, lsn: int, *, force: bool = False,
         out: IO[str] = sys.stdout) -> int:
    """Trim ``log_id`` up to ``lsn`` (past its tail only with ``force``)."""
    with ctx.client() as client:
        client.trim(log_id, lsn, force=force)
    out.write(f"log {log_id} trimmed up to {lsn_str(lsn)}\n")
    return EXIT_OK


def rebuild(ctx: ShellContext, node: int, kind: str, out: IO[str] = sys.stdout) -> int:
    """Drain ``node`` (``kind`` "drain") or mark its data lost ("unrecoverable")."""
    version = ctx.metadata().request_rebuild(node, drain=kind == "drain")
    what = "draining" if kind == "drain" else "marked unrecoverable"
    out.write(f"N{node} {what} (event {version}); follow it with 'ldshell rebuilding'\n")
    return EXIT_OK


def cancel_rebuild(ctx: ShellContext, node: int, undrain: bool,
                   out: IO[str] = sys.stdout) -> int:
    """Undrain ``node`` or abort its rebuilding."""
    version = ctx.metadata().cancel_rebuild(node, undrain=undrain)
    what = "undrained" if undrain else "rebuilding aborted"
    out.write(f"N{node} {what} (event {version})\n")
    return EXIT_OK


def rebuilding(ctx: ShellContext, as_json: bool = False, out: IO[str] = sys.stdout) -> int:
    """The rebuilding set, each storage node's progress, and why each node that is down
    or being rebuilt waits."""
    meta = ctx.metadata()
    rset = meta.rebuilding_set()
    statuses, _ = meta.shard_statuses()
    views = ctx.views()
    dead_for = max(views.values(), key=lambda v: v.time_ms).dead_for_ms if views else {}
    waits = explain_waits((n.index for n in ctx.config.storage_nodes()), rset, statuses,
                          dead_for, meta.events(),
                          ctx.config.settings.self_rebuild_grace_period_ms)
    table = build("rebuilding", ctx, TableOptions())
    if as_json:
        _dump({"set_version": rset.version, "lost": sorted(rset.lost),
               "draining": sorted(rset.draining), "donors": sorted(rset.donors or ()),
               "done": sorted(rset.done), "waits": {str(n): w for n, w in waits.items()},
               "nodes": table.to_pylist()}, out)
        return EXIT_OK
    if not rset:
        out.write("nothing is being rebuilt\n")
    else:
        out.write(f"rebuilding set v{rset.version}: lost {sorted(rset.lost)}, draining "
                  f"{sorted(rset.draining)}; donors done {sorted(rset.done)} of "
                  f"{sorted(rset.donors or ())}\n")
    for node, why in waits.items():
        out.write(f"N{node}: {why}\n")
    _print_table(table, "rebuilding", out)
    return EXIT_OK


def tables(out: IO[str] = sys.stdout) -> int:
    import pyarrow as pa  # optional ("cli" extra)

    _print_table(pa.Table.from_pylist([{"table": k, "holds": v[0]}
                                       for k, v in TABLES.items()]), "tables", out)
    return EXIT_OK


def referenced_tables(sql: str) -> list[str]:
    """The tables a statement names (a word match, so only they are built)."""
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", sql.lower()))
    return [t for t in TABLES if t in words]


def run_sql(ctx: ShellContext, sql: str, opts: TableOptions,
            builder: Callable[[str, ShellContext, TableOptions], Any] = build) -> Any:
    """``sql`` over the tables it names, with DuckDB; an Arrow table."""
    import duckdb  # optional ("admin" extra): only query needs it

    con = duckdb.connect()
    try:
        for name in referenced_tables(sql):
            con.register(name, builder(name, ctx, opts))
        rel = con.sql(sql)
        if rel is None:  # a statement without rows
            import pyarrow as pa  # optional ("cli" extra)

            return pa.table({})
        # The name of "the relation as an Arrow table" moved between DuckDB releases.
        fetch = getattr(rel, "to_arrow_table", None) or rel.arrow
        return fetch()
    finally:
        con.close()


def query(ctx: ShellContext, sql: str, opts: TableOptions, as_json: bool = False,
          out: IO[str] = sys.stdout) -> int:
    """SQL over the cluster's tables; ``--json`` prints a list of row objects."""
    try:
        import duckdb  # optional ("admin" extra): only query needs it
    except ImportError:
        print("ldshell: query needs duckdb and pyarrow (pip install 'logdevice[admin]')",
              file=sys.stderr)
        return EXIT_FAILED
    try:
        table = run_sql(ctx, sql, opts)
    except duckdb.Error as exc:
        print(f"ldshell: query failed: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except LogDeviceError as exc:
        print(f"ldshell: {exc}", file=sys.stderr)
        return EXIT_FAILED
    _emit(table, as_json, "", out)
    return EXIT_OK
