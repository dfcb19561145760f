# LogsDB's record formats, written n records per call (the layout is owned and documented
# by logdevice.storage.keys; this kernel writes the very bytes of its numpy encoders, in
# one pass and without a numpy call per field, which is what a write of a few records
# costs most).  Integers in keys are big-endian (RocksDB's byte order is then (log, LSN)
# order), integers in values little-endian:
#
#   data key   | 'd' | log id u64 BE | lsn u64 BE |                              17 bytes
#   head       | H u16 | format u8 (1) | k u8 | timestamp i64 | flags u32 |
#              | wave u32 | crc32c(payload) u32 | copyset u16 x k |         H = 24 + 2k
#   CSI key    | 'C' | log id u64 BE | lsn u64 BE | type u8 (0: single) |   18 bytes
#   CSI value  | flags u32 | k u8 | copyset u16 x k |                         5 + 2k
#   CSI range  | 'B' | log id u64 BE | first lsn u64 BE | type u8 (1: block, 2: run) |
#   CSI block  | last lsn u64 | flags u32 | k u8 | copyset u16 x k |         13 + 2k
#   CSI run    | last lsn u64 | n u32 | w u8 | n rows of:                   13 + n (13 + 2w)
#              |   lsn u64 | flags u32 | k u8 | copyset u16 x w (first k used) |
#
# A data record's value is its head followed by its payload (the caller joins them, see
# WriteBatch.put_many's heads).  Copysets come in as int16 rows padded with -1 (anywhere
# in the row); the padding is dropped, the other entries keep their order.
#
# encode_run builds every entry a run of records of one log writes into one partition
# (data entries, then its copyset index entries) as a *put plan*: one bytes object that
# the binding's ld_batch_put_plan puts into a write batch in one call, the payloads
# staying where they are.  Each entry of a plan (integers native-endian, no padding):
#
#   | key length u32 | inline length u32 | body offset u64 | body length u64 |
#   | key | inline part of the value |
#
# The value is the inline part followed by body[offset : offset + length] of the buffer
# handed to the binding with the plan (a data entry: the head, then the payload).
import numpy as np

cimport numpy as cnp
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.stdint cimport (
    INT64_MAX, INT64_MIN, UINT64_MAX, int16_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t,
)
from libc.string cimport memcpy, memset

from ldcore.byteorder cimport (
    get_be64, get_le16, get_le32, get_le64, put_be64, put_le16, put_le32, put_le64,
)
from ldcore.checksum cimport ld_crc32c, ld_crc32c_init

cnp.import_array()
ld_crc32c_init()

DATA_KEY_LEN = 17
CSI_KEY_LEN = 18
HEAD_FIXED = 24
FORMAT = 1
MAX_COPYSET = 255
LSN_MAX = 0xFFFFFFFFFFFFFFFF

cdef enum:
    _HEAD_FIXED = 24
    _FORMAT = 1
    _CSI_FIXED = 5
    _DATA_KEY = 17
    _CSI_KEY = 18
    _KEY_LSN = 9  # where a key's LSN starts (after the prefix byte and the log id)
    _RANGE_FIXED = 13  # a block's or a run's head: last lsn u64, then u32, u8
    _RUN_ROW_FIXED = 13  # lsn u64 | flags u32 | k u8
    _PLAN_ENTRY = 24  # key length u32 | inline length u32 | body offset u64 | body length u64


class RecordFormatError(ValueError):
    """Records that cannot be encoded (lengths differ, LSNs not increasing...)."""


class RecordTooBigError(RecordFormatError):
    """A payload is above the limit given to ``encode_data``."""


cdef inline int _copyset(uint8_t *p, const int16_t[:, ::1] cs, Py_ssize_t row) noexcept nogil:
    """Write row ``row``'s node indices (padding dropped) as u16 LE; return how many."""
    cdef Py_ssize_t j
    cdef int k = 0
    cdef int16_t v
    for j in range(cs.shape[1]):
        v = cs[row, j]
        if v >= 0:
            put_le16(p + 2 * k, <uint16_t>v)
            k += 1
    return k


cdef object _entry_offsets(const int16_t[:, ::1] cs, Py_ssize_t n, uint64_t fixed):
    """Boundaries of n entries of ``fixed`` bytes plus 2 per copyset member."""
    offs_arr = np.empty(n + 1, np.uint64)
    cdef uint64_t[::1] offs = offs_arr
    cdef uint64_t total = 0
    cdef Py_ssize_t i
    offs[0] = 0
    with nogil:
        for i in range(n):
            total += fixed + 2 * _count(cs, i)
            offs[i + 1] = total
    return offs_arr


