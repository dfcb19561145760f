# Single copy delivery (SCD): which storage node ships each record to a reader.
#
# A storage node reading for an SCD reader asks, for every record it holds, "am I the one
# that ships this?"  ``ship_mask`` answers for a whole batch of records in one nogil pass.
# For a record with copyset C, this node ``me`` and the reader's known-down list K:
#
#   1. flags & DRAINED                         -> skip (the record moved elsewhere)
#   2. a rebuilding set is given and no member
#      of C is in it                           -> skip
#   3. flags & (HOLE | BRIDGE)                 -> ship (every reader needs these)
#   4. SCD off (me is None)                    -> ship
#   5. reorder C (seed=None: keep the stored order; an int: the shuffle below)
#   6. local SCD: walk C over the client's region only; the first node that is me or
#      not in K decides (ship iff it is me); no such node -> go on
#   7. walk C; the first node that is me or not in K decides (ship iff it is me).
#      Testing "is me" before "is in K" is what makes a node that sees itself in K act
#      as if it were not there: that is how the reader learns it is back.
#   8. every member of C is in K               -> ship
#
# Copysets arrive as one 2-D int array, a row per record; negative entries are padding
# (-1 by convention).  The common case (stored order, no local SCD, no rebuilding filter,
# at most 4 known-down nodes, width 1..8) runs in scd.h: per-entry bits from SSE2 compares,
# then all rows of a 16-row block at once with shifts and masks, about as fast as a copy
# of the array.  Otherwise node indices (below 65536) index one 64 KiB table of bits for
# K, the local region and the rebuilding set, built only for those kernels; without local
# SCD or a rebuilding filter, a large batch decides each distinct row once and answers
# repeats from a small hash table (scd.h).
#
# The shuffle (seed is an int): identical on every node, process and platform, so that
# the nodes of a copyset agree on who ships.  With GAMMA = 0x9E3779B97F4A7C15 and
# mix64 = the splitmix64 finalizer (xor-shift 30, * 0xBF58476D1CE4E5B9, xor-shift 27,
# * 0x94D049BB133111EB, xor-shift 31), all arithmetic mod 2**64:
#
#   key   = mix64(seed + GAMMA)                      seed taken mod 2**64
#   h     = key ^ n                                  n = number of members (padding dropped)
#   h     = (h ^ w) * 0xBF58476D1CE4E5B9  for each word w packing 4 members (in stored
#           order) 16 bits apiece, the first member in the low bits; the last word may
#           hold fewer.  (One multiply per word: next() below does the avalanche.)
#   state = h;  next() = mix64(state += GAMMA)       (splitmix64)
#   for i in 0 .. n-2:  j = i + (((next() >> 32) * (n - i)) >> 32);  swap(c[i], c[j])
#
# The swaps run front to back, so position i is final after step i: the kernel shuffles
# only as far as it has to look, which is usually one step.
import operator

import numpy as np

cimport numpy as cnp
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc

cnp.import_array()

cdef extern from *:
    """
    #define LD_SCD_GAMMA 0x9E3779B97F4A7C15ULL
    #define LD_SCD_MUL1 0xBF58476D1CE4E5B9ULL
    #define LD_SCD_MUL2 0x94D049BB133111EBULL
    """
    const uint64_t LD_SCD_GAMMA
    const uint64_t LD_SCD_MUL1
    const uint64_t LD_SCD_MUL2

