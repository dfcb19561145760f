# BufferedWriter blob: many payloads in one record, our byte layout.
#
#  byte 0     1       2..5 (if CHECKSUM)    next 16 (if PRODUCER)
#  +------+-------+=====================+==========================+---------------+
#  | 0xb1 | flags | crc32c, 4 bytes, LE | producer id, sequence no | varint count  |
#  +------+-------+=====================+==========================+---------------+
#                                         u64 LE        u64 LE
#
#  flags:  bit 7..5  reserved, must be 0
#          bit 4     PRODUCER: the writer's id and the blob's sequence number follow
#                    (a retried blob carries the same pair: the sequencer drops repeats)
#          bit 3     CHECKSUM_CRC32C: bytes 2..5 hold a checksum
#          bit 2..0  compression: NONE = 0, ZSTD = 1 (others are errors)
#
#  body, compression NONE:            body, compression ZSTD:
#  +------------+-----------+         +-------------------------+-------------------+
#  | varint len | len bytes |  x count| varint uncompressed size| one zstd frame    |
#  +------------+-----------+         +-------------------------+-------------------+
#                                       the frame holds the NONE body: [varint len][bytes]...
#
# Where the checksum sits.  LogDevice writes "[optional checksum][0xb1][flags]...", which a
# reader can only tell apart by guessing (a checksum may begin with 0xb1).  We keep the
# magic at byte 0 always and let a flag bit say that a checksum follows the flags byte, so
# every blob is read the same way: magic, flags, then the checksum iff flags bit 3.
# The checksum is CRC32C of bytes 0..1 followed by bytes 6..end (everything but itself),
# so it covers the magic, the flags, the count and the (compressed) body.
#
# varint: unsigned LEB128, 7 bits a byte, low group first, high bit = more; at most 10
# bytes (64 bits).  Compression is kept only if it makes the blob smaller.
#
# decode() returns (buffer, offsets): one numpy uint8 buffer holding the payloads back to
# back and n + 1 uint64 boundaries, payload i = buffer[offsets[i]:offsets[i + 1]].
# Everything in a blob is checked before it is trusted; bad input raises CodecError.
import numpy as np

cimport numpy as cnp
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport (
    PyBytes_AS_STRING,
    PyBytes_CheckExact,
    PyBytes_FromStringAndSize,
    PyBytes_GET_SIZE,
)
from libc.stdint cimport uint8_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcpy, memmove

from ldcore.byteorder cimport get_le64, put_le64
from ldcore.checksum cimport ld_crc32c, ld_crc32c_init

cnp.import_array()
ld_crc32c_init()

MAGIC = 0xB1
COMPRESSION_NONE = 0
COMPRESSION_ZSTD = 1
FLAG_CHECKSUM_CRC32C = 0x08
FLAG_PRODUCER = 0x10
# The largest blob a BufferedWriter makes: its blobs are appends, and no append may exceed
# 32 MiB (logdevice's MAX_PAYLOAD_SIZE).  A blob claiming more is refused before anything
# is allocated, so a small compressed record cannot make a reader allocate more.
DEFAULT_MAX_SIZE = 32 * 1024 * 1024

cdef enum:
    _MAGIC = 0xB1
    _COMP_MASK = 0x07
    _FLAG_CRC = 0x08
    _FLAG_PRODUCER = 0x10
    _RESERVED = 0xE0
    _POOL = 4
    _KEEP_SCRATCH = 1 << 22


class CodecError(ValueError):
    """A blob that is not a valid BufferedWriter blob (corrupt, truncated or unknown)."""


# What went wrong in a nogil section; turned into a CodecError message with the GIL.
cdef enum:
    E_OK = 0
    E_SHORT
    E_MAGIC
    E_FLAGS
    E_COMPRESSION
    E_CHECKSUM
    E_VARINT_TRUNC
    E_VARINT_OVERFLOW
    E_COUNT
    E_LEN
    E_TRAILING
    E_TOO_BIG
    E_ZSTD
    E_SIZE
    E_FRAME_TRAILING
    E_REST

