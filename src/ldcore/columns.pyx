# Payload gathers for records kept as columns (one byte buffer, n + 1 offsets): copying
# many records' bytes into one new buffer with a memcpy each, where numpy needs an index
# array as long as the bytes themselves.
cimport numpy as cnp
from libc.stdint cimport uint8_t, uint64_t
from libc.string cimport memcpy

cnp.import_array()


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