# The plain path (stored order, no local SCD, no rebuilding filter, <= 4 known-down
# nodes, width 1..8): SSE2 on x86-64, a portable loop elsewhere.  See scd.h.
cdef extern from "scd.h":
    int LD_SCD_HAVE_SSE2
    int ld_scd_simd
    void ld_scd_init() noexcept nogil
    ctypedef struct ld_scd_args_int8_t:
        int8_t k[4]
        int8_t me
        int me_ok
    ctypedef struct ld_scd_args_int16_t:
        int16_t k[4]
        int16_t me
        int me_ok
    ctypedef struct ld_scd_args_int32_t:
        int32_t k[4]
        int32_t me
        int me_ok
    ctypedef struct ld_scd_args_int64_t:
        int64_t k[4]
        int64_t me
        int me_ok
    # 0 done, 1 some index >= 2**16 (out is then garbage), -1 width not handled.
    int ld_scd_plain_int8_t(const int8_t* cs, Py_ssize_t n, Py_ssize_t w,
                            const ld_scd_args_int8_t* a, uint8_t* out) noexcept nogil
    int ld_scd_plain_int16_t(const int16_t* cs, Py_ssize_t n, Py_ssize_t w,
                             const ld_scd_args_int16_t* a, uint8_t* out) noexcept nogil
    int ld_scd_plain_int32_t(const int32_t* cs, Py_ssize_t n, Py_ssize_t w,
                             const ld_scd_args_int32_t* a, uint8_t* out) noexcept nogil
    int ld_scd_plain_int64_t(const int64_t* cs, Py_ssize_t n, Py_ssize_t w,
                             const ld_scd_args_int64_t* a, uint8_t* out) noexcept nogil
    # The seeded path's cache of answers per distinct row (see scd.h).
    ctypedef struct ld_scd_cache_t:
        int on
    int ld_scd_cache_init(ld_scd_cache_t* c, const void* cs, Py_ssize_t nrows,
                          Py_ssize_t rowbytes) noexcept nogil
    void ld_scd_cache_free(ld_scd_cache_t* c) noexcept nogil
    Py_ssize_t ld_scd_cache_rows(ld_scd_cache_t* c, Py_ssize_t r, uint8_t* out,
                                 uint64_t* key) noexcept nogil
    void ld_scd_cache_put(ld_scd_cache_t* c, const uint64_t* key, uint8_t res) noexcept nogil

ld_scd_init()

# Whether the plain path's classify step is SSE2 here (else the portable loop).
HAVE_SSE2 = bool(LD_SCD_HAVE_SSE2)


def use_simd(bint enabled):
    """``False`` makes the plain path use its portable classify step even where
    SSE2 is built in (``True`` does nothing without SSE2).  Returns the previous setting."""
    global ld_scd_simd
    previous = bool(ld_scd_simd)
    ld_scd_simd = enabled and LD_SCD_HAVE_SSE2
    return previous


FLAG_HOLE = LD_FLAG_HOLE
FLAG_WRITTEN_BY_RECOVERY = LD_FLAG_WRITTEN_BY_RECOVERY
FLAG_BRIDGE = LD_FLAG_BRIDGE
FLAG_DRAINED = LD_FLAG_DRAINED
MAX_NODES = LD_MAX_NODES

# Rows of one ship_mask call from which _ship_small remembers answers per row (scd.h).
cdef enum:
    CACHE_MIN_ROWS = 4096

# Rows from which a kernel runs without the GIL: below, releasing it costs more than the
# work (a read stream's tail step decides on one or two records) and lets another thread
# take the interpreter away mid-call.
cdef enum:
    NOGIL_MIN_ROWS = 256

# Bits of the per-node lookup table.
cdef enum:
    T_DOWN = 1
    T_LOCAL = 2
    T_REBUILDING = 4

ctypedef fused cs_t:
    int8_t
    int16_t
    int32_t
    int64_t


# --- the shuffle -----------------------------------------------------------------------

cdef inline uint64_t ld_mix64(uint64_t z) noexcept nogil:
    z = (z ^ (z >> 30)) * LD_SCD_MUL1
    z = (z ^ (z >> 27)) * LD_SCD_MUL2
    return z ^ (z >> 31)


cdef inline uint64_t ld_seed_key(uint64_t seed) noexcept nogil:
    return ld_mix64(seed + LD_SCD_GAMMA)


cdef inline void ld_shuffle_start(ld_shuffle_t* st, uint64_t key,
                                  const int32_t* members, Py_ssize_t n) noexcept nogil:
    cdef uint64_t h = key ^ <uint64_t>n
    cdef uint64_t w = 0
    cdef Py_ssize_t i
    for i in range(n):
        w |= <uint64_t>members[i] << (16 * (i & 3))
        if (i & 3) == 3 or i == n - 1:
            h = (h ^ w) * LD_SCD_MUL1
            w = 0
    st.state = h
    st.fixed = 0


