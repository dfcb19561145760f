"""LogsDB's read path: range reads, copyset index (CSI) reads, reads of chosen LSNs, and
find-time.  Each returns columnar batches (:mod:`.batch`).

A log's LSNs usually sit in partitions with disjoint LSN ranges, read one after another.
Where ranges overlap (records written with old timestamps), the overlapping partitions are
read together and merged by LSN; a partition cut short by a limit caps what the merge may
return (its ``horizon``), so nothing is skipped.

Records come back with their amendments applied (flags and copyset of the copy as
rebuilding last amended it; ``keys``): each partition read is followed by a read of the
amendment entries over the same LSNs, which finds nothing at all in the usual case.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import numpy as np

from ldcore.lsn import LSN_MAX
from logdevice.errors import E, error_for
from logdevice.storage import keys as K
from logdevice.storage.batch import CsiBatch, RecordBatch
from logdevice.storage.flags import FLAG_WRITTEN_BY_RECOVERY
from logdevice.storage.rocksdb import Chunk

if TYPE_CHECKING:
    from logdevice.storage.partitioned import PartitionedDB



class ReadSource(Protocol):
    """What the read path uses of its store (``logsdb.LogsDB`` is one)."""

    parts: PartitionedDB

    def trim_point(self, log_id: int) -> int: ...

    def tail(self, log_id: int) -> int: ...


def _upper(prefix: bytes, log_id: int, hi: int, kind: bytes = b"") -> bytes:
    """Exclusive iterator bound just past LSN ``hi`` of ``log_id``."""
    if hi >= LSN_MAX:
        return K.log_prefix(prefix, log_id) + b"\xff" * 10
    return K.log_prefix(prefix, log_id) + K.u64be(hi + 1) + kind


def _records(log_id: int, ch: Chunk, payloads: bool = True) -> RecordBatch:
    """The chunk's records; a header-only chunk (``skip_body``) gives empty payloads."""
    n = len(ch)
    ts, fl, wv, crc, cs = K.decode_heads(ch.heads, ch.head_offsets)
    offsets = ch.body_offsets if payloads else np.zeros(n + 1, np.uint64)
    return RecordBatch(
        log_id, K.lsns_of_keys(ch.keys, n, K.DATA_KEY_LEN), ts, fl, wv, cs, crc, ch.bodies,
        offsets, 0,
    )


def _amendments(partitions: PartitionedDB, pid: int, log_id: int, rb: RecordBatch, *,
                sparse: bool):
    """The amendment entries of partition ``pid`` over the LSNs of ``rb`` (lsns, flags,
    waves, copysets); ``sparse``: look up exactly those LSNs (a merge join) rather than
    scan the range they span."""
    lo, hi = int(rb.lsns[0]), int(rb.lsns[-1])
    lower = K.amend_key(log_id, lo)
    with partitions.db.iterator(partitions.cf(pid), lower,
                                 _upper(K.AMEND, log_id, hi)) as it:
        if sparse:
            ch = it.read_keys(K.amend_keys(log_id, rb.lsns),
                              K.fixed_offsets(len(rb), K.DATA_KEY_LEN))
            return K.decode_amends(ch.keys, ch.bodies, ch.body_offsets)
        # At most one amendment per record held, so len(rb) of them unless some are
        # left over from a record no longer held (then read on).
        it.seek(lower)
        chunks = [it.read_many(len(rb) + 1)]
        while chunks[-1].stop != "end":
            chunks.append(it.read_many(4096))
    parts = [K.decode_amends(c.keys, c.bodies, c.body_offsets) for c in chunks]
    if len(parts) == 1:
        return parts[0]
    width = max(p[3].shape[1] for p in parts)
    return (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]),
            np.concatenate([p[2] for p in parts]),
            np.concatenate([_pad(p[3], width) for p in parts]))


def amendable(rb: RecordBatch, at: np.ndarray, flags: np.ndarray, waves: np.ndarray
              ) -> np.ndarray:
    """Bool per amendment: is record ``rb[at[i]]`` the copy it names (same wave, and
    written by recovery or not alike)?"""
    rec = np.uint32(FLAG_WRITTEN_BY_RECOVERY)
    return (rb.waves[at] == waves) & (((rb.flags[at] ^ flags) & rec) == 0)