cdef inline int _count(const int16_t[:, ::1] cs, Py_ssize_t row) noexcept nogil:
    cdef Py_ssize_t j
    cdef int k = 0
    for j in range(cs.shape[1]):
        if cs[row, j] >= 0:
            k += 1
    return k


cdef int _check_copysets(const int16_t[:, ::1] copysets, Py_ssize_t n) except -1:
    if copysets.shape[0] != n:
        raise RecordFormatError(f"copysets must have {n} rows, got {copysets.shape[0]}")
    if copysets.shape[1] > MAX_COPYSET:
        raise RecordFormatError(f"copysets wider than {MAX_COPYSET}")
    return 0


cdef int _check_lsns(const uint64_t[::1] lsns, const uint64_t[::1] ends=None) except -1:
    """LSNs in range and strictly increasing (within each run, given run ``ends``: each
    run's rows end there, increasing, the last at the last row; no run is empty)."""
    cdef Py_ssize_t i, j = 0, n = lsns.shape[0]
    cdef Py_ssize_t bad = -1
    cdef uint64_t lo = 0, hi
    if ends is not None:
        for j in range(ends.shape[0]):
            hi = ends[j]
            if hi <= lo or hi > <uint64_t>n:
                raise RecordFormatError(f"run ends must increase up to {n}, "
                                        f"got {hi} after {lo}")
            lo = hi
        if lo != <uint64_t>n:
            raise RecordFormatError(f"run ends must end at {n}, got {lo}")
        j = 0
    if n == 0:
        return 0
    with nogil:
        for i in range(n):
            if lsns[i] == 0 or lsns[i] == UINT64_MAX:  # (LSN_MAX)
                bad = i
                break
    if bad >= 0:
        raise RecordFormatError("lsns must be between 1 and LSN_MAX - 1")
    with nogil:
        for i in range(1, n):
            if ends is not None and <uint64_t>i == ends[j]:
                j += 1  # a new run starts at row i
                continue
            if lsns[i] <= lsns[i - 1]:
                bad = i
                break
    if bad >= 0:
        raise RecordFormatError(
            f"lsns must be strictly increasing: {lsns[bad - 1]} then {lsns[bad]}")
    return 0


cdef int _check_records(const uint64_t[::1] lsns, const int64_t[::1] timestamps,
                        const uint32_t[::1] flags, const uint32_t[::1] waves,
                        const int16_t[:, ::1] copysets, uint64_t size,
                        const uint64_t[::1] offsets, int64_t max_payload,
                        const uint64_t[::1] ends=None) except -1:
    """What ``encode_data``, ``encode_run`` and ``encode_runs`` (with its run ``ends``)
    check (``waves`` may be None: all 1)."""
    cdef Py_ssize_t n = lsns.shape[0]
    cdef Py_ssize_t i
    cdef Py_ssize_t bad = -1
    if timestamps.shape[0] != n or flags.shape[0] != n or (
            waves is not None and waves.shape[0] != n):
        raise RecordFormatError(f"timestamps, flags and waves must have {n} entries")
    if offsets.shape[0] != n + 1:
        raise RecordFormatError(f"offsets must have {n + 1} entries, got {offsets.shape[0]}")
    _check_copysets(copysets, n)
    _check_lsns(lsns, ends)
    with nogil:
        for i in range(n):
            if offsets[i] > offsets[i + 1]:
                bad = i
                break
    if bad >= 0 or offsets[n] > size:
        raise RecordFormatError("payload offsets are decreasing or run past the buffer")
    if max_payload >= 0:
        with nogil:
            for i in range(n):
                if offsets[i + 1] - offsets[i] > <uint64_t>max_payload:
                    bad = i
                    break
        if bad >= 0:
            raise RecordTooBigError(
                f"payload of {offsets[bad + 1] - offsets[bad]} bytes is above "
                f"{max_payload}")
    return 0


cdef inline void _put_key(uint8_t *key, uint8_t prefix, const uint8_t *log_be,
                          uint64_t lsn) noexcept nogil:
    """``prefix | log id BE | lsn BE``: a data, CSI or CSI range key (17 bytes; a CSI
    key's type byte follows)."""
    key[0] = prefix
    memcpy(key + 1, log_be, 8)
    put_be64(key + _KEY_LSN, lsn)


