# Payload gathers for records kept as columns (one byte buffer, n + 1 offsets): copying
# many records' bytes into one new buffer with a memcpy each, where numpy needs an index
# array as long as the bytes themselves; and the record cache's packed copies of writes.
cimport cpython
cimport numpy as cnp
from libc.stdint cimport int16_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy

import numpy as np

from ldcore.checksum cimport ld_crc32c, ld_crc32c_init

cnp.import_array()
ld_crc32c_init()


def gather_payloads(const uint8_t[::1] src, const uint64_t[::1] starts,
                    const uint64_t[::1] ends, uint8_t[::1] dst,
                    const uint64_t[::1] dst_starts):
    """Copy ``src[starts[i]:ends[i]]`` to ``dst[dst_starts[i]:]`` for every i.

    Raises ``ValueError`` (nothing copied) when a range is reversed or falls outside its
    buffer.
    """
    cdef Py_ssize_t n = starts.shape[0], i
    if ends.shape[0] != n or dst_starts.shape[0] != n:
        raise ValueError("starts, ends and dst_starts differ in length")
    cdef uint64_t s, e, d, size = src.shape[0], room = dst.shape[0]
    for i in range(n):
        s, e, d = starts[i], ends[i], dst_starts[i]
        if e < s or e > size or d > room or e - s > room - d:
            raise ValueError(f"record {i}: bytes [{s}, {e}) to {d} do not fit "
                             f"({size} bytes in, {room} out)")
    with nogil:
        for i in range(n):
            if ends[i] > starts[i]:
                memcpy(&dst[dst_starts[i]], &src[starts[i]], ends[i] - starts[i])


cdef inline Py_ssize_t _up8(Py_ssize_t x) noexcept nogil:
    return (x + 7) & ~7


cdef Py_ssize_t _layout(Py_ssize_t n, Py_ssize_t width, Py_ssize_t *at) noexcept nogil:
    """Where each column of a packed write starts (8-byte aligned): lsns, timestamps,
    offsets (n + 1), flags, waves, checksums, copysets (n x width), then the payload
    bytes; returns where the payload bytes start."""
    at[0] = 0
    at[1] = 8 * n
    at[2] = 16 * n
    at[3] = 24 * n + 8
    at[4] = at[3] + _up8(4 * n)
    at[5] = at[4] + _up8(4 * n)
    at[6] = at[5] + _up8(4 * n)
    at[7] = at[6] + _up8(2 * n * width)
    return at[7]


def pack_written(const uint64_t[:] lsns, const int64_t[:] timestamps,
                 const uint32_t[:] flags, waves, const int16_t[:, :] copysets,
                 const uint8_t[::1] payloads, const uint64_t[:] offsets):
    """One write's columns packed into one buffer of its own, as the record cache keeps
    them: ``(buffer, copyset width)``; ``unpack_written`` gives the columns back.
    ``waves`` all 1 when None, copysets as wide as the widest one (padding columns of -1
    dropped), the crc32c of each payload, the payload bytes with offsets from 0.

    One allocation and one C pass: the cache keeps a copy of every write a storage node
    makes, most of them of one record, and a numpy array per column would cost a
    thousand bytes a write before any record.
    """
    cdef Py_ssize_t n = lsns.shape[0]
    cdef const uint32_t[:] wv = _checked(lsns, timestamps, flags, waves, copysets, payloads,
                                         offsets)
    return _pack(lsns, timestamps, flags, wv, copysets, payloads, offsets, 0, n)


def pack_written_runs(const uint64_t[::1] ends, const uint64_t[:] lsns,
                      const int64_t[:] timestamps, const uint32_t[:] flags, waves,
                      const int16_t[:, :] copysets, const uint8_t[::1] payloads,
                      const uint64_t[:] offsets, runs=None):
    """``pack_written`` of several writes (of several logs) at once: run j is rows
    ``ends[j - 1]`` (0 for the first) to ``ends[j]`` of the columns.  Returns a list of
    ``(buffer, copyset width)``, one per run, or per run in ``runs`` (indices, in
    order) when given.  One call for a group commit's logs, not one per log."""
    cdef Py_ssize_t m = ends.shape[0], j, lo, hi, n = lsns.shape[0]
    cdef const uint32_t[:] wv = _checked(lsns, timestamps, flags, waves, copysets, payloads,
                                         offsets)
    lo = 0
    for j in range(m):
        hi = <Py_ssize_t>ends[j]
        if hi < lo or hi > n:
            raise ValueError(f"run ends must not decrease or pass {n} rows")
        lo = hi
    out = []
    for j in (range(m) if runs is None else runs):
        if not 0 <= j < m:
            raise ValueError(f"no run {j} of {m}")
        lo = 0 if j == 0 else <Py_ssize_t>ends[j - 1]
        out.append(_pack(lsns, timestamps, flags, wv, copysets, payloads, offsets, lo,
                         <Py_ssize_t>ends[j]))
    return out


