"""Plain counters the node's roles keep for metrics, cheap enough for the append path.

Nothing here imports ``prometheus_client``: roles count into these objects (an integer
add, or a float appended to a list), and ``node.roles.metrics_role`` turns them into Prometheus
samples when someone scrapes.  Latencies are folded into histogram buckets in bulk with
numpy (every ``FOLD_EVERY`` observations, and at scrape time), not one by one.
"""

from __future__ import annotations

import numpy as np

__all__ = ["LatencyHistogram", "AppendStats", "ReadTotals", "LATENCY_BUCKETS"]

#: Upper bounds (seconds) of the latency histogram buckets, as Prometheus ``le``.
LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                   2.5, 5.0, 10.0)
FOLD_EVERY = 4096


class LatencyHistogram:
    """Observations in seconds, bucketed lazily."""

    def __init__(self, buckets: tuple[float, ...] = LATENCY_BUCKETS) -> None:
        self.bounds = np.asarray(buckets, np.float64)
        self.counts = np.zeros(len(buckets) + 1, np.int64)  # the last one is +Inf
        self.sum = 0.0
        self._pending: list[float] = []

    def add(self, seconds: float) -> None:
        self._pending.append(seconds)
        if len(self._pending) >= FOLD_EVERY:
            self.fold()

    def fold(self) -> None:
        pending, self._pending = self._pending, []
        if pending:
            arr = np.asarray(pending, np.float64)
            idx = np.searchsorted(self.bounds, arr, side="left")
            self.counts += np.bincount(idx, minlength=len(self.counts))
            self.sum += float(arr.sum())

    def snapshot(self) -> tuple[list[tuple[str, int]], float]:
        """Cumulative ``(le, count)`` pairs ending with ``+Inf``, and the sum."""
        self.fold()
        cum = np.cumsum(self.counts).tolist()
        les = [repr(float(b)) for b in self.bounds] + ["+Inf"]
        return list(zip(les, cum, strict=True)), self.sum


class AppendStats:
    """What a sequencer role did with APPENDs."""

    def __init__(self) -> None:
        self.appends = 0  # accepted for sequencing
        self.bytes = 0
        self.failed = 0  # answered with an error after being accepted
        self.latency = LatencyHistogram()


class ReadTotals:
    """Read streams served, folded in as they close (live ones are added at scrape)."""

    def __init__(self) -> None:
        self.started = 0
        self.records = {"scd": 0, "all_send_all": 0}
        self.bytes = {"scd": 0, "all_send_all": 0}

    def fold(self, stream: object) -> None:
        """Add a closed stream's counts (anything with ``scd`` and ``stats``)."""
        mode = "scd" if getattr(stream, "scd", False) else "all_send_all"
        stats = stream.stats  # type: ignore[attr-defined]
        self.records[mode] += stats.records_sent
        self.bytes[mode] += stats.payload_bytes_sent
