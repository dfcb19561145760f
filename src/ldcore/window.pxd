cimport cython
from libc.stdint cimport int64_t, uint64_t


@cython.final
cdef class Window:
    cdef int64_t* _slots      # one handle per slot, -1 when empty
    cdef Py_ssize_t _cap      # the window's size in LSNs: head + _cap and on are beyond it
    cdef Py_ssize_t _alloc    # slots allocated (<= _cap): offsets from here on are empty
    cdef Py_ssize_t _base     # slot of _head; LSN head + k lives in (_base + k) % _alloc
    cdef Py_ssize_t _count    # filled slots
    cdef uint64_t _head       # next LSN to deliver
    cdef bint _past_end       # LSN_MAX was passed: head reads 2**64, nothing fits

    cdef Py_ssize_t _slot(self, Py_ssize_t off) noexcept nogil
    cdef int _insert(self, uint64_t lsn, int64_t handle) except -3 nogil
    cdef int _grow(self, Py_ssize_t need) noexcept nogil
    cdef int64_t _get(self, uint64_t lsn) noexcept nogil
    cdef void _set_head(self, object head)
    cdef void _reset(self, object head)
    cdef tuple _take(self, Py_ssize_t span)
    cdef void _move(self, Py_ssize_t k)