cdef inline int32_t ld_shuffle_at(ld_shuffle_t* st, int32_t* members, Py_ssize_t n,
                                  Py_ssize_t i) noexcept nogil:
    # Member at position i of the shuffled copyset, shuffling (Fisher-Yates, front to
    # back) only as far as position i.
    cdef Py_ssize_t k, j
    cdef uint64_t z
    cdef int32_t t
    while st.fixed <= i:
        k = st.fixed
        if k < n - 1:
            st.state += LD_SCD_GAMMA
            z = ld_mix64(st.state)
            j = k + <Py_ssize_t>(((z >> 32) * <uint64_t>(n - k)) >> 32)
            t = members[k]
            members[k] = members[j]
            members[j] = t
        st.fixed = k + 1
    return members[i]


# --- per-row helpers -------------------------------------------------------------------

cdef inline Py_ssize_t _load_row(const cs_t* row, Py_ssize_t width, int32_t* buf,
                                 int64_t* bad) noexcept nogil:
    # Members of one row into buf (padding dropped); -1 and *bad set on a bad index.
    cdef Py_ssize_t c, n = 0
    cdef int64_t v
    for c in range(width):
        v = row[c]
        if v < 0:
            continue
        if cs_t is int32_t or cs_t is int64_t:
            if v >= LD_MAX_NODES:
                bad[0] = v
                return -1
        buf[n] = <int32_t>v
        n += 1
    return n


cdef inline void _start(ld_shuffle_t* st, bint shuffle, uint64_t key, int32_t* m,
                        Py_ssize_t n) noexcept nogil:
    if shuffle:
        ld_shuffle_start(st, key, m, n)
    else:
        st.state = 0
        st.fixed = n


cdef inline int _decide(int32_t* m, Py_ssize_t n, int32_t me, const uint8_t* table,
                        bint have_local, ld_shuffle_t* st) noexcept nogil:
    # Rules 6-8 for one record: 1 ship, 0 do not.  "Up or me" is tested first and the
    # answer returned as a value, so the usual case (first node is up) does not hinge on
    # a data-dependent branch.
    cdef Py_ssize_t i
    cdef int32_t x
    if have_local:
        for i in range(n):
            x = ld_shuffle_at(st, m, n, i)
            if (table[x] & T_LOCAL) and ((table[x] & T_DOWN) == 0 or x == me):
                return x == me
    for i in range(n):
        x = ld_shuffle_at(st, m, n, i)
        if (table[x] & T_DOWN) == 0 or x == me:
            return x == me
    return 1


cdef inline int32_t _first(int32_t* m, Py_ssize_t n, const uint8_t* table,
                           bint have_local, ld_shuffle_t* st) noexcept nogil:
    # The node that rules 6-7 pick, as the reader sees it; -1 if every member is down.
    cdef Py_ssize_t i
    cdef int32_t x
    if have_local:
        for i in range(n):
            x = ld_shuffle_at(st, m, n, i)
            if (table[x] & (T_LOCAL | T_DOWN)) == T_LOCAL:
                return x
    for i in range(n):
        x = ld_shuffle_at(st, m, n, i)
        if not (table[x] & T_DOWN):
            return x
    return -1


# --- kernels (one per dtype via the fused type) ----------------------------------------

cdef Py_ssize_t _ship_kernel(const cs_t* cs, Py_ssize_t nrows, Py_ssize_t width,
                             const uint32_t* flags, const uint8_t* table, int32_t me,
                             bint have_local, bint have_rebuilding, bint shuffle,
                             uint64_t key, int32_t* buf, uint8_t* out,
                             int64_t* bad) noexcept nogil:
    # Returns -1 when done, else the row holding the bad node index *bad.
    cdef Py_ssize_t r, i, n
    cdef uint32_t f
    cdef ld_shuffle_t st
    cdef bint hit
    for r in range(nrows):
        n = _load_row(cs + r * width, width, buf, bad)
        if n < 0:
            return r
        f = flags[r] if flags != NULL else 0
        if f & LD_FLAG_DRAINED:
            out[r] = 0
            continue
        if have_rebuilding:
            hit = False
            for i in range(n):
                if table[buf[i]] & T_REBUILDING:
                    hit = True
                    break
            if not hit:
                out[r] = 0
                continue
        if (f & (LD_FLAG_HOLE | LD_FLAG_BRIDGE)) or me < 0:
            out[r] = 1
            continue
        _start(&st, shuffle, key, buf, n)
        out[r] = <uint8_t>_decide(buf, n, me, table, have_local, &st)
    return -1


