# CRC32C (Castagnoli), the checksum of LogDevice records and of our BufferedWriter blobs.
#
#   crc32c(b"123456789") == 0xE3069283      (the standard check value)
#   crc32c(b, crc32c(a)) == crc32c(a + b)   (``value`` continues a running checksum)
#
# The work is done in crc32c.h: the SSE4.2 crc32 instruction when the CPU has it (checked
# once at import), else a portable slice-by-8 table implementation.  ``crc32c_many``
# checksums n payload slices of one buffer, described by n + 1 offsets, without the GIL:
#
#   buffer:  |<- payload 0 ->|<- payload 1 ->| ... |<- payload n-1 ->|
#   offsets: o[0]            o[1]            o[2]  o[n-1]            o[n]
import numpy as np

cimport numpy as cnp
from libc.stdint cimport uint32_t, uint64_t

cnp.import_array()
ld_crc32c_init()

HAVE_SSE42 = bool(ld_crc32c_have_hw)


cdef inline uint32_t _check_value(value) except? 0xFFFFFFFF:
    if not 0 <= value <= 0xFFFFFFFF:
        raise ValueError(f"crc32c value must fit in 32 bits, got {value}")
    return <uint32_t>value


def crc32c(const unsigned char[::1] data, value=0):
    """CRC32C of ``data``, continuing from ``value`` (a previous result, 0 to start).

    Parameters
    ----------
    data : bytes-like
        bytes, bytearray, memoryview or a contiguous numpy uint8 array.
    value : int
        Finished CRC32C of the bytes before ``data``.

    Returns
    -------
    int
        The finished CRC32C, in ``[0, 2**32)``.
    """
    cdef uint32_t v = _check_value(value)
    cdef size_t n = data.shape[0]
    if n == 0:
        return v
    with nogil:
        v = ld_crc32c(v, &data[0], n)
    return v


def crc32c_portable(const unsigned char[::1] data, value=0):
    """``crc32c`` on the portable slice-by-8 path, whatever the CPU offers (to check one
    against the other)."""
    cdef uint32_t v = _check_value(value)
    cdef size_t n = data.shape[0]
    if n == 0:
        return v
    with nogil:
        v = ld_crc32c_portable(v, &data[0], n)
    return v


def crc32c_many(const unsigned char[::1] buffer, offsets):
    """CRC32C of each payload ``buffer[offsets[i]:offsets[i + 1]]``.

    Parameters
    ----------
    buffer : bytes-like
        All payloads, back to back.
    offsets : array of uint64, length n + 1
        Non-decreasing boundaries, ``offsets[n] <= len(buffer)``.

    Returns
    -------
    numpy.ndarray of uint32, length n

    Raises
    ------
    ValueError
        If the offsets are empty, decreasing or run past the end of ``buffer``.
    """
    cdef const uint64_t[::1] off = np.ascontiguousarray(offsets, dtype=np.uint64).ravel()
    cdef Py_ssize_t m = off.shape[0]
    cdef Py_ssize_t i, n
    cdef uint64_t size = <uint64_t>buffer.shape[0]
    cdef const unsigned char *base
    if m == 0:
        raise ValueError("offsets must hold n + 1 boundaries (at least one)")
    n = m - 1
    out = np.empty(n, dtype=np.uint32)
    cdef uint32_t[::1] res = out
    cdef Py_ssize_t bad = -1
    with nogil:
        for i in range(n):
            if off[i] > off[i + 1]:
                bad = i
                break
        if bad < 0 and off[n] > size:
            bad = n
    if bad >= 0:
        if bad == n:
            raise ValueError(f"offsets run past the end of the buffer: {off[n]} > {size}")
        raise ValueError(f"offsets decrease at index {bad}: {off[bad]} > {off[bad + 1]}")
    if n == 0 or off[n] == off[0]:
        out[:] = 0
        return out
    base = &buffer[0]
    with nogil:
        for i in range(n):
            res[i] = ld_crc32c(0, base + off[i], <size_t>(off[i + 1] - off[i]))
    return out
