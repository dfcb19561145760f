"""Copysets as runs: how a storage node ships the copysets of the records it holds.

Consecutive records (in LSN order) usually share a copyset: a sticky-copyset block, or a
batch written with one copyset.  So a node sends one entry per *run* of records with the
same copyset, and each distinct copyset once:

- ``run_lengths[i]``: how many of the node's stored LSNs run ``i`` covers;
- ``run_copysets[i]``: the row of ``copysets`` (the distinct copysets, node indices
  padded with -1) that every record of run ``i`` has.

Both directions are one pass over the rows: a kernel (``ldcore.runs``) one way, numpy
``repeat`` the other, never a Python loop over records.
"""

from __future__ import annotations

import numpy as np

from ldcore.runs import copyset_runs

__all__ = ["to_runs", "check_runs", "expand_runs"]



def to_runs(copysets: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Runs of equal rows of ``copysets`` (one row per stored LSN, int16, -1 padded).

    Returns
    -------
    run_lengths : uint32 array
    run_copysets : uint32 array
        Index of each run's copyset in ``distinct``.
    distinct : int16 2-D array
        The distinct copysets, in order of first appearance.
    """
    cs = np.asarray(copysets, dtype=np.int16)
    if cs.ndim != 2:
        raise ValueError(f"copysets must be a 2-D array, got shape {cs.shape}")
    return copyset_runs(cs)


def check_runs(run_lengths: np.ndarray, run_copysets: np.ndarray, n_table: int,
               n_records: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The runs as int64 arrays, after checking they fit a table of ``n_table`` copysets
    (and cover ``n_records`` records, when given); ``ValueError`` if not."""
    lengths = np.asarray(run_lengths, dtype=np.int64)
    index = np.asarray(run_copysets, dtype=np.int64)
    if len(lengths) != len(index):
        raise ValueError(f"{len(lengths)} run lengths but {len(index)} run copysets")
    if len(index) and not 0 <= int(index.min()) <= int(index.max()) < n_table:
        raise ValueError("a run names a copyset that is not in the table")
    if len(lengths) and int(lengths.min()) < 0:
        raise ValueError("a run has a negative length")
    if n_records is not None and int(lengths.sum()) != n_records:
        raise ValueError(f"runs cover {int(lengths.sum())} records, not {n_records}")
    return lengths, index


def expand_runs(run_lengths: np.ndarray, run_copysets: np.ndarray,
                distinct: np.ndarray) -> np.ndarray:
    """One copyset row per stored LSN again (the inverse of ``to_runs``)."""
    table = np.asarray(distinct, dtype=np.int16)
    lengths, index = check_runs(run_lengths, run_copysets, len(table))
    if not len(index):
        return np.empty((0, table.shape[1] if table.ndim == 2 else 0), np.int16)
    return table[np.repeat(index, lengths)]