# Err.what for varint errors: which field.
cdef enum:
    W_COUNT = -1
    W_USIZE = -2

cdef struct Err:
    int code
    long long what
    uint64_t a
    uint64_t b
    size_t zcode

cdef struct Header:
    int compression
    bint has_checksum
    bint has_producer
    uint64_t producer_id
    uint64_t producer_seq
    uint64_t count
    size_t body          # offset of the body (after the count varint)


# ---------------------------------------------------------------- varints

cdef inline size_t _varint_size(uint64_t v) noexcept nogil:
    cdef size_t n = 1
    while v >= 0x80:
        v >>= 7
        n += 1
    return n


cdef inline size_t _write_varint(uint8_t *p, uint64_t v) noexcept nogil:
    cdef size_t i = 0
    while v >= 0x80:
        p[i] = <uint8_t>(v | 0x80)
        v >>= 7
        i += 1
    p[i] = <uint8_t>v
    return i + 1


cdef inline int _read_varint(const uint8_t *p, size_t end, size_t *pos, uint64_t *out,
                             Err *err, long long what) noexcept nogil:
    cdef size_t i = pos[0]
    cdef uint64_t v = 0
    cdef unsigned int shift = 0
    cdef uint8_t b
    while True:
        if i >= end:
            err.code = E_VARINT_TRUNC
            err.what = what
            err.a = pos[0]
            return -1
        b = p[i]
        i += 1
        if shift == 63 and b > 1:
            err.code = E_VARINT_OVERFLOW
            err.what = what
            err.a = pos[0]
            return -1
        v |= (<uint64_t>(b & 0x7F)) << shift
        if b < 0x80:
            break
        shift += 7
    pos[0] = i
    out[0] = v
    return 0


# ---------------------------------------------------------------- zstd contexts
# Creating a zstd context costs more than compressing a small blob, and fresh scratch
# buffers cost page faults, so a few of each are kept.  The pools are only touched with
# the GIL held; an entry is used by one thread at a time.

cdef struct Scratch:
    ZSTD_CCtx *cctx
    uint8_t *section
    size_t section_cap
    uint8_t *zbuf
    size_t zbuf_cap

cdef Scratch _enc_pool[_POOL]
cdef int _enc_n = 0


cdef int _take_enc(Scratch *s) except -1:
    global _enc_n
    if _enc_n > 0:
        _enc_n -= 1
        s[0] = _enc_pool[_enc_n]
        return 0
    s.cctx = ZSTD_createCCtx()
    s.section = NULL
    s.section_cap = 0
    s.zbuf = NULL
    s.zbuf_cap = 0
    if s.cctx == NULL:
        raise MemoryError("ZSTD_createCCtx failed")
    return 0


cdef void _give_enc(Scratch *s) noexcept:
    global _enc_n
    # big scratch buffers are not worth keeping around
    if s.section_cap > _KEEP_SCRATCH:
        free(s.section)
        s.section = NULL
        s.section_cap = 0
    if s.zbuf_cap > _KEEP_SCRATCH:
        free(s.zbuf)
        s.zbuf = NULL
        s.zbuf_cap = 0
    if _enc_n < _POOL:
        _enc_pool[_enc_n] = s[0]
        _enc_n += 1
    else:
        ZSTD_freeCCtx(s.cctx)
        free(s.section)
        free(s.zbuf)


cdef int _reserve(uint8_t **buf, size_t *cap, size_t need) except -1:
    cdef uint8_t *p
    if cap[0] >= need:
        return 0
    p = <uint8_t *>malloc(need)
    if p == NULL:
        raise MemoryError()
    free(buf[0])
    buf[0] = p
    cap[0] = need
    return 0


cdef ZSTD_DCtx *_dctx_pool[_POOL]
cdef int _dctx_n = 0


