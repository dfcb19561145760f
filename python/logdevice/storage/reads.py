"""LogsDB's read path: range reads, copyset index (CSI) reads, reads of chosen LSNs, and
find-time.  Each returns columnar batches (:mod:`.batch`).

A log's LSNs usually sit in partitions with disjoint LSN ranges, read one after another.
Where ranges overlap (records written with old timestamps), the overlapping partitions are
read together and merged by LSN; a partition cut short by a limit caps what the merge may
return (its ``horizon``), so nothing is skipped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from logdevice.storage import keys as K
from logdevice.storage.batch import CsiBatch, RecordBatch
from logdevice.storage.rocksdb import Chunk

if TYPE_CHECKING:
    from logdevice.storage.logsdb import LogsDB

LSN_MAX = 2**64 - 1


def _upper(prefix: bytes, log_id: int, hi: int, kind: bytes = b"") -> bytes:
    """Exclusive iterator bound just past LSN ``hi`` of ``log_id``."""
    if hi >= LSN_MAX:
        return K.log_prefix(prefix, log_id) + b"\xff" * 10
    return K.log_prefix(prefix, log_id) + K._U64BE.pack(hi + 1) + kind


def _records(log_id: int, ch: Chunk) -> RecordBatch:
    n = len(ch)
    ts, fl, wv, crc, cs = K.decode_heads(ch.heads, ch.head_offsets)
    return RecordBatch(
        log_id, K.lsns_of_keys(ch.keys, n, K.DATA_KEY_LEN), ts, fl, wv, cs, crc, ch.bodies,
        ch.body_offsets, 0,
    )


def _merge(log_id: int, parts: list[RecordBatch]) -> RecordBatch:
    """Records of several partitions in LSN order (an LSN found twice: the first kept)."""
    rb = RecordBatch.concat(log_id, parts, 0)
    if len(rb) > 1 and bool(np.any(rb.lsns[1:] <= rb.lsns[:-1])):
        order = np.argsort(rb.lsns, kind="stable")
        keep = np.ones(len(order), bool)
        keep[1:] = rb.lsns[order][1:] != rb.lsns[order][:-1]
        rb = rb.take(order[keep])
    return rb


def _cut(rb: RecordBatch, max_n: int, max_bytes: int) -> RecordBatch:
    """The longest prefix within the limits (at least one record), like the C reader."""
    n = min(len(rb), max_n)
    if max_bytes and n:
        sizes = (rb.offsets[1 : n + 1] - rb.offsets[:n]).astype(np.int64)
        before = np.cumsum(sizes) - sizes  # bytes taken before each record
        n = max(1, int(np.searchsorted(before, max_bytes, side="left")))
    return rb if n == len(rb) else rb.take(slice(0, n))


def read_records(store: LogsDB, log_id: int, lo: int, hi: int, max_records: int,
                 max_bytes: int) -> RecordBatch:
    lo = max(lo, store.trim_point(log_id) + 1)
    if lo > hi:
        return RecordBatch.empty(log_id, lo)
    parts: list[RecordBatch] = []
    n_left, b_left = max_records, max_bytes
    for group in store._dir.groups(log_id, lo, hi):
        if n_left <= 0 or (max_bytes and b_left <= 0):
            return RecordBatch.concat(log_id, parts, int(parts[-1].lsns[-1]) + 1)
        got, horizon = [], hi
        for pid, _ in group:
            lower, upper = K.data_key(log_id, lo), _upper(K.DATA, log_id, hi)
            with store._db.iterator(store._cf(pid), lower, upper) as it:
                it.seek(lower)
                ch = it.read_many(n_left, b_left if max_bytes else 0, split_head=True,
                                  key_hint=K.DATA_KEY_LEN)
            rb = _records(log_id, ch)
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
            return RecordBatch.concat(log_id, parts, nxt)
        n_left -= len(rb)
        b_left -= rb.nbytes
    return RecordBatch.concat(log_id, parts, hi + 1)


def read_records_at(store: LogsDB, log_id: int, lsns) -> RecordBatch:
    want = np.ascontiguousarray(lsns, dtype=np.uint64)
    if want.ndim != 1 or (len(want) > 1 and bool(np.any(want[1:] <= want[:-1]))):
        from logdevice.storage.writes import _invalid

        raise _invalid("lsns must be a strictly increasing 1-D array")
    if not len(want):
        return RecordBatch.empty(log_id, 0)
    nxt = int(want[-1]) + 1
    want = want[want > np.uint64(store.trim_point(log_id))]
    if not len(want):
        return RecordBatch.empty(log_id, nxt)
    parts = []
    for group in store._dir.groups(log_id, int(want[0]), int(want[-1])):
        got = []
        for pid, u in group:
            a = int(np.searchsorted(want, np.uint64(u.min_lsn), "left"))
            b = int(np.searchsorted(want, np.uint64(u.max_lsn), "right"))
            sel = want[a:b]
            if not len(sel):
                continue
            lower = K.data_key(log_id, int(sel[0]))
            upper = _upper(K.DATA, log_id, int(sel[-1]))
            with store._db.iterator(store._cf(pid), lower, upper) as it:
                ch = it.read_keys(K.data_keys(log_id, sel),
                                  K.fixed_offsets(len(sel), K.DATA_KEY_LEN), split_head=True)
            got.append(_records(log_id, ch))
        if got:
            parts.append(got[0] if len(got) == 1 else _merge(log_id, got))
    return RecordBatch.concat(log_id, parts, nxt)


def _csi_entries(store: LogsDB, pid: int, log_id: int, lo: int, hi: int, max_entries: int):
    """CSI entries of one partition that may cover ``[lo, hi]``, and the LSN through which
    the partition was read completely."""
    lower = K.log_prefix(K.CSI, log_id)
    upper = _upper(K.CSI, log_id, hi, b"\x00")
    with store._db.iterator(store._cf(pid), lower, upper) as it:
        pre_keys, pre_vals = b"", b""
        it.seek_for_prev(K.csi_key(log_id, lo - 1, 255))  # a block that starts before lo
        if it.valid():
            key = it.key()
            if key[17] == K.CSI_BLOCK:
                pre_keys, pre_vals = key, it.value()
        it.seek(K.csi_key(log_id, lo, 0))
        ch = it.read_many(max_entries, key_hint=K.CSI_KEY_LEN, body_hint=64 * max_entries)
    first, kinds, flags, cs, last = K.decode_csi(ch.keys, ch.bodies, ch.body_offsets)
    done = hi if ch.stop == "end" else int(first[-1])
    if pre_keys:
        p = K.decode_csi(np.frombuffer(pre_keys, np.uint8), np.frombuffer(pre_vals, np.uint8),
                         np.array([0, len(pre_vals)], np.uint64))
        width = max(cs.shape[1], p[3].shape[1])

        def pad(a):
            return np.pad(a, ((0, 0), (0, width - a.shape[1])), constant_values=-1)

        first, kinds, flags, last = (np.concatenate([x, y]) for x, y in
                                     zip(p[:3] + p[4:], (first, kinds, flags, last),
                                         strict=True))
        cs = np.concatenate([pad(p[3]), pad(cs)])
    return (first, kinds, flags, cs, last), done


def read_csi(store: LogsDB, log_id: int, lo: int, hi: int, max_entries: int) -> CsiBatch:
    lo = max(lo, store.trim_point(log_id) + 1)
    empty = (np.empty(0, np.uint64), np.empty(0, np.uint32), np.empty((0, 0), np.int16))
    if lo > hi:
        return CsiBatch(log_id, *empty, lo)
    out: list[tuple] = []
    left = max_entries
    for group in store._dir.groups(log_id, lo, hi):
        if left <= 0:
            break
        cols, horizon = [], hi
        for pid, _ in group:
            entries, done = _csi_entries(store, pid, log_id, lo, hi, left)
            horizon = min(horizon, done)
            cols.append(entries)
        lsns, kinds, flags, cs = _expand(cols, lo, min(hi, horizon), left)
        full = len(lsns)
        if full > left:
            lsns, flags, cs = lsns[:left], flags[:left], cs[:left]
        if len(lsns):
            out.append((lsns, flags, cs))
            left -= len(lsns)
        if full > len(lsns) or horizon < hi:
            nxt = int(lsns[-1]) + 1 if full > len(lsns) else horizon + 1
            return _csi_batch(log_id, out, nxt)
    if left <= 0 and out:
        return _csi_batch(log_id, out, int(out[-1][0][-1]) + 1)
    return _csi_batch(log_id, out, hi + 1)


def _expand(cols, lo: int, hi: int, budget: int):
    """One row per LSN in ``[lo, hi]`` from CSI entries; single entries beat blocks."""
    first = np.concatenate([c[0] for c in cols])
    kinds = np.concatenate([c[1] for c in cols])
    flags = np.concatenate([c[2] for c in cols])
    width = max(c[3].shape[1] for c in cols)
    cs = np.concatenate([np.pad(c[3], ((0, 0), (0, width - c[3].shape[1])), constant_values=-1)
                         for c in cols])
    last = np.concatenate([c[4] for c in cols])
    start = np.maximum(first, np.uint64(lo))
    # Nothing past the first `budget` LSNs of a block can be among the first `budget` rows.
    end = np.minimum(np.minimum(last, np.uint64(hi)), start + np.uint64(max(budget, 1) - 1))
    keep = end >= start
    start, end, kinds, flags, cs = start[keep], end[keep], kinds[keep], flags[keep], cs[keep]
    counts = (end - start + np.uint64(1)).astype(np.int64)
    total = int(counts.sum())
    rows = np.repeat(np.arange(len(counts)), counts)
    step = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    lsns = start[rows] + step.astype(np.uint64)
    order = np.lexsort((kinds[rows], lsns))
    lsns, rows = lsns[order], rows[order]
    if total > 1:
        uniq = np.ones(total, bool)
        uniq[1:] = lsns[1:] != lsns[:-1]
        lsns, rows = lsns[uniq], rows[uniq]
    return lsns, kinds[rows], flags[rows], cs[rows]


def _csi_batch(log_id: int, out: list[tuple], nxt: int) -> CsiBatch:
    if not out:
        return CsiBatch(log_id, np.empty(0, np.uint64), np.empty(0, np.uint32),
                        np.empty((0, 0), np.int16), nxt)
    width = max(o[2].shape[1] for o in out)
    return CsiBatch(
        log_id,
        np.concatenate([o[0] for o in out]),
        np.concatenate([o[1] for o in out]),
        np.concatenate([np.pad(o[2], ((0, 0), (0, width - o[2].shape[1])), constant_values=-1)
                        for o in out]),
        nxt,
    )


def find_time(store: LogsDB, log_id: int, ms: int) -> int:
    trim = store.trim_point(log_id)
    for pid, u in store._dir.ranges(log_id, trim + 1, LSN_MAX):
        if u.max_ts < ms:
            continue
        if u.min_ts >= ms and u.min_lsn > trim:
            return u.min_lsn
        lower, upper = K.data_key(log_id, max(trim + 1, u.min_lsn)), _upper(K.DATA, log_id, LSN_MAX)
        with store._db.iterator(store._cf(pid), lower, upper) as it:
            it.seek(lower)
            while True:
                ch = it.read_many(4096, split_head=True, skip_body=True, key_hint=K.DATA_KEY_LEN)
                if not len(ch):
                    break
                ts = K.decode_heads(ch.heads, ch.head_offsets)[0]
                hit = np.flatnonzero(ts >= ms)
                if len(hit):
                    return int(K.lsns_of_keys(ch.keys, len(ch), K.DATA_KEY_LEN)[hit[0]])
                if ch.stop == "end":
                    break
    return max(store.tail(log_id), trim) + 1