def _amend(partitions: PartitionedDB, pid: int, log_id: int, rb: RecordBatch, *,
           sparse: bool = False) -> RecordBatch:
    """``rb`` (records of partition ``pid``) with the amendments that apply to them."""
    if not len(rb) or pid not in partitions.amended:
        return rb
    lsns, flags, waves, cs = _amendments(partitions, pid, log_id, rb, sparse=sparse)
    if not len(lsns):
        return rb
    at = np.minimum(np.searchsorted(rb.lsns, lsns), len(rb) - 1)
    ok = (rb.lsns[at] == lsns)
    ok[ok] = amendable(rb, at[ok], flags[ok], waves[ok])
    if not ok.any():
        return rb
    at = at[ok]
    width = max(rb.copysets.shape[1], cs.shape[1])
    new_flags = rb.flags.copy()
    new_flags[at] = flags[ok]
    new_cs = _pad(rb.copysets, width).copy()
    new_cs[at] = _pad(cs[ok], width)
    return rb.replace(flags=new_flags, copysets=new_cs)


def _merge(log_id: int, parts: list[RecordBatch]) -> RecordBatch:
    """Records of several partitions in LSN order (an LSN found twice: the first kept)."""
    rb = RecordBatch.concat_reads(log_id, parts, 0)
    if len(rb) > 1 and bool(np.any(rb.lsns[1:] <= rb.lsns[:-1])):
        order = np.argsort(rb.lsns, kind="stable")
        keep = np.ones(len(order), bool)
        keep[1:] = rb.lsns[order][1:] != rb.lsns[order][:-1]
        rb = rb.take(order[keep])
    return rb


def _cut(rb: RecordBatch, max_n: int, max_bytes: int) -> RecordBatch:
    """The longest prefix within the limits (at least one record), like the C reader."""
    n = min(len(rb), max_n)
    if n == len(rb) and (not max_bytes or rb.nbytes < max_bytes):
        return rb  # (the common small read: no numpy pass to find the cut)
    if max_bytes and n:
        sizes = (rb.offsets[1 : n + 1] - rb.offsets[:n]).astype(np.int64)
        before = np.cumsum(sizes) - sizes  # bytes taken before each record
        n = max(1, int(np.searchsorted(before, max_bytes, side="left")))
    return rb if n == len(rb) else rb.take(slice(0, n))


def read_records(store: ReadSource, log_id: int, lo: int, hi: int, max_records: int,
                 max_bytes: int, payloads: bool = True) -> RecordBatch:
    lo = max(lo, store.trim_point(log_id) + 1)
    if not payloads:
        max_bytes = 0  # no payload bytes are taken, so none can run out
    if lo > hi:
        return RecordBatch.empty(log_id, lo)
    parts: list[RecordBatch] = []
    n_left, b_left = max_records, max_bytes
    for group in store.parts.directory.groups(log_id, lo, hi):
        if n_left <= 0 or (max_bytes and b_left <= 0):
            return RecordBatch.concat_reads(log_id, parts, int(parts[-1].lsns[-1]) + 1)
        got, horizon = [], hi
        for pid, _ in group:
            ch = store.parts.db.read_range(
                store.parts.cf(pid), K.data_key(log_id, lo), _upper(K.DATA, log_id, hi),
                n_left, b_left if max_bytes else 0, split_head=True, skip_body=not payloads)
            rb = _amend(store.parts, pid, log_id, _records(log_id, ch, payloads))
            if ch.stop != "end":
                horizon = min(horizon, int(rb.lsns[-1]))
            got.append(rb)
        rb = got[0] if len(got) == 1 else _merge(log_id, got)
        if horizon < hi and len(got) > 1:
            rb = rb.take(slice(0, int(np.searchsorted(rb.lsns, np.uint64(horizon), "right"))))
        full = len(rb)
        rb = _cut(rb, n_left, b_left if max_bytes else 0)
        if len(rb):
            parts.append(rb)
        if len(rb) < full or horizon < hi:
            nxt = int(rb.lsns[-1]) + 1 if len(rb) else horizon + 1
            return RecordBatch.concat_reads(log_id, parts, nxt)
        n_left -= len(rb)
        b_left -= rb.nbytes
    return RecordBatch.concat_reads(log_id, parts, hi + 1)


def checked_lsns(lsns) -> np.ndarray:
    """``lsns`` as uint64, INVALID_PARAM unless strictly increasing and 1-D."""
    want = np.ascontiguousarray(lsns, dtype=np.uint64)
    if want.ndim != 1 or (len(want) > 1 and bool(np.any(want[1:] <= want[:-1]))):
        raise error_for(E.INVALID_PARAM, "logsdb: lsns must be a strictly increasing 1-D array")
    return want