cdef ZSTD_DCtx *_take_dctx() except NULL:
    global _dctx_n
    cdef ZSTD_DCtx *d
    if _dctx_n > 0:
        _dctx_n -= 1
        return _dctx_pool[_dctx_n]
    d = ZSTD_createDCtx()
    if d == NULL:
        raise MemoryError("ZSTD_createDCtx failed")
    return d


cdef void _give_dctx(ZSTD_DCtx *d) noexcept:
    global _dctx_n
    if _dctx_n < _POOL:
        _dctx_pool[_dctx_n] = d
        _dctx_n += 1
    else:
        ZSTD_freeDCtx(d)


# ---------------------------------------------------------------- errors

cdef str _field(long long what):
    if what == W_COUNT:
        return "payload count"
    if what == W_USIZE:
        return "uncompressed size"
    return f"length of payload {what}"


cdef object _error(Err *e):
    cdef int c = e.code
    if c == E_SHORT:
        msg = f"blob truncated: {e.a} bytes, its header needs at least {e.b}"
    elif c == E_MAGIC:
        msg = f"bad magic byte 0x{e.a:02x} (expected 0xb1): not a BufferedWriter blob"
    elif c == E_FLAGS:
        msg = f"unknown flag bits 0x{e.a:02x} in the flags byte"
    elif c == E_COMPRESSION:
        msg = f"unknown compression {e.a} in the flags byte (0 none, 1 zstd)"
    elif c == E_CHECKSUM:
        msg = f"checksum mismatch: blob says 0x{e.a:08x}, contents give 0x{e.b:08x}"
    elif c == E_VARINT_TRUNC:
        msg = f"truncated varint ({_field(e.what)}) at byte {e.a}"
    elif c == E_VARINT_OVERFLOW:
        msg = f"varint ({_field(e.what)}) at byte {e.a} does not fit in 64 bits"
    elif c == E_COUNT:
        msg = f"payload count {e.a} cannot fit in the {e.b} bytes that follow"
    elif c == E_LEN:
        msg = (f"payload {e.what} claims {e.a} bytes but only {e.b} remain: "
               f"truncated or corrupt blob")
    elif c == E_TRAILING:
        msg = f"{e.a} trailing bytes after the last of {e.b} payloads"
    elif c == E_TOO_BIG:
        msg = f"uncompressed size {e.a} exceeds max_size {e.b}"
    elif c == E_ZSTD:
        msg = f"zstd: {ZSTD_getErrorName(e.zcode).decode('ascii', 'replace')}"
    elif c == E_SIZE:
        msg = f"uncompressed size mismatch: header says {e.a}, zstd frame gives {e.b}"
    elif c == E_REST:
        msg = (f"payload {e.what} leaves {e.a} bytes for the {e.b} payloads after it: "
               f"truncated or corrupt blob")
    elif c == E_FRAME_TRAILING:
        msg = f"{e.a} trailing bytes after the zstd frame"
    else:
        msg = f"internal error code {c}"
    return CodecError(msg)


# ---------------------------------------------------------------- decode

cdef int _parse_header(const uint8_t *p, size_t size, Header *h, Err *err,
                       bint verify) noexcept nogil:
    cdef uint8_t flags
    cdef size_t pos
    cdef uint32_t stored, actual
    if size < 2:
        err.code = E_SHORT if size == 0 or p[0] == _MAGIC else E_MAGIC
        err.a = size if err.code == E_SHORT else p[0]
        err.b = 3
        return -1
    if p[0] != _MAGIC:
        err.code = E_MAGIC
        err.a = p[0]
        return -1
    flags = p[1]
    if flags & _RESERVED:
        err.code = E_FLAGS
        err.a = flags & _RESERVED
        return -1
    h.compression = flags & _COMP_MASK
    if h.compression > 1:
        err.code = E_COMPRESSION
        err.a = h.compression
        return -1
    h.has_checksum = (flags & _FLAG_CRC) != 0
    pos = 2
    if h.has_checksum:
        if size < 7:
            err.code = E_SHORT
            err.a = size
            err.b = 7
            return -1
        pos = 6
        if verify:
            stored = (<uint32_t>p[2] | (<uint32_t>p[3] << 8) | (<uint32_t>p[4] << 16)
                      | (<uint32_t>p[5] << 24))
            actual = ld_crc32c(ld_crc32c(0, p, 2), p + 6, size - 6)
            if stored != actual:
                err.code = E_CHECKSUM
                err.a = stored
                err.b = actual
                return -1
    h.has_producer = (flags & _FLAG_PRODUCER) != 0
    if h.has_producer:
        if size < pos + 17:
            err.code = E_SHORT
            err.a = size
            err.b = pos + 17
            return -1
        h.producer_id = get_le64(p + pos)
        h.producer_seq = get_le64(p + pos + 8)
        pos += 16
    if _read_varint(p, size, &pos, &h.count, err, W_COUNT) < 0:
        return -1
    h.body = pos
    return 0


