"""The open-loop scheduler and delivery log every latency workload of benchmarks/peers.py
uses, whatever the system (ours, Redis Streams, NATS JetStream).

Open loop, as wrk2 and the OpenMessaging Benchmark measure it: the send time of record
``i`` is fixed in advance at ``t0 + i / rate``; the scheduler hands each record to the
system's ``send`` as soon as that time has passed (all the records that are due at once
when it woke late or ``send`` was slow), and the latency of a record is the time its
tailing reader got it minus its *scheduled* send time.  A system that stalls cannot hide
the stall by sending less (no coordinated omission): the records scheduled during the stall
are late, and their latency says so.

Each record's payload starts with its index (8 bytes, little endian), so a reader can
mark it delivered without a lookup.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["Deliveries", "latency_payloads", "run_open_loop", "latency_figures"]


def latency_payloads(total: int, size: int, filler: bytes) -> list[bytes]:
    """``total`` payloads of ``size`` bytes: the index (8 bytes, little endian), then
    ``filler`` (cut or repeated to fit)."""
    rest = size - 8
    tail = (filler * (rest // max(1, len(filler)) + 1))[:rest]
    return [i.to_bytes(8, "little") + tail for i in range(total)]


def index_of(payload: bytes | memoryview) -> int:
    return int.from_bytes(payload[:8], "little")


class Deliveries:
    """When each record reached the tailing reader (``time.perf_counter`` seconds; NaN:
    not yet).  Readers call ``mark`` / ``mark_many`` from any thread; indices outside
    ``0 .. total-1`` (warm-up records) and repeats are ignored."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.at = np.full(total, np.nan)
        self.count = 0
        self._lock = threading.Lock()
        self._all = threading.Event()
        if total == 0:
            self._all.set()

    def mark(self, i: int, now: float) -> None:
        if not 0 <= i < self.total:
            return
        with self._lock:
            if self.at[i] != self.at[i]:  # NaN: the first delivery
                self.at[i] = now
                self.count += 1
                if self.count == self.total:
                    self._all.set()

    def mark_many(self, idx: np.ndarray, now: float) -> None:
        idx = idx[(idx >= 0) & (idx < self.total)]
        with self._lock:
            fresh = idx[np.isnan(self.at[idx])]
            fresh = np.unique(fresh)
            self.at[fresh] = now
            self.count += len(fresh)
            if self.count >= self.total:
                self._all.set()

    def wait(self, timeout: float) -> bool:
        """Until every record was delivered, at most ``timeout`` seconds."""
        return self._all.wait(timeout)

    def wait_count(self, count: int, timeout: float) -> bool:
        """Until at least ``count`` records were delivered, at most ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while self.count < count:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.005)
        return True

    def after(self, skip: int) -> Deliveries:
        """The deliveries of records ``skip ..`` numbered from 0 (a warm-up left out)."""
        v = Deliveries(self.total - skip)
        v.at = self.at[skip:].copy()
        v.count = int((~np.isnan(v.at)).sum())
        return v


def run_open_loop(rate: float, total: int, send: Callable[[int, int], None],
                  max_batch: int = 1000) -> dict[str, Any]:
    """Schedule records ``0 .. total-1`` at ``rate``/s and call ``send(lo, hi)`` for the
    records ``lo .. hi-1`` once their send times have passed (at most ``max_batch`` per
    call, in order).  Returns the scheduled times (``due``, perf_counter seconds) and how
    late the scheduler handed records over (``send_lag_ms``: p50 / p99 / max)."""
    t0 = time.perf_counter() + 0.005
    due = t0 + np.arange(total, dtype=np.float64) / rate
    handed = np.empty(total, dtype=np.float64)
    i = 0
    while i < total:
        now = time.perf_counter()
        if now < due[i]:
            time.sleep(due[i] - now)
            continue
        hi = min(total, i + max_batch, max(i + 1, int((now - t0) * rate) + 1))
        handed[i:hi] = now
        send(i, hi)
        i = hi
    lag = (handed - due) * 1000.0
    return {"due": due, "send_lag_ms": {
        "p50": float(np.percentile(lag, 50)) if total else 0.0,
        "p99": float(np.percentile(lag, 99)) if total else 0.0,
        "max": float(lag.max()) if total else 0.0}}


def latency_figures(due: np.ndarray, deliveries: Deliveries) -> dict[str, Any]:
    """Delivery minus scheduled send time, in ms: p50 / p99 / p99.9 / max over every
    record; a record not delivered (within the drain time) counts as infinitely late, so
    a percentile that reaches those records is ``inf``."""
    lat = (deliveries.at - due) * 1000.0
    undelivered = int(np.isnan(lat).sum())
    lat = np.where(np.isnan(lat), np.inf, lat)
    out: dict[str, Any] = {"records": int(len(lat)), "undelivered": undelivered}
    if len(lat):
        p50, p99, p999 = np.percentile(lat, [50, 99, 99.9], method="higher")
        out.update(p50_ms=float(p50), p99_ms=float(p99), p999_ms=float(p999),
                   max_ms=float(lat.max()))
    return out
