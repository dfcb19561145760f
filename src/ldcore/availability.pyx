# BP-34 condensed availability: a sorted set of entry ids (or LSNs) as sequence groups.
#
# A "sequence" is a run of consecutive ids; "size" is its length.  Consecutive sequences
# of the same size whose starts are the same distance ("period") apart form a group:
#
#   1 2 _ 4 5 _ 7 8 _ 10 11   ->  one group {first=1, last=10, size=2, period=3}
#   entries of a group = size                              if first == last (period 0)
#                      = ((last - first) / period + 1) * size   otherwise
#
# Bytes, all big-endian (Java's DataOutput, as BookKeeper writes them):
#
#   0        4        8                                                   64
#   +--------+--------+----------------------------------------------------+
#   | ver=0  | groups |              56 reserved bytes, all zero           |  header
#   +--------+--------+----------------------------------------------------+
#   then `groups` times, 24 bytes each:
#   0                 8                 16         20         24
#   +-----------------+-----------------+----------+----------+
#   | firstSeqStart   | lastSeqStart    | seqSize  | seqPeriod|
#   |  int64          |  int64          |  int32   |  int32   |
#   +-----------------+-----------------+----------+----------+
#
# Grouping is greedy, left to right: a sequence joins the open group if it has the
# group's size and (for a group of one sequence) any spacing that fits in an int32, or
# (for a longer group) exactly the group's period; otherwise it opens a new group.
# Runs longer than 2**31 - 1 are cut into sequences of that size, spaced by it.
# Ids are non-negative int64 (what the format can carry); LSNs at or above 2**63 are
# refused by encode and are simply "not contained" for queries.
#
# Unlike BookKeeper's code, groups merge (its encoder never does) and "missing" is exact
# for every schedule (its query gives up once a probe passes a group's end by two).
import numpy as np

cimport numpy as cnp
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.stdint cimport INT32_MAX, INT64_MAX, int32_t, int64_t, uint8_t, uint32_t, uint64_t

cnp.import_array()

VERSION = 0
HEADER_SIZE = 64
GROUP_SIZE = 24

cdef enum:
    _HEADER = 64
    _GROUP = 24


class AvailabilityError(ValueError):
    """Bytes that are not a valid condensed availability, or values it cannot hold."""


# ---------------------------------------------------------------- big-endian helpers

cdef inline void _put64(uint8_t *p, uint64_t v) noexcept nogil:
    cdef int i
    for i in range(8):
        p[i] = <uint8_t>(v >> (56 - 8 * i))


cdef inline void _put32(uint8_t *p, uint64_t v) noexcept nogil:
    cdef int i
    for i in range(4):
        p[i] = <uint8_t>(v >> (24 - 8 * i))


cdef inline int64_t _get64(const uint8_t *p) noexcept nogil:
    cdef uint64_t v = 0
    cdef int i
    for i in range(8):
        v = (v << 8) | p[i]
    return <int64_t>v


cdef inline int32_t _get32(const uint8_t *p) noexcept nogil:
    cdef uint64_t v = 0
    cdef int i
    for i in range(4):
        v = (v << 8) | p[i]
    return <int32_t><uint32_t>v


# ---------------------------------------------------------------- encode

cdef Py_ssize_t _group(const uint64_t *v, Py_ssize_t n, uint8_t *out) noexcept nogil:
    # One pass over sorted unique values; counts the groups and, if out is not NULL,
    # writes each as 24 bytes.  Called twice: to size the output, then to fill it.
    cdef Py_ssize_t i = 0, j, ngroups = 0
    cdef uint64_t start, size
    cdef uint64_t g_first = 0, g_last = 0, g_size = 0, g_period = 0
    cdef bint open_group = False
    while i < n:
        # the next sequence: a run of consecutive values, at most INT32_MAX long
        start = v[i]
        j = i + 1
        while j < n and v[j] == v[j - 1] + 1 and <uint64_t>(j - i) < INT32_MAX:
            j += 1
        size = <uint64_t>(j - i)
        i = j
        if open_group and size == g_size:
            if g_first == g_last:
                if start - g_first <= INT32_MAX:
                    g_period = start - g_first
                    g_last = start
                    continue
            elif start - g_last == g_period:
                g_last = start
                continue
        if open_group:
            if out != NULL:
                _put_group(out + _GROUP * ngroups, g_first, g_last, g_size, g_period)
            ngroups += 1
        g_first = start
        g_last = start
        g_size = size
        g_period = 0
        open_group = True
    if open_group:
        if out != NULL:
            _put_group(out + _GROUP * ngroups, g_first, g_last, g_size, g_period)
        ngroups += 1
    return ngroups


