"""Removing records from a stopped node's LogsDB behind the cluster's back.

``drop_records`` deletes records of one log (their data and their copyset index entries,
single or inside a block / run entry) the way a failing disk loses them: nothing else is
told, and the partition directory's counters are left as they were.  Tests use it to
build a node that silently lost data (what the checker must find); operators can use it
to remove records they know are corrupt before a check or a rebuild.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from logdevice.storage import keys as K
from logdevice.storage.rocksdb import WriteBatch

if TYPE_CHECKING:
    from logdevice.storage.logsdb import LogsDB

__all__ = ["drop_records"]


def _range_entries(store: LogsDB, cf, log_id: int, lo: int, hi: int) -> list[tuple[bytes,
                                                                                  bytes]]:
    """(key, value) of the block / run CSI entries of ``log_id`` that meet ``[lo, hi]``."""
    out = []
    lower = K.log_prefix(K.CSI_RANGE, log_id)
    upper = K.log_prefix(K.CSI_RANGE, log_id + 1) if log_id + 1 < 2**64 else None
    with store._db.iterator(cf, lower, upper) as it:
        it.seek_for_prev(K.csi_range_key(log_id, lo, 255))
        if not it.valid():
            it.seek(lower)
        while it.valid():
            key, value = it.key(), it.value()
            first = K.read_be(key, 9)
            if first > hi:
                break
            if K.range_last(value) >= lo:
                out.append((key, value))
            it.next()
    return out


def drop_records(store: LogsDB, log_id: int, lsns) -> int:
    """Delete the records of ``log_id`` at ``lsns`` (data and copyset index) in one
    atomic write; returns how many of them the store had.

    Range entries of the copyset index that cover a dropped LSN are rewritten without
    it (as a run entry of what remains).
    """
    want = np.unique(np.asarray(lsns, dtype=np.uint64))
    if not len(want):
        return 0
    present = 0
    batch = WriteBatch()
    store._check_open()
    with store._gate, store._lock:
        for pid, u in store._dir.ranges(log_id, int(want[0]), int(want[-1])):
            sel = want[(want >= np.uint64(u.min_lsn)) & (want <= np.uint64(u.max_lsn))]
            if not len(sel):
                continue
            cf = store._cf(pid)
            found = store.read_records_at(log_id, sel, payloads=False).lsns
            present += len(found)
            batch.delete_many(K.data_keys(log_id, sel), K.fixed_offsets(len(sel),
                                                                       K.DATA_KEY_LEN), cf)
            batch.delete_many(K.csi_keys(log_id, sel, K.CSI_SINGLE),
                              K.fixed_offsets(len(sel), K.CSI_KEY_LEN), cf)
            for key, value in _range_entries(store, cf, log_id, int(sel[0]), int(sel[-1])):
                r_lsns, r_flags, r_cs = K.decode_range(K.read_be(key, 9), key[17], value)
                keep = ~np.isin(r_lsns, sel)
                if bool(keep.all()):
                    continue
                batch.delete(key, cf)
                if bool(keep.any()):
                    cs, counts = K.normalize_copysets(r_cs[keep], int(keep.sum()))
                    rest = r_lsns[keep]
                    batch.put(K.csi_range_key(log_id, int(rest[0]), K.CSI_RUN),
                              K.encode_run(rest, r_flags[keep], cs, counts), cf)
        if batch.count():
            store._db.write(batch, sync=True)
    return present
