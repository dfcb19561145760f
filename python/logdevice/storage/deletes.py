"""Deleting single records of a log (purging copies that epoch recovery overruled).

A record lives in one partition: its data key, perhaps an amendment, and either its own
copyset-index entry or a place in a range entry (a block or run of LSNs written together).
Deleting it removes the data key, the amendment and the single entry, and rewrites every
range entry that lists it as a run entry without it (keyed by its first remaining LSN:
range entries never overlap, and a subset of one cannot overlap another).  Partition
usage figures are left as they were: they are upper bounds already (a record written
twice is counted twice).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from logdevice.storage import keys as K
from logdevice.storage.rocksdb_batch import WriteBatch

if TYPE_CHECKING:
    from logdevice.storage.partitioned import PartitionedDB


def _range_entries(partitions: PartitionedDB, pid: int, log_id: int, lo: int, hi: int):
    """(key, value) of the range entries of ``log_id`` in partition ``pid`` that may
    cover an LSN of ``[lo, hi]``."""
    cf = partitions.cf(pid)
    lower = K.log_prefix(K.CSI_RANGE, log_id)
    upper = K.csi_range_key(log_id, hi, 255)
    out = []
    with partitions.db.iterator(cf, lower, upper + b"\x00") as it:
        it.seek_for_prev(K.csi_range_key(log_id, lo - 1, 255))
        if it.valid() and K.range_last(it.value()) >= lo:
            out.append((it.key(), it.value()))
        it.seek(K.csi_range_key(log_id, lo, 0))
        while it.valid():
            out.append((it.key(), it.value()))
            it.next()
        it.check()
    return out


def delete_records(partitions: PartitionedDB, log_id: int, lsns: np.ndarray, *,
                   sync: bool) -> int:
    """Delete the records ``lsns`` (sorted) of ``log_id``; how many range entries were
    rewritten.  LSNs the store does not hold are ignored."""
    if not len(lsns):
        return 0
    lo, hi = int(lsns[0]), int(lsns[-1])
    batch = WriteBatch()
    rewritten = 0
    for pid, _usage in partitions.directory.ranges(log_id, lo, hi):
        cf = partitions.cf(pid)
        for lsn in lsns.tolist():
            batch.delete(K.data_key(log_id, lsn), cf)
            batch.delete(K.csi_key(log_id, lsn, K.CSI_SINGLE), cf)
            batch.delete(K.amend_key(log_id, lsn), cf)
        for key, value in _range_entries(partitions, pid, log_id, lo, hi):
            first, kind = K.read_be(key, 9), key[17]
            r_lsns, r_flags, r_cs = K.decode_range(first, kind, value)
            keep = ~np.isin(r_lsns, lsns)
            if bool(keep.all()):
                continue
            rewritten += 1
            batch.delete(key, cf)
            if keep.any():
                cs, counts = K.normalize_copysets(r_cs[keep], int(keep.sum()))
                kept = r_lsns[keep]
                batch.put(K.csi_range_key(log_id, int(kept[0]), K.CSI_RUN),
                          K.encode_run(kept, r_flags[keep], cs, counts), cf)
    partitions.db.write(batch, sync=sync)
    return rewritten
