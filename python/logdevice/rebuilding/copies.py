"""What a node does with the rebuilt copies and amendments a donor sends it.

A full copy (REBUILD_STORE) is written unless the node holds a newer one of that record
(``plan.newer_or_equal``: a later wave, or written by recovery).  An amendment
(REBUILD_AMEND) changes the flags and copyset of the copy held, payload untouched, when
that copy is the very version the donor holds; a newer copy is left as it is, and the
records not held or held in an older version are answered with "send the full copy".
Amendments go in slices of ``AMEND_SLICE`` records, each a write of its own: LogsDB holds
its write lock while it checks and writes a slice, and STOREs must not wait long for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from logdevice.rebuilding.plan import newer_or_equal

if TYPE_CHECKING:
    from logdevice.storage.batch import RecordBatch
    from logdevice.storage.logsdb import LogsDB

__all__ = ["write_copies", "amend_copies", "amend_held", "AMEND_SLICE"]

#: Records per LogsDB amendment write.
AMEND_SLICE = 1024


def write_copies(db: LogsDB, rb: RecordBatch, *, sync: bool = False) -> int:
    """Write the copies of ``rb`` except where ``db`` holds a newer one; how many were
    written."""
    held = db.read_records_at(rb.log_id, rb.lsns, payloads=False)
    if len(held):
        at = np.searchsorted(rb.lsns, held.lsns)
        keep = np.ones(len(rb), bool)
        keep[at] = newer_or_equal(rb.flags[at], rb.waves[at], held.flags, held.waves)
        if not keep.all():
            rb = rb.take(np.flatnonzero(keep))
    if len(rb):
        db.write_records(rb.log_id, rb.lsns, rb.timestamps, rb.flags, rb.copysets,
                         rb.payloads, rb.offsets, rb.waves, sync=sync)
    return len(rb)


def amend_copies(db: LogsDB, log_id: int, lsns: np.ndarray, flags: np.ndarray,
                 waves: np.ndarray, copysets: np.ndarray, *, sync: bool = False
                 ) -> np.ndarray:
    """``LogsDB.amend_records`` a slice at a time; bool per LSN: amended?"""
    out = np.zeros(len(lsns), bool)
    for a in range(0, len(lsns), AMEND_SLICE):
        b = a + AMEND_SLICE
        out[a:b] = db.amend_records(log_id, lsns[a:b], flags[a:b], waves[a:b],
                                    copysets[a:b], sync=sync)
    return out


def amend_held(db: LogsDB, log_id: int, lsns: np.ndarray, flags: np.ndarray,
               waves: np.ndarray, copysets: np.ndarray, *, sync: bool = False
               ) -> np.ndarray:
    """Amend the copies held of exactly the donor's version (``flags``' recovery bit and
    ``waves``); the LSNs that need a full copy instead: not held, or held older."""
    amended = amend_copies(db, log_id, lsns, flags, waves, copysets, sync=sync)
    if amended.all():
        return np.empty(0, np.uint64)
    rest = np.flatnonzero(~amended)
    held = db.read_records_at(log_id, lsns[rest], payloads=False)
    need = np.ones(len(rest), bool)
    if len(held):
        at = np.searchsorted(lsns[rest], held.lsns)
        need[at] = newer_or_equal(flags[rest[at]], waves[rest[at]], held.flags, held.waves)
    return np.ascontiguousarray(lsns[rest[need]], np.uint64)