cdef inline int _put_head(uint8_t *h, int64_t timestamp, uint32_t flags, uint32_t wave,
                          const int16_t[:, ::1] cs, Py_ssize_t row,
                          const unsigned char *payload, uint64_t length) noexcept nogil:
    """Write record ``row``'s head (crc32c of its payload included); return its length."""
    cdef int k = _copyset(h + _HEAD_FIXED, cs, row)
    put_le16(h, <uint16_t>(_HEAD_FIXED + 2 * k))
    h[2] = _FORMAT
    h[3] = <uint8_t>k
    put_le64(h + 4, <uint64_t>timestamp)
    put_le32(h + 12, flags)
    put_le32(h + 16, wave)
    put_le32(h + 20, ld_crc32c(0, payload, length) if length else 0)
    return _HEAD_FIXED + 2 * k


def encode_data(uint64_t log_id, const uint64_t[::1] lsns, const int64_t[::1] timestamps,
                const uint32_t[::1] flags, const uint32_t[::1] waves,
                const int16_t[:, ::1] copysets, const unsigned char[::1] payloads,
                const uint64_t[::1] offsets, int64_t max_payload=-1):
    """Data keys and record heads of n records, checked.

    Parameters
    ----------
    log_id : int
    lsns : uint64[n]
        Strictly increasing, between 1 and ``LSN_MAX - 1``.
    timestamps : int64[n]
    flags, waves : uint32[n]
    copysets : int16[n, w]
        Node indices, padded with -1; ``w <= 255``.
    payloads : bytes-like
        All payloads back to back.
    offsets : uint64[n + 1]
        Record i's payload is ``payloads[offsets[i]:offsets[i + 1]]``: non-decreasing,
        ``offsets[n] <= len(payloads)``.
    max_payload : int
        Largest payload allowed (negative: no limit).

    Returns
    -------
    keys : uint8[17 n]
        The data keys, back to back.
    heads : uint8[...]
        The record heads (checksums of the payloads included), back to back.
    head_offsets : uint64[n + 1]
        Head i is ``heads[head_offsets[i]:head_offsets[i + 1]]``.

    Raises
    ------
    RecordTooBigError
        A payload is longer than ``max_payload``.
    RecordFormatError
        Lengths that do not match, LSNs not strictly increasing or out of range, bad
        offsets, copysets wider than 255.
    """
    cdef Py_ssize_t n = lsns.shape[0]
    cdef Py_ssize_t i
    cdef uint64_t size = <uint64_t>payloads.shape[0]
    cdef uint64_t total = 0
    _check_records(lsns, timestamps, flags, waves, copysets, size, offsets, max_payload)
    keys_arr = np.empty(n * 17, np.uint8)
    hoffs_arr = _entry_offsets(copysets, n, _HEAD_FIXED)
    cdef uint8_t[::1] keys = keys_arr
    cdef uint64_t[::1] hoffs = hoffs_arr
    total = hoffs[n]
    heads_arr = np.empty(total, np.uint8)
    if n == 0:
        return keys_arr, heads_arr, hoffs_arr
    cdef uint8_t[::1] heads = heads_arr
    cdef const unsigned char *pay = &payloads[0] if size else NULL
    cdef uint8_t log_be[8]
    put_be64(log_be, log_id)
    with nogil:
        for i in range(n):
            _put_key(&keys[17 * i], 100, log_be, lsns[i])  # 'd'
            _put_head(&heads[hoffs[i]], timestamps[i], flags[i], waves[i], copysets, i,
                      pay + offsets[i], offsets[i + 1] - offsets[i])
    return keys_arr, heads_arr, hoffs_arr


