# Payload gathers for records kept as columns (one byte buffer, n + 1 offsets): copying
# many records' bytes into one new buffer with a memcpy each, where numpy needs an index
# array as long as the bytes themselves; and the record cache's copy of a write.
cimport numpy as cnp
from libc.stdint cimport int16_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcpy

from ldcore.checksum cimport ld_crc32c, ld_crc32c_init

cnp.import_array()
ld_crc32c_init()


def gather_payloads(const uint8_t[::1] src, const uint64_t[::1] starts,
                    const uint64_t[::1] ends, uint8_t[::1] dst,
                    const uint64_t[::1] dst_starts):
    """Copy ``src[starts[i]:ends[i]]`` to ``dst[dst_starts[i]:]`` for every i.

    Raises ``ValueError`` (nothing copied) when a range is reversed or falls outside its
    buffer.
    """
    cdef Py_ssize_t n = starts.shape[0], i
    if ends.shape[0] != n or dst_starts.shape[0] != n:
        raise ValueError("starts, ends and dst_starts differ in length")
    cdef uint64_t s, e, d, size = src.shape[0], room = dst.shape[0]
    for i in range(n):
        s, e, d = starts[i], ends[i], dst_starts[i]
        if e < s or e > size or d > room or e - s > room - d:
            raise ValueError(f"record {i}: bytes [{s}, {e}) to {d} do not fit "
                             f"({size} bytes in, {room} out)")
    with nogil:
        for i in range(n):
            if ends[i] > starts[i]:
                memcpy(&dst[dst_starts[i]], &src[starts[i]], ends[i] - starts[i])


def copy_written(const uint64_t[:] lsns, const int64_t[:] timestamps,
                 const uint32_t[:] flags, waves, const int16_t[:, :] copysets,
                 const uint8_t[::1] payloads, const uint64_t[:] offsets):
    """Own copies of one write's columns, as the record cache keeps them: ``(lsns,
    timestamps, flags, waves, copysets, checksums, payloads, offsets)`` with ``waves``
    all 1 when None, copysets as wide as the widest one (padding columns of -1 dropped),
    the crc32c of each payload, its bytes in a buffer of their own and offsets from 0.

    One C pass, where numpy needs a call per column: the cache copies every write a
    storage node makes, most of them of one record.
    """
    cdef Py_ssize_t n = lsns.shape[0], i, j, k = copysets.shape[1], width = 0, w
    if (timestamps.shape[0] != n or flags.shape[0] != n or copysets.shape[0] != n
            or offsets.shape[0] != n + 1):
        raise ValueError("columns differ in length")
    cdef uint64_t o0 = offsets[0], o1 = offsets[n]
    if o1 < o0 or o1 > <uint64_t>payloads.shape[0]:
        raise ValueError(f"payload bytes [{o0}, {o1}) outside a buffer of "
                         f"{payloads.shape[0]}")
    for i in range(n):
        if offsets[i + 1] < offsets[i]:
            raise ValueError(f"record {i}: offsets go back")
        w = 0
        for j in range(k):
            if copysets[i, j] >= 0:
                w = j + 1
        if w > width:
            width = w
    cdef const uint32_t[:] wv = None if waves is None else waves
    if wv is not None and wv.shape[0] != n:
        raise ValueError("columns differ in length")
    cdef cnp.npy_intp dims[2]
    dims[0] = n
    dims[1] = width
    out_lsns = cnp.PyArray_EMPTY(1, dims, cnp.NPY_UINT64, 0)
    out_ts = cnp.PyArray_EMPTY(1, dims, cnp.NPY_INT64, 0)
    out_flags = cnp.PyArray_EMPTY(1, dims, cnp.NPY_UINT32, 0)
    out_waves = cnp.PyArray_EMPTY(1, dims, cnp.NPY_UINT32, 0)
    out_crc = cnp.PyArray_EMPTY(1, dims, cnp.NPY_UINT32, 0)
    out_cs = cnp.PyArray_EMPTY(2, dims, cnp.NPY_INT16, 0)
    dims[0] = n + 1
    out_offs = cnp.PyArray_EMPTY(1, dims, cnp.NPY_UINT64, 0)
    dims[0] = <cnp.npy_intp>(o1 - o0)
    out_body = cnp.PyArray_EMPTY(1, dims, cnp.NPY_UINT8, 0)
    cdef uint64_t *ol = <uint64_t *>cnp.PyArray_DATA(out_lsns)
    cdef uint64_t *oo = <uint64_t *>cnp.PyArray_DATA(out_offs)
    cdef int64_t *ot = <int64_t *>cnp.PyArray_DATA(out_ts)
    cdef uint32_t *of = <uint32_t *>cnp.PyArray_DATA(out_flags)
    cdef uint32_t *ow = <uint32_t *>cnp.PyArray_DATA(out_waves)
    cdef uint32_t *oc = <uint32_t *>cnp.PyArray_DATA(out_crc)
    cdef int16_t *ocs = <int16_t *>cnp.PyArray_DATA(out_cs)
    cdef uint8_t *ob = <uint8_t *>cnp.PyArray_DATA(out_body)
    with nogil:
        if o1 > o0:
            memcpy(ob, &payloads[o0], o1 - o0)
        for i in range(n):
            ol[i] = lsns[i]
            ot[i] = timestamps[i]
            of[i] = flags[i]
            ow[i] = 1 if wv is None else wv[i]
            for j in range(width):
                ocs[i * width + j] = copysets[i, j]
            oo[i] = offsets[i] - o0
            oc[i] = ld_crc32c(0, &payloads[offsets[i]], offsets[i + 1] - offsets[i])
        oo[n] = o1 - o0
    return out_lsns, out_ts, out_flags, out_waves, out_cs, out_crc, out_body, out_offs