cdef inline uint8_t _decide_small(int32_t* m, Py_ssize_t n, uint64_t w0, uint64_t w1,
                                  const uint8_t* table, int32_t me, bint shuffle,
                                  uint64_t key) noexcept nogil:
    # Rules 5, 7, 8 for the n members m of one row, w0/w1 their hash words.
    cdef ld_shuffle_t st
    cdef Py_ssize_t i
    cdef int32_t x
    st.fixed = n
    st.state = 0
    if shuffle:
        st.fixed = 0
        st.state = key ^ <uint64_t>n
        if n > 0:
            st.state = (st.state ^ w0) * LD_SCD_MUL1
        if n > 4:
            st.state = (st.state ^ w1) * LD_SCD_MUL1
    for i in range(n):
        x = ld_shuffle_at(&st, m, n, i)
        if (table[x] & T_DOWN) == 0 or x == me:
            return x == me
    return 1


cdef Py_ssize_t _ship_small(const cs_t* cs, Py_ssize_t nrows, Py_ssize_t width,
                            const uint8_t* table, int32_t me, bint shuffle, uint64_t key,
                            ld_scd_cache_t* cache, uint8_t* out, int64_t* bad) noexcept nogil:
    # Rules 5, 7, 8 for rows of at most 8 entries (no local SCD, no rebuilding filter;
    # the caller applies flags).  The same steps as _ship_kernel with the members in a
    # stack array and the shuffle state in registers.  With a cache (NULL, or set up on
    # these rows: scd.h), only the rows it does not know are decided here.
    cdef int32_t m[8]
    cdef Py_ssize_t r = 0, c, n
    cdef uint64_t w0, w1, prev_w0 = 0, prev_w1 = 0
    cdef uint64_t rowkey[2]
    cdef Py_ssize_t prev_n = -1
    cdef uint8_t res = 1
    while r < nrows:
        if cache != NULL:
            r = ld_scd_cache_rows(cache, r, out, rowkey)
            if r == nrows:
                break
        n = _load_row(cs + r * width, width, m, bad)
        if n < 0:
            return r
        # The hash words of ld_shuffle_start.
        w0 = 0
        w1 = 0
        for c in range(n):
            if c < 4:
                w0 |= <uint64_t>m[c] << (16 * c)
            else:
                w1 |= <uint64_t>m[c] << (16 * (c - 4))
        # Sticky copysets repeat row after row (the cache sees to that itself).
        if cache != NULL or not (n == prev_n and w0 == prev_w0 and w1 == prev_w1):
            res = _decide_small(m, n, w0, w1, table, me, shuffle, key)
            prev_n = n
            prev_w0 = w0
            prev_w1 = w1
        out[r] = res
        if cache != NULL:
            ld_scd_cache_put(cache, rowkey, res)
        r += 1
    return -1


cdef void _apply_flags(const uint32_t* flags, uint8_t* out, Py_ssize_t n) noexcept nogil:
    # Rules 1 and 3 over a mask computed without them.
    cdef Py_ssize_t r
    cdef uint32_t f
    for r in range(n):
        f = flags[r]
        out[r] = ((out[r] | ((f & (LD_FLAG_HOLE | LD_FLAG_BRIDGE)) != 0))
                  & ((f & LD_FLAG_DRAINED) == 0))


cdef Py_ssize_t _first_kernel(const cs_t* cs, Py_ssize_t nrows, Py_ssize_t width,
                              const uint8_t* table, bint have_local, bint shuffle,
                              uint64_t key, int32_t* buf, int32_t* out,
                              int64_t* bad) noexcept nogil:
    cdef Py_ssize_t r, n
    cdef ld_shuffle_t st
    for r in range(nrows):
        n = _load_row(cs + r * width, width, buf, bad)
        if n < 0:
            return r
        _start(&st, shuffle, key, buf, n)
        out[r] = _first(buf, n, table, have_local, &st)
    return -1


cdef Py_ssize_t _shuffle_kernel(const cs_t* cs, Py_ssize_t nrows, Py_ssize_t width,
                                uint64_t key, int32_t* buf, cs_t* out,
                                int64_t* bad) noexcept nogil:
    cdef Py_ssize_t r, c, n
    cdef ld_shuffle_t st
    for r in range(nrows):
        n = _load_row(cs + r * width, width, buf, bad)
        if n < 0:
            return r
        ld_shuffle_start(&st, key, buf, n)
        if n > 0:
            ld_shuffle_at(&st, buf, n, n - 1)
        for c in range(n):
            out[r * width + c] = <cs_t>buf[c]
        for c in range(n, width):
            out[r * width + c] = -1
    return -1