cdef const uint32_t[:] _checked(const uint64_t[:] lsns, const int64_t[:] timestamps,
                                const uint32_t[:] flags, waves,
                                const int16_t[:, :] copysets, const uint8_t[::1] payloads,
                                const uint64_t[:] offsets):
    """Raise ``ValueError`` unless the columns are as ``pack_written`` takes them;
    the waves (None: all 1)."""
    cdef Py_ssize_t n = lsns.shape[0], i
    if (timestamps.shape[0] != n or flags.shape[0] != n or copysets.shape[0] != n
            or offsets.shape[0] != n + 1):
        raise ValueError("columns differ in length")
    if offsets[n] < offsets[0] or offsets[n] > <uint64_t>payloads.shape[0]:
        raise ValueError(f"payload bytes [{offsets[0]}, {offsets[n]}) outside a buffer of "
                         f"{payloads.shape[0]}")
    for i in range(n):
        if offsets[i + 1] < offsets[i]:
            raise ValueError(f"record {i}: offsets go back")
    cdef const uint32_t[:] wv = None if waves is None else waves
    if wv is not None and wv.shape[0] != n:
        raise ValueError("columns differ in length")
    return wv


cdef object _pack(const uint64_t[:] lsns, const int64_t[:] timestamps,
                  const uint32_t[:] flags, const uint32_t[:] wv,
                  const int16_t[:, :] copysets, const uint8_t[::1] payloads,
                  const uint64_t[:] offsets, Py_ssize_t lo, Py_ssize_t hi):
    """Rows ``[lo, hi)`` (checked by ``_checked``) packed: ``(buffer, width)``."""
    cdef Py_ssize_t n = hi - lo, i, j, k = copysets.shape[1], width = 0, w
    for i in range(lo, hi):
        w = 0
        for j in range(k):
            if copysets[i, j] >= 0:
                w = j + 1
        if w > width:
            width = w
    cdef uint64_t o0 = offsets[lo], o1 = offsets[hi]
    cdef Py_ssize_t at[8]
    cdef cnp.npy_intp size = _layout(n, width, at) + <Py_ssize_t>(o1 - o0)
    buf = cnp.PyArray_EMPTY(1, &size, cnp.NPY_UINT8, 0)
    cdef uint8_t *b = <uint8_t *>cnp.PyArray_DATA(buf)
    cdef uint64_t *ol = <uint64_t *>(b + at[0])
    cdef int64_t *ot = <int64_t *>(b + at[1])
    cdef uint64_t *oo = <uint64_t *>(b + at[2])
    cdef uint32_t *of = <uint32_t *>(b + at[3])
    cdef uint32_t *ow = <uint32_t *>(b + at[4])
    cdef uint32_t *oc = <uint32_t *>(b + at[5])
    cdef int16_t *ocs = <int16_t *>(b + at[6])
    with nogil:
        if o1 > o0:
            memcpy(b + at[7], &payloads[o0], o1 - o0)
        for i in range(n):
            ol[i] = lsns[lo + i]
            ot[i] = timestamps[lo + i]
            of[i] = flags[lo + i]
            ow[i] = 1 if wv is None else wv[lo + i]
            for j in range(width):
                ocs[i * width + j] = copysets[lo + i, j]
            oo[i] = offsets[lo + i] - o0
            oc[i] = ld_crc32c(0, &payloads[offsets[lo + i]],
                              offsets[lo + i + 1] - offsets[lo + i])
        oo[n] = o1 - o0
    return buf, width


cdef object _view(cnp.ndarray buf, Py_ssize_t at, int nd, cnp.npy_intp *dims, int typenum):
    """A column of ``buf`` as an array that keeps ``buf`` alive."""
    arr = cnp.PyArray_SimpleNewFromData(nd, dims, typenum, <char *>cnp.PyArray_DATA(buf) + at)
    cpython.Py_INCREF(buf)  # PyArray_SetBaseObject steals a reference
    cnp.PyArray_SetBaseObject(arr, buf)
    return arr