cdef int _unpack(uint8_t *dst, const uint8_t *src, size_t size, uint64_t count,
                 uint64_t *offs, Err *err) noexcept nogil:
    # Payloads of a NONE body at src[0:size] go back to back into dst, which must hold
    # size - count bytes.  dst may alias src (in-place): the write position never passes
    # the read position, as every payload is preceded by at least one varint byte, so
    # memmove is safe.
    cdef size_t r = 0
    cdef uint64_t w = 0
    cdef uint64_t i, n
    offs[0] = 0
    for i in range(count):
        if r < size and src[r] < 0x80:
            n = src[r]
            r += 1
        elif _read_varint(src, size, &r, &n, err, <long long>i) < 0:
            return -1
        if n > size - r:
            err.code = E_LEN
            err.what = <long long>i
            err.a = n
            err.b = size - r
            return -1
        # Every later payload needs at least its length byte.  Checking it here keeps
        # the output within size - count bytes even when the blob turns out bad midway.
        if size - r - n < count - 1 - i:
            err.code = E_REST
            err.what = <long long>i
            err.a = size - r - n
            err.b = count - 1 - i
            return -1
        memmove(dst + w, src + r, n)
        r += n
        w += n
        offs[i + 1] = w
    if r != size:
        err.code = E_TRAILING
        err.a = size - r
        err.b = count
        return -1
    return 0


cdef Header _header_only(blob) except *:
    # The header of a blob, its checksum not verified; CodecError if malformed.
    cdef const uint8_t[::1] view = blob
    cdef Header h
    cdef Err err
    err.code = E_OK
    cdef const uint8_t *p = &view[0] if view.shape[0] else NULL
    if _parse_header(p, view.shape[0], &h, &err, False) < 0:
        raise _error(&err)
    return h


def decode_count(blob):
    """Number of payloads in a blob, from its header alone (checksum not verified).

    Raises
    ------
    CodecError
        If the header is malformed or truncated.
    """
    return _header_only(blob).count


def producer_of(blob):
    """``(producer id, sequence number)`` from a blob's header, or None if it has none
    (checksum not verified).

    Raises
    ------
    CodecError
        If the header is malformed or truncated.
    """
    cdef Header h = _header_only(blob)
    return (h.producer_id, h.producer_seq) if h.has_producer else None


