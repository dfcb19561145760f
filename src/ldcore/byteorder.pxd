# Fixed-width integers in byte buffers, for the kernels' formats: little-endian (values,
# the BufferedWriter header) and big-endian (LogsDB keys, which sort in that order).
# Inline: each kernel that cimports them gets its own copy, no call between modules.
from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t


cdef inline void put_be64(uint8_t *p, uint64_t v) noexcept nogil:
    cdef int i
    for i in range(8):
        p[7 - i] = <uint8_t>(v >> (8 * i))


cdef inline uint64_t get_be64(const uint8_t *p) noexcept nogil:
    cdef uint64_t v = 0
    cdef int i
    for i in range(8):
        v = (v << 8) | p[i]
    return v


cdef inline void put_le16(uint8_t *p, uint16_t v) noexcept nogil:
    p[0] = <uint8_t>v
    p[1] = <uint8_t>(v >> 8)


cdef inline void put_le32(uint8_t *p, uint32_t v) noexcept nogil:
    cdef int i
    for i in range(4):
        p[i] = <uint8_t>(v >> (8 * i))


cdef inline void put_le64(uint8_t *p, uint64_t v) noexcept nogil:
    cdef int i
    for i in range(8):
        p[i] = <uint8_t>(v >> (8 * i))


cdef inline uint16_t get_le16(const uint8_t *p) noexcept nogil:
    return p[0] | (<uint16_t>p[1] << 8)


cdef inline uint32_t get_le32(const uint8_t *p) noexcept nogil:
    return p[0] | (<uint32_t>p[1] << 8) | (<uint32_t>p[2] << 16) | (<uint32_t>p[3] << 24)


cdef inline uint64_t get_le64(const uint8_t *p) noexcept nogil:
    cdef uint64_t v = 0
    cdef int i
    for i in range(8):
        v |= (<uint64_t>p[i]) << (8 * i)
    return v
