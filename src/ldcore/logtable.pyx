# Per-log integers for a node that holds many logs: log id -> a row of ``columns``
# unsigned 64-bit values, in one open-addressing hash table (linear probing, rows stored
# inline).  A Python dict of log -> int costs 90-140 bytes a log (its slot, the key and
# the value objects, a tuple when there are several); here a row costs
# (8 + 8 * columns) bytes over the table's fill (at most 70 %, at least 35 % after a
# growth), and nothing is allocated for a log before it is set.
#
# Every call holds the GIL throughout (no callbacks, no release), so the table is as safe
# to share between threads as a dict is.
import numpy as np

from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.stdint cimport uint64_t
from libc.string cimport memset

DEF MIN_CAPACITY = 16


cdef inline uint64_t _mix(uint64_t x) noexcept nogil:
    # splitmix64's finaliser: log ids come in dense ranges, slots must not.
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL
    return x ^ (x >> 31)


cdef class LogTable:
    """Log id -> ``columns`` unsigned 64-bit integers (see the module comment).

    A log never set reads as absent (``get`` returns its default); a log set reads 0 in
    the columns not set.
    """

    cdef uint64_t *_keys  # log id + 1 (0: empty slot), so that log id 0 works too
    cdef uint64_t *_rows  # (capacity + 1) * columns: the last row is log id 2**64 - 1's
    cdef Py_ssize_t _capacity, _used
    cdef bint _has_last  # log id 2**64 - 1 (key 0) is set
    cdef readonly Py_ssize_t columns

    def __cinit__(self, Py_ssize_t columns=1):
        if columns < 1:
            raise ValueError(f"a log table needs at least one column, got {columns}")
        self.columns = columns
        self._allocate(MIN_CAPACITY)

    def __dealloc__(self):
        PyMem_Free(self._keys)
        PyMem_Free(self._rows)

    cdef void _allocate(self, Py_ssize_t capacity) except *:
        cdef uint64_t *keys = <uint64_t *>PyMem_Malloc(capacity * sizeof(uint64_t))
        cdef uint64_t *rows = <uint64_t *>PyMem_Malloc(
            (capacity + 1) * self.columns * sizeof(uint64_t))
        if keys == NULL or rows == NULL:
            PyMem_Free(keys)
            PyMem_Free(rows)
            raise MemoryError()
        memset(keys, 0, capacity * sizeof(uint64_t))
        memset(rows, 0, (capacity + 1) * self.columns * sizeof(uint64_t))
        self._keys, self._rows, self._capacity, self._used = keys, rows, capacity, 0

    cdef Py_ssize_t _find(self, uint64_t key) noexcept:
        """The slot holding ``key`` (log id + 1), or the empty slot where it would go."""
        cdef Py_ssize_t mask = self._capacity - 1
        cdef Py_ssize_t i = <Py_ssize_t>(_mix(key) & <uint64_t>mask)
        while self._keys[i] != 0 and self._keys[i] != key:
            i = (i + 1) & mask
        return i

    cdef Py_ssize_t _slot(self, uint64_t log_id) noexcept:
        """The row of ``log_id``, or -1 when it is not set."""
        cdef uint64_t key = log_id + 1
        if key == 0:
            return self._capacity if self._has_last else -1
        cdef Py_ssize_t i = self._find(key)
        return i if self._keys[i] != 0 else -1

    cdef void _grow(self) except *:
        cdef uint64_t *old_keys = self._keys
        cdef uint64_t *old_rows = self._rows
        cdef Py_ssize_t old_capacity = self._capacity, i, j, c, n = self.columns
        cdef Py_ssize_t used = self._used
        self._allocate(old_capacity * 2)
        for i in range(old_capacity):
            if old_keys[i] != 0:
                j = self._find(old_keys[i])
                self._keys[j] = old_keys[i]
                for c in range(n):
                    self._rows[j * n + c] = old_rows[i * n + c]
        for c in range(n):
            self._rows[self._capacity * n + c] = old_rows[old_capacity * n + c]
        self._used = used
        PyMem_Free(old_keys)
        PyMem_Free(old_rows)

    cdef inline void _check_column(self, Py_ssize_t column) except *:
        if not 0 <= column < self.columns:
            raise IndexError(f"column {column} of a {self.columns}-column log table")

    cpdef object get(self, uint64_t log_id, Py_ssize_t column=0, object default=None):
        """The log's value in ``column``; ``default`` when the log was never set."""
        self._check_column(column)
        cdef Py_ssize_t i = self._slot(log_id)
        if i < 0:
            return default
        return self._rows[i * self.columns + column]

    cpdef void set(self, uint64_t log_id, Py_ssize_t column, uint64_t value) except *:
        """Set the log's value in ``column`` (the log's other columns read 0 until set)."""
        self._check_column(column)
        cdef uint64_t key = log_id + 1
        cdef Py_ssize_t i
        if key == 0:
            if not self._has_last:
                self._has_last = True
                self._used += 1
            self._rows[self._capacity * self.columns + column] = value
            return
        i = self._find(key)
        if self._keys[i] == 0:
            if (self._used + 1) * 10 > self._capacity * 7:
                self._grow()
                i = self._find(key)
            self._keys[i] = key
            self._used += 1
        self._rows[i * self.columns + column] = value

    def set_many(self, const uint64_t[:] log_ids, Py_ssize_t column,
                 const uint64_t[:] values):
        """``set`` of each log in ``log_ids`` to the value at the same place in
        ``values`` (a node's start-up loads every log's metadata this way)."""
        if log_ids.shape[0] != values.shape[0]:
            raise ValueError(f"{log_ids.shape[0]} log ids but {values.shape[0]} values")
        self._check_column(column)
        cdef Py_ssize_t j
        for j in range(log_ids.shape[0]):
            self.set(log_ids[j], column, values[j])

    def get_many(self, const uint64_t[:] log_ids, Py_ssize_t column=0):
        """``get`` of each log in ``log_ids`` as a uint64 array (0 for a log never set)."""
        self._check_column(column)
        out = np.zeros(log_ids.shape[0], np.uint64)
        cdef uint64_t[::1] o = out
        cdef Py_ssize_t j, i
        for j in range(log_ids.shape[0]):
            i = self._slot(log_ids[j])
            if i >= 0:
                o[j] = self._rows[i * self.columns + column]
        return out

    cpdef tuple row(self, uint64_t log_id):
        """Every column of the log (zeros when it was never set)."""
        cdef Py_ssize_t i = self._slot(log_id), c, n = self.columns
        if i < 0:
            return (0,) * n
        return tuple([self._rows[i * n + c] for c in range(n)])

    def discard(self, uint64_t log_id):
        """Forget the log (nothing if it was never set)."""
        cdef Py_ssize_t mask = self._capacity - 1, n = self.columns
        cdef Py_ssize_t i = self._slot(log_id), j, home, c
        if i < 0:
            return
        if i == self._capacity:  # log id 2**64 - 1
            self._has_last = False
            self._used -= 1
            for c in range(n):
                self._rows[i * n + c] = 0
            return
        for c in range(n):
            self._rows[i * n + c] = 0
        # Backward-shift deletion: move later entries of the probe run into the hole.
        j = i
        while True:
            self._keys[i] = 0
            while True:
                j = (j + 1) & mask
                if self._keys[j] == 0:
                    self._used -= 1
                    return
                home = <Py_ssize_t>(_mix(self._keys[j]) & <uint64_t>mask)
                # Entry j may fill hole i unless its home lies cyclically in (i, j].
                if (i <= j and (home <= i or home > j)) or (i > j and home <= i and home > j):
                    break
            self._keys[i] = self._keys[j]
            for c in range(n):
                self._rows[i * n + c] = self._rows[j * n + c]
                self._rows[j * n + c] = 0
            i = j

    def __contains__(self, uint64_t log_id):
        return self._slot(log_id) >= 0

    def __len__(self):
        return self._used

    def logs(self):
        """The log ids set, in no particular order."""
        cdef Py_ssize_t i
        cdef list out = [self._keys[i] - 1 for i in range(self._capacity) if self._keys[i] != 0]
        if self._has_last:
            out.append(0xFFFFFFFFFFFFFFFF)
        return out

    def __sizeof__(self):
        return object.__sizeof__(self) + self.nbytes()

    def nbytes(self):
        """Bytes the table holds (its arrays)."""
        return (self._capacity * (1 + self.columns) + self.columns) * sizeof(uint64_t)
