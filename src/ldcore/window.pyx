# The client read stream's buffer: which LSNs in [head, head + capacity) have arrived.
#
# A ring of int64 handles (an index into the caller's own record store; -1 = empty):
#
#   LSN:    head      head+1     ...                          head+capacity-1
#   slot:   base      base+1     ... allocated-1, 0, 1, ... base-1
#
# pop_ready() takes the filled run starting at head and moves head past it; advance()
# moves head forward over a gap, handing back what it drops.  Moving head by d costs
# O(min(d, capacity)): a jump across epochs (~2**32 LSNs) clears the ring once.
# Offsets are computed as lsn - head (never head + capacity), so nothing overflows near
# LSN_MAX; once LSN_MAX itself is passed, head reads 2**64 and every LSN is stale.
#
# The ring is allocated as far as it is used: INITIAL_SLOTS at first, doubled (in LSN
# order, base back at 0) when an LSN lands past the allocated slots, up to capacity.  A
# reader over thousands of logs, most with a few records in flight, keeps a few hundred
# bytes per stream instead of the whole window (128 KiB for 16,384 LSNs).
#
# Not thread-safe: one owner (the read stream state machine) drives it.
import operator

import numpy as np

cimport numpy as cnp
from libc.stdint cimport int8_t, int64_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc

cnp.import_array()

DEF_CAPACITY = 512
#: Slots a window allocates at first (fewer if its capacity is smaller).
INITIAL_SLOTS = 64
MAX_CAPACITY = 1 << 32
cdef uint64_t LSN_MAX = 0xFFFFFFFFFFFFFFFF
cdef object PAST_END = 1 << 64

INSERTED = 1
DUPLICATE = 0
STALE = -1
BEYOND = -2


cdef inline object _int_arg(object x, str what):
    try:
        return operator.index(x)
    except TypeError:
        raise ValueError(f"{what} must be an int, got {type(x).__name__}") from None


cdef inline uint64_t _lsn_arg(object x) except? 0:
    x = _int_arg(x, "lsn")
    if not 0 <= x <= LSN_MAX:
        raise ValueError(f"lsn {x} is not in [0, 2**64)")
    return <uint64_t>x


cdef inline object _head_arg(object x, str what):
    # A head may also be 2**64: "past LSN_MAX", where every LSN is stale.
    x = _int_arg(x, what)
    if not 0 <= x <= PAST_END:
        raise ValueError(f"{what} {x} is not in [0, 2**64]")
    return x


cdef inline int64_t _handle_arg(object x) except? -1:
    x = _int_arg(x, "handle")
    if not 0 <= x <= 0x7FFFFFFFFFFFFFFF:
        raise ValueError(f"handle {x} must be a non-negative int64")
    return <int64_t>x