def decode(blob, *, max_size=DEFAULT_MAX_SIZE):
    """Split a blob back into its payloads.

    Parameters
    ----------
    blob : bytes-like
        A blob made by ``encode``.
    max_size : int
        Refuse blobs whose payloads would need more than this many bytes (guards against
        a corrupt size field asking for an absurd allocation).

    Returns
    -------
    buffer : numpy.ndarray of uint8
        The payloads back to back (one allocation, no per-payload objects).
    offsets : numpy.ndarray of uint64, length n + 1
        Payload ``i`` is ``buffer[offsets[i]:offsets[i + 1]]``.

    Raises
    ------
    CodecError
        Bad magic, unknown flags, checksum mismatch, bad varint, lengths past the end,
        trailing bytes, a zstd error or a size mismatch.
    """
    cdef const uint8_t[::1] view = blob
    cdef size_t size = view.shape[0]
    cdef const uint8_t *p = &view[0] if size else NULL
    cdef Header h
    cdef Err err
    cdef uint64_t limit = max_size
    cdef uint64_t usize = 0
    cdef unsigned long long fsize
    cdef size_t pos, zr, room
    cdef int rc = 0
    cdef ZSTD_DCtx *dctx
    cdef uint8_t[::1] outv
    cdef uint64_t[::1] offv
    err.code = E_OK
    with nogil:
        rc = _parse_header(p, size, &h, &err, True)
    if rc < 0:
        raise _error(&err)
    pos = h.body
    if h.compression == 0:
        room = size - pos
        if h.count > room:
            err.code = E_COUNT
            err.a = h.count
            err.b = room
            raise _error(&err)
        if room - h.count > limit:
            err.code = E_TOO_BIG
            err.a = room - h.count
            err.b = limit
            raise _error(&err)
        # + 1: never a zero-length allocation
        out = np.empty(room - h.count + 1, dtype=np.uint8)
        offsets = np.empty(h.count + 1, dtype=np.uint64)
        outv = out
        offv = offsets
        with nogil:
            rc = _unpack(&outv[0], p + pos, room, h.count, &offv[0], &err)
        if rc < 0:
            raise _error(&err)
        return out[:offv[h.count]], offsets

    # zstd body
    with nogil:
        rc = _read_varint(p, size, &pos, &usize, &err, W_USIZE)
    if rc < 0:
        raise _error(&err)
    if usize > limit:
        err.code = E_TOO_BIG
        err.a = usize
        err.b = limit
        raise _error(&err)
    if h.count > usize:
        err.code = E_COUNT
        err.a = h.count
        err.b = usize
        raise _error(&err)
    room = size - pos
    zr = ZSTD_findFrameCompressedSize(p + pos, room)
    if ZSTD_isError(zr):
        err.code = E_ZSTD
        err.zcode = zr
        raise _error(&err)
    if zr != room:
        err.code = E_FRAME_TRAILING
        err.a = room - zr
        raise _error(&err)
    fsize = ZSTD_getFrameContentSize(p + pos, room)
    if fsize != ZSTD_CONTENTSIZE_UNKNOWN and fsize != usize:
        err.code = E_SIZE
        err.a = usize
        err.b = fsize
        raise _error(&err)
    # one extra byte so a frame that holds more than it said shows up as a size mismatch
    out = np.empty(usize + 1, dtype=np.uint8)
    offsets = np.empty(h.count + 1, dtype=np.uint64)
    outv = out
    offv = offsets
    dctx = _take_dctx()
    try:
        with nogil:
            zr = ZSTD_decompressDCtx(dctx, &outv[0], usize + 1, p + pos, room)
            if ZSTD_isError(zr):
                err.code = E_ZSTD
                err.zcode = zr
                rc = -1
            elif zr != usize:
                err.code = E_SIZE
                err.a = usize
                err.b = zr
                rc = -1
            else:
                rc = _unpack(&outv[0], &outv[0], usize, h.count, &offv[0], &err)
    finally:
        _give_dctx(dctx)
    if rc < 0:
        raise _error(&err)
    return out[:offv[h.count]], offsets


# ---------------------------------------------------------------- encode

cdef int _compression_of(compression) except -1:
    if compression is None:
        return 0
    if isinstance(compression, str):
        c = compression.lower()
        if c == "none":
            return 0
        if c == "zstd":
            return 1
    raise ValueError(f"compression must be 'zstd' or 'none', got {compression!r}")


cdef inline bint _is_offsets(x):
    return isinstance(x, np.ndarray) and x.dtype.kind in "iu" and x.dtype.itemsize > 1


cdef struct Producer:
    bint present
    uint64_t id
    uint64_t seq


