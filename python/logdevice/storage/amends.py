"""Amending copies a node already holds: new flags and copyset, the payload untouched.

Rebuilding changes the copyset of every surviving copy of a record it re-replicates (and
flags a drained node's moved copies DRAINED).  Writing those copies again would cost as
much as the copy itself, payload and all; an amendment entry (format: :mod:`.keys`) says
only what changes.  Per record the amendment goes, with a single copyset-index entry
carrying the same flags and copyset, into the partition holding the record, in one write
batch, and only if the copy held is the one the caller names (same wave, written by
recovery or not alike): a copy written since by recovery or a later wave keeps its own
copyset.  Holding the write lock from that check to the write means no other write can
slip in between.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from logdevice.storage import keys as K
from logdevice.storage import reads
from logdevice.storage.rocksdb_batch import WriteBatch

if TYPE_CHECKING:
    from logdevice.storage.partitioned import PartitionedDB


def amend_records(partitions: PartitionedDB, log_id: int, lsns: np.ndarray, flags: np.ndarray,
                  waves: np.ndarray, copysets: np.ndarray, *, sync: bool) -> np.ndarray:
    """Amend the copies of ``lsns`` (checked, strictly increasing, above the trim point)
    to ``flags`` and ``copysets`` where the copy held has wave ``waves[i]`` and the same
    recovery flag as ``flags[i]``.  Bool per LSN: amended?  The caller holds the store's
    write lock."""
    amended = np.zeros(len(lsns), bool)
    if not len(lsns):
        return amended
    batch = WriteBatch()
    try:
        for group in reads.records_by_partition(partitions, log_id, lsns, payloads=False):
            for pid, held in group:
                if not len(held):
                    continue
                at = np.searchsorted(lsns, held.lsns)
                ok = reads.amendable(held, np.arange(len(held)), flags[at], waves[at])
                at = at[ok]
                if not len(at):
                    continue
                cf = partitions.cf(pid)
                partitions.amended.add(pid)  # before the write: readers must look there
                cs, counts = K.normalize_copysets(copysets[at], len(at))
                values, offsets = K.encode_amends(flags[at], waves[at], cs, counts)
                batch.put_many(K.amend_keys(log_id, lsns[at]),
                               K.fixed_offsets(len(at), K.DATA_KEY_LEN), values, offsets, cf)
                values, offsets = K.encode_csi_values(flags[at], cs, counts)
                batch.put_many(K.csi_keys(log_id, lsns[at], K.CSI_SINGLE),
                               K.fixed_offsets(len(at), K.CSI_KEY_LEN), values, offsets, cf)
                amended[at] = True
        if batch.count():
            partitions.db.write(batch, sync=sync)
    finally:
        batch.close()
    return amended
