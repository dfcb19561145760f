# Who holds each record, and which copyset it has: the cluster checker's merge step.
#
# The checker lays a log's LSNs out on slots: each epoch present is a segment of
# consecutive LSNs [start, start + length) at slots [base, base + length).  Each node the
# log involves has one bit.  Every node that answered lists the LSNs it holds (sorted)
# and their copysets as runs (run i: the next ``lengths[i]`` LSNs have row ``rows[i]`` of
# the node's own copyset table, which ``to_row`` maps into a table shared by all nodes).
# ``merge_holders`` turns those lists into, per slot, the bit row of the nodes holding
# it, how many do, and the copyset the verdict judges it by.  Holders may disagree on a
# copyset (a store wave that timed out leaves copies naming an older copyset): the first
# copyset whose members all hold the slot wins, else the first one seen.  Members that
# did not answer (``unknown``) count as holding it for that choice: the wave that won
# may name a node that is restarting, and the older copyset of a stale copy must not be
# judged instead (its missing member would look like a lost copy).  Two passes
# over the lists (the second walks the runs), nothing allocated per record.
#
# cython: boundscheck=False, wraparound=False

import numpy as np

from libc.stdint cimport int64_t, uint16_t, uint64_t


cdef Py_ssize_t _slot(uint64_t lsn, const uint64_t[::1] start, const int64_t[::1] base,
                      const int64_t[::1] length, Py_ssize_t *seg) noexcept nogil:
    """Slot of ``lsn``, moving ``seg`` forward (LSNs come sorted); -1 if not in the grid."""
    cdef Py_ssize_t s = seg[0], n = start.shape[0]
    while s < n and lsn >= start[s] + <uint64_t>length[s]:
        s += 1
    seg[0] = s
    if s == n or lsn < start[s]:
        return -1
    return base[s] + <Py_ssize_t>(lsn - start[s])


def merge_holders(starts, bases, lengths, holders, member_of, unknown=None):
    """Per-slot holder bits, holder counts and chosen copyset rows.

    Parameters
    ----------
    starts, bases, lengths : uint64, int64, int64 arrays
        The grid's segments: LSNs ``[starts[i], starts[i] + lengths[i])`` are slots
        ``[bases[i], bases[i] + lengths[i])``; in LSN order, slots end to end.
    holders : sequence of (lsns, lengths, rows, to_row, position)
        One per node that answered: its sorted uint64 LSNs, their copysets as runs (run i
        covers the next ``lengths[i]`` LSNs, whose copyset is row ``rows[i]`` of the
        node's own table), ``to_row`` mapping those rows to rows of ``member_of``, and the
        node's bit (``position // 64`` is its word).
    member_of : uint64 2-D array
        One bit row per copyset: its members.  The last row is the "no copyset" row.
    unknown : uint64 array, optional
        The bits of the nodes that did not answer (one word per word of ``member_of``).

    Returns
    -------
    hold : uint64 2-D array, shape (slots, words)
        The bits of the nodes holding each slot.
    copies : uint16 array
        How many nodes hold each slot.
    chosen : int64 array
        Each slot's copyset row (the last row of ``member_of`` where nobody holds it).
    """
    cdef const uint64_t[::1] start = np.ascontiguousarray(starts, dtype=np.uint64)
    cdef const int64_t[::1] base = np.ascontiguousarray(bases, dtype=np.int64)
    cdef const int64_t[::1] length = np.ascontiguousarray(lengths, dtype=np.int64)
    if not start.shape[0] == base.shape[0] == length.shape[0]:
        raise ValueError("starts, bases and lengths differ in length")
    members_a = np.ascontiguousarray(member_of, dtype=np.uint64)
    if members_a.ndim != 2 or members_a.shape[0] < 1:
        raise ValueError("member_of must be a 2-D array with a last 'no copyset' row")
    cdef const uint64_t[:, ::1] members = members_a
    cdef Py_ssize_t words = members.shape[1], none = members.shape[0] - 1
    unknown_a = (np.zeros(words, np.uint64) if unknown is None
                 else np.ascontiguousarray(unknown, dtype=np.uint64))
    if unknown_a.shape != (words,):
        raise ValueError(f"unknown must have {words} words, got shape {unknown_a.shape}")
    cdef const uint64_t[::1] unk = unknown_a
    cdef Py_ssize_t segments = start.shape[0]
    cdef Py_ssize_t size = base[segments - 1] + length[segments - 1] if segments else 0
    lists = []
    for lsns, lengths, index, to_row, position in holders:
        lsns = np.ascontiguousarray(lsns, dtype=np.uint64)
        lengths = np.ascontiguousarray(lengths, dtype=np.int64)
        index = np.ascontiguousarray(index, dtype=np.int64)
        to_row = np.ascontiguousarray(to_row, dtype=np.int64)
        if len(lengths) != len(index):
            raise ValueError(f"{len(lengths)} run lengths but {len(index)} run copysets")
        if len(lengths) and (lengths.min() < 0 or lengths.sum() != len(lsns)):
            raise ValueError(f"runs cover {lengths.sum()} records, not the {len(lsns)} LSNs")
        if not len(lengths) and len(lsns):
            raise ValueError(f"no runs for {len(lsns)} LSNs")
        if len(index) and not 0 <= index.min() <= index.max() < len(to_row):
            raise ValueError("a copyset row is outside the node's table")
        if len(to_row) and not 0 <= to_row.min() <= to_row.max() < none:
            raise ValueError("a node's table maps outside member_of")
        if not 0 <= position < 64 * words:
            raise ValueError(f"bit position {position} does not fit {words} words")
        lists.append((lsns, lengths, index, to_row, int(position)))
    hold_a = np.zeros((size, words), np.uint64)
    copies_a = np.zeros(size, np.uint16)
    chosen_a = np.full(size, none, np.int64)
    complete_a = np.zeros(size, np.uint8)
    cdef uint64_t[:, ::1] hold = hold_a
    cdef uint16_t[::1] copies = copies_a
    cdef int64_t[::1] chosen = chosen_a
    cdef unsigned char[::1] complete = complete_a
    cdef const uint64_t[::1] lsn
    cdef const int64_t[::1] run_length
    cdef const int64_t[::1] idx
    cdef const int64_t[::1] rows
    cdef Py_ssize_t i, j, _k, n, w, s, r, seg
    cdef uint64_t bit
    cdef bint ok
    for lsns, _lengths, _index, _to_row, position in lists:  # pass 1: who holds what
        lsn = lsns
        n = lsn.shape[0]
        w = position >> 6
        bit = (<uint64_t>1) << (position & 63)
        seg = 0
        s = 0
        with nogil:
            for i in range(n):
                s = _slot(lsn[i], start, base, length, &seg)
                if s < 0:
                    break
                hold[s, w] |= bit
                copies[s] += 1
        if n and s < 0:
            raise ValueError(f"LSN {lsn[i]} is not in the grid")
    for lsns, lengths, index, to_row, _position in lists:  # pass 2: each slot's copyset
        lsn = lsns
        run_length = lengths
        idx = index
        rows = to_row
        seg = 0
        i = 0
        with nogil:
            for j in range(run_length.shape[0]):
                r = rows[idx[j]]
                for _k in range(run_length[j]):
                    s = _slot(lsn[i], start, base, length, &seg)
                    i += 1
                    if complete[s]:
                        continue
                    ok = True
                    for w in range(words):
                        if members[r, w] & ~(hold[s, w] | unk[w]):
                            ok = False
                            break
                    if ok or chosen[s] == none:
                        chosen[s] = r
                        complete[s] = ok
    return hold_a, copies_a, chosen_a
