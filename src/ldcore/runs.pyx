# Copysets as runs: one entry per run of consecutive equal rows, each distinct row once.
#
# A storage node describes the copysets of the records it holds to the cluster checker
# this way (sticky copysets make long runs; per-record copysets make short ones, but the
# distinct rows stay few).  ``copyset_runs`` does it in one nogil pass: a run ends where a
# row differs from the one before it (memcmp), and a new run's row is looked up in an
# open-addressing hash table of the distinct rows seen so far, so the cost is linear in
# the rows whatever their order (a sort of the rows, as np.unique does, is n log n and was
# most of a node's work in a check).
#
# cython: boundscheck=False, wraparound=False

import numpy as np

from libc.stdint cimport int16_t, int64_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free
from libc.string cimport memcmp


cdef inline uint64_t _hash_row(const int16_t *row, Py_ssize_t width) noexcept nogil:
    cdef uint64_t h = 0x9E3779B97F4A7C15ULL
    cdef Py_ssize_t j
    for j in range(width):
        h = (h ^ <uint16_t>row[j]) * 0xBF58476D1CE4E5B9ULL
        h ^= h >> 31
    return h


cdef uint32_t *_rehash(uint32_t *old, Py_ssize_t old_cap, Py_ssize_t cap,
                       const int16_t *base, const int64_t *first_row,
                       Py_ssize_t width) noexcept nogil:
    """A table of ``cap`` slots holding the entries of ``old`` (NULL if out of memory)."""
    cdef uint32_t *table = <uint32_t *>calloc(cap, sizeof(uint32_t))
    cdef Py_ssize_t i, slot
    cdef uint64_t mask = cap - 1
    if table == NULL:
        return NULL
    for i in range(old_cap):
        if old[i]:
            slot = _hash_row(base + first_row[old[i] - 1] * width, width) & mask
            while table[slot]:
                slot = (slot + 1) & mask
            table[slot] = old[i]
    return table


def copyset_runs(copysets):
    """Runs of equal consecutive rows of a 2-D int16 copyset array (-1 padded).

    Returns
    -------
    run_lengths : uint32 array
        Rows in each run, in row order.
    run_copysets : uint32 array
        Each run's row of ``distinct``.
    distinct : int16 2-D array
        The distinct rows, in order of first appearance.
    """
    cs = np.ascontiguousarray(copysets, dtype=np.int16)
    if cs.ndim != 2:
        raise ValueError(f"copysets must be a 2-D array, got shape {cs.shape}")
    cdef Py_ssize_t n = cs.shape[0], width = cs.shape[1]
    if n == 0:
        return (np.empty(0, np.uint32), np.empty(0, np.uint32),
                np.empty((0, width), np.int16))
    if n >= 0xFFFFFFFF:
        raise ValueError("too many rows for uint32 run lengths")
    if width == 0:  # every row is the empty copyset
        return (np.array([n], np.uint32), np.zeros(1, np.uint32),
                np.empty((1, 0), np.int16))
    lengths_a = np.empty(n, np.uint32)
    index_a = np.empty(n, np.uint32)
    first_a = np.empty(n, np.int64)
    cdef const int16_t[:, ::1] view = cs
    cdef const int16_t *base = &view[0, 0]
    cdef uint32_t[::1] lengths = lengths_a
    cdef uint32_t[::1] index = index_a
    cdef int64_t[::1] first_row = first_a
    cdef Py_ssize_t cap = 1024, i, slot, runs = 0, distinct = 0
    cdef size_t row_bytes = width * sizeof(int16_t)
    cdef uint32_t *table
    cdef uint32_t *grown
    cdef uint32_t d
    cdef const int16_t *row
    cdef const int16_t *prev = NULL
    cdef bint failed = False
    table = <uint32_t *>calloc(cap, sizeof(uint32_t))
    if table == NULL:
        raise MemoryError()
    with nogil:
        for i in range(n):
            row = base + i * width
            if prev != NULL and memcmp(row, prev, row_bytes) == 0:
                lengths[runs - 1] += 1
                continue
            slot = _hash_row(row, width) & (cap - 1)
            while True:
                d = table[slot]
                if d == 0:
                    first_row[distinct] = i
                    distinct += 1
                    table[slot] = <uint32_t>distinct
                    d = <uint32_t>distinct
                    if 2 * distinct > cap:  # keep the table at most half full
                        grown = _rehash(table, cap, 2 * cap, base, &first_row[0], width)
                        free(table)
                        table = grown
                        cap *= 2
                        if table == NULL:
                            failed = True
                    break
                if memcmp(base + first_row[d - 1] * width, row, row_bytes) == 0:
                    break
                slot = (slot + 1) & (cap - 1)
            if failed:
                break
            index[runs] = d - 1
            lengths[runs] = 1
            runs += 1
            prev = row
    free(table)
    if failed:
        raise MemoryError()
    return lengths_a[:runs].copy(), index_a[:runs].copy(), cs[first_a[:distinct]]