def unpack_written(cnp.ndarray buf, Py_ssize_t n, Py_ssize_t width):
    """The columns of a ``pack_written`` buffer of ``n`` records, as views of it:
    ``(lsns, timestamps, flags, waves, copysets, checksums, payloads, offsets)``."""
    cdef Py_ssize_t at[8]
    cdef Py_ssize_t body = _layout(n, width, at)
    if (cnp.PyArray_TYPE(buf) != cnp.NPY_UINT8 or not cnp.PyArray_IS_C_CONTIGUOUS(buf)
            or n < 0 or width < 0 or cnp.PyArray_SIZE(buf) < body):
        raise ValueError(f"not a packed write of {n} records {width} wide")
    cdef cnp.npy_intp dims[2]
    dims[0] = n
    dims[1] = width
    ls = _view(buf, at[0], 1, dims, cnp.NPY_UINT64)
    ts = _view(buf, at[1], 1, dims, cnp.NPY_INT64)
    fl = _view(buf, at[3], 1, dims, cnp.NPY_UINT32)
    wv = _view(buf, at[4], 1, dims, cnp.NPY_UINT32)
    crc = _view(buf, at[5], 1, dims, cnp.NPY_UINT32)
    cs = _view(buf, at[6], 2, dims, cnp.NPY_INT16)
    dims[0] = n + 1
    offs = _view(buf, at[2], 1, dims, cnp.NPY_UINT64)
    dims[0] = cnp.PyArray_SIZE(buf) - body
    payload = _view(buf, body, 1, dims, cnp.NPY_UINT8)
    return ls, ts, fl, wv, cs, crc, payload, offs


# ------------------------------------------------------------ joining record columns
#
# A read stream's runs and a reader's batches join many small parts (one or two records
# each, one part per node or per log): numpy costs a few microseconds a call whatever the
# size, and concatenating six columns of two parts took tens of them.  These do it in one
# C pass.  A part is any object with the columns of ``RecordColumns`` as attributes.

cdef struct _Part:
    const uint64_t *lsns
    const int64_t *timestamps
    const uint32_t *flags
    const uint64_t *offsets  # n + 1 of them (int64 offsets are read as the same bits)
    const uint32_t *batch_offsets  # NULL: every row a plain record
    const uint8_t *payloads
    Py_ssize_t n
    uint64_t size  # bytes in ``payloads``


cdef const void *_column(object a, int typenum, Py_ssize_t length, str what,
                         list keep) except NULL:
    """The data of column ``a`` (1-D, ``typenum``, contiguous, at least ``length`` items;
    converted, and the copy kept in ``keep``, when it is not)."""
    cdef cnp.ndarray arr
    if (cnp.PyArray_Check(a) and cnp.PyArray_NDIM(<cnp.ndarray>a) == 1
            and cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>a)
            and (cnp.PyArray_TYPE(<cnp.ndarray>a) == typenum
                 or (typenum == cnp.NPY_UINT64
                     and cnp.PyArray_TYPE(<cnp.ndarray>a) == cnp.NPY_INT64))):
        arr = <cnp.ndarray>a
    else:
        arr = np.ascontiguousarray(a, dtype=cnp.PyArray_TypeObjectFromType(typenum))
        if cnp.PyArray_NDIM(arr) != 1:
            raise ValueError(f"{what} must be a 1-D array")
        keep.append(arr)
    if cnp.PyArray_SIZE(arr) < length:
        raise ValueError(f"{what}: {cnp.PyArray_SIZE(arr)} items, {length} needed")
    return cnp.PyArray_DATA(arr)


cdef int _part(object p, _Part *out, Py_ssize_t k, list keep) except -1:
    lsns = p.lsns
    cdef Py_ssize_t n = len(lsns)
    out.n = n
    out.lsns = <const uint64_t *>_column(lsns, cnp.NPY_UINT64, n, "lsns", keep)
    out.timestamps = <const int64_t *>_column(p.timestamps, cnp.NPY_INT64, n,
                                              "timestamps", keep)
    out.flags = <const uint32_t *>_column(p.flags, cnp.NPY_UINT32, n, "flags", keep)
    out.offsets = <const uint64_t *>_column(p.offsets, cnp.NPY_UINT64, n + 1, "offsets",
                                            keep)
    payloads = p.payloads
    out.size = <uint64_t>len(payloads)
    out.payloads = <const uint8_t *>_column(payloads, cnp.NPY_UINT8, 0, "payloads", keep)
    bo = p.batch_offsets
    out.batch_offsets = NULL
    if bo is not None:
        out.batch_offsets = <const uint32_t *>_column(bo, cnp.NPY_UINT32, n,
                                                      "batch_offsets", keep)
    if out.offsets[n] < out.offsets[0] or out.offsets[n] > out.size:
        raise ValueError(f"part {k}: payload bytes [{out.offsets[0]}, {out.offsets[n]}) "
                         f"outside a buffer of {out.size}")
    return 0


