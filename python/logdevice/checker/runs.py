"""Copysets as runs: how a storage node ships the copysets of the records it holds.

Consecutive records (in LSN order) usually share a copyset: a sticky-copyset block, or a
batch written with one copyset.  So a node sends one entry per *run* of records with the
same copyset, and each distinct copyset once:

- ``run_lengths[i]``: how many of the node's stored LSNs run ``i`` covers;
- ``run_copysets[i]``: the row of ``copysets`` (the distinct copysets, node indices
  padded with -1) that every record of run ``i`` has.

Both directions are whole-array numpy operations, never a loop over records.
"""

from __future__ import annotations

import numpy as np

__all__ = ["to_runs", "expand_runs", "row_keys", "EMPTY_COPYSETS"]

EMPTY_COPYSETS = np.empty((0, 0), np.int16)


def to_runs(copysets: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Runs of equal rows of ``copysets`` (one row per stored LSN, int16, -1 padded).

    Returns
    -------
    run_lengths : uint32 array
    run_copysets : uint32 array
        Index of each run's copyset in ``distinct``.
    distinct : int16 2-D array
        The distinct copysets (in ``row_keys`` order).
    """
    cs = np.asarray(copysets, dtype=np.int16)
    n = len(cs)
    if n == 0:
        return np.empty(0, np.uint32), np.empty(0, np.uint32), EMPTY_COPYSETS
    if cs.ndim != 2:
        raise ValueError(f"copysets must be a 2-D array, got shape {cs.shape}")
    change = np.ones(n, bool)
    if n > 1:
        change[1:] = np.any(cs[1:] != cs[:-1], axis=1)
    starts = np.flatnonzero(change)
    lengths = np.diff(np.append(starts, n)).astype(np.uint32)
    heads = cs[starts]
    _, first, inverse = np.unique(row_keys(heads), return_index=True, return_inverse=True)
    return lengths, inverse.reshape(-1).astype(np.uint32), heads[first].astype(np.int16)


def row_keys(cs: np.ndarray) -> np.ndarray:
    """One int64 per copyset row, equal iff the rows are equal (16 bits per entry when the
    rows have at most 4 entries: no sort of rows needed)."""
    if cs.shape[1] == 0:
        return np.zeros(len(cs), np.int64)
    if cs.shape[1] <= 4:
        shifted = (cs.astype(np.int64) + 1) << (16 * np.arange(cs.shape[1], dtype=np.int64))
        return shifted.sum(axis=1)
    _, inverse = np.unique(cs, axis=0, return_inverse=True)
    return inverse.reshape(-1).astype(np.int64)


def expand_runs(run_lengths: np.ndarray, run_copysets: np.ndarray,
                distinct: np.ndarray) -> np.ndarray:
    """One copyset row per stored LSN again (the inverse of ``to_runs``)."""
    lengths = np.asarray(run_lengths, dtype=np.int64)
    index = np.asarray(run_copysets, dtype=np.int64)
    if len(lengths) != len(index):
        raise ValueError(f"{len(lengths)} run lengths but {len(index)} run copysets")
    if not len(lengths):
        return np.empty((0, distinct.shape[1] if distinct.ndim == 2 else 0), np.int16)
    if int(index.max()) >= len(distinct) or int(index.min()) < 0:
        raise ValueError("a run names a copyset that is not in the table")
    return np.asarray(distinct, dtype=np.int16)[np.repeat(index, lengths)]