cdef class Window:
    """Slots for the LSNs ``[head, head + capacity)`` of one read stream.

    Parameters
    ----------
    head : int
        The first LSN to deliver, in ``[0, 2**64]`` (``2**64``: past ``LSN_MAX``).
    capacity : int
        Number of slots, ``1 <= capacity <= 2**32``.

    Notes
    -----
    Insert results: 1 inserted, 0 duplicate (slot already filled), -1 below head
    (stale), -2 at or after ``head + capacity`` (beyond the window).  Handles are
    non-negative int64 values chosen by the caller.  LSN 0 (``LSN_INVALID``) is never a
    record; ``first_filled`` uses 0 to say "none".
    """

    def __cinit__(self, head, capacity=DEF_CAPACITY):
        cap = _int_arg(capacity, "capacity")
        if not 1 <= cap <= MAX_CAPACITY:
            raise ValueError(f"capacity {cap} is not in [1, 2**32]")
        alloc = min(cap, INITIAL_SLOTS)
        self._slots = <int64_t*>malloc(sizeof(int64_t) * <size_t>alloc)
        if self._slots == NULL:
            raise MemoryError(f"cannot allocate a window of {alloc} slots")
        self._cap = cap
        self._alloc = alloc
        self._reset(_head_arg(head, "head"))

    def __dealloc__(self):
        free(self._slots)

    cdef void _set_head(self, object head):
        self._past_end = head == PAST_END
        self._head = 0 if self._past_end else <uint64_t>head

    cdef void _reset(self, object head):
        cdef Py_ssize_t i
        for i in range(self._alloc):
            self._slots[i] = -1
        self._base = 0
        self._count = 0
        self._set_head(head)

    cdef Py_ssize_t _slot(self, Py_ssize_t off) noexcept nogil:
        cdef Py_ssize_t s = self._base + off
        return s - self._alloc if s >= self._alloc else s

    cdef int _grow(self, Py_ssize_t need) noexcept nogil:
        # Allocate at least `need` slots (<= _cap), in LSN order from slot 0; -1 if out of
        # memory (nothing changed).
        cdef Py_ssize_t off, size = self._alloc
        while size < need:
            size *= 2
        if size > self._cap:
            size = self._cap
        cdef int64_t* slots = <int64_t*>malloc(sizeof(int64_t) * <size_t>size)
        if slots == NULL:
            return -1
        for off in range(self._alloc):
            slots[off] = self._slots[self._slot(off)]
        for off in range(self._alloc, size):
            slots[off] = -1
        free(self._slots)
        self._slots = slots
        self._alloc = size
        self._base = 0
        return 0

    cdef int _insert(self, uint64_t lsn, int64_t handle) except -3 nogil:
        cdef uint64_t off
        cdef Py_ssize_t s
        if self._past_end or lsn < self._head:
            return -1
        off = lsn - self._head
        if off >= <uint64_t>self._cap:
            return -2
        if off >= <uint64_t>self._alloc and self._grow(<Py_ssize_t>off + 1) < 0:
            with gil:
                raise MemoryError(f"cannot grow a window to {off + 1} slots")
        s = self._slot(<Py_ssize_t>off)
        if self._slots[s] >= 0:
            return 0
        self._slots[s] = handle
        self._count += 1
        return 1

    cdef int64_t _get(self, uint64_t lsn) noexcept nogil:
        cdef uint64_t off
        if self._past_end or lsn < self._head:
            return -1
        off = lsn - self._head
        if off >= <uint64_t>self._alloc:  # beyond the window, or not allocated: empty
            return -1
        return self._slots[self._slot(<Py_ssize_t>off)]

    cdef tuple _take(self, Py_ssize_t span):
        # Remove the filled slots among the first `span` offsets, in LSN order.
        cdef Py_ssize_t off, s, k = 0, n = 0
        if self._count == 0:
            return np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.int64)
        if span > self._alloc:  # the slots past the allocated ones are empty
            span = self._alloc
        for off in range(span):
            if self._slots[self._slot(off)] >= 0:
                n += 1
                if n == self._count:
                    break
        lsns = np.empty(n, dtype=np.uint64)
        handles = np.empty(n, dtype=np.int64)
        cdef uint64_t[::1] lv = lsns
        cdef int64_t[::1] hv = handles
        if n:
            for off in range(span):
                s = self._slot(off)
                if self._slots[s] >= 0:
                    lv[k] = self._head + <uint64_t>off
                    hv[k] = self._slots[s]
                    self._slots[s] = -1
                    k += 1
                    if k == n:
                        break
        self._count -= n
        return lsns, handles

    @property
    def head(self):
        """Next LSN to deliver (``2**64`` once ``LSN_MAX`` has been passed)."""
        return PAST_END if self._past_end else self._head

    @property
    def capacity(self):
        """The window's size in LSNs."""
        return self._cap

    @property
    def allocated(self):
        """Slots allocated now (grows with the farthest LSN inserted, up to capacity)."""
        return self._alloc

    def __len__(self):
        return self._count

    def __repr__(self):
        return f"Window(head={self.head}, capacity={self._cap}, filled={self._count})"

    def insert(self, lsn, handle):
        """Put ``handle`` in the slot of ``lsn``.

        Returns
        -------
        int
            1 inserted, 0 duplicate, -1 stale (below head), -2 beyond the window.
        """
        return self._insert(_lsn_arg(lsn), _handle_arg(handle))

    def insert_many(self, lsns, handles):
        """``insert`` for arrays of LSNs and handles, in order; returns int8 codes.

        Parameters
        ----------
        lsns : array_like of uint64
            Any integer dtype; negative values are rejected.
        handles : array_like of int64
            Non-negative, same length as ``lsns``.

        Returns
        -------
        numpy.ndarray of int8
            One code per LSN (a repeated LSN gets 0 after its first insert).
        """
        cdef const uint64_t[::1] lv = _u64_array(lsns, "lsns")
        cdef const int64_t[::1] hv = _handle_array(handles)
        cdef Py_ssize_t i, n = lv.shape[0]
        if hv.shape[0] != n:
            raise ValueError(f"lsns and handles differ in length ({n} != {hv.shape[0]})")
        codes = np.empty(n, dtype=np.int8)
        cdef int8_t[::1] cv = codes
        with nogil:
            for i in range(n):
                cv[i] = <int8_t>self._insert(lv[i], hv[i])
        return codes

    def insert_run(self, const uint64_t[:] lsns, int64_t first_handle,
                   const uint32_t[:] flags, uint32_t mark):
        """``insert`` of a batch's records (LSNs in rising order), record i with handle
        ``first_handle + i``, up to the first LSN beyond the window (the later ones would
        be beyond too).  What a read stream needs of the codes, without an array of them:

        Returns
        -------
        tuple
            ``(taken, inserted, marked)``: how many LSNs, from the first, were not
            beyond the window; how many of them went in; the indices of the duplicates
            whose ``flags`` have a bit of ``mark`` (list of int).
        """
        cdef Py_ssize_t i, n = lsns.shape[0], inserted = 0
        if flags.shape[0] != n:
            raise ValueError(f"lsns and flags differ in length ({n} != {flags.shape[0]})")
        if first_handle < 0 or n and first_handle > 0x7FFFFFFFFFFFFFFF - (n - 1):
            raise ValueError(f"handles from {first_handle} must be non-negative int64 values")
        cdef int code
        marked = []
        for i in range(n):
            code = self._insert(lsns[i], first_handle + i)
            if code == -2:
                return i, inserted, marked
            if code == 1:
                inserted += 1
            elif code == 0 and flags[i] & mark:
                marked.append(i)
        return n, inserted, marked

    def get(self, lsn):
        """The handle stored for ``lsn``, or -1 (empty, stale or beyond the window)."""
        return self._get(_lsn_arg(lsn))

    def replace(self, lsn, handle):
        """Put ``handle`` in the filled slot of ``lsn`` instead of what is there (a better
        copy of the same record arrived).  Returns the handle it replaced, or -1 (the
        slot is empty, stale or beyond the window: nothing changes)."""
        cdef uint64_t key = _lsn_arg(lsn)
        cdef int64_t h = _handle_arg(handle)
        cdef int64_t old = self._get(key)
        if old >= 0:
            self._slots[self._slot(<Py_ssize_t>(key - self._head))] = h
        return old

    def pop_ready(self):
        """Remove the filled run that starts at head; head moves past it.

        Returns
        -------
        tuple of numpy.ndarray
            ``(lsns uint64, handles int64)``, both empty if the head slot is empty.
        """
        cdef Py_ssize_t k = 0
        if self._past_end:
            return np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.int64)
        while k < self._count and self._slots[self._slot(k)] >= 0:
            k += 1
        out = self._take(k)
        self._move(k)
        return out

    cdef void _move(self, Py_ssize_t k):
        # head += k for k < capacity slots already emptied; LSN_MAX + 1 is "past the end".
        if k == 0:
            return
        if <uint64_t>(k - 1) >= LSN_MAX - self._head:
            self._past_end = True
            self._head = 0
            self._base = 0
            return
        self._head += <uint64_t>k
        self._base = self._slot(k) if k < self._alloc else 0  # else: all emptied

    def advance(self, new_head):
        """Move head forward to ``new_head``, dropping the filled slots passed over.

        Parameters
        ----------
        new_head : int
            ``head <= new_head <= 2**64``.

        Returns
        -------
        tuple of numpy.ndarray
            ``(lsns uint64, handles int64)`` of the dropped slots, in LSN order.
        """
        nh = _head_arg(new_head, "new_head")
        head = self.head
        if nh < head:
            raise ValueError(f"advance() cannot move head back from {head} to {nh}; "
                             f"use clear() to rewind")
        dist = nh - head
        if dist >= self._alloc:
            out = self._take(self._alloc)
            self._base = 0
            self._set_head(nh)
            return out
        out = self._take(dist)
        self._move(dist)
        return out

    def first_filled(self):
        """Smallest filled LSN (all are >= head), or 0 (``LSN_INVALID``) if none."""
        cdef Py_ssize_t off
        if self._count == 0:
            return 0
        for off in range(self._alloc):
            if self._slots[self._slot(off)] >= 0:
                return self._head + <uint64_t>off
        return 0

    def clear(self, new_head):
        """Empty every slot and put head at ``new_head`` (any value: used to rewind)."""
        self._reset(_head_arg(new_head, "new_head"))


def _u64_array(x, what):
    a = np.asarray(x)
    if a.ndim != 1:
        raise ValueError(f"{what} must be a 1-D array, got {a.ndim} dimension(s)")
    if a.dtype != np.uint64:
        if a.size and a.dtype.kind not in "iu":
            raise ValueError(f"{what} must be an integer array, got dtype {a.dtype}")
        if a.size and a.dtype.kind == "i" and int(a.min()) < 0:
            raise ValueError(f"{what} holds a negative value")
    return np.ascontiguousarray(a, dtype=np.uint64)


def _handle_array(x):
    a = np.asarray(x)
    if a.ndim != 1:
        raise ValueError(f"handles must be a 1-D array, got {a.ndim} dimension(s)")
    if a.size:
        if a.dtype.kind not in "iu":
            raise ValueError(f"handles must be an integer array, got dtype {a.dtype}")
        if int(a.min()) < 0 or int(a.max()) > 0x7FFFFFFFFFFFFFFF:
            raise ValueError("handles must be non-negative int64 values")
    return np.ascontiguousarray(a, dtype=np.int64)