# Fused def entry points: Cython picks the specialisation from the array's dtype.

cdef int _ship_vectorised(const cs_t* cs, Py_ssize_t nrows, Py_ssize_t width, list kd,
                          int32_t me, const uint32_t* flags, uint8_t* out) except -2:
    # The plain path of scd.h; -1 when it does not apply or found a bad index (the
    # general kernel then runs and reports it).
    cdef ld_scd_args_int8_t a8
    cdef ld_scd_args_int16_t a16
    cdef ld_scd_args_int32_t a32
    cdef ld_scd_args_int64_t a64
    cdef int64_t lim
    cdef int64_t k[4]
    cdef Py_ssize_t i
    cdef int rc
    if cs_t is int8_t:
        lim = 127
    elif cs_t is int16_t:
        lim = 32767
    else:
        lim = LD_MAX_NODES - 1
    # Nodes the dtype cannot hold cannot match any entry: -2 (padding) matches only
    # entries that are ignored anyway.
    for i in range(4):
        k[i] = kd[i] if i < len(kd) and kd[i] <= lim else -2
    cdef int me_ok = me <= lim
    with nogil:
        if cs_t is int8_t:
            for i in range(4):
                a8.k[i] = <int8_t>k[i]
            a8.me, a8.me_ok = <int8_t>(me if me_ok else 0), me_ok
            rc = ld_scd_plain_int8_t(cs, nrows, width, &a8, out)
        elif cs_t is int16_t:
            for i in range(4):
                a16.k[i] = <int16_t>k[i]
            a16.me, a16.me_ok = <int16_t>(me if me_ok else 0), me_ok
            rc = ld_scd_plain_int16_t(cs, nrows, width, &a16, out)
        elif cs_t is int32_t:
            for i in range(4):
                a32.k[i] = <int32_t>k[i]
            a32.me, a32.me_ok = me, me_ok
            rc = ld_scd_plain_int32_t(cs, nrows, width, &a32, out)
        else:
            for i in range(4):
                a64.k[i] = k[i]
            a64.me, a64.me_ok = me, me_ok
            rc = ld_scd_plain_int64_t(cs, nrows, width, &a64, out)
        if rc == 0 and flags != NULL:
            _apply_flags(flags, out, nrows)
    return 0 if rc == 0 else -1


def _ship_impl(const cs_t[:, ::1] cs, const uint32_t[::1] flags, list kd, list local,
               list rebuilding, int32_t me, bint shuffle, uint64_t key, uint8_t[::1] out):
    cdef Py_ssize_t nrows = cs.shape[0], width = cs.shape[1], bad_row
    cdef int64_t bad = 0
    if nrows == 0:
        return
    cdef const cs_t* p = &cs[0, 0] if width > 0 else NULL
    cdef const uint32_t* fp = &flags[0] if flags is not None else NULL
    cdef bint have_local = len(local) > 0, have_rebuilding = len(rebuilding) > 0
    # (the plain path, ``_ship_plain``, was tried first: it did not apply)
    cdef const uint8_t[::1] table = _node_table(kd, local, rebuilding)
    cdef ld_scd_cache_t cache
    cdef ld_scd_cache_t* cp = NULL
    if me >= 0 and width <= 8 and not (have_rebuilding or have_local):
        # Below CACHE_MIN_ROWS, setting up and growing the table costs more than it saves
        # (short runs of equal rows are caught without it).
        if (nrows >= CACHE_MIN_ROWS and 1 <= width * cs.itemsize <= 15
                and ld_scd_cache_init(&cache, p, nrows, width * cs.itemsize) == 0):
            cp = &cache
        try:
            if nrows >= NOGIL_MIN_ROWS:
                with nogil:
                    bad_row = _ship_small(p, nrows, width, &table[0], me, shuffle, key, cp,
                                          &out[0], &bad)
            else:
                bad_row = _ship_small(p, nrows, width, &table[0], me, shuffle, key, cp,
                                      &out[0], &bad)
            if bad_row < 0 and fp != NULL:
                _apply_flags(fp, &out[0], nrows)
        finally:
            if cp != NULL:
                ld_scd_cache_free(cp)
        if bad_row >= 0:
            _raise_bad(bad_row, bad)
        return
    cdef int32_t* buf = <int32_t*>malloc(sizeof(int32_t) * (width + 1))
    if buf == NULL:
        raise MemoryError()
    try:
        if nrows >= NOGIL_MIN_ROWS:
            with nogil:
                bad_row = _ship_kernel(p, nrows, width, fp, &table[0], me, have_local,
                                       have_rebuilding, shuffle, key, buf, &out[0], &bad)
        else:
            bad_row = _ship_kernel(p, nrows, width, fp, &table[0], me, have_local,
                                   have_rebuilding, shuffle, key, buf, &out[0], &bad)
    finally:
        free(buf)
    if bad_row >= 0:
        _raise_bad(bad_row, bad)