cdef inline void _put_group(uint8_t *p, uint64_t first, uint64_t last, uint64_t size,
                            uint64_t period) noexcept nogil:
    _put64(p, first)
    _put64(p + 8, last)
    _put32(p + 16, size)
    _put32(p + 20, period)


cdef object _as_u64_query(values):
    # Any integer array as uint64 such that negatives land at or above 2**63, where no
    # group reaches, so they come out "not contained".
    a = np.asarray(values)
    if a.size == 0:
        return np.zeros(a.shape, dtype=np.uint64)
    if a.dtype.kind == "u":
        return np.ascontiguousarray(a, dtype=np.uint64)
    if a.dtype.kind == "i":
        return np.ascontiguousarray(a, dtype=np.int64).view(np.uint64)
    raise TypeError(f"expected an array of integers, got dtype {a.dtype}")


def encode(values):
    """Condensed availability bytes of a sorted set of ids.

    Parameters
    ----------
    values : array of int64 or uint64
        Strictly increasing, each in ``[0, 2**63)``.

    Returns
    -------
    bytes
        64-byte header and 24 bytes per sequence group (big-endian).

    Raises
    ------
    AvailabilityError
        If the values are not strictly increasing or fall outside ``[0, 2**63)``.
    """
    a = np.asarray(values)
    if a.ndim != 1:
        raise AvailabilityError(f"values must be one-dimensional, got shape {a.shape}")
    if a.size and a.dtype.kind not in "iu":
        raise AvailabilityError(f"values must be integers, got dtype {a.dtype}")
    if a.size and a.dtype.kind == "i" and (a < 0).any():
        raise AvailabilityError(f"values must not be negative, got {a.min()}")
    cdef const uint64_t[::1] v = _as_u64_query(a)
    cdef Py_ssize_t n = v.shape[0], i, bad = -1, ngroups = 0
    with nogil:
        for i in range(1, n):
            if v[i] <= v[i - 1]:
                bad = i
                break
    if bad >= 0:
        raise AvailabilityError(
            f"values must be strictly increasing: index {bad} holds {a[bad]} "
            f"after {a[bad - 1]}")
    if n and v[n - 1] > <uint64_t>INT64_MAX:
        raise AvailabilityError(f"values must be below 2**63, got {a[n - 1]}")
    cdef const uint64_t *base = &v[0] if n else NULL
    with nogil:
        ngroups = _group(base, n, NULL)
    if ngroups > INT32_MAX:
        raise AvailabilityError(f"{ngroups} groups do not fit the int32 group count")
    result = PyBytes_FromStringAndSize(NULL, _HEADER + _GROUP * ngroups)
    cdef uint8_t *out = <uint8_t *>PyBytes_AS_STRING(result)
    with nogil:
        for i in range(_HEADER):
            out[i] = 0
        _put32(out, 0)
        _put32(out + 4, <uint64_t>ngroups)
        _group(base, n, out + _HEADER)
    return result


# ---------------------------------------------------------------- decode

cdef enum:
    E_OK = 0
    E_NEG_FIRST
    E_ORDER
    E_SIZE
    E_PERIOD_SINGLE
    E_PERIOD
    E_STRIDE
    E_OVERFLOW
    E_OVERLAP