cdef size_t _fill_header(uint8_t *out, int compression, bint checksum, uint64_t count,
                         const Producer *prod) noexcept nogil:
    out[0] = _MAGIC
    out[1] = <uint8_t>(compression | (_FLAG_CRC if checksum else 0)
                       | (_FLAG_PRODUCER if prod.present else 0))
    cdef size_t pos = 6 if checksum else 2
    if prod.present:
        put_le64(out + pos, prod.id)
        put_le64(out + pos + 8, prod.seq)
        pos += 16
    return pos + _write_varint(out + pos, count)


cdef void _seal(uint8_t *out, size_t size) noexcept nogil:
    cdef uint32_t crc = ld_crc32c(ld_crc32c(0, out, 2), out + 6, size - 6)
    out[2] = <uint8_t>crc
    out[3] = <uint8_t>(crc >> 8)
    out[4] = <uint8_t>(crc >> 16)
    out[5] = <uint8_t>(crc >> 24)


cdef size_t _pack(uint8_t *dst, const uint8_t **ptrs, const size_t *lens,
                  size_t n) noexcept nogil:
    cdef size_t i, w = 0
    for i in range(n):
        w += _write_varint(dst + w, lens[i])
        if lens[i]:
            memcpy(dst + w, ptrs[i], lens[i])
            w += lens[i]
    return w


cdef object _encode(const uint8_t **ptrs, const size_t *lens, size_t n, int compression,
                    int level, bint checksum, const Producer *prod):
    cdef size_t i, body = 0, head, plain, zsize = 0, total, bound
    cdef uint8_t hdr[40]
    cdef uint8_t *out
    cdef Scratch s
    cdef bint use_zstd = False, have_scratch = False
    with nogil:
        for i in range(n):
            body += _varint_size(lens[i]) + lens[i]
    head = _fill_header(hdr, 0, checksum, n, prod)
    plain = head + body
    try:
        if compression == 1 and body > 0:
            _take_enc(&s)
            have_scratch = True
            bound = ZSTD_compressBound(body)
            _reserve(&s.section, &s.section_cap, body)
            _reserve(&s.zbuf, &s.zbuf_cap, bound)
            with nogil:
                _pack(s.section, ptrs, lens, n)
                zsize = ZSTD_compressCCtx(s.cctx, s.zbuf, bound, s.section, body, level)
            if ZSTD_isError(zsize):
                raise CodecError(
                    f"zstd: {ZSTD_getErrorName(zsize).decode('ascii', 'replace')}")
            use_zstd = head + _varint_size(body) + zsize < plain
        if use_zstd:
            total = head + _varint_size(body) + zsize
            result = PyBytes_FromStringAndSize(NULL, total)
            out = <uint8_t *>PyBytes_AS_STRING(result)
            with nogil:
                i = _fill_header(out, 1, checksum, n, prod)
                i += _write_varint(out + i, body)
                memcpy(out + i, s.zbuf, zsize)
                if checksum:
                    _seal(out, total)
        else:
            result = PyBytes_FromStringAndSize(NULL, plain)
            out = <uint8_t *>PyBytes_AS_STRING(result)
            with nogil:
                i = _fill_header(out, 0, checksum, n, prod)
                if have_scratch:
                    memcpy(out + i, s.section, body)
                else:
                    _pack(out + i, ptrs, lens, n)
                if checksum:
                    _seal(out, plain)
        return result
    finally:
        if have_scratch:
            _give_enc(&s)