def _first_impl(const cs_t[:, ::1] cs, const uint8_t[::1] table, bint have_local,
                bint shuffle, uint64_t key, int32_t[::1] out):
    cdef Py_ssize_t nrows = cs.shape[0], width = cs.shape[1], bad_row
    cdef int64_t bad = 0
    cdef const cs_t* p = &cs[0, 0] if nrows > 0 and width > 0 else NULL
    cdef int32_t* buf = <int32_t*>malloc(sizeof(int32_t) * (width + 1))
    if buf == NULL:
        raise MemoryError()
    try:
        with nogil:
            bad_row = _first_kernel(p, nrows, width, &table[0], have_local, shuffle, key,
                                    buf, &out[0] if nrows > 0 else NULL, &bad)
    finally:
        free(buf)
    if bad_row >= 0:
        _raise_bad(bad_row, bad)


def _shuffle_impl(const cs_t[:, ::1] cs, uint64_t key, cs_t[:, ::1] out):
    cdef Py_ssize_t nrows = cs.shape[0], width = cs.shape[1], bad_row
    cdef int64_t bad = 0
    if nrows == 0 or width == 0:
        return
    cdef int32_t* buf = <int32_t*>malloc(sizeof(int32_t) * (width + 1))
    if buf == NULL:
        raise MemoryError()
    try:
        with nogil:
            bad_row = _shuffle_kernel(&cs[0, 0], nrows, width, key, buf, &out[0, 0], &bad)
    finally:
        free(buf)
    if bad_row >= 0:
        _raise_bad(bad_row, bad)


# --- argument handling -----------------------------------------------------------------

def _raise_bad(Py_ssize_t row, int64_t value):
    raise ValueError(
        f"copysets[{row}] holds node index {value}; node indices must be in "
        f"[0, {LD_MAX_NODES}) (negative entries are padding)"
    )


def _as_copysets(copysets):
    if type(copysets) is np.ndarray and copysets.ndim == 2 and copysets.dtype in _PLAIN_CS \
            and copysets.flags.c_contiguous:
        return copysets  # (the common case, without the checks' numpy calls)
    a = np.asarray(copysets)
    if a.ndim != 2:
        raise ValueError(f"copysets must be a 2-D int array (one row per record), "
                         f"got {a.ndim} dimension(s)")
    if a.size == 0 and a.dtype.kind not in "iu":
        a = a.astype(np.int32)
    if a.dtype.kind == "u":
        if a.dtype.itemsize == 8 and a.size and int(a.max()) > 0x7FFFFFFFFFFFFFFF:
            raise ValueError("copysets hold a node index >= 2**63")
        a = a.astype(np.int64)
    elif a.dtype.kind != "i":
        raise ValueError(f"copysets must be an integer array, got dtype {a.dtype}")
    # Normalise byte order and the platform's C int names to int8/16/32/64.
    return np.ascontiguousarray(a, dtype=np.dtype(f"i{a.dtype.itemsize}"))


# Copyset and flag arrays the kernels take as they are (native int8/16/32/64, uint32).
_PLAIN_CS = frozenset(np.dtype(f"i{n}") for n in (1, 2, 4, 8))
_U32 = np.dtype(np.uint32)


def _node_index(x, what):
    try:
        v = operator.index(x)
    except TypeError:
        raise ValueError(f"{what} must hold integer node indices, got {x!r}") from None
    if not 0 <= v < LD_MAX_NODES:
        raise ValueError(f"{what}: node index {v} is not in [0, {LD_MAX_NODES})")
    return v


