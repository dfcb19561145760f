from libc.stdint cimport uint32_t, uint64_t

cdef extern from *:
    """
    #define LD_EPOCH_OF(x) ((uint32_t)((x) >> 32))
    #define LD_ESN_OF(x) ((uint32_t)((x) & 0xFFFFFFFFu))
    #define LD_COMPOSE(e, n) ((((uint64_t)(e)) << 32) | (uint64_t)(n))
    """
    uint32_t LD_EPOCH_OF(uint64_t x) nogil
    uint32_t LD_ESN_OF(uint64_t x) nogil
    uint64_t LD_COMPOSE(uint32_t e, uint32_t n) nogil