def encode_csi(uint64_t log_id, const uint64_t[::1] lsns, const uint32_t[::1] flags,
               const int16_t[:, ::1] copysets):
    """Keys and values of n single copyset-index entries.

    Parameters
    ----------
    log_id : int
    lsns : uint64[n]
    flags : uint32[n]
    copysets : int16[n, w], padded with -1

    Returns
    -------
    keys : uint8[18 n]
    values : uint8[...]
    value_offsets : uint64[n + 1]
    """
    cdef Py_ssize_t n = lsns.shape[0]
    cdef Py_ssize_t i
    cdef uint64_t total = 0
    cdef int k
    if flags.shape[0] != n:
        raise RecordFormatError(f"flags must have {n} entries, got {flags.shape[0]}")
    _check_copysets(copysets, n)
    keys_arr = np.empty(n * 18, np.uint8)
    voffs_arr = _entry_offsets(copysets, n, _CSI_FIXED)
    cdef uint8_t[::1] keys = keys_arr
    cdef uint64_t[::1] voffs = voffs_arr
    total = voffs[n]
    values_arr = np.empty(total, np.uint8)
    if n == 0:
        return keys_arr, values_arr, voffs_arr
    cdef uint8_t[::1] values = values_arr
    cdef uint8_t *v
    cdef uint8_t *key
    cdef uint8_t log_be[8]
    put_be64(log_be, log_id)
    with nogil:
        for i in range(n):
            key = &keys[18 * i]
            _put_key(key, 67, log_be, lsns[i])  # 'C'
            key[17] = 0
            v = &values[voffs[i]]
            put_le32(v, flags[i])
            k = _copyset(v + _CSI_FIXED, copysets, i)
            v[4] = <uint8_t>k
    return keys_arr, values_arr, voffs_arr


cdef class Run:
    """A run of records of one log, encoded by ``encode_run``.

    Attributes
    ----------
    plan : bytes
        Its entries as a put plan (see the comment at the top of this module): the data
        entries in LSN order, then the copyset index entries.
    first_lsn, last_lsn : int
    min_ts, max_ts : int
        Smallest and largest timestamp.
    records : int
    payload_bytes, head_bytes : int
        Bytes of the payloads and of the record heads.
    blobs : int
        Records flagged with any of the ``blob_flags`` given to ``encode_run``.
    """

    cdef readonly bytes plan
    cdef readonly uint64_t first_lsn, last_lsn
    cdef readonly int64_t min_ts, max_ts
    cdef readonly Py_ssize_t records
    cdef readonly uint64_t payload_bytes, head_bytes
    cdef readonly Py_ssize_t blobs


cdef inline uint8_t *_put_entry(uint8_t *p, uint32_t key_len, uint32_t inline_len,
                                uint64_t body_offset, uint64_t body_len) noexcept nogil:
    """Write a plan entry's lengths; return where its key goes."""
    memcpy(p, &key_len, 4)
    memcpy(p + 4, &inline_len, 4)
    memcpy(p + 8, &body_offset, 8)
    memcpy(p + 16, &body_len, 8)
    return p + _PLAN_ENTRY


cdef bint _same_copysets(const int16_t[:, ::1] cs, Py_ssize_t lo,
                         Py_ssize_t hi) noexcept nogil:
    """Whether rows lo+1..hi-1 hold the same nodes in the same order as row lo (padding
    aside)."""
    cdef Py_ssize_t i, a, b, width = cs.shape[1]
    for i in range(lo + 1, hi):
        a = b = 0
        while True:
            while a < width and cs[lo, a] < 0:
                a += 1
            while b < width and cs[i, b] < 0:
                b += 1
            if a == width or b == width:
                if a != width or b != width:
                    return False
                break
            if cs[lo, a] != cs[i, b]:
                return False
            a += 1
            b += 1
    return True


cdef enum:
    _SINGLE = 0
    _BLOCK = 1
    _RUN = 2


cdef struct _Shape:
    # What a run of rows [lo, hi) writes: its CSI kind and sizes, its figures.
    int kind
    uint64_t heads  # bytes of the record heads
    uint64_t plan_bytes  # of its whole put plan
    int64_t tmin, tmax
    Py_ssize_t blobs