def records_by_partition(partitions: PartitionedDB, log_id: int, want: np.ndarray, payloads: bool
                         ) -> list[list[tuple[int, RecordBatch]]]:
    """The records at LSNs ``want`` (checked, above the trim point) as written, without
    amendments: per group of overlapping partitions, (pid, records found there)."""
    out = []
    for group in partitions.directory.groups(log_id, int(want[0]), int(want[-1])):
        got = []
        for pid, u in group:
            a = int(np.searchsorted(want, np.uint64(u.min_lsn), "left"))
            b = int(np.searchsorted(want, np.uint64(u.max_lsn), "right"))
            sel = want[a:b]
            if not len(sel):
                continue
            lower = K.data_key(log_id, int(sel[0]))
            upper = _upper(K.DATA, log_id, int(sel[-1]))
            with partitions.db.iterator(partitions.cf(pid), lower, upper) as it:
                ch = it.read_keys(K.data_keys(log_id, sel),
                                  K.fixed_offsets(len(sel), K.DATA_KEY_LEN), split_head=True,
                                  skip_body=not payloads)
            got.append((pid, _records(log_id, ch, payloads)))
        if got:
            out.append(got)
    return out


def read_records_at(store: ReadSource, log_id: int, lsns, payloads: bool = True) -> RecordBatch:
    want = checked_lsns(lsns)
    if not len(want):
        return RecordBatch.empty(log_id, 0)
    nxt = int(want[-1]) + 1
    want = want[want > np.uint64(store.trim_point(log_id))]
    if not len(want):
        return RecordBatch.empty(log_id, nxt)
    parts = []
    for group in records_by_partition(store.parts, log_id, want, payloads):
        got = [_amend(store.parts, pid, log_id, rb, sparse=True) for pid, rb in group]
        parts.append(got[0] if len(got) == 1 else _merge(log_id, got))
    return RecordBatch.concat_reads(log_id, parts, nxt)


def _csi_partition(partitions: PartitionedDB, pid: int, log_id: int, lo: int, hi: int,
                   budget: int):
    """One row per LSN of ``[lo, hi]`` in one partition's CSI (lsns, priority, flags,
    copysets; single entries have priority 0, range entries 1), and the LSN through which
    the partition was read completely."""
    cf = partitions.cf(pid)
    ch = partitions.db.read_range(cf, K.csi_key(log_id, lo, K.CSI_SINGLE),
                                  _upper(K.CSI, log_id, hi, b"\x00"), budget)
    lsns, flags, cs = K.decode_csi(ch.keys, ch.bodies, ch.body_offsets)
    done = hi if ch.stop == "end" else int(lsns[-1])
    rows = [(lsns, np.zeros(len(lsns), np.uint8), flags, cs)]
    # Range entries never overlap each other: at most one starts before lo and covers it.
    lower = K.log_prefix(K.CSI_RANGE, log_id)
    with partitions.db.iterator(cf, lower, _upper(K.CSI_RANGE, log_id, hi, b"\x00")) as it:
        entries = []
        it.seek_for_prev(K.csi_range_key(log_id, lo - 1, 255))
        if it.valid() and K.range_last(value := it.value()) >= lo:
            entries.append((it.key(), value))
        it.seek(K.csi_range_key(log_id, lo, 0))
        covered = 0
        while covered < budget and it.valid():
            key, value = it.key(), it.value()
            entries.append((key, value))
            covered += K.range_count(K.read_be(key, 9), key[17], value)
            it.next()
        if it.valid():  # stopped for the budget: later range entries start past this one
            done = min(done, K.range_last(entries[-1][1]))
        else:
            it.check()
    if entries:
        r_lsns, r_flags, r_cs = K.decode_ranges(
            [(K.read_be(key, 9), key[17], value) for key, value in entries])
        # In LSN order: what lies outside [lo, done] is at the two ends.
        a = int(np.searchsorted(r_lsns, np.uint64(lo), "left"))
        b = int(np.searchsorted(r_lsns, np.uint64(done), "right"))
        if a or b < len(r_lsns):
            r_lsns, r_flags, r_cs = r_lsns[a:b], r_flags[a:b], r_cs[a:b]
        rows.append((r_lsns, np.ones(len(r_lsns), np.uint8), r_flags, r_cs))
    return rows, done


