"""Prometheus metrics of one node, served at ``http://<host>:<admin_port>/metrics``.

``MetricsRole`` starts ``prometheus_client``'s HTTP server (a thread) on the node's admin
port with a registry of its own (not the process-wide default, so nodes built in one
process never collide).  Its single collector reads the roles' plain counters
(``node.roles.stats``, the group committer, read streams, recoveries, the checker) when someone
scrapes: nothing is pushed from the hot paths.  The snapshot of role state is taken on
the node's event loop (the roles are not thread safe); RocksDB properties are read from
the scraping thread.

Names start with ``logdevice_``; counters end in ``_total``.  The checker's gauges are
named after BookKeeper's auditor metrics (placement, no replica, fewer copies than
required, under-replicated past the grace period).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

from logdevice.node.roles.role import NodeServices, Role

log = logging.getLogger("logdevice.node.roles.metrics_role")

__all__ = ["MetricsRole", "ROCKSDB_PROPERTIES", "CHECKER_GAUGES"]

#: RocksDB properties exported (summed over partitions), metric name -> property.
ROCKSDB_PROPERTIES = {
    "logdevice_rocksdb_memtable_bytes": "rocksdb.cur-size-all-mem-tables",
    "logdevice_rocksdb_pending_compaction_bytes": "rocksdb.estimate-pending-compaction-bytes",
    "logdevice_rocksdb_running_compactions": "rocksdb.num-running-compactions",
    "logdevice_rocksdb_write_stopped": "rocksdb.is-write-stopped",
    "logdevice_rocksdb_delayed_write_rate": "rocksdb.actual-delayed-write-rate",
    "logdevice_rocksdb_live_sst_bytes": "rocksdb.live-sst-files-size",
}
#: Checker results of the last periodic run: gauge name -> (source, key, help).
CHECKER_GAUGES = {
    "logdevice_checker_records_not_adhering_to_placement": (
        "violations", "placement", "records whose copyset breaks the replication property"),
    "logdevice_checker_records_missing_copies": (
        "violations", "durability", "records a copyset member (fully authoritative) lacks"),
    "logdevice_checker_records_under_replicated_past_grace": (
        "violations", "progress", "records still under-replicated past the grace period"),
    "logdevice_checker_unavailable_nodes_not_in_event_log": (
        "violations", "availability", "silent nodes the event log does not mark"),
    "logdevice_checker_records_having_no_replica": (
        "summary", "no_replica", "records no node holds"),
    "logdevice_checker_records_less_than_r_copies": (
        "summary", "under_replicated", "records held by fewer nodes than the replication"),
    "logdevice_checker_records_checked": ("summary", "records", "records checked"),
    "logdevice_checker_records_outside_nodeset": (
        "summary", "outside_nodeset", "records whose copyset leaves their epoch's nodeset"),
    "logdevice_checker_nodes_down_within_grace": (
        "other", "down_nodes", "silent nodes the cluster holds dead within the grace period"),
    "logdevice_checker_details_left_out": (
        "other", "details_left_out", "violation runs not listed in the report"),
}
SNAPSHOT_TIMEOUT = 2.0


class _Collector:
    """Reads the node's counters at scrape time (see the module docstring)."""

    def __init__(self, role: MetricsRole) -> None:
        self.role = role

    def describe(self) -> list[Any]:
        return []  # dynamic: do not collect at registration

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import (  # optional ("server" extra)
            CounterMetricFamily,
            GaugeMetricFamily,
            HistogramMetricFamily,
        )

        role = self.role
        try:
            fut = asyncio.run_coroutine_threadsafe(role.snapshot_async(), role.node.loop)
            snap = fut.result(SNAPSHOT_TIMEOUT)
        except Exception as exc:  # loop stopping or busy: serve what we can
            log.debug("metrics snapshot failed: %s", exc)
            snap = None
        up = GaugeMetricFamily("logdevice_node_up", "1 while the node serves",
                               labels=["node"])
        up.add_metric([str(role.node.index)], 1.0 if snap is not None else 0.0)
        yield up
        if snap is None:
            return

        def counter(name: str, doc: str, value: float) -> Any:
            c = CounterMetricFamily(name, doc)
            c.add_metric([], value)
            return c

        def gauge(name: str, doc: str, value: float) -> Any:
            g = GaugeMetricFamily(name, doc)
            g.add_metric([], value)
            return g

        a = snap.get("appends")
        if a is not None:
            yield counter("logdevice_appends_total", "APPENDs accepted", a["count"])
            yield counter("logdevice_append_bytes_total", "payload bytes appended", a["bytes"])
            yield counter("logdevice_append_failures_total",
                          "accepted APPENDs answered with an error", a["failed"])
            h = HistogramMetricFamily("logdevice_append_latency_seconds",
                                      "APPEND received to acknowledged, at the sequencer")
            h.add_metric([], buckets=a["buckets"], sum_value=a["sum"])
            yield h
            yield counter("logdevice_recoveries_total", "epoch recoveries finished",
                          a["recoveries"])
            yield counter("logdevice_recovery_failures_total", "epoch recoveries that failed",
                          a["recovery_failures"])
            yield gauge("logdevice_recoveries_running", "epoch recoveries running now",
                        a["recoveries_running"])
            yield gauge("logdevice_sequencers", "logs this node sequences now",
                        a["sequencers"])
            yield gauge("logdevice_sequencers_awake", "of those, sequencers holding a window "
                        "(appended to within sequencer_idle_ms)", a["sequencers_awake"])
            yield counter("logdevice_stores_sent_total",
                          "STOREs sent (one per storage node, log and epoch per loop turn)",
                          a["stores"])
            yield counter("logdevice_store_frames_sent_total",
                          "frames carrying them (a STORE_LOGS carries several)",
                          a["store_frames"])
        s = snap.get("stores")
        if s is not None:
            yield counter("logdevice_store_records_total", "records written to LogsDB",
                          s["records"])
            yield counter("logdevice_store_batches_total",
                          "group commits (one RocksDB write each)", s["writes"])
        yield counter("logdevice_releases_total", "RELEASEs taken (one per log)",
                      snap["releases"])
        r = snap.get("reads")
        if r is not None:
            yield gauge("logdevice_read_streams", "read streams open", r["open"])
            yield counter("logdevice_read_streams_started_total", "read streams started",
                          r["started"])
            for name, key, doc in (
                    ("logdevice_read_records_shipped_total", "records", "records shipped"),
                    ("logdevice_read_bytes_shipped_total", "bytes", "payload bytes shipped")):
                c = CounterMetricFamily(name, doc + " by delivery mode", labels=["mode"])
                for mode, value in r[key].items():
                    c.add_metric([mode], value)
                yield c
        served = snap.get("checker")
        if served is not None:
            yield counter("logdevice_checker_requests_total",
                          "availability requests answered", served["requests"])
            yield counter("logdevice_checker_records_served_total",
                          "records listed in availability answers", served["records"])
        runs = snap.get("checker_runs")
        if runs is not None:
            yield counter("logdevice_checker_runs_total", "periodic checks run here",
                          runs["runs"])
            for name, (source, key, doc) in CHECKER_GAUGES.items():
                yield gauge(name, doc + " (last check)", runs[source].get(key, 0))
        rb = snap.get("rebuilding")
        if rb is not None:
            yield counter("logdevice_rebuilding_records_total",
                          "records this node donated in the current rebuilding set",
                          rb["records"])
            yield counter("logdevice_rebuilding_bytes_total",
                          "payload bytes this node donated in the current rebuilding set",
                          rb["bytes"])
            yield counter("logdevice_rebuilding_copies_taken_total",
                          "rebuilt copies other donors stored here", rb["copies_taken"])
            yield counter("logdevice_rebuilding_copies_amended_total",
                          "copies held here whose copyset other donors amended",
                          rb["copies_amended"])
            for key, doc in (
                    ("set_version", "event-log version of the rebuilding set (0: none)"),
                    ("rebuilding_nodes", "nodes in the rebuilding set"),
                    ("logs_done", "logs this donor has finished in the current set"),
                    ("logs_total", "logs this donor walks in the current set"),
                    ("eta_seconds", "estimated seconds until this donor is done"),
                    ("started_seconds", "when this donor began the current set (Unix "
                                        "time; kept across restarts)"),
                    ("refusing_stores", "1 while this node refuses new copies"),
                    ("refusing_nodes", "nodes this node's sequencers give no new copies")):
                yield gauge(f"logdevice_rebuilding_{key}", doc, rb[key])
            lsn = GaugeMetricFamily("logdevice_rebuilding_log_lsn",
                                    "per log, the LSN this donor has finished up to",
                                    labels=["log"])
            for log_id, reached in sorted(rb["log_lsn"].items()):
                lsn.add_metric([str(log_id)], float(reached))
            yield lsn
        yield from self._rocksdb(gauge)

    def _rocksdb(self, gauge: Any) -> Iterator[Any]:
        db = self.role.db()
        if db is None:
            return
        try:
            parts = [p.id for p in db.partitions()]
            for name, prop in ROCKSDB_PROPERTIES.items():
                total = 0
                for pid in parts:
                    value = db.property(prop, pid)
                    total += int(value) if value and value.strip().isdigit() else 0
                yield gauge(name, f"{prop}, summed over partitions", total)
        except Exception as exc:  # closed under us: skip RocksDB this time
            log.debug("rocksdb properties: %s", exc)


