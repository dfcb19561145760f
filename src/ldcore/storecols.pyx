# The columns of a sequencer's STORE frames, and its STORED answers back to records.
#
# ``store_columns`` turns the waves one storage node gets from one log and epoch in one
# loop turn into the STORE message's columns: LSN order, a later wave of an LSN winning
# over an earlier one (a retry queued in the same turn), copysets padded with -1 to one
# width, payloads back to back (one record's payload is passed on as it came, uncopied).
# A one-record group, the common case below a few thousand appends/s, costs a handful of
# C allocations and no Python-level numpy call.  ``store_logs_columns`` does the same
# for many one-record STOREs of different logs at once: the columns of a STORE_LOGS.
#
# ``stored_replies`` matches a STORED's statuses to what the STORE carried: the reply
# names LSNs and statuses (in the STORE's order, as storage nodes answer, or in any
# order or a subset), or one status for the whole frame.
#
# ``reply_columns`` makes the three columns of an APPENDED_BATCH from the lists the role
# fills in as the batch's records get their outcome.
#
# A wave is the sequencer's ``StoreWave`` tuple:
#   (log_id, lsn, wave, copyset, timestamp, flags, lng, request_id)
cimport cython
cimport numpy as cnp
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from libc.stdint cimport int16_t, int64_t, uint16_t, uint32_t, uint64_t

import numpy as np

from logdevice.errors import E

cnp.import_array()

cdef Py_ssize_t _LSN = 1, _WAVE = 2, _COPYSET = 3, _TS = 4, _FLAGS = 5, _LNG = 6
cdef object _EMPTY_U32 = np.empty(0, np.uint32)
_EMPTY_U32.flags.writeable = False


cdef inline cnp.ndarray _new(Py_ssize_t n, int typenum):
    cdef cnp.npy_intp dims[1]
    dims[0] = n
    return cnp.PyArray_EMPTY(1, dims, typenum, 0)


cdef inline cnp.ndarray _matrix(Py_ssize_t n, Py_ssize_t width):
    cdef cnp.npy_intp dims[2]
    dims[0] = n
    dims[1] = width
    return cnp.PyArray_EMPTY(2, dims, cnp.NPY_INT16, 0)


cdef inline Py_ssize_t _nbytes(object payload) except -1:
    cdef Py_buffer view
    PyObject_GetBuffer(payload, &view, PyBUF_SIMPLE)
    cdef Py_ssize_t n = view.len
    PyBuffer_Release(&view)
    return n


cdef inline cnp.ndarray _contiguous(object a, object dtype):
    return np.ascontiguousarray(a, dtype)


def store_columns(list waves, list entries, uint32_t checksum_flag):
    """STORE columns for ``waves`` (``StoreWave`` tuples of one log and epoch, for one
    node) whose kept ``entries`` are ``(payload, crc32c)``.

    Returns ``(lsns, timestamps, flags, waves, copysets, payload_offsets, payloads,
    checksums, last_known_good)``: checksums are empty unless a record's flags have
    ``checksum_flag``; ``last_known_good`` is the highest LNG the waves carry.
    """
    if len(waves) == 0 or len(entries) != len(waves):
        raise ValueError("store_columns needs one entry per wave, and at least one wave")
    cols = _columns(waves, entries, [0] if len(waves) == 1 else _lsn_order(waves),
                    checksum_flag)
    return cols[:8] + (cols[9],)


def store_logs_columns(list waves, list entries, uint32_t checksum_flag):
    """STORE_LOGS columns for ``waves`` (``StoreWave`` tuples, one per part: each a STORE
    of one record, of its own log or epoch, for one node) whose ``entries`` are
    ``(payload, crc32c)``, in the order given.

    Returns ``(lsns, timestamps, flags, waves, copysets, payload_offsets, payloads,
    checksums, log_ids, last_known_good)``, the last two one per part.
    """
    if len(waves) == 0 or len(entries) != len(waves):
        raise ValueError("store_logs_columns needs one entry per wave, and at least one")
    cols = _columns(waves, entries, list(range(len(waves))), checksum_flag)
    return cols[:9] + (cols[10],)