cdef _Shape _measure(const uint64_t[::1] lsns, const int64_t[::1] timestamps,
                     const uint32_t[::1] flags, const int16_t[:, ::1] copysets,
                     Py_ssize_t lo, Py_ssize_t hi, bint grouped,
                     uint32_t blob_flags) noexcept nogil:
    """The shape of the run of rows ``[lo, hi)`` (at least one row)."""
    cdef _Shape r
    cdef Py_ssize_t i, n = hi - lo, width = copysets.shape[1]
    cdef uint64_t copysets_bytes = 0, csi_bytes
    r.tmin, r.tmax, r.blobs, r.kind = INT64_MAX, INT64_MIN, 0, _SINGLE
    for i in range(lo, hi):
        copysets_bytes += 2 * _count(copysets, i)
        if timestamps[i] < r.tmin:
            r.tmin = timestamps[i]
        if timestamps[i] > r.tmax:
            r.tmax = timestamps[i]
        if flags[i] & blob_flags:
            r.blobs += 1
    r.heads = n * _HEAD_FIXED + copysets_bytes
    if grouped and n > 1:
        r.kind = _RUN
        if lsns[hi - 1] - lsns[lo] == <uint64_t>(n - 1) and _same_copysets(copysets, lo, hi):
            r.kind = _BLOCK
            for i in range(lo + 1, hi):
                if flags[i] != flags[lo]:
                    r.kind = _RUN
                    break
    if r.kind == _SINGLE:
        csi_bytes = n * (_PLAN_ENTRY + _CSI_KEY + _CSI_FIXED) + copysets_bytes
    elif r.kind == _BLOCK:
        csi_bytes = _PLAN_ENTRY + _CSI_KEY + _RANGE_FIXED + 2 * _count(copysets, lo)
    else:
        csi_bytes = _PLAN_ENTRY + _CSI_KEY + _RANGE_FIXED + n * (_RUN_ROW_FIXED + 2 * width)
    r.plan_bytes = n * (_PLAN_ENTRY + _DATA_KEY) + r.heads + csi_bytes
    return r


