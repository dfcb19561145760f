"""Driver side of planning: ask the cluster where each log's range starts and ends.

All logs at once: ``Client.log_summaries`` asks each storage node one question about
every log (trim point, release pointer, size estimate, ``find_time`` of
``from_time``/``until_time``) and each sequencer node one GET_TAILS for the logs it
sequences, so planning costs a round trip per node, not several per log.  The range of
a log is ``max(from_lsn, trim point + 1) .. min(until_lsn, last released)``: the last
released LSN is the sequencers' tail (every acknowledged append is in the plan, as
``get_tail_attributes`` gives it) or a storage node's release pointer if that is later;
either is released, so no reader waits for it.  The size estimate is the storage
nodes' statistics (``approximate_data_size``) over the window of ``from_time`` ..
``until_time`` (all of the log by default).  No payload is read to plan.

Per log, only where the one-round-trip answer is not enough (``log_extent``'s calls):
LSN bounds inside the log (the size is then estimated over the times of the records
at the bounds, read without payloads, one record each), and a range over several
epochs that must be cut (``find_time`` cut points at evenly spaced times, because LSN
arithmetic cannot split it).  The result is what ``plan.plan_extents`` cuts into
partitions.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Any, cast

from logdevice.client.summaries import LogSummary
from logdevice.errors import LogDeviceError, TimedOutError
from logdevice.records import LSN_MAX, LSN_OLDEST, DataRecord
from logdevice.spark.fanout import fan_out
from logdevice.spark.loss import LossCounter, below_trim_point
from logdevice.spark.options import ConfigRef, ReadOptions, connect
from logdevice.spark.plan import LSN_FIRST, LogExtent, slice_count

__all__ = ["log_extent", "log_extents", "client_extents", "extent_of_summary",
           "size_window", "first_record",
           "first_timestamp"]

log = logging.getLogger("logdevice.spark")


def log_extent(client: Any, log_id: int, opts: ReadOptions,
               skipped: LossCounter | None = None) -> LogExtent:
    """The range of ``log_id`` that ``opts`` asks for, bounded by what the log holds now.

    An explicit ``from_lsn`` at or below the trim point is loss (``loss``): it raises, or
    with ``fail_on_data_loss=false`` the trimmed part is counted in ``skipped``."""
    head = client.get_head_attributes(log_id)
    tail = client.get_tail_attributes(log_id)
    hi = min(opts.until_lsn, tail.last_released_real_lsn)
    if opts.from_lsn > LSN_OLDEST:  # LSN_OLDEST is the default: "from the trim point"
        lost = below_trim_point(log_id, max(opts.from_lsn, LSN_FIRST), hi, head.trim_point)
        if lost is not None:
            (skipped if skipped is not None else LossCounter()).handle(
                lost, opts.fail_on_data_loss)
    lo = max(opts.from_lsn, head.trim_point + 1, LSN_FIRST)
    if opts.from_time is not None:
        lo = max(lo, client.find_time(log_id, opts.from_time))
    if opts.until_time is not None:
        hi = min(hi, client.find_time(log_id, opts.until_time) - 1)
    ext = LogExtent(log_id, lo, min(hi, LSN_MAX - 1))
    if lo > hi:
        return ext
    t_lo = opts.from_time if opts.from_time is not None else head.trim_point_timestamp
    t_hi = opts.until_time if opts.until_time is not None else tail.last_timestamp
    # LSN bounds inside the log: the size estimate is by time, so take the times of the
    # records at the bounds (header-only reads of one record each).
    if lo > max(head.trim_point + 1, LSN_FIRST) and opts.from_time is None:
        t_lo = first_timestamp(client, log_id, lo, hi) or t_lo
    if hi < tail.last_released_real_lsn and opts.until_time is None:
        t_hi = first_timestamp(client, log_id, hi, tail.last_released_real_lsn) or t_hi
    now_ms = int(time.time() * 1000)
    t_hi = max(t_hi, t_lo)
    try:
        ext.est_bytes = int(client.approximate_data_size(log_id, t_lo, min(t_hi, now_ms)))
    except LogDeviceError as e:  # only the plan's granularity depends on it
        log.info("log %d: no size estimate (%s); planning by LSN count", log_id, e)
    if not ext.one_epoch:
        n = slice_count(ext.est_records, ext.est_bytes, opts.records_per_partition,
                        opts.bytes_per_partition)
        if n > 1 and t_hi > t_lo:
            ext.time_cuts = [client.find_time(log_id, t_lo + (t_hi - t_lo) * k // n)
                             for k in range(1, n)]
    return ext


def first_record(client: Any, log_id: int, lo: int, hi: int,
                 timeout: float = 10.0) -> DataRecord | None:
    """The first record in ``lo..hi`` (released LSNs), read without its payload; None if
    there is none.  ``TimedOutError`` if the range was not read within ``timeout``."""
    deadline = time.monotonic() + timeout
    with client.create_reader(max_buffered_records=16) as r:
        r.without_payload()
        r.wait_only_when_no_data()
        r.start_reading(log_id, lo, hi)
        while time.monotonic() < deadline:
            done = not r.is_reading(log_id)
            for item in r.read(16, timeout=0 if done else 0.5):
                if isinstance(item, DataRecord):
                    return item
            if done:
                return None
    raise TimedOutError(message=f"log {log_id}: LSNs [{lo}, {hi}] not read within "
                                f"{timeout:g} s")


def first_timestamp(client: Any, log_id: int, lo: int, hi: int) -> int | None:
    """Timestamp (ms) of the first record in ``lo..hi``; None if there is none or the
    cluster did not answer in time (it only sizes the plan)."""
    try:
        rec = first_record(client, log_id, lo, hi)
    except TimedOutError:
        return None
    return int(rec.timestamp) if rec is not None else None


def extent_of_summary(summary: LogSummary, opts: ReadOptions,
                      skipped: LossCounter | None = None) -> LogExtent | None:
    """The extent of one log from its ``log_summaries`` answer (asked with the find
    times ``opts.from_time``, ``opts.until_time`` in that order and the size window of
    ``size_window``), or None where only ``log_extent``'s per-log calls can tell (an LSN
    bound inside the log).  Loss below the trim point as ``log_extent``."""
    log_id, trim, released = summary.log_id, summary.trim_point, summary.last_released
    top = min(opts.until_lsn, released)
    lo, hi = max(opts.from_lsn, trim + 1, LSN_FIRST), top
    found = iter(summary.find_time)
    if opts.from_time is not None:
        lo = max(lo, next(found))
    if opts.until_time is not None:
        hi = min(hi, next(found) - 1)
    ext = LogExtent(log_id, lo, min(hi, LSN_MAX - 1), est_bytes=summary.est_bytes)
    if lo <= hi:
        inside = (lo > max(trim + 1, LSN_FIRST) and opts.from_time is None) or \
            (hi < released and opts.until_time is None)
        if inside or (not ext.one_epoch and slice_count(
                ext.est_records, ext.est_bytes, opts.records_per_partition,
                opts.bytes_per_partition) > 1):
            return None  # sized by the bounds' records, or cut at find_time points
    if opts.from_lsn > LSN_OLDEST:
        lost = below_trim_point(log_id, max(opts.from_lsn, LSN_FIRST), top, trim)
        if lost is not None:
            (skipped if skipped is not None else LossCounter()).handle(
                lost, opts.fail_on_data_loss)
    return ext


def size_window(opts: ReadOptions) -> tuple[int, int] | None:
    """The window of the size estimate ``log_extents`` asks for (None: all records)."""
    if opts.from_time is None and opts.until_time is None:
        return None
    return (opts.from_time if opts.from_time is not None else 0,
            opts.until_time if opts.until_time is not None else int(time.time() * 1000))


def log_extents(config: ConfigRef, logs: Sequence[int], opts: ReadOptions,
                skipped: LossCounter | None = None) -> list[LogExtent]:
    """``client_extents`` through a client of its own."""
    with connect(config, opts.credentials) as client:
        return client_extents(client, logs, opts, skipped)


def client_extents(client: Any, logs: Sequence[int], opts: ReadOptions,
                   skipped: LossCounter | None = None) -> list[LogExtent]:
    """The extent of each log: one ``log_summaries`` of all of them, then
    ``log_extent``'s per-log calls for the few it cannot settle (module docstring),
    many logs at a time (``fanout``)."""
    lock = threading.Lock()
    times = [t for t in (opts.from_time, opts.until_time) if t is not None]

    def one(log_id: int) -> LogExtent:
        mine = LossCounter()  # counted apart: the calls run in several threads
        ext = log_extent(client, log_id, opts, mine)
        if skipped is not None:
            with lock:
                skipped.add(mine)
        return ext

    summaries = client.log_summaries(logs, find_times=times, size_window=size_window(opts))
    found = [extent_of_summary(s, opts, skipped) for s in summaries]
    rest = [s.log_id for s, e in zip(summaries, found, strict=True) if e is None]
    if rest:
        by_log = dict(zip(rest, fan_out(one, rest), strict=True))
        found = [e if e is not None else by_log[s.log_id]
                 for s, e in zip(summaries, found, strict=True)]
    return cast(list[LogExtent], found)
