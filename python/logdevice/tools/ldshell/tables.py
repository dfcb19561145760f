"""The tables ``ldshell query`` runs SQL over, in the spirit of LogDevice's LDQuery.

Each builder returns a ``pyarrow.Table``; ``query`` registers only the tables a
statement names, so a query over ``nodes`` never reads records.  Tables over records
(``records``, ``record_csi``, ``logs``) cover the logs chosen with ``--logs`` (default:
every log the epoch store knows); ``records`` reads at most ``--max-records`` per log.
Array-backed tables are built from the arrays as they are, without a row loop.
``partitions`` asks every storage node for its LogsDB partition directory, ``readers``
for its open read streams, and ``recoveries`` asks every node for the epoch recoveries its
sequencers run or ran lately; a node that does not answer is left out with a warning.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from logdevice.client.read.batch import ReaderBatch
from logdevice.placement import sequencer_for
from logdevice.protocol import GetReadStreams, GetRecoveries
from logdevice.shards import AuthoritativeStatus
from logdevice.tools.ldshell.context import ShellContext

__all__ = ["TABLES", "TableOptions", "build"]


@dataclass
class TableOptions:
    """What the record-level tables cover."""

    logs: list[int] | None = None
    lo: int = 1
    hi: int | None = None  # None: each log's tail
    max_records: int = 100_000
    _logs_cache: list[int] | None = field(default=None, repr=False)

    def log_ids(self, ctx: ShellContext) -> list[int]:
        if self.logs is not None:
            return self.logs
        if self._logs_cache is None:
            self._logs_cache = sorted(ctx.epoch_states())
        return self._logs_cache


def _pa() -> Any:
    import pyarrow as pa  # optional ("cli" extra): the tables are Arrow

    return pa


def nodes(ctx: ShellContext, opts: TableOptions) -> Any:
    views, alive = ctx.views(), ctx.alive()
    statuses, _ = ctx.metadata().shard_statuses()
    rows = [{"node": n.index, "host": n.host, "port": n.port, "admin_port": n.admin_port,
             "location": str(n.location), "roles": ",".join(sorted(n.roles)),
             "sequencer_weight": n.sequencer_weight, "storage_weight": n.storage_weight,
             "answering": n.index in views, "alive": n.index in alive,
             "authoritative_status": statuses.get(
                 n.index, AuthoritativeStatus.FULLY_AUTHORITATIVE).name}
            for n in ctx.config.nodes]
    return _pa().Table.from_pylist(rows)


def shards(ctx: ShellContext, opts: TableOptions) -> Any:
    statuses, since = ctx.metadata().shard_statuses()
    rows = [{"node": n.index, "shard": 0,
             "authoritative_status": statuses.get(
                 n.index, AuthoritativeStatus.FULLY_AUTHORITATIVE).name,
             "since_ms": since.get(n.index)}
            for n in ctx.config.storage_nodes()]
    return _pa().Table.from_pylist(rows)


def events(ctx: ShellContext, opts: TableOptions) -> Any:
    rows = [{"version": ev.get("version"), "time_ms": ev.get("time_ms"), "type": ev["type"],
             "node": ev["node"],
             "extra": json.dumps({k: v for k, v in ev.items()
                                  if k not in ("version", "time_ms", "type", "node")})}
            for ev in ctx.events()]
    return _pa().Table.from_pylist(rows, schema=_pa().schema(
        [("version", "int64"), ("time_ms", "int64"), ("type", "string"), ("node", "int64"),
         ("extra", "string")]))


def epoch_store(ctx: ShellContext, opts: TableOptions) -> Any:
    rows = []
    for log_id, st in sorted(ctx.epoch_states().items()):
        m = st.metadata
        rows.append({"log_id": log_id, "epoch": st.epoch,
                     "last_clean_epoch": st.last_clean_epoch,
                     "tail_lsn": st.tail.lsn if st.tail else None,
                     "tail_timestamp": st.tail.timestamp if st.tail else None,
                     "version": st.version, "first_epoch": m.first_epoch if m else None,
                     "nodeset": list(m.nodeset) if m else [],
                     "replication": json.dumps(dict(m.replication)) if m else None,
                     "history": len(st.history)})
    return _pa().Table.from_pylist(rows, schema=_pa().schema(
        [("log_id", "int64"), ("epoch", "int64"), ("last_clean_epoch", "int64"),
         ("tail_lsn", "uint64"), ("tail_timestamp", "int64"), ("version", "int64"),
         ("first_epoch", "int64"), ("nodeset", _pa().list_(_pa().int64())),
         ("replication", "string"), ("history", "int64")]))


def sequencers(ctx: ShellContext, opts: TableOptions) -> Any:
    weights = ctx.config.sequencer_weights()
    alive = ctx.alive() or None
    rows = [{"log_id": log_id,
             "node": sequencer_for(log_id, weights, alive),
             "epoch": st.epoch, "last_clean_epoch": st.last_clean_epoch}
            for log_id, st in sorted(ctx.epoch_states().items())]
    return _pa().Table.from_pylist(rows, schema=_pa().schema(
        [("log_id", "int64"), ("node", "int64"), ("epoch", "int64"),
         ("last_clean_epoch", "int64")]))


def log_groups(ctx: ShellContext, opts: TableOptions) -> Any:
    rows = [{"name": g.name, "lo": g.lo, "hi": g.hi, "replication": str(g.replication),
             "replication_factor": g.replication_factor,
             "nodeset_size": ctx.config.nodeset_size(g), "scd": g.scd,
             "sticky_copysets": g.sticky_copysets,
             "backlog_retention_ms": g.backlog_retention_ms,
             "max_writes_in_flight": g.max_writes_in_flight,
             "source": "runtime" if g.name in ctx.config.runtime_log_names else "file"}
            for g in ctx.config.logs]
    return _pa().Table.from_pylist(rows)


def logs(ctx: ShellContext, opts: TableOptions) -> Any:
    """Per log: replication, trim point, release pointer, records and copies held."""
    ids = opts.log_ids(ctx)
    held = ctx.holdings(ids)
    rows = []
    for log_id in ids:
        got = {x: f for x, f in held[log_id].items() if f is not None}
        lsns = [f.holdings.lsns for f in got.values() if len(f.holdings.lsns)]
        rows.append({
            "log_id": log_id, "group": ctx.config.log_group(log_id).name,
            "replication": str(ctx.config.log_group(log_id).replication),
            "trim_point": max((f.trim_point for f in got.values()), default=0),
            "last_released": max((f.last_released for f in got.values()), default=0),
            "records": len(np.unique(np.concatenate(lsns))) if lsns else 0,
            "copies": sum(len(f.holdings.lsns) for f in got.values()),
            "nodes_answering": len(got), "nodes_silent": len(held[log_id]) - len(got)})
    return _pa().Table.from_pylist(rows, schema=_pa().schema(
        [("log_id", "int64"), ("group", "string"), ("replication", "string"),
         ("trim_point", "uint64"), ("last_released", "uint64"), ("records", "int64"),
         ("copies", "int64"), ("nodes_answering", "int64"), ("nodes_silent", "int64")]))


def _list_column(cs: np.ndarray) -> Any:
    """int16 copyset rows padded with -1 -> an Arrow list<int16> column (no row loop)."""
    pa = _pa()
    valid = cs >= 0
    offsets = np.zeros(len(cs) + 1, np.int32)
    np.cumsum(valid.sum(axis=1), out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(cs[valid]))


def record_csi(ctx: ShellContext, opts: TableOptions) -> Any:
    """Per node and stored record: its copyset (from the copyset index)."""
    pa = _pa()
    parts = []
    for log_id, by_node in ctx.holdings(opts.log_ids(ctx)).items():
        for x, f in sorted(by_node.items()):
            if f is None:
                continue
            h = f.holdings
            n = len(h.lsns)
            parts.append(pa.table({
                "node": pa.array(np.full(n, x, np.int64)),
                "log_id": pa.array(np.full(n, log_id, np.int64)),
                "lsn": pa.array(h.lsns), "copyset": _list_column(h.copysets)}))
    if not parts:
        return pa.table({"node": pa.array([], pa.int64()), "log_id": pa.array([], pa.int64()),
                         "lsn": pa.array([], pa.uint64()),
                         "copyset": pa.array([], pa.list_(pa.int16()))})
    return pa.concat_tables(parts)


def records(ctx: ShellContext, opts: TableOptions) -> Any:
    """Records of the chosen logs (``--from`` .. ``--until``, at most ``--max-records``
    per log), read through a client like any reader."""
    pa = _pa()
    batches = []
    with ctx.client() as client:
        for log_id in opts.log_ids(ctx):
            hi = client.get_tail_lsn(log_id) if opts.hi is None else opts.hi
            if hi < opts.lo:
                continue
            with client.create_reader() as r:
                r.start_reading(log_id, opts.lo, hi)
                batches += [b.to_arrow() for b in r.batches(limit=opts.max_records)]
    if not batches:
        return pa.Table.from_batches([ReaderBatch.empty().to_arrow()])
    return pa.Table.from_batches(batches)


def stats(ctx: ShellContext, opts: TableOptions) -> Any:
    """Every node's Prometheus metrics, one row per sample."""
    from prometheus_client.parser import text_string_to_metric_families  # optional

    rows = []
    for n in ctx.config.nodes:
        text = ctx.metrics_text(n.index)
        if text is None:
            continue
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                rows.append({"node": n.index, "name": s.name, "type": fam.type,
                             "labels": json.dumps(s.labels, sort_keys=True),
                             "value": float(s.value)})
    return _pa().Table.from_pylist(rows, schema=_pa().schema(
        [("node", "int64"), ("name", "string"), ("type", "string"), ("labels", "string"),
         ("value", "float64")]))


