from libc.stdint cimport uint32_t

cdef extern from "crc32c.h":
    void ld_crc32c_init() nogil
    int ld_crc32c_have_hw
    uint32_t ld_crc32c(uint32_t value, const unsigned char *p, size_t n) nogil
    uint32_t ld_crc32c_portable(uint32_t value, const unsigned char *p, size_t n) nogil