class MetricsRole(Role):
    """Serves the node's metrics on its admin port (no-op without one)."""

    name = "metrics"

    def __init__(self, node: NodeServices) -> None:
        super().__init__(node)
        try:
            from prometheus_client import CollectorRegistry
        except ImportError:  # the "server" extra is not installed: no /metrics
            self.registry: Any = None
        else:
            self.registry = CollectorRegistry(auto_describe=False)
            self.registry.register(_Collector(self))  # type: ignore[arg-type]
        self.releases = 0
        self._server: Any = None
        self._thread: Any = None

    # -- state the collector reads ---------------------------------------------------------
    def db(self) -> Any:
        node = self.node
        return node.role("storage").db if node.has_role("storage") else None

    async def snapshot_async(self) -> dict[str, Any]:
        return self.snapshot()

    def snapshot(self) -> dict[str, Any]:
        """The counters of every role, read on the loop (plain numbers and dicts)."""
        node = self.node
        snap: dict[str, Any] = {"releases": self.releases}
        if node.has_role("sequencer"):
            seq = node.role("sequencer")
            st = seq.append_stats
            buckets, total = st.latency.snapshot()
            snap["appends"] = {"count": st.appends, "bytes": st.bytes, "failed": st.failed,
                               "buckets": buckets, "sum": total,
                               "recoveries": seq.recoveries.completed,
                               "recovery_failures": seq.recoveries.failed,
                               "recoveries_running": len(seq.recoveries.by_log),
                               "sequencers": len(seq.sequencers),
                               "sequencers_awake": seq.awake_sequencers(),
                               "stores": seq.sender.stores,
                               "store_frames": seq.sender.frames}
        if node.has_role("storage"):
            committer = node.role("storage").committer
            if committer is not None:
                snap["stores"] = {"records": committer.records, "writes": committer.writes}
        if node.has_role("read_streams"):
            rs = node.role("read_streams")
            records = dict(rs.totals.records)
            nbytes = dict(rs.totals.bytes)
            live = rs.live_streams()
            for s in live:
                mode = "scd" if s.scd else "all_send_all"
                records[mode] += s.stats.records_sent
                nbytes[mode] += s.stats.payload_bytes_sent
            snap["reads"] = {"open": len(live), "started": rs.totals.started,
                             "records": records, "bytes": nbytes}
        if node.has_role("availability"):
            av = node.role("availability")
            snap["checker"] = {"requests": av.requests, "records": av.records}
        if node.has_role("checker"):
            snap["checker_runs"] = node.role("checker").metrics_snapshot()
        if node.has_role("rebuilding"):
            snap["rebuilding"] = node.role("rebuilding").metrics_snapshot()
        return snap

    # -- life cycle ------------------------------------------------------------------------
    async def start(self) -> None:
        me = self.node.me
        if me.admin_port is None:
            return
        if self.registry is None:
            log.warning("N%d: prometheus-client is not installed (pip install "
                        "'logdevice[server]'): no metrics on port %d", self.node.index,
                        me.admin_port)
            return
        from prometheus_client import start_http_server  # optional ("server" extra)

        self._server, self._thread = start_http_server(me.admin_port, addr=me.host,
                                                       registry=self.registry)
        log.info("N%d: metrics at http://%s:%d/metrics", self.node.index, me.host,
                 me.admin_port)

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            # shutdown() waits for the serving thread's loop: not on the event loop.
            await self.node.loop.run_in_executor(None, server.shutdown)
            server.server_close()

    def on_release(self, log_id: int, lsn: int) -> None:
        self.releases += 1