_REBUILDING = ("set_version", "rebuilding_nodes", "records_total", "bytes_total",
               "logs_done", "logs_total", "eta_seconds", "copies_taken_total",
               "refusing_stores")


def rebuilding(ctx: ShellContext, opts: TableOptions) -> Any:
    """Each storage node's part in the current rebuilding, from its metrics."""
    from prometheus_client.parser import text_string_to_metric_families  # optional

    rows = []
    for n in ctx.config.storage_nodes():
        text = ctx.metrics_text(n.index)
        got: dict[str, float] = {}
        for fam in text_string_to_metric_families(text or ""):
            for s in fam.samples:
                if s.name.startswith("logdevice_rebuilding_"):
                    got[s.name.removeprefix("logdevice_rebuilding_")] = float(s.value)
        rows.append({"node": n.index, "answering": text is not None,
                     **{k: got.get(k) for k in _REBUILDING}})
    return _pa().Table.from_pylist(rows, schema=_pa().schema(
        [("node", "int64"), ("answering", "bool"),
         *((k, "float64") for k in _REBUILDING)]))


def partitions(ctx: ShellContext, opts: TableOptions) -> Any:
    """Every storage node's LogsDB time partitions."""
    pa = _pa()
    parts = []
    for x, r in sorted(ctx.partitions().items()):
        n = len(r.ids)
        parts.append(pa.table({
            "node": pa.array(np.full(n, x, np.int64)), "partition": pa.array(r.ids),
            "start_ms": pa.array(r.start_ms), "min_ts": pa.array(r.min_ts),
            "max_ts": pa.array(r.max_ts), "records": pa.array(r.records),
            "bytes": pa.array(r.nbytes)}))
    if not parts:
        return pa.table({k: pa.array([], pa.int64()) for k in (
            "node", "partition", "start_ms", "min_ts", "max_ts", "records", "bytes")})
    return pa.concat_tables(parts)