@cython.boundscheck(False)
@cython.wraparound(False)
cdef tuple _columns(list waves, list entries, list order, uint32_t checksum_flag):
    """The columns of ``waves[order[i]]`` for each i: ``(lsns, timestamps, flags, waves,
    copysets, payload_offsets, payloads, checksums, log_ids, the highest LNG, the LNGs)``."""
    cdef Py_ssize_t n = len(order), i, j, k, width = 0
    cdef tuple w
    cdef cnp.ndarray lsns = _new(n, cnp.NPY_UINT64)
    cdef cnp.ndarray stamps = _new(n, cnp.NPY_INT64)
    cdef cnp.ndarray flags = _new(n, cnp.NPY_UINT32)
    cdef cnp.ndarray wave_nos = _new(n, cnp.NPY_UINT32)
    cdef cnp.ndarray offsets = _new(n + 1, cnp.NPY_UINT64)
    cdef cnp.ndarray log_ids = _new(n, cnp.NPY_UINT64)
    cdef cnp.ndarray lngs = _new(n, cnp.NPY_UINT64)
    cdef uint64_t* lsn_p = <uint64_t*>cnp.PyArray_DATA(lsns)
    cdef int64_t* ts_p = <int64_t*>cnp.PyArray_DATA(stamps)
    cdef uint32_t* flag_p = <uint32_t*>cnp.PyArray_DATA(flags)
    cdef uint32_t* wave_p = <uint32_t*>cnp.PyArray_DATA(wave_nos)
    cdef uint64_t* off_p = <uint64_t*>cnp.PyArray_DATA(offsets)
    cdef uint64_t* log_p = <uint64_t*>cnp.PyArray_DATA(log_ids)
    cdef uint64_t* lng_p = <uint64_t*>cnp.PyArray_DATA(lngs)
    cdef uint64_t lng = 0
    cdef uint32_t any_flags = 0
    cdef tuple copyset
    for i in range(n):
        w = <tuple>waves[<Py_ssize_t>order[i]]
        copyset = <tuple>w[_COPYSET]
        if len(copyset) > width:
            width = len(copyset)
    cdef cnp.ndarray copysets = _matrix(n, width)
    cdef int16_t* cs_p = <int16_t*>cnp.PyArray_DATA(copysets)
    cdef list payloads = []
    off_p[0] = 0
    for i in range(n):
        k = <Py_ssize_t>order[i]
        w = <tuple>waves[k]
        log_p[i] = w[0]
        lsn_p[i] = w[_LSN]
        ts_p[i] = w[_TS]
        flag_p[i] = w[_FLAGS]
        any_flags |= flag_p[i]
        wave_p[i] = w[_WAVE]
        lng_p[i] = w[_LNG]
        if lng_p[i] > lng:
            lng = lng_p[i]
        copyset = <tuple>w[_COPYSET]
        for j in range(width):
            cs_p[i * width + j] = <int16_t>(copyset[j] if j < len(copyset) else -1)
        payload = (<tuple>entries[k])[0]
        payloads.append(payload)
        off_p[i + 1] = off_p[i] + <uint64_t>_nbytes(payload)
    cdef cnp.ndarray checksums
    cdef uint32_t* crc_p
    if any_flags & checksum_flag:
        checksums = _new(n, cnp.NPY_UINT32)
        crc_p = <uint32_t*>cnp.PyArray_DATA(checksums)
        for i in range(n):
            crc_p[i] = (<tuple>entries[<Py_ssize_t>order[i]])[1]
    else:
        checksums = _EMPTY_U32
    joined = payloads[0] if n == 1 else b"".join(payloads)
    return (lsns, stamps, flags, wave_nos, copysets, offsets, joined, checksums, log_ids,
            lng, lngs)


