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
#   CSI run    | last lsn u64 | n u32 | w u8 | n rows of:                   13 + n (13 + 2w)
#              |   lsn u64 | flags u32 | k u8 | copyset u16 x w (first k used) |
#
# A data record's value is its head followed by its payload (the caller joins them, see
# WriteBatch.put_many's heads).  Copysets come in as int16 rows padded with -1 (anywhere
# in the row); the padding is dropped, the other entries keep their order.
import numpy as np

cimport numpy as cnp
from libc.stdint cimport int16_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy

from ldcore.byteorder cimport get_le32, get_le64, put_be64, put_le16, put_le32, put_le64
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
    _CSI_FIXED = 5


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


cdef int _check_lsns(const uint64_t[::1] lsns) except -1:
    cdef Py_ssize_t i, n = lsns.shape[0]
    cdef Py_ssize_t bad = -1
    if n == 0:
        return 0
    if lsns[0] == 0 or lsns[n - 1] == LSN_MAX:
        raise RecordFormatError("lsns must be between 1 and LSN_MAX - 1")
    with nogil:
        for i in range(1, n):
            if lsns[i] <= lsns[i - 1]:
                bad = i
                break
    if bad >= 0:
        raise RecordFormatError(
            f"lsns must be strictly increasing: {lsns[bad - 1]} then {lsns[bad]}")
    return 0


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
    cdef uint64_t total = 0, length
    cdef Py_ssize_t bad = -1
    cdef int k
    if timestamps.shape[0] != n or flags.shape[0] != n or waves.shape[0] != n:
        raise RecordFormatError(f"timestamps, flags and waves must have {n} entries")
    if offsets.shape[0] != n + 1:
        raise RecordFormatError(f"offsets must have {n + 1} entries, got {offsets.shape[0]}")
    _check_copysets(copysets, n)
    _check_lsns(lsns)
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

    keys_arr = np.empty(n * 17, np.uint8)
    hoffs_arr = _entry_offsets(copysets, n, _HEAD_FIXED)
    cdef uint8_t[::1] keys = keys_arr
    cdef uint64_t[::1] hoffs = hoffs_arr
    total = hoffs[n]
    heads_arr = np.empty(total, np.uint8)
    if n == 0:
        return keys_arr, heads_arr, hoffs_arr
    cdef uint8_t[::1] heads = heads_arr
    cdef uint8_t *h
    cdef uint8_t *key
    cdef const unsigned char *pay = &payloads[0] if size else NULL
    cdef uint8_t log_be[8]
    put_be64(log_be, log_id)
    with nogil:
        for i in range(n):
            key = &keys[17 * i]
            key[0] = 100  # 'd'
            memcpy(key + 1, log_be, 8)
            put_be64(key + 9, lsns[i])
            h = &heads[hoffs[i]]
            k = _copyset(h + _HEAD_FIXED, copysets, i)
            put_le16(h, <uint16_t>(_HEAD_FIXED + 2 * k))
            h[2] = 1
            h[3] = <uint8_t>k
            put_le64(h + 4, <uint64_t>timestamps[i])
            put_le32(h + 12, flags[i])
            put_le32(h + 16, waves[i])
            length = offsets[i + 1] - offsets[i]
            put_le32(h + 20, ld_crc32c(0, pay + offsets[i], length) if length else 0)
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
            key[0] = 67  # 'C'
            memcpy(key + 1, log_be, 8)
            put_be64(key + 9, lsns[i])
            key[17] = 0
            v = &values[voffs[i]]
            put_le32(v, flags[i])
            k = _copyset(v + _CSI_FIXED, copysets, i)
            v[4] = <uint8_t>k
    return keys_arr, values_arr, voffs_arr


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
                    cs[at, j] = <int16_t>(row[13 + 2 * j] | (<uint16_t>row[14 + 2 * j] << 8))
                at += 1
        if bad:
            raise RecordFormatError(f"CSI run entry row with {k} copyset entries in a width "
                                    f"of {w}")
    return lsns_arr, flags_arr, cs_arr