cdef struct _Out:
    uint64_t *lsns
    int64_t *timestamps
    uint32_t *flags
    uint8_t *payloads
    uint64_t *offsets
    uint32_t *batch_offsets  # NULL: the output has none


cdef _Part *_parts(list parts, list keep, bint *plain) except NULL:
    """Every part's columns (a malloc'd array the caller frees); ``plain``: whether
    no part has batch offsets."""
    cdef Py_ssize_t m = len(parts), k
    cdef _Part *ps = <_Part *>malloc(sizeof(_Part) * (m if m else 1))
    if ps == NULL:
        raise MemoryError()
    plain[0] = True
    try:
        for k in range(m):
            _part(parts[k], &ps[k], k, keep)
            plain[0] = plain[0] and ps[k].batch_offsets == NULL
    except BaseException:
        free(ps)
        raise
    return ps


cdef tuple _new_columns(Py_ssize_t n, uint64_t nbytes, bint plain, _Out *o):
    """New columns for ``n`` rows of ``nbytes`` payload bytes, their data in ``o``."""
    cdef cnp.npy_intp dim = n
    lsns = cnp.PyArray_EMPTY(1, &dim, cnp.NPY_UINT64, 0)
    timestamps = cnp.PyArray_EMPTY(1, &dim, cnp.NPY_INT64, 0)
    flags = cnp.PyArray_EMPTY(1, &dim, cnp.NPY_UINT32, 0)
    batch_offsets = None if plain else cnp.PyArray_ZEROS(1, &dim, cnp.NPY_UINT32, 0)
    dim = n + 1
    offsets = cnp.PyArray_EMPTY(1, &dim, cnp.NPY_UINT64, 0)
    dim = <cnp.npy_intp>nbytes
    payloads = cnp.PyArray_EMPTY(1, &dim, cnp.NPY_UINT8, 0)
    o.lsns = <uint64_t *>cnp.PyArray_DATA(lsns)
    o.timestamps = <int64_t *>cnp.PyArray_DATA(timestamps)
    o.flags = <uint32_t *>cnp.PyArray_DATA(flags)
    o.payloads = <uint8_t *>cnp.PyArray_DATA(payloads)
    o.offsets = <uint64_t *>cnp.PyArray_DATA(offsets)
    o.batch_offsets = NULL if plain else <uint32_t *>cnp.PyArray_DATA(batch_offsets)
    return lsns, timestamps, flags, payloads, offsets, batch_offsets


def concat_columns(list parts):
    """The rows of every part in order, as new columns ``(lsns, timestamps, flags,
    payloads, offsets, batch_offsets)``: offsets from 0, ``batch_offsets`` None when no
    part has any.  Raises ``ValueError`` for a part whose columns do not fit together."""
    cdef Py_ssize_t m = len(parts), k, i, n = 0, row = 0
    cdef uint64_t nbytes = 0, base = 0, o0, size
    cdef bint plain
    cdef _Out o
    keep = []
    cdef _Part *ps = _parts(parts, keep, &plain)
    try:
        for k in range(m):
            n += ps[k].n
            nbytes += ps[k].offsets[ps[k].n] - ps[k].offsets[0]
        out = _new_columns(n, nbytes, plain, &o)
        with nogil:
            for k in range(m):
                n = ps[k].n
                memcpy(o.lsns + row, ps[k].lsns, 8 * n)
                memcpy(o.timestamps + row, ps[k].timestamps, 8 * n)
                memcpy(o.flags + row, ps[k].flags, 4 * n)
                if o.batch_offsets != NULL and ps[k].batch_offsets != NULL:
                    memcpy(o.batch_offsets + row, ps[k].batch_offsets, 4 * n)
                o0 = ps[k].offsets[0]
                for i in range(n):
                    o.offsets[row + i] = base + ps[k].offsets[i] - o0
                size = ps[k].offsets[n] - o0
                if size:
                    memcpy(o.payloads + base, ps[k].payloads + o0, size)
                base += size
                row += n
            o.offsets[row] = base
        return out
    finally:
        free(ps)