def _node_table(replies: dict[int, Any], schema: Any) -> Any:
    """One table from the nodes' table replies (their columns are the schema's after
    ``node``), with each row's node first."""
    pa = _pa()
    parts = []
    for x, r in sorted(replies.items()):
        n = len(getattr(r, schema.names[1]))
        cols = [pa.array(np.full(n, x, np.int64))]
        for f in list(schema)[1:]:
            v = getattr(r, f.name)
            if isinstance(v, np.ndarray):
                v = v.astype(f.type.to_pandas_dtype(), copy=False)
            cols.append(pa.array(v, type=f.type))
        parts.append(pa.Table.from_arrays(cols, schema=schema))
    return pa.concat_tables(parts) if parts else schema.empty_table()


def _schema(*columns: tuple[str, Any]) -> Any:
    pa = _pa()
    return pa.schema([(name, pa.list_(pa.int64()) if kind == "nodes" else kind)
                      for name, kind in columns])


def readers(ctx: ShellContext, opts: TableOptions) -> Any:
    """Every read stream open on a storage node: where it is, what it sent."""
    replies = ctx.ask_nodes(lambda: GetReadStreams(request_id=0),
                            [n.index for n in ctx.config.storage_nodes()])
    return _node_table(replies, _schema(
        ("node", "int64"), ("read_stream_id", "uint64"), ("log_id", "int64"),
        ("conn_id", "int64"), ("peer", "string"), ("address", "string"),
        ("start_lsn", "uint64"), ("until_lsn", "uint64"), ("next_lsn", "uint64"),
        ("delivered_to", "uint64"), ("window_high", "uint64"), ("last_released", "uint64"),
        ("filter_version", "int64"), ("mode", "string"), ("state", "string"),
        ("known_down", "nodes"), ("records_sent", "int64"), ("bytes_sent", "int64"),
        ("gaps_sent", "int64"), ("started_ms", "int64"), ("age_ms", "int64")))