def _pad(cs: np.ndarray, width: int) -> np.ndarray:
    if cs.shape[1] == width:
        return cs
    return np.pad(cs, ((0, 0), (0, width - cs.shape[1])), constant_values=-1)


def merge_rows(rows: list[tuple], horizon: int):
    """Rows in LSN order up to ``horizon``, one per LSN (single entries win)."""
    rows = [r for r in rows if len(r[0])] or rows[:1]
    width = max(r[3].shape[1] for r in rows)
    if len(rows) == 1:
        lsns, prio, flags, cs = rows[0]
        cs = _pad(cs, width)
    else:
        lsns = np.concatenate([r[0] for r in rows])
        prio = np.concatenate([r[1] for r in rows])
        flags = np.concatenate([r[2] for r in rows])
        cs = np.concatenate([_pad(r[3], width) for r in rows])
    # The usual case needs no sort: one source read in key order, or range entries (which
    # never overlap) one after another.  Checking is far cheaper than a lexsort.
    if len(lsns) < 2 or bool(np.all(lsns[1:] > lsns[:-1])):
        n = int(np.searchsorted(lsns, np.uint64(horizon), "right"))
        return lsns[:n], flags[:n], cs[:n]
    keep = lsns <= np.uint64(horizon)
    order = np.lexsort((prio[keep], lsns[keep]))
    lsns, flags, cs = lsns[keep][order], flags[keep][order], cs[keep][order]
    if len(lsns) > 1:
        uniq = np.ones(len(lsns), bool)
        uniq[1:] = lsns[1:] != lsns[:-1]
        if not bool(uniq.all()):
            lsns, flags, cs = lsns[uniq], flags[uniq], cs[uniq]
    return lsns, flags, cs


def read_csi(store: ReadSource, log_id: int, lo: int, hi: int, max_entries: int) -> CsiBatch:
    lo = max(lo, store.trim_point(log_id) + 1)
    out: list[tuple] = []
    left = max_entries
    nxt = max(lo, hi + 1)
    for group in store.parts.directory.groups(log_id, lo, hi) if lo <= hi else []:
        if left <= 0:
            nxt = int(out[-1][0][-1]) + 1
            break
        rows, horizon = [], hi
        for pid, _ in group:
            part_rows, done = _csi_partition(store.parts, pid, log_id, lo, hi, left)
            rows += part_rows
            horizon = min(horizon, done)
        lsns, flags, cs = merge_rows(rows, horizon)
        full = len(lsns)
        if full > left:
            lsns, flags, cs = lsns[:left], flags[:left], cs[:left]
        if len(lsns):
            out.append((lsns, flags, cs))
            left -= len(lsns)
        if full > len(lsns) or horizon < hi:
            nxt = int(lsns[-1]) + 1 if full > len(lsns) else horizon + 1
            break
    if not out:
        return CsiBatch(log_id, np.empty(0, np.uint64), np.empty(0, np.uint32),
                        np.empty((0, 0), np.int16), nxt)
    width = max(o[2].shape[1] for o in out)
    return CsiBatch(
        log_id,
        np.concatenate([o[0] for o in out]),
        np.concatenate([o[1] for o in out]),
        np.concatenate([_pad(o[2], width) for o in out]),
        nxt,
    )


def find_time(store: ReadSource, log_id: int, ms: int) -> int:
    trim = store.trim_point(log_id)
    for pid, u in store.parts.directory.ranges(log_id, trim + 1, LSN_MAX):
        if u.max_ts < ms:
            continue
        if u.min_ts >= ms and u.min_lsn > trim:
            return u.min_lsn
        lower, upper = K.data_key(log_id, max(trim + 1, u.min_lsn)), _upper(K.DATA, log_id, LSN_MAX)
        with store.parts.db.iterator(store.parts.cf(pid), lower, upper) as it:
            it.seek(lower)
            while True:
                ch = it.read_many(4096, split_head=True, skip_body=True)
                if not len(ch):
                    break
                ts = K.decode_heads(ch.heads, ch.head_offsets)[0]
                hit = np.flatnonzero(ts >= ms)
                if len(hit):
                    return int(K.lsns_of_keys(ch.keys, len(ch), K.DATA_KEY_LEN)[hit[0]])
                if ch.stop == "end":
                    break
    return max(store.tail(log_id), trim) + 1