def take_columns(list parts, const int64_t[::1] part, const int64_t[::1] row):
    """Row ``row[i]`` of ``parts[part[i]]`` for every i, as new columns (as
    ``concat_columns`` returns them).  Rows that follow one another in one part are
    copied together.  Raises ``ValueError`` (nothing built) for an index out of range or
    columns that do not fit together."""
    cdef Py_ssize_t m = len(parts), n = part.shape[0], k, i, j, r
    if row.shape[0] != n:
        raise ValueError(f"part and row differ in length ({n} != {row.shape[0]})")
    cdef uint64_t nbytes = 0, base = 0, a, b
    cdef bint plain
    cdef _Out o
    keep = []
    cdef _Part *ps = _parts(parts, keep, &plain)
    try:
        for i in range(n):
            k, r = part[i], row[i]
            if not 0 <= k < m or not 0 <= r < ps[k].n:
                raise ValueError(f"row {i}: no row {r} of part {k}")
            a, b = ps[k].offsets[r], ps[k].offsets[r + 1]
            if b < a or b > ps[k].size:
                raise ValueError(f"row {i}: payload bytes [{a}, {b}) outside part {k}'s "
                                 f"buffer of {ps[k].size}")
            nbytes += b - a
        out = _new_columns(n, nbytes, plain, &o)
        with nogil:
            i = 0
            while i < n:
                k, r = part[i], row[i]
                j = i + 1  # rows i..j-1 follow one another in part k
                while j < n and part[j] == k and row[j] == r + (j - i):
                    j += 1
                memcpy(o.lsns + i, ps[k].lsns + r, 8 * (j - i))
                memcpy(o.timestamps + i, ps[k].timestamps + r, 8 * (j - i))
                memcpy(o.flags + i, ps[k].flags + r, 4 * (j - i))
                if o.batch_offsets != NULL and ps[k].batch_offsets != NULL:
                    memcpy(o.batch_offsets + i, ps[k].batch_offsets + r, 4 * (j - i))
                a = ps[k].offsets[r]
                for r in range(r, r + (j - i)):
                    o.offsets[i] = base + ps[k].offsets[r] - a
                    i += 1
                b = ps[k].offsets[r + 1]
                if b > a:
                    memcpy(o.payloads + base, ps[k].payloads + a, b - a)
                base += b - a
            o.offsets[n] = base
        return out
    finally:
        free(ps)


def split_handles(const int64_t[::1] handles):
    """Record handles ``batch_id << 32 | row`` split: ``(batch ids in the order they first
    appear, index into them per handle (int64), row per handle (int64), handles per batch
    id)``.  Raises ``ValueError`` for a negative handle."""
    cdef Py_ssize_t n = handles.shape[0], i, k = -1, found = 0
    cdef int64_t h, bid, last = -1
    cdef cnp.npy_intp dim = n
    part = cnp.PyArray_EMPTY(1, &dim, cnp.NPY_INT64, 0)
    row = cnp.PyArray_EMPTY(1, &dim, cnp.NPY_INT64, 0)
    cdef int64_t *pp = <int64_t *>cnp.PyArray_DATA(part)
    cdef int64_t *rp = <int64_t *>cnp.PyArray_DATA(row)
    ids = []
    index = {}
    cdef Py_ssize_t *counts = <Py_ssize_t *>malloc(sizeof(Py_ssize_t) * (n if n else 1))
    if counts == NULL:
        raise MemoryError()
    try:
        for i in range(n):
            h = handles[i]
            if h < 0:
                raise ValueError(f"handle {h} is negative")
            bid = h >> 32
            if bid != last:
                got = index.get(bid)
                if got is None:
                    k = found
                    found += 1
                    index[bid] = k
                    ids.append(bid)
                    counts[k] = 0
                else:
                    k = got
                last = bid
            pp[i] = k
            rp[i] = h & 0xFFFFFFFF
            counts[k] += 1
        return ids, part, row, [counts[i] for i in range(found)]
    finally:
        free(counts)