def recoveries(ctx: ShellContext, opts: TableOptions) -> Any:
    """Epoch recoveries each node's sequencers run now or finished lately, per epoch."""
    replies = ctx.ask_nodes(lambda: GetRecoveries(request_id=0))
    return _node_table(replies, _schema(
        ("node", "int64"), ("log_id", "int64"), ("epoch", "int64"), ("seal_epoch", "int64"),
        ("attempt", "int64"), ("state", "string"), ("outcome", "string"),
        ("message", "string"), ("nodeset", "nodes"), ("sealed", "nodes"),
        ("digested", "nodes"), ("lng", "uint64"), ("records", "int64"), ("holes", "int64"),
        ("bridge", "uint64"), ("pending", "int64"), ("last_clean_epoch", "int64"),
        ("started_ms", "int64"), ("duration_ms", "int64")))


Builder = Callable[[ShellContext, TableOptions], Any]

#: name -> (what it holds, builder)
TABLES: dict[str, tuple[str, Builder]] = {
    "nodes": ("nodes of the config, whether they answer and are alive, their status", nodes),
    "shards": ("authoritative status of each storage shard (event log)", shards),
    "events": ("the event log (shard rebuilding events)", events),
    "epoch_store": ("per log: epoch, last clean epoch, tail, current nodeset", epoch_store),
    "sequencers": ("per log: the node that should sequence it, its epoch", sequencers),
    "log_groups": ("log groups of the config and their attributes", log_groups),
    "logs": ("per log: trim point, release pointer, records and copies held", logs),
    "records": ("records of the chosen logs (one log / an LSN range)", records),
    "record_csi": ("per node and stored record: its copyset", record_csi),
    "partitions": ("per storage node: its LogsDB time partitions", partitions),
    "rebuilding": ("per storage node: its progress in the current rebuilding", rebuilding),
    "readers": ("per storage node: its open read streams, their position and what they "
                "sent", readers),
    "recoveries": ("per node: epoch recoveries of its sequencers, running and recent "
                   "(one row per epoch)", recoveries),
    "stats": ("every node's Prometheus metrics", stats),
}


def build(name: str, ctx: ShellContext, opts: TableOptions) -> Any:
    return TABLES[name][1](ctx, opts)