def _node_list(nodes, what):
    if isinstance(nodes, np.ndarray):
        if nodes.size and nodes.dtype.kind not in "iu":
            raise ValueError(f"{what} must hold integer node indices, got dtype {nodes.dtype}")
        nodes = nodes.ravel().tolist()
    return [_node_index(x, what) for x in nodes]


def _seed_key(seed):
    try:
        s = operator.index(seed)
    except TypeError:
        raise ValueError(f"seed must be None or an int, got {seed!r}") from None
    if not -(1 << 63) <= s < (1 << 64):
        raise ValueError(f"seed {s} does not fit in 64 bits")
    return ld_seed_key(<uint64_t>(s & 0xFFFFFFFFFFFFFFFF))


_EMPTY_FORMS = (frozenset, tuple, list, set)


def _node_sets(known_down, local_nodes, rebuilding):
    """The validated node lists: known_down sorted without repeats, local_nodes and
    rebuilding as given (empty when None)."""
    # (an empty known-down list, what read streams mostly have, without the checks)
    kd = [] if known_down is None or type(known_down) in _EMPTY_FORMS and not known_down \
        else sorted(set(_node_list(known_down, "known_down")))
    local = [] if local_nodes is None else _node_list(local_nodes, "local_nodes")
    reb = [] if rebuilding is None else _node_list(rebuilding, "rebuilding")
    return kd, local, reb


# Tables built lately, by their node lists (the kernels only read them).  Read streams
# ask again and again with the same few lists, mostly all empty; a table is 64 KiB.
_TABLES = {}
cdef enum:
    TABLES_KEPT = 64


def _node_table(kd, local, rebuilding):
    """The per-node bit table of the general kernels (64 KiB: only built when one runs)."""
    key = (tuple(kd), tuple(local), tuple(rebuilding))
    table = _TABLES.get(key)
    if table is not None:
        return table
    table = np.zeros(LD_MAX_NODES, dtype=np.uint8)
    for bit, idx in ((T_DOWN, kd), (T_LOCAL, local), (T_REBUILDING, rebuilding)):
        if idx:
            table[np.asarray(idx, dtype=np.int64)] |= bit
    table.flags.writeable = False
    if len(_TABLES) >= TABLES_KEPT:
        _TABLES.clear()
    _TABLES[key] = table
    return table


def _as_flags(flags, Py_ssize_t nrows):
    if type(flags) is np.ndarray and flags.dtype == _U32 and flags.ndim == 1 \
            and flags.shape[0] == nrows and flags.flags.c_contiguous:
        return flags
    f = np.asarray(flags)
    if f.ndim != 1 or f.shape[0] != nrows:
        raise ValueError(f"flags must be a 1-D array with one entry per record "
                         f"({nrows}), got shape {f.shape}")
    if f.size and f.dtype.kind not in "iu":
        raise ValueError(f"flags must be an unsigned 32-bit int array, got dtype {f.dtype}")
    if f.dtype != np.uint32 and f.size and (int(f.min()) < 0 or int(f.max()) > 0xFFFFFFFF):
        raise ValueError("flags must fit in 32 unsigned bits")
    return np.ascontiguousarray(f, dtype=np.uint32)


# --- public API ------------------------------------------------------------------------