def read_packed(list bufs, list ns, list widths, uint64_t lo, uint64_t hi,
                Py_ssize_t max_records, uint64_t max_bytes):
    """The rows of several ``pack_written`` buffers (one log's writes, in LSN order)
    with LSNs in ``[lo, hi]``, packed as one: at most ``max_records`` of them, and no
    record whose payload would start at or past ``max_bytes`` bytes (the first one is
    always taken; 0: no byte limit).  Returns ``(buffer, records, copyset width, cut)``,
    ``cut`` True when a limit left out rows of the range.  One pass: the record cache
    answers a young log's read, a record or two over a few writes, with it."""
    cdef Py_ssize_t parts = len(bufs), p, i, j, n = 0, width = 0, pn, pw, row = 0
    if len(ns) != parts or len(widths) != parts:
        raise ValueError("bufs, ns and widths differ in length")
    cdef Py_ssize_t at[8]
    cdef Py_ssize_t src_at[8]
    cdef cnp.ndarray part
    cdef const uint64_t *ls
    cdef const uint64_t *so
    cdef uint64_t taken = 0, body = 0, base
    cdef bint cut = False
    cdef cnp.npy_intp size
    cdef uint8_t *b
    cdef uint8_t *s
    cdef uint64_t *dst_offs
    cdef int16_t *dst_cs
    cdef const int16_t *src_cs
    cdef Py_ssize_t k, f
    # which rows: [first[p], last[p]) of each part
    cdef Py_ssize_t *first = <Py_ssize_t *>malloc(sizeof(Py_ssize_t) * 2 * (parts or 1))
    if first == NULL:
        raise MemoryError()
    cdef Py_ssize_t *last = first + parts
    try:
        for p in range(parts):
            part = bufs[p]
            pn, pw = ns[p], widths[p]
            if (cnp.PyArray_TYPE(part) != cnp.NPY_UINT8
                    or not cnp.PyArray_IS_C_CONTIGUOUS(part) or pn < 0 or pw < 0
                    or cnp.PyArray_SIZE(part) < _layout(pn, pw, src_at)):
                raise ValueError(f"part {p}: not a packed write of {pn} records {pw} wide")
            ls = <const uint64_t *>(<uint8_t *>cnp.PyArray_DATA(part) + src_at[0])
            so = <const uint64_t *>(<uint8_t *>cnp.PyArray_DATA(part) + src_at[2])
            i = 0
            while i < pn and ls[i] < lo:
                i += 1
            first[p] = last[p] = i
            while i < pn and ls[i] <= hi:
                if n == max_records or (max_bytes and n and taken >= max_bytes):
                    cut = True
                    break
                taken += so[i + 1] - so[i]
                n += 1
                i += 1
            last[p] = i
            if last[p] > first[p]:
                width = max(width, pw)
            if cut:
                for j in range(p + 1, parts):
                    first[j] = last[j] = 0
                parts = p + 1
                break
        body = taken
        size = _layout(n, width, at) + <Py_ssize_t>body
        buf = cnp.PyArray_EMPTY(1, &size, cnp.NPY_UINT8, 0)
        b = <uint8_t *>cnp.PyArray_DATA(buf)
        dst_offs = <uint64_t *>(b + at[2])
        dst_cs = <int16_t *>(b + at[6])
        base = 0
        for p in range(parts):
            k = last[p] - first[p]
            if k <= 0:
                continue
            part = bufs[p]
            pn, pw = ns[p], widths[p]
            _layout(pn, pw, src_at)
            s = <uint8_t *>cnp.PyArray_DATA(part)
            f = first[p]
            memcpy(b + at[0] + 8 * row, s + src_at[0] + 8 * f, 8 * k)  # lsns
            memcpy(b + at[1] + 8 * row, s + src_at[1] + 8 * f, 8 * k)  # timestamps
            memcpy(b + at[3] + 4 * row, s + src_at[3] + 4 * f, 4 * k)  # flags
            memcpy(b + at[4] + 4 * row, s + src_at[4] + 4 * f, 4 * k)  # waves
            memcpy(b + at[5] + 4 * row, s + src_at[5] + 4 * f, 4 * k)  # checksums
            so = <const uint64_t *>(s + src_at[2])
            src_cs = <const int16_t *>(s + src_at[6])
            for i in range(k):
                dst_offs[row + i] = base + so[f + i] - so[f]
                for j in range(width):
                    dst_cs[(row + i) * width + j] = src_cs[(f + i) * pw + j] if j < pw else -1
            if so[f + k] > so[f]:
                memcpy(b + at[7] + base, s + src_at[7] + so[f], so[f + k] - so[f])
            base += so[f + k] - so[f]
            row += k
        dst_offs[n] = base
        return buf, n, width, cut
    finally:
        free(first)
