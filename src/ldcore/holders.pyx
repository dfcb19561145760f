# Who holds each record, and which copyset it has: the cluster checker's merge step.
#
# The checker lays a log's LSNs out on slots (one per LSN of each epoch present) and gives
# each node the log involves one bit.  Every node that answered lists the slots it holds
# and, for each, the row of a shared copyset table it stored.  ``merge_holders`` turns
# those lists into, per slot, the bit row of the nodes holding it and the copyset the
# verdict judges it by.  Holders may disagree on a copyset (a store wave that timed out
# leaves copies naming an older copyset): the first copyset whose members all hold the
# slot wins, else the first one seen.  Two passes over the lists, no allocation per
# record.
#
# cython: boundscheck=False, wraparound=False

import numpy as np

from libc.stdint cimport int64_t, uint64_t


def merge_holders(Py_ssize_t size, slots, rows, offsets, positions, member_of):
    """Per-slot holder bits and chosen copyset rows.

    Parameters
    ----------
    size : int
        Number of slots.
    slots, rows : int64 arrays
        Every node's list, concatenated: a slot it holds and that copy's copyset row in
        ``member_of``.
    offsets : int64 array
        Node k's entries are ``slots[offsets[k]:offsets[k + 1]]``.
    positions : int64 array
        Node k's bit (``positions[k] // 64`` is its word).
    member_of : uint64 2-D array
        One bit row per copyset: its members.  The last row is the "no copyset" row.

    Returns
    -------
    hold : uint64 2-D array, shape (size, words)
        The bits of the nodes holding each slot.
    chosen : int64 array
        Each slot's copyset row (the last row of ``member_of`` where nobody holds it).
    """
    cdef const int64_t[::1] at = np.ascontiguousarray(slots, dtype=np.int64)
    cdef const int64_t[::1] row = np.ascontiguousarray(rows, dtype=np.int64)
    cdef const int64_t[::1] off = np.ascontiguousarray(offsets, dtype=np.int64)
    cdef const int64_t[::1] pos = np.ascontiguousarray(positions, dtype=np.int64)
    members_a = np.ascontiguousarray(member_of, dtype=np.uint64)
    if members_a.ndim != 2 or members_a.shape[0] < 1:
        raise ValueError("member_of must be a 2-D array with a last 'no copyset' row")
    cdef const uint64_t[:, ::1] members = members_a
    cdef Py_ssize_t words = members.shape[1], n_rows = members.shape[0]
    cdef Py_ssize_t K = pos.shape[0], n = at.shape[0]
    if off.shape[0] != K + 1 or row.shape[0] != n or off[0] != 0 or off[K] != n:
        raise ValueError("offsets must split slots and rows into one list per position")
    hold_a = np.zeros((size, words), np.uint64)
    chosen_a = np.full(size, n_rows - 1, np.int64)
    complete_a = np.zeros(size, np.uint8)
    cdef uint64_t[:, ::1] hold = hold_a
    cdef int64_t[::1] chosen = chosen_a
    cdef unsigned char[::1] complete = complete_a
    cdef Py_ssize_t k, i, w, s, r
    cdef uint64_t bit
    cdef bint ok
    for i in range(n):
        if at[i] < 0 or at[i] >= size or row[i] < 0 or row[i] >= n_rows - 1:
            raise ValueError(f"entry {i}: slot {at[i]} or copyset row {row[i]} out of range")
    for k in range(K):
        if pos[k] < 0 or pos[k] >= 64 * words:
            raise ValueError(f"bit position {pos[k]} does not fit {words} words")
    with nogil:
        for k in range(K):
            w = pos[k] >> 6
            bit = (<uint64_t>1) << (pos[k] & 63)
            for i in range(off[k], off[k + 1]):
                hold[at[i], w] |= bit
        for i in range(n):
            s = at[i]
            r = row[i]
            if complete[s]:
                continue
            ok = True
            for w in range(words):
                if members[r, w] & ~hold[s, w]:
                    ok = False
                    break
            if ok or chosen[s] == n_rows - 1:
                chosen[s] = r
                complete[s] = ok
    return hold_a, chosen_a
