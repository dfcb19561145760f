from libc.stdint cimport uint64_t

# Record / CSI flag bits (LogDevice's numbering, shared with RECORD and STORE headers).
cdef enum:
    LD_FLAG_HOLE = 1 << 6
    LD_FLAG_WRITTEN_BY_RECOVERY = 1 << 13
    LD_FLAG_BRIDGE = 1 << 15
    LD_FLAG_DRAINED = 1 << 19

# Node indices are below this bound (lookup tables have one byte per index).
cdef enum:
    LD_MAX_NODES = 65536

# State of the lazy copyset shuffle (see the comment block at the top of scd.pyx).
ctypedef struct ld_shuffle_t:
    uint64_t state      # splitmix64 state
    Py_ssize_t fixed    # positions [0, fixed) of the copyset are final