cdef list _lsn_order(list waves):
    """Indices of ``waves`` in LSN order, the last one of each LSN (its latest wave)."""
    cdef Py_ssize_t n = len(waves), i
    cdef uint64_t prev = 0, lsn
    cdef bint ordered = True
    for i in range(n):
        lsn = (<tuple>waves[i])[_LSN]
        if i and lsn <= prev:
            ordered = False
            break
        prev = lsn
    if ordered:
        return list(range(n))
    cdef dict latest = {}
    for i in range(n):
        latest[(<tuple>waves[i])[_LSN]] = i
    return [latest[k] for k in sorted(latest)]


@cython.boundscheck(False)
@cython.wraparound(False)
def stored_replies(int node, cnp.ndarray sent_lsns, cnp.ndarray sent_waves,
                   object lsns, object statuses, int status, int flagged):
    """``(node, lsn, wave, status)`` per record a STORE carried (``sent_lsns`` and
    ``sent_waves``, as ``store_columns`` made them), from its STORED's ``lsns`` and
    ``statuses`` (or ``status`` for all when ``statuses`` is empty), and whether any of
    them is ``flagged``.  A record the STORED does not name failed (``E.FAILED``)."""
    cdef Py_ssize_t n = cnp.PyArray_DIMS(sent_lsns)[0], m = len(statuses), i
    cdef const uint64_t* sent = <const uint64_t*>cnp.PyArray_DATA(sent_lsns)
    cdef const uint32_t* wave_p = <const uint32_t*>cnp.PyArray_DATA(sent_waves)
    cdef list out = []
    cdef bint hit = False
    cdef cnp.ndarray got, st
    cdef const uint64_t* got_p
    cdef const uint16_t* st_p
    cdef bint aligned
    cdef dict by_lsn
    if m == 0:
        for i in range(n):
            out.append((node, sent[i], wave_p[i], status))
        return out, status == flagged and n > 0
    got = _contiguous(lsns, np.uint64)
    st = _contiguous(statuses, np.uint16)
    if cnp.PyArray_DIMS(got)[0] != m:
        raise ValueError("a STORED with more statuses than LSNs")
    got_p = <const uint64_t*>cnp.PyArray_DATA(got)
    st_p = <const uint16_t*>cnp.PyArray_DATA(st)
    aligned = m == n
    if aligned:
        for i in range(n):
            if got_p[i] != sent[i]:
                aligned = False
                break
    if aligned:
        for i in range(n):
            out.append((node, sent[i], wave_p[i], st_p[i]))
            hit = hit or st_p[i] == flagged
        return out, hit
    by_lsn = {}
    for i in range(m):
        by_lsn[got_p[i]] = st_p[i]
    failed = int(E.FAILED)
    for i in range(n):
        s = by_lsn.get(sent[i], failed)
        out.append((node, sent[i], wave_p[i], s))
        hit = hit or s == flagged
    return out, hit


@cython.boundscheck(False)
@cython.wraparound(False)
def reply_columns(list statuses, list lsns, list timestamps):
    """``(statuses, lsns, timestamps)`` as uint16, uint64 and int64 arrays."""
    cdef Py_ssize_t n = len(statuses), i
    if len(lsns) != n or len(timestamps) != n:
        raise ValueError("reply_columns needs columns of one length")
    cdef cnp.ndarray st = _new(n, cnp.NPY_UINT16)
    cdef cnp.ndarray ls = _new(n, cnp.NPY_UINT64)
    cdef cnp.ndarray ts = _new(n, cnp.NPY_INT64)
    cdef uint16_t* st_p = <uint16_t*>cnp.PyArray_DATA(st)
    cdef uint64_t* ls_p = <uint64_t*>cnp.PyArray_DATA(ls)
    cdef int64_t* ts_p = <int64_t*>cnp.PyArray_DATA(ts)
    for i in range(n):
        st_p[i] = statuses[i]
        ls_p[i] = lsns[i]
        ts_p[i] = timestamps[i]
    return st, ls, ts