def decode(data):
    """Parse condensed availability bytes.

    Parameters
    ----------
    data : bytes-like

    Returns
    -------
    Availability

    Raises
    ------
    AvailabilityError
        Wrong length, unknown version, a group count that disagrees with the length,
        non-zero reserved bytes, or a group that is not well formed (negative start,
        last before first, size <= 0, period < size or not dividing the span, a period
        on a one-sequence group, overflow past 2**63, groups out of order or overlapping).
    """
    cdef const uint8_t[::1] view = data
    cdef Py_ssize_t size = view.shape[0]
    cdef Py_ssize_t g, i
    if size < _HEADER:
        raise AvailabilityError(f"availability needs a 64-byte header, got {size} bytes")
    cdef const uint8_t *p = &view[0]
    cdef int32_t version = _get32(p)
    cdef int32_t count = _get32(p + 4)
    if version != 0:
        raise AvailabilityError(f"unknown availability version {version} (expected 0)")
    if (size - _HEADER) % _GROUP:
        raise AvailabilityError(
            f"{size - _HEADER} bytes after the header are not a whole number of "
            f"24-byte groups")
    g = (size - _HEADER) // _GROUP
    if count != g:
        raise AvailabilityError(f"header says {count} groups, the data holds {g}")
    for i in range(8, _HEADER):
        if p[i]:
            raise AvailabilityError(f"reserved header byte {i} is 0x{p[i]:02x}, not 0")
    first = np.empty(g, dtype=np.int64)
    last = np.empty(g, dtype=np.int64)
    sizes = np.empty(g, dtype=np.int64)
    periods = np.empty(g, dtype=np.int64)
    cdef int64_t[::1] f = first, ls = last, s = sizes, t = periods
    cdef const uint8_t *q
    with nogil:
        for i in range(g):
            q = p + _HEADER + _GROUP * i
            f[i] = _get64(q)
            ls[i] = _get64(q + 8)
            s[i] = _get32(q + 16)
            t[i] = _get32(q + 20)
    return _validated(first, last, sizes, periods)


def from_groups(first, last, sizes, periods):
    """An ``Availability`` from its groups given as four arrays (each group's first
    sequence start, last sequence start, sequence size and period), checked as ``decode``
    checks the bytes' groups.  What a reader of a packed form of the bytes calls instead
    of rebuilding them."""
    cols = [np.ascontiguousarray(a, dtype=np.int64) for a in (first, last, sizes, periods)]
    if len({len(a) for a in cols}) != 1 or cols[0].ndim != 1:
        raise AvailabilityError("group columns must be 1-D and of one length")
    return _validated(cols[0], cols[1], cols[2], cols[3])


