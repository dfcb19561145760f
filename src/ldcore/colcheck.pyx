# Consistency checks of the record columns a message carries (logdevice.protocol.messages
# states the rules; every message with raw sections runs its checks when it is encoded
# and when it is decoded).  Each check is one call over arrays of a few elements in the
# common case, where numpy's per-call overhead would be most of the cost: loops in C over
# the arrays' memory, and the same descriptions of a problem as the messages give.
#
# The arrays are normally what the wire decodes to (1-D, the column's dtype); anything
# else is first converted with numpy (the slow path, for hand-made messages).
cimport numpy as cnp
from cpython.buffer cimport PyBUF_FULL_RO, PyBuffer_Release, PyObject_GetBuffer
from libc.stdint cimport uint32_t, uint64_t

import numpy as np

cnp.import_array()

cdef cnp.dtype _U64 = np.dtype(np.uint64)
cdef cnp.dtype _U32 = np.dtype(np.uint32)


cdef cnp.ndarray _column(object values, cnp.dtype dtype):
    """``values`` as a 1-D array of ``dtype`` (itself when it already is one)."""
    cdef cnp.ndarray arr
    if cnp.PyArray_Check(values):
        arr = <cnp.ndarray>values
        if arr.ndim == 1 and (arr.descr is dtype or cnp.PyArray_EquivTypes(arr.descr, dtype)):
            return arr
    arr = np.asarray(values, dtype=dtype)
    if arr.ndim != 1:
        raise TypeError(f"expected a 1-D column, got {arr.ndim} dimensions")
    return arr


cdef Py_ssize_t _nbytes(object buffer) except -1:
    cdef Py_buffer view
    PyObject_GetBuffer(buffer, &view, PyBUF_FULL_RO)
    cdef Py_ssize_t n = view.len
    PyBuffer_Release(&view)
    return n


def columns_problem(Py_ssize_t n, dict required, dict optional=None):
    """Each ``required`` column (name -> array) has ``n`` entries, each ``optional`` one 0
    or ``n``; the first one that does not, described, or None."""
    cdef Py_ssize_t have
    for name, arr in required.items():
        have = len(arr)
        if have != n:
            return f"{name} has {have} entries, expected {n}"
    if optional:
        for name, arr in optional.items():
            have = len(arr)
            if have != 0 and have != n:
                return f"{name} has {have} entries, expected 0 or {n}"
    return None


def offsets_problem(offsets, Py_ssize_t n, payloads):
    """``offsets`` delimit ``n`` payloads in the buffer ``payloads``: ``n + 1`` of them
    from 0 to the buffer's size, never decreasing (or none at all, with no records and
    no payload bytes).  The problem, or None."""
    cdef cnp.ndarray arr = _column(offsets, _U64)
    cdef Py_ssize_t count = arr.shape[0], i
    cdef Py_ssize_t payload_bytes = _nbytes(payloads)
    if count == 0:
        return None if n == 0 and payload_bytes == 0 else "payload_offsets missing"
    if count != n + 1:
        return f"payload_offsets has {count} entries, expected {n + 1}"
    cdef char *data = <char *>cnp.PyArray_DATA(arr)
    cdef Py_ssize_t stride = arr.strides[0]
    cdef uint64_t first = (<uint64_t *>data)[0]
    cdef uint64_t last = (<uint64_t *>(data + (count - 1) * stride))[0]
    if first != 0 or last != <uint64_t>payload_bytes:
        return f"payload_offsets span [{first}, {last}], payloads {payload_bytes} B"
    cdef uint64_t prev = first, cur
    for i in range(1, count):
        cur = (<uint64_t *>(data + i * stride))[0]
        if cur < prev:
            return "payload_offsets decrease"
        prev = cur
    return None


def checksummed_problem(flags, checksums, uint32_t checksum_flag):
    """Records whose ``flags`` have ``checksum_flag`` come with their checksums: the
    problem when some do and the checksums column is empty, else None."""
    if len(checksums) or not len(flags):
        return None
    cdef cnp.ndarray arr = _column(flags, _U32)
    cdef char *data = <char *>cnp.PyArray_DATA(arr)
    cdef Py_ssize_t stride = arr.strides[0], i
    for i in range(arr.shape[0]):
        if (<uint32_t *>(data + i * stride))[0] & checksum_flag:
            return "records are flagged CHECKSUM but the checksums column is empty"
    return None