def encode(payloads, *, compression="zstd", level=1, checksum=True, producer=None):
    """Pack payloads into one BufferedWriter blob.

    Parameters
    ----------
    payloads : sequence of bytes-like, or ``(buffer, offsets)``
        Either the payloads themselves, or one buffer holding them back to back with a
        numpy integer array of n + 1 boundaries (payload i is
        ``buffer[offsets[i]:offsets[i + 1]]``), so a producer can hand many payloads at once.
    compression : {"zstd", "none"}
        zstd is kept only if it makes the blob smaller.
    level : int
        zstd compression level.
    checksum : bool
        Store a CRC32C of the blob (flags bit 3).
    producer : (int, int), optional
        The writer's id and this blob's sequence number (flags bit 4), both uint64.

    Returns
    -------
    bytes
    """
    cdef Producer prod
    prod.present = producer is not None
    if prod.present:
        pid, pseq = producer
        if not (0 <= pid < 2**64 and 0 <= pseq < 2**64):
            raise ValueError(f"producer id and sequence number must be uint64, got {producer}")
        prod.id = pid
        prod.seq = pseq
    cdef int comp = _compression_of(compression)
    cdef int lvl = level
    if comp == 1 and not ZSTD_minCLevel() <= lvl <= ZSTD_maxCLevel():
        raise ValueError(
            f"zstd level must be in [{ZSTD_minCLevel()}, {ZSTD_maxCLevel()}], got {level}")
    cdef bint crc = bool(checksum)
    if isinstance(payloads, tuple) and len(payloads) == 2 and _is_offsets(payloads[1]):
        return _encode_buffer(payloads[0], payloads[1], comp, lvl, crc, &prod)
    return _encode_list(payloads, comp, lvl, crc, &prod)


cdef object _encode_buffer(buffer, offsets, int comp, int lvl, bint crc,
                           const Producer *prod):
    cdef const uint8_t[::1] buf = buffer
    cdef const uint64_t[::1] off = np.ascontiguousarray(offsets, dtype=np.uint64).ravel()
    cdef Py_ssize_t m = off.shape[0], i, n
    cdef uint64_t size = <uint64_t>buf.shape[0]
    if m == 0:
        raise ValueError("offsets must hold n + 1 boundaries (at least one)")
    if (np.asarray(offsets) < 0).any():
        raise ValueError("offsets must not be negative")
    n = m - 1
    for i in range(n):
        if off[i] > off[i + 1]:
            raise ValueError(f"offsets decrease at index {i}: {off[i]} > {off[i + 1]}")
    if off[n] > size:
        raise ValueError(f"offsets run past the end of the buffer: {off[n]} > {size}")
    cdef const uint8_t **ptrs = <const uint8_t **>malloc((n + 1) * sizeof(uint8_t *))
    cdef size_t *lens = <size_t *>malloc((n + 1) * sizeof(size_t))
    cdef const uint8_t *base = &buf[0] if size else NULL
    try:
        if ptrs == NULL or lens == NULL:
            raise MemoryError()
        for i in range(n):
            ptrs[i] = base + off[i] if base != NULL else NULL
            lens[i] = off[i + 1] - off[i]
        return _encode(ptrs, lens, n, comp, lvl, crc, prod)
    finally:
        free(ptrs)
        free(lens)


cdef object _encode_list(payloads, int comp, int lvl, bint crc, const Producer *prod):
    cdef tuple items = tuple(payloads)
    cdef Py_ssize_t n = len(items), i, held = 0
    cdef const uint8_t **ptrs = <const uint8_t **>malloc((n + 1) * sizeof(uint8_t *))
    cdef size_t *lens = <size_t *>malloc((n + 1) * sizeof(size_t))
    # buffers of non-bytes payloads stay exported until the blob is written
    cdef Py_buffer *views = <Py_buffer *>calloc(n + 1, sizeof(Py_buffer))
    cdef object it
    try:
        if ptrs == NULL or lens == NULL or views == NULL:
            raise MemoryError()
        for i in range(n):
            it = items[i]
            if PyBytes_CheckExact(it):
                ptrs[i] = <const uint8_t *>PyBytes_AS_STRING(it)
                lens[i] = PyBytes_GET_SIZE(it)
            else:
                PyObject_GetBuffer(it, &views[held], PyBUF_SIMPLE)
                ptrs[i] = <const uint8_t *>views[held].buf
                lens[i] = views[held].len
                held += 1
        return _encode(ptrs, lens, n, comp, lvl, crc, prod)
    finally:
        if views != NULL:
            for i in range(held):
                PyBuffer_Release(&views[i])
        free(views)
        free(ptrs)
        free(lens)