def ship_mask(copysets, me, known_down=(), *, seed=None, local_nodes=None, flags=None,
              rebuilding=None):
    """Which records this storage node ships to a single-copy-delivery reader.

    Parameters
    ----------
    copysets : array_like of int, shape (n_records, width)
        One copyset per record, padded with -1 (any negative entry is padding).
        Any integer dtype; int16/int32 are read without a copy.
    me : int or None
        This node's index.  None means SCD is off: only rules 1-3 filter (DRAINED,
        rebuilding), everything else ships.
    known_down : iterable of int
        The reader's known-down list.  ``me`` being in it changes nothing for ``me``.
    seed : int, optional
        None keeps each copyset's stored order.  An int (in ``[-2**63, 2**64)``) shuffles
        each copyset deterministically (see the module comment); every node of the
        copyset gets the same order for the same seed.
    local_nodes : iterable of int, optional
        The nodes in the reader's region (local SCD): among them, the first one not
        known down ships; if none qualifies the normal rule applies.
    flags : array_like of uint32, shape (n_records,), optional
        Record flags.  ``FLAG_DRAINED`` never ships; ``FLAG_HOLE`` and ``FLAG_BRIDGE``
        always ship.
    rebuilding : iterable of int, optional
        Rebuilding filter: when non-empty, a record none of whose members is in it is
        skipped.

    Returns
    -------
    numpy.ndarray of bool, shape (n_records,)
        True where this node ships the record.

    Raises
    ------
    ValueError
        A node index outside ``[0, 65536)``, a non-integer array, mismatched shapes.
    """
    cdef int32_t me_c = -1 if me is None else _node_index(me, "me")
    cdef cnp.ndarray cs = _as_copysets(copysets)
    cdef cnp.npy_intp nrows = cs.shape[0]
    f = None if flags is None else _as_flags(flags, nrows)
    kd, local, reb = _node_sets(known_down, local_nodes, rebuilding)
    shuffle = seed is not None
    out = cnp.PyArray_EMPTY(1, &nrows, cnp.NPY_BOOL, 0)
    if nrows and me_c >= 0 and not (shuffle or local or reb) \
            and _ship_plain(cs, f, kd, me_c, <uint8_t*>cnp.PyArray_DATA(out)) == 0:
        return out
    key = _seed_key(seed) if shuffle else 0
    _ship_impl(cs, f, kd, local, reb, me_c, shuffle, key, out.view(np.uint8))
    return out


cdef int _ship_plain(cnp.ndarray cs, object flags, list kd, int32_t me, uint8_t* out
                     ) except -2:
    # ``_ship_vectorised`` straight on the arrays' data, without the typed memoryviews
    # and the fused dispatch of ``_ship_impl`` (several microseconds: most of the call
    # when a read stream asks about a record or two).  ``cs`` is what ``_as_copysets``
    # returns: C-contiguous, native signed ints.  -1 when the plain path does not apply
    # (or met a bad index): then the general kernels of ``_ship_impl`` run.
    cdef Py_ssize_t nrows = cs.shape[0], width = cs.shape[1]
    if not 1 <= width <= 8 or len(kd) > 4:
        return -1
    cdef const uint32_t* fp = NULL
    if flags is not None:
        fp = <const uint32_t*>cnp.PyArray_DATA(<cnp.ndarray>flags)
    cdef void* p = cnp.PyArray_DATA(cs)
    cdef Py_ssize_t size = cnp.PyArray_ITEMSIZE(cs)
    if size == 1:
        return _ship_vectorised(<const int8_t*>p, nrows, width, kd, me, fp, out)
    if size == 2:
        return _ship_vectorised(<const int16_t*>p, nrows, width, kd, me, fp, out)
    if size == 4:
        return _ship_vectorised(<const int32_t*>p, nrows, width, kd, me, fp, out)
    return _ship_vectorised(<const int64_t*>p, nrows, width, kd, me, fp, out)


def first_eligible(copysets, known_down=(), *, seed=None, local_nodes=None):
    """The node expected to ship each record to an SCD reader (the reader's view).

    Same rules and arguments as :func:`ship_mask`, without a node of its own: the first
    member (after the optional shuffle) in ``local_nodes`` and not in ``known_down``,
    else the first member not in ``known_down``.

    Returns
    -------
    numpy.ndarray of int32, shape (n_records,)
        The responsible node index, or -1 where every member is known down (then every
        member ships) or the copyset is empty.
    """
    cs = _as_copysets(copysets)
    kd, local, _ = _node_sets(known_down, local_nodes, None)
    shuffle = seed is not None
    key = _seed_key(seed) if shuffle else 0
    out = np.empty(cs.shape[0], dtype=np.int32)
    _first_impl(cs, _node_table(kd, local, []), len(local) > 0, shuffle, key, out)
    return out


def shuffle_copysets(copysets, seed):
    """Each copyset in the order the shuffle for ``seed`` gives it.

    Parameters
    ----------
    copysets : array_like of int, shape (n_records, width)
        As for :func:`ship_mask`.
    seed : int
        As for :func:`ship_mask`.

    Returns
    -------
    numpy.ndarray, shape (n_records, width)
        Same integer dtype as the (normalised) input; each row holds its members in
        shuffled order followed by -1 padding.
    """
    cs = _as_copysets(copysets)
    key = _seed_key(seed)
    out = np.empty_like(cs)
    _shuffle_impl(cs, key, out)
    return out