cdef object _validated(first, last, sizes, periods):
    """The Availability of these groups, or AvailabilityError naming the first bad one."""
    cdef int64_t[::1] f = first, ls = last, s = sizes, t = periods
    cdef Py_ssize_t g = f.shape[0], i
    cum = np.empty(g + 1, dtype=np.uint64)
    cdef uint64_t[::1] c = cum
    cdef int code = E_OK
    cdef Py_ssize_t at = -1
    cdef int64_t prev_end = -1
    with nogil:
        c[0] = 0
        for i in range(g):
            at = i
            if f[i] < 0:
                code = E_NEG_FIRST
            elif ls[i] < f[i]:
                code = E_ORDER
            elif s[i] <= 0 or s[i] > INT32_MAX:
                code = E_SIZE
            elif ls[i] == f[i] and t[i] != 0:
                code = E_PERIOD_SINGLE
            elif ls[i] != f[i] and (t[i] < s[i] or t[i] > INT32_MAX):
                code = E_PERIOD
            elif ls[i] != f[i] and (ls[i] - f[i]) % t[i] != 0:
                code = E_STRIDE
            elif ls[i] > INT64_MAX - (s[i] - 1):
                code = E_OVERFLOW
            elif f[i] <= prev_end:
                code = E_OVERLAP
            if code != E_OK:
                break
            prev_end = ls[i] + (s[i] - 1)
            if ls[i] == f[i]:
                c[i + 1] = c[i] + <uint64_t>s[i]
            else:
                c[i + 1] = c[i] + (<uint64_t>((ls[i] - f[i]) // t[i]) + 1) * <uint64_t>s[i]
    if code != E_OK:
        grp = (f"group {at} {{first={f[at]}, last={ls[at]}, size={s[at]}, "
               f"period={t[at]}}}")
        why = {
            E_NEG_FIRST: "starts below 0",
            E_ORDER: "has its last sequence before its first",
            E_SIZE: "has a sequence size that is not positive (or above 2**31 - 1)",
            E_PERIOD_SINGLE: "has one sequence but a non-zero period",
            E_PERIOD: "has a period smaller than its sequence size (or above 2**31 - 1)",
            E_STRIDE: "has a span that is not a multiple of its period",
            E_OVERFLOW: "runs past 2**63 - 1",
            E_OVERLAP: f"starts at or before the previous group's end {prev_end}",
        }[code]
        raise AvailabilityError(f"{grp} {why}")
    return Availability._make(first, last, sizes, periods, cum)


# ---------------------------------------------------------------- queries

cdef inline bint _contains(const int64_t *f, const int64_t *ls, const int64_t *s,
                           const int64_t *t, Py_ssize_t g, uint64_t x) noexcept nogil:
    cdef Py_ssize_t lo = 0, hi = g, mid
    cdef uint64_t off
    if x > <uint64_t>INT64_MAX:
        return False
    # the last group whose first start is <= x
    while lo < hi:
        mid = (lo + hi) >> 1
        if <uint64_t>f[mid] <= x:
            lo = mid + 1
        else:
            hi = mid
    if lo == 0:
        return False
    lo -= 1
    if x > <uint64_t>(ls[lo] + (s[lo] - 1)):
        return False
    off = x - <uint64_t>f[lo]
    if t[lo] == 0:
        return off < <uint64_t>s[lo]
    return off % <uint64_t>t[lo] < <uint64_t>s[lo]


cdef class Availability:
    """A decoded condensed availability: which ids a node holds.

    Attributes
    ----------
    groups : list of (first_start, last_start, size, period)
    count : int
        Number of ids held.
    """

    cdef object _first, _last, _size, _period, _cum
    cdef uint64_t total
    cdef const int64_t[::1] f, ls, s, t

    @staticmethod
    cdef Availability _make(first, last, sizes, periods, cum):
        cdef Availability a = Availability.__new__(Availability)
        a._first = first
        a._last = last
        a._size = sizes
        a._period = periods
        a._cum = cum
        a.total = cum[len(cum) - 1]
        a.f = first
        a.ls = last
        a.s = sizes
        a.t = periods
        return a

    def __init__(self):
        raise TypeError("use ldcore.availability.decode(bytes) to make an Availability")

    @property
    def groups(self):
        """The sequence groups as ``(first_start, last_start, size, period)`` tuples."""
        return list(zip(self._first.tolist(), self._last.tolist(), self._size.tolist(),
                        self._period.tolist()))

    @property
    def count(self):
        """How many ids the groups hold."""
        return int(self.total)

    def contains(self, x):
        """Whether id ``x`` is held."""
        x = int(x)
        if x < 0 or x > INT64_MAX:
            return False
        cdef Py_ssize_t g = self.f.shape[0]
        if g == 0:
            return False
        return bool(_contains(&self.f[0], &self.ls[0], &self.s[0], &self.t[0], g,
                              <uint64_t>x))

    def __contains__(self, x):
        return self.contains(x)

    def contains_many(self, values):
        """Boolean array: which of ``values`` (any integer array) are held."""
        q = _as_u64_query(values)
        out = np.zeros(q.shape, dtype=np.bool_)
        cdef const uint64_t[::1] v = q.ravel()
        cdef uint8_t[::1] r = out.reshape(-1).view(np.uint8)
        cdef Py_ssize_t n = v.shape[0], g = self.f.shape[0], i
        if n == 0 or g == 0:
            return out
        cdef const int64_t *f = &self.f[0]
        cdef const int64_t *ls = &self.ls[0]
        cdef const int64_t *s = &self.s[0]
        cdef const int64_t *t = &self.t[0]
        with nogil:
            for i in range(n):
                r[i] = _contains(f, ls, s, t, g, v[i])
        return out

    def missing(self, expected):
        """The elements of ``expected`` that are not held, in their given order."""
        e = np.asarray(expected)
        if e.size == 0:
            return e.ravel()
        return e.ravel()[~self.contains_many(e).ravel()]

    def to_array(self):
        """Every held id, ascending, as int64."""
        out = np.empty(self.total, dtype=np.int64)
        cdef int64_t[::1] o = out
        cdef Py_ssize_t g = self.f.shape[0], i
        cdef int64_t start, k
        cdef uint64_t w = 0
        with nogil:
            for i in range(g):
                start = self.f[i]
                while True:
                    # start + k stays <= the group's end, so never past 2**63 - 1
                    for k in range(self.s[i]):
                        o[w] = start + k
                        w += 1
                    if start == self.ls[i]:
                        break
                    start += self.t[i]
        return out

    def __eq__(self, other):
        if not isinstance(other, Availability):
            return NotImplemented
        return self.groups == other.groups

    def __hash__(self):
        return hash(tuple(self.groups))

    def __repr__(self):
        return f"Availability(count={self.count}, groups={self.groups!r})"