cdef uint8_t *_write_run(uint8_t *p, uint64_t log_id, int kind, const uint64_t[::1] lsns,
                         const int64_t[::1] timestamps, const uint32_t[::1] flags,
                         const uint32_t[::1] waves, const int16_t[:, ::1] copysets,
                         const unsigned char *pay, const uint64_t[::1] offsets,
                         Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
    """Write the plan entries of the run of rows ``[lo, hi)`` at ``p`` (``_measure``
    sized them): data entries, then copyset index entries.  Returns the end."""
    cdef Py_ssize_t i, n = hi - lo, width = copysets.shape[1]
    cdef uint8_t *key
    cdef uint8_t *v
    cdef uint64_t length
    cdef int k
    cdef uint8_t log_be[8]
    put_be64(log_be, log_id)
    for i in range(lo, hi):
        key = p + _PLAN_ENTRY
        _put_key(key, 100, log_be, lsns[i])  # 'd'
        length = offsets[i + 1] - offsets[i]
        k = _put_head(key + _DATA_KEY, timestamps[i], flags[i],
                      1 if waves is None else waves[i], copysets, i, pay + offsets[i],
                      length)
        _put_entry(p, _DATA_KEY, k, offsets[i], length)
        p = key + _DATA_KEY + k
    if kind == _SINGLE:
        for i in range(lo, hi):
            key = p + _PLAN_ENTRY
            _put_key(key, 67, log_be, lsns[i])  # 'C'
            key[17] = _SINGLE
            v = key + _CSI_KEY
            put_le32(v, flags[i])
            k = _copyset(v + _CSI_FIXED, copysets, i)
            v[4] = <uint8_t>k
            _put_entry(p, _CSI_KEY, _CSI_FIXED + 2 * k, 0, 0)
            p = v + _CSI_FIXED + 2 * k
        return p
    key = p + _PLAN_ENTRY
    _put_key(key, 66, log_be, lsns[lo])  # 'B'
    key[17] = kind
    v = key + _CSI_KEY
    put_le64(v, lsns[hi - 1])
    if kind == _BLOCK:
        put_le32(v + 8, flags[lo])
        k = _copyset(v + _RANGE_FIXED, copysets, lo)
        v[12] = <uint8_t>k
        _put_entry(p, _CSI_KEY, _RANGE_FIXED + 2 * k, 0, 0)
        return v + _RANGE_FIXED + 2 * k
    put_le32(v + 8, <uint32_t>n)
    v[12] = <uint8_t>width
    p = v + _RANGE_FIXED
    for i in range(lo, hi):
        put_le64(p, lsns[i])
        put_le32(p + 8, flags[i])
        memset(p + _RUN_ROW_FIXED, 0, 2 * width)
        p[12] = <uint8_t>_copyset(p + _RUN_ROW_FIXED, copysets, i)
        p += _RUN_ROW_FIXED + 2 * width
    _put_entry(key - _PLAN_ENTRY, _CSI_KEY, _RANGE_FIXED + n * (_RUN_ROW_FIXED + 2 * width),
               0, 0)
    return p


def encode_run(uint64_t log_id, const uint64_t[::1] lsns, const int64_t[::1] timestamps,
               const uint32_t[::1] flags, const uint32_t[::1] waves,
               const int16_t[:, ::1] copysets, const unsigned char[::1] payloads,
               const uint64_t[::1] offsets, int64_t max_payload=-1, bint grouped=False,
               uint32_t blob_flags=0):
    """Every entry n records of one log write into one partition, as one put plan.

    Parameters as for ``encode_data`` (``waves`` may be None: all 1), and

    grouped : bool
        One copyset index entry for the run (LogsDB's CSI ranges): a block when the LSNs
        are consecutive and share flags and copyset, else a run; a run of one record
        gets a single entry like any record when not grouped.
    blob_flags : int
        Flag bits to count in ``Run.blobs``.

    Returns
    -------
    Run

    Raises
    ------
    RecordTooBigError, RecordFormatError
        As ``encode_data``.
    """
    cdef Py_ssize_t n = lsns.shape[0]
    cdef uint64_t size = <uint64_t>payloads.shape[0]
    _check_records(lsns, timestamps, flags, waves, copysets, size, offsets, max_payload)
    cdef Run run = Run.__new__(Run)
    run.records = n
    if n == 0:
        run.plan = b""
        run.min_ts, run.max_ts = INT64_MAX, INT64_MIN
        return run
    cdef _Shape shape
    with nogil:
        shape = _measure(lsns, timestamps, flags, copysets, 0, n, grouped, blob_flags)
    plan = PyBytes_FromStringAndSize(NULL, shape.plan_bytes)
    cdef uint8_t *p = <uint8_t *>PyBytes_AS_STRING(plan)
    cdef const unsigned char *pay = &payloads[0] if size else NULL
    with nogil:
        _write_run(p, log_id, shape.kind, lsns, timestamps, flags, waves, copysets, pay,
                   offsets, 0, n)
    run.plan = plan
    run.first_lsn, run.last_lsn = lsns[0], lsns[n - 1]
    run.min_ts, run.max_ts = shape.tmin, shape.tmax
    run.payload_bytes = offsets[n] - offsets[0]
    run.head_bytes = shape.heads
    run.blobs = shape.blobs
    return run


def encode_runs(const uint64_t[::1] log_ids, const uint64_t[::1] ends,
                const uint64_t[::1] lsns, const int64_t[::1] timestamps,
                const uint32_t[::1] flags, const uint32_t[::1] waves,
                const int16_t[:, ::1] copysets, const unsigned char[::1] payloads,
                const uint64_t[::1] offsets, int64_t max_payload=-1, bint grouped=False,
                uint32_t blob_flags=0):
    """``encode_run`` for m runs of different logs (or partitions) at once: one put plan
    for all of them, in run order.  Run j is log ``log_ids[j]``'s rows ``ends[j - 1]``
    (0 for the first) to ``ends[j]`` of the columns, whose offsets index the one
    ``payloads`` buffer.  A group commit of many logs' few records pays one call, not
    one per log.

    Returns
    -------
    plan : bytes
    figures : int64[m, 6]
        Per run: first LSN and last LSN (as int64 bit patterns: view as uint64), smallest
        and largest timestamp, bytes of its payloads plus heads, and its records flagged
        with any of ``blob_flags``.

    Raises
    ------
    RecordTooBigError, RecordFormatError
        As ``encode_run``, for any run (nothing is encoded then); also for ends that are
        not increasing or do not end at the last row.
    """
    cdef Py_ssize_t m = log_ids.shape[0], j, lo, hi
    cdef uint64_t size = <uint64_t>payloads.shape[0], total = 0
    if ends.shape[0] != m:
        raise RecordFormatError(f"ends must have {m} entries, got {ends.shape[0]}")
    _check_records(lsns, timestamps, flags, waves, copysets, size, offsets, max_payload,
                   ends)
    figures_arr = np.empty((m, 6), np.int64)
    cdef int64_t[:, ::1] figures = figures_arr
    shapes_arr = np.empty(m * sizeof(_Shape), np.uint8)
    cdef _Shape *shapes = <_Shape *>cnp.PyArray_DATA(shapes_arr)
    with nogil:
        lo = 0
        for j in range(m):
            hi = <Py_ssize_t>ends[j]
            shapes[j] = _measure(lsns, timestamps, flags, copysets, lo, hi, grouped,
                                 blob_flags)
            total += shapes[j].plan_bytes
            lo = hi
    plan = PyBytes_FromStringAndSize(NULL, total)
    cdef uint8_t *p = <uint8_t *>PyBytes_AS_STRING(plan)
    cdef const unsigned char *pay = &payloads[0] if size else NULL
    with nogil:
        lo = 0
        for j in range(m):
            hi = <Py_ssize_t>ends[j]
            p = _write_run(p, log_ids[j], shapes[j].kind, lsns, timestamps, flags, waves,
                           copysets, pay, offsets, lo, hi)
            figures[j, 0] = <int64_t>lsns[lo]
            figures[j, 1] = <int64_t>lsns[hi - 1]
            figures[j, 2] = shapes[j].tmin
            figures[j, 3] = shapes[j].tmax
            figures[j, 4] = <int64_t>(offsets[hi] - offsets[lo] + shapes[j].heads)
            figures[j, 5] = shapes[j].blobs
            lo = hi
    return plan, figures_arr


def plan_of(list entries):
    """A put plan of ``entries``, (key, value) pairs of bytes, values all inline."""
    cdef Py_ssize_t size = 0
    cdef bytes key, value
    for key, value in entries:
        size += _PLAN_ENTRY + len(key) + len(value)
    plan = PyBytes_FromStringAndSize(NULL, size)
    cdef uint8_t *p = <uint8_t *>PyBytes_AS_STRING(plan)
    for key, value in entries:
        p = _put_entry(p, <uint32_t>len(key), <uint32_t>len(value), 0, 0)
        memcpy(p, PyBytes_AS_STRING(key), len(key))
        p += len(key)
        memcpy(p, PyBytes_AS_STRING(value), len(value))
        p += len(value)
    return plan


def check_records(const uint64_t[::1] lsns, const int64_t[::1] timestamps,
                  const uint32_t[::1] flags, const uint32_t[::1] waves,
                  const int16_t[:, ::1] copysets, const unsigned char[::1] payloads,
                  const uint64_t[::1] offsets, int64_t max_payload=-1):
    """Raise what ``encode_run`` would for these records, encoding nothing (a write
    cut into several runs checks all its records before it puts any)."""
    _check_records(lsns, timestamps, flags, waves, copysets, <uint64_t>payloads.shape[0],
                   offsets, max_payload)


def time_range(const int64_t[::1] timestamps):
    """(smallest, largest) timestamp; ``(INT64_MAX, INT64_MIN)`` when there is none."""
    cdef int64_t tmin = INT64_MAX, tmax = INT64_MIN
    cdef Py_ssize_t i
    for i in range(timestamps.shape[0]):
        if timestamps[i] < tmin:
            tmin = timestamps[i]
        if timestamps[i] > tmax:
            tmax = timestamps[i]
    return tmin, tmax


def decode_csi_runs(list values):
    """The rows of copyset-index run entries (whole values, head included), in order.

    A page of a log written in batches is thousands of run entries; decoding them in one
    pass costs a few nanoseconds a row where a numpy pass per entry and field costs
    microseconds an entry.

    Returns
    -------
    lsns : uint64[n]
    flags : uint32[n]
    copysets : int16[n, w], w the widest entry's, padded with -1

    Raises ``RecordFormatError`` for an entry shorter than its head says, or with a copyset
    count above its width.
    """
    cdef Py_ssize_t m = len(values), e, i, j, rows_total = 0, width = 0
    cdef const uint8_t[::1] v
    cdef uint32_t n
    cdef int w
    heads = []
    for e in range(m):
        v = values[e]
        if v.shape[0] < 13:
            raise RecordFormatError(f"CSI run entry of {v.shape[0]} bytes: no head")
        n = get_le32(&v[8])
        w = v[12]
        if v.shape[0] < 13 + <Py_ssize_t>n * (13 + 2 * w):
            raise RecordFormatError(f"CSI run entry of {n} rows of width {w} is "
                                    f"{v.shape[0]} bytes")
        heads.append((n, w))
        rows_total += n
        width = max(width, w)
    lsns_arr = np.empty(rows_total, np.uint64)
    flags_arr = np.empty(rows_total, np.uint32)
    cs_arr = np.full((rows_total, width), -1, np.int16)
    if rows_total == 0:
        return lsns_arr, flags_arr, cs_arr
    cdef uint64_t[::1] lsns = lsns_arr
    cdef uint32_t[::1] flags = flags_arr
    cdef int16_t[:, ::1] cs = cs_arr
    cdef Py_ssize_t at = 0
    cdef const uint8_t *row
    cdef int k
    cdef bint bad = False
    for e in range(m):
        v = values[e]
        n, w = heads[e]
        with nogil:
            for i in range(n):
                row = &v[13 + i * (13 + 2 * w)]
                lsns[at] = get_le64(row)
                flags[at] = get_le32(row + 8)
                k = row[12]
                if k > w:
                    bad = True
                    break
                for j in range(k):
                    cs[at, j] = <int16_t>get_le16(row + 13 + 2 * j)
                at += 1
        if bad:
            raise RecordFormatError(f"CSI run entry row with {k} copyset entries in a width "
                                    f"of {w}")
    return lsns_arr, flags_arr, cs_arr


def decode_heads(const uint8_t[::1] heads, const uint64_t[::1] offsets):
    """The columns of data records' heads, head ``i`` being ``heads[offsets[i]:offsets[i+1]]``
    (what a read that splits values at their heads returns).  A read of a young log's
    record or two paid more for a numpy pass per field than for the read itself.

    Returns
    -------
    timestamps : int64[n]
    flags, waves, checksums : uint32[n]
    copysets : int16[n, w], w the largest copyset's size, padded with -1

    Raises ``RecordFormatError`` for a head of another format, or shorter than it says.
    """
    cdef Py_ssize_t n = max(offsets.shape[0] - 1, 0), i, j
    cdef uint64_t size = <uint64_t>heads.shape[0], a, b
    cdef int k, width = 0
    for i in range(n):
        a = offsets[i]
        b = offsets[i + 1]
        if b < a or b > size:
            raise RecordFormatError(f"record head {i} at [{a}, {b}) is not in the "
                                    f"{size} bytes of heads")
        if b - a < _HEAD_FIXED:
            raise RecordFormatError(f"record head {i} is {<int64_t>(b - a)} bytes")
        if heads[a + 2] != _FORMAT:
            raise RecordFormatError(f"record head {i} is of format {heads[a + 2]}")
        k = heads[a + 3]
        if b - a < <uint64_t>(_HEAD_FIXED + 2 * k):
            raise RecordFormatError(f"record head {i} of {<int64_t>(b - a)} bytes names "
                                    f"{k} copies")
        if k > width:
            width = k
    ts_arr = np.empty(n, np.int64)
    flags_arr = np.empty(n, np.uint32)
    waves_arr = np.empty(n, np.uint32)
    crc_arr = np.empty(n, np.uint32)
    cs_arr = np.empty((n, width), np.int16)  # (np.full costs more than this whole pass)
    if n == 0:
        return ts_arr, flags_arr, waves_arr, crc_arr, cs_arr
    cdef int64_t[::1] ts = ts_arr
    cdef uint32_t[::1] flags = flags_arr
    cdef uint32_t[::1] waves = waves_arr
    cdef uint32_t[::1] crc = crc_arr
    cdef int16_t[:, ::1] cs = cs_arr
    cdef const uint8_t *h
    with nogil:
        for i in range(n):
            h = &heads[offsets[i]]
            ts[i] = <int64_t>get_le64(h + 4)
            flags[i] = get_le32(h + 12)
            waves[i] = get_le32(h + 16)
            crc[i] = get_le32(h + 20)
            k = h[3]
            for j in range(k):
                cs[i, j] = <int16_t>get_le16(h + _HEAD_FIXED + 2 * j)
            for j in range(k, width):
                cs[i, j] = -1
    return ts_arr, flags_arr, waves_arr, crc_arr, cs_arr


def key_lsns(const uint8_t[::1] keys, Py_ssize_t n, Py_ssize_t width):
    """The LSNs of ``n`` keys of ``width`` bytes laid end to end in ``keys`` (data, CSI
    or CSI range keys, as ``_put_key`` writes them), as uint64[n]."""
    if n < 0 or width < _KEY_LSN + 8 or n * width > keys.shape[0]:
        raise ValueError(f"{n} keys of {width} bytes do not fit in {keys.shape[0]} bytes, "
                         f"or hold no LSN")
    out_arr = np.empty(n, np.uint64)
    if n == 0:
        return out_arr
    cdef uint64_t[::1] out = out_arr
    cdef Py_ssize_t i
    with nogil:
        for i in range(n):
            out[i] = get_be64(&keys[i * width + _KEY_LSN])
    return out_arr
