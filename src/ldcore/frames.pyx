# Frames of one message type, encoded and decoded by a plan made once per type.
#
# The frame layout is owned and documented by logdevice.protocol.framing:
#
#   | u32 frame_length | u16 type | u8 ver | u8 flg | u32 header_length |   12-byte prefix
#   | header: msgpack array of the fields, a raw field's byte length in its place |
#   | zero padding to 8 (only with raw fields) | section | pad to 8 | section | ... |
#
# framing's generic path turned the message into a list, prepared each raw field through
# its spec, rebuilt the message for the consistency check and called numpy once per
# section on decode: a few microseconds of interpreter per frame, which is most of what a
# small STORE or APPEND_BATCH costs.  A FramePlan holds what that path looked up per
# frame (which fields are raw, their dtypes and dimensions, the header's msgspec decoder)
# and this module does the per-frame work in C: an array field that already has the
# spec's dtype, dimensions and C order is taken as it is (a flat read-only view of its
# bytes goes on the wire, no copy); anything else goes through the spec's own ``prepare``
# (the generic rules, the same conversions and errors).  The header stays msgspec's (the
# same encoder and decoder, so the same bytes and the same strictness); decoded arrays
# are made with one numpy C call each, as views of the frame's buffer.
#
# ``decode_frames`` runs the receiver's loop over the complete frames of one chunk of input:
# the prefix checks, the peer's admission hook, one copy of a frame with raw sections into
# a buffer of its own (its arrays view that), the decode.  framing's FrameDecoder keeps the
# rest (incomplete frames, the first frame's own limit, holding later bytes).
#
# Errors are plain exceptions of this module (ldcore knows nothing of logdevice's status
# codes): EncodeError (a field the spec refuses, or the message's consistency_problem()),
# FrameTooBig (the frame would exceed the limit), BadFrame (a received frame that is not
# a valid message) and UnsupportedVersion (one of a version not accepted); framing turns
# them into its own.
from cpython.buffer cimport (
    PyBUF_SIMPLE,
    PyBuffer_FillInfo,
    PyBuffer_IsContiguous,
    PyBuffer_Release,
    PyObject_CheckBuffer,
    PyObject_GetBuffer,
)
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.bytearray cimport (
    PyByteArray_AS_STRING,
    PyByteArray_FromStringAndSize,
    PyByteArray_GET_SIZE,
    PyByteArray_Resize,
)
from cpython.memoryview cimport PyMemoryView_Check, PyMemoryView_FromObject, PyMemoryView_GET_BUFFER
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.object cimport PyTypeObject
from cpython.ref cimport Py_INCREF
from libc.stdint cimport uint8_t, uint16_t, uint32_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset

cimport numpy as cnp

from ldcore.byteorder cimport get_le32, put_le16, put_le32

import msgspec

cnp.import_array()

cdef extern from "numpy/arrayobject.h":
    # steals a reference to descr
    object PyArray_NewFromDescr(PyTypeObject *subtype, cnp.dtype descr, int nd,
                                cnp.npy_intp *dims, cnp.npy_intp *strides, void *data,
                                int flags, object obj)

cdef object _astuple = msgspec.structs.astuple
cdef object _replace = msgspec.structs.replace
cdef object _DecodeErrors = (msgspec.DecodeError, UnicodeDecodeError)
cdef tuple _PAD = tuple(b"\0" * n for n in range(8))
cdef object _NO_BYTES = memoryview(b"")

PREFIX_SIZE = 12

cdef enum:
    _PREFIX = 12
    MAX_RAW_FIELDS = 64
    KIND_ARRAY = 1
    KIND_BYTES = 2


class EncodeError(ValueError):
    """The message cannot be encoded: a raw field its spec refuses, or its own
    ``consistency_problem()``."""


class FrameTooBig(ValueError):
    """The frame would exceed the frame size limit."""


class BadFrame(ValueError):
    """A received frame is not a valid message of its type."""


class UnsupportedVersion(BadFrame):
    """A received frame is of an encoding version the receiver does not accept."""


cdef class _FlatBytes:
    """The bytes of a C-contiguous array as one flat read-only buffer of unsigned bytes
    (what ``arr.data.cast("B")`` gives, for one object instead of two)."""

    cdef object owner
    cdef char *data
    cdef Py_ssize_t size

    def __getbuffer__(self, Py_buffer *view, int flags):
        PyBuffer_FillInfo(view, self, self.data, self.size, 1, flags)

    def __releasebuffer__(self, Py_buffer *view):
        pass


cdef inline Py_ssize_t _align8(Py_ssize_t n) noexcept:
    return (n + 7) & ~(<Py_ssize_t>7)


cdef struct RawField:
    Py_ssize_t index  # position among the message's fields
    int kind
    int ndim
    Py_ssize_t itemsize


cdef class FramePlan:
    """How to encode and decode one message type.

    Parameters
    ----------
    type_id : int
        The frame's message type.
    cls : type
        The message class (an array_like msgspec Struct).
    decoder : msgspec.msgpack.Decoder
        Decodes the header: the class itself without raw fields, else a struct with each
        raw field as its length (``int``, or ``(int, int)`` for 2-D arrays).
    encoder : msgspec.msgpack.Encoder
        Encodes the header.
    raw : sequence of (index, name, dtype or None, ndim, empty, prepare)
        The raw fields in order: field position, name, numpy dtype (None for a byte
        buffer), dimensions, the value of an empty section on decode, and the spec's
        generic ``prepare(value) -> (normalised, flat memoryview, header value)``.
    """

    cdef readonly int type_id
    cdef readonly str name
    cdef readonly Py_ssize_t n_raw
    cdef object cls, decoder, encoder
    cdef tuple names, dtypes, empties, prepares
    cdef RawField raw[MAX_RAW_FIELDS]

    def __init__(self, int type_id, cls, decoder, encoder, raw):
        raw = tuple(raw)
        if len(raw) > MAX_RAW_FIELDS:
            raise ValueError(f"{cls.__name__}: more than {MAX_RAW_FIELDS} raw fields")
        self.type_id = type_id
        self.name = cls.__name__
        self.cls = cls
        self.decoder = decoder
        self.encoder = encoder
        self.n_raw = len(raw)
        self.names = tuple(r[1] for r in raw)
        self.dtypes = tuple(r[2] for r in raw)
        self.empties = tuple(r[4] for r in raw)
        self.prepares = tuple(r[5] for r in raw)
        cdef Py_ssize_t i
        for i, (index, _name, dtype, ndim, _empty, _prepare) in enumerate(raw):
            if ndim not in (1, 2) or (dtype is None and ndim != 1):
                raise ValueError(f"{cls.__name__}: unsupported raw field {_name}")
            self.raw[i].index = index
            self.raw[i].kind = KIND_BYTES if dtype is None else KIND_ARRAY
            self.raw[i].ndim = ndim
            self.raw[i].itemsize = 1 if dtype is None else int(dtype.itemsize)

    def __repr__(self):
        return f"FramePlan({self.name}, type {self.type_id}, {self.n_raw} raw fields)"


# ---------------------------------------------------------------------------- encoding


cdef inline bint _is_flat_bytes(object raw):
    """A memoryview of unsigned bytes, 1-D and C-contiguous (what a section must be)."""
    cdef Py_buffer *view = PyMemoryView_GET_BUFFER(raw)
    if view.ndim != 1 or not PyBuffer_IsContiguous(view, b'C'):
        return False
    return view.format == NULL or (view.format[0] == b'B' and view.format[1] == 0)


cdef object _flat_view(cnp.ndarray arr, cnp.dtype dtype, int ndim):
    """The flat bytes of ``arr`` if it is already what the wire carries (the dtype, the
    dimensions, C order), else None."""
    if (arr.ndim != ndim or not cnp.PyArray_IS_C_CONTIGUOUS(arr)
            or not (arr.descr is dtype or cnp.PyArray_EquivTypes(arr.descr, dtype))):
        return None
    cdef Py_ssize_t nbytes = cnp.PyArray_NBYTES(arr)
    if nbytes == 0:
        return _NO_BYTES
    cdef _FlatBytes flat = _FlatBytes.__new__(_FlatBytes)
    flat.owner = arr
    flat.data = <char *>cnp.PyArray_DATA(arr)
    flat.size = nbytes
    return PyMemoryView_FromObject(flat)


cdef inline void _write_prefix(bytearray head, Py_ssize_t total, int type_id, int version,
                               Py_ssize_t header_length) noexcept:
    cdef uint8_t *p = <uint8_t *>PyByteArray_AS_STRING(head)
    put_le32(p, <uint32_t>total)
    put_le16(p + 4, <uint16_t>type_id)
    p[6] = <uint8_t>version
    p[7] = 0
    put_le32(p + 8, <uint32_t>header_length)


cdef inline _check_size(FramePlan plan, Py_ssize_t total, Py_ssize_t max_frame_size):
    if total > max_frame_size:
        raise FrameTooBig(f"{plan.name} frame of {total} bytes exceeds {max_frame_size}")


def encode(FramePlan plan not None, msg, int version, Py_ssize_t max_frame_size):
    """Encode ``msg`` (of the plan's class) as a list of buffers for ``writelines``: the
    prefix and header in one bytearray, then each non-empty raw section (a read-only
    view of the caller's array or buffer, not a copy) and its padding."""
    cdef bytearray head = bytearray(_PREFIX)
    cdef Py_ssize_t header_length, total, i, nbytes, pad
    if plan.n_raw == 0:
        plan.encoder.encode_into(msg, head, _PREFIX)
        total = PyByteArray_GET_SIZE(head)
        _check_size(plan, total, max_frame_size)
        _write_prefix(head, total, plan.type_id, version, total - _PREFIX)
        return [head]

    cdef list values = list(_astuple(msg))
    cdef list out = [head]
    cdef dict changed = None
    cdef RawField *r
    cdef object value, raw, header_value
    cdef Py_ssize_t sections = 0
    for i in range(plan.n_raw):
        r = &plan.raw[i]
        value = values[r.index]
        raw = None
        if r.kind == KIND_ARRAY:
            if cnp.PyArray_CheckExact(value):
                raw = _flat_view(value, plan.dtypes[i], r.ndim)
                if raw is not None:
                    header_value = PyMemoryView_GET_BUFFER(raw).len
                    if r.ndim == 2:
                        header_value = (header_value, cnp.PyArray_DIM(<cnp.ndarray>value, 1))
        elif PyObject_CheckBuffer(value):
            raw = PyMemoryView_FromObject(value)
            if _is_flat_bytes(raw):
                header_value = PyMemoryView_GET_BUFFER(raw).len
            else:
                raw = None
        if raw is None:  # not in the wire's form yet: the spec's generic conversion
            try:
                normalised, raw, header_value = plan.prepares[i](value)
            except (TypeError, ValueError) as exc:
                raise EncodeError(f"{plan.name}.{plan.names[i]}: {exc}") from None
            if normalised is not value:
                if changed is None:
                    changed = {}
                changed[plan.names[i]] = normalised
        values[r.index] = header_value
        nbytes = PyMemoryView_GET_BUFFER(raw).len
        if nbytes:
            out.append(raw)
            pad = -nbytes & 7
            if pad:
                out.append(_PAD[pad])
            sections += nbytes + pad
    problem = (_replace(msg, **changed) if changed else msg).consistency_problem()
    if problem:
        raise EncodeError(f"{plan.name}: {problem}")
    plan.encoder.encode_into(values, head, _PREFIX)
    total = PyByteArray_GET_SIZE(head)
    header_length = total - _PREFIX
    pad = -total & 7
    if pad:
        PyByteArray_Resize(head, total + pad)
        memset(PyByteArray_AS_STRING(head) + total, 0, pad)
        total += pad
    total += sections
    _check_size(plan, total, max_frame_size)
    _write_prefix(head, total, plan.type_id, version, header_length)
    return out


def coalesce(list buffers not None, Py_ssize_t small=16384):
    """``buffers`` (``encode``'s, of any number of frames) for one ``writelines``: each
    run of consecutive buffers under ``small`` bytes joined into one bytes object, the
    larger ones left as they are.  uvloop's ``writelines`` costs about a microsecond per
    buffer that is not bytes, and a small RECORDS frame is five of them; copying the
    small ones costs far less, and a large payload is still written from where it is."""
    cdef Py_ssize_t n = len(buffers), i, j, start, run, at
    cdef Py_ssize_t *sizes = NULL
    cdef Py_buffer view
    cdef list out = []
    cdef bytes joined
    cdef char *dst
    if n == 0:
        return out
    sizes = <Py_ssize_t *>malloc(n * sizeof(Py_ssize_t))
    if sizes == NULL:
        raise MemoryError()
    try:
        for i in range(n):
            PyObject_GetBuffer(buffers[i], &view, PyBUF_SIMPLE)
            sizes[i] = view.len
            PyBuffer_Release(&view)
        i = 0
        while i < n:
            if sizes[i] >= small:
                out.append(buffers[i])
                i += 1
                continue
            start, run = i, 0
            while i < n and sizes[i] < small:
                run += sizes[i]
                i += 1
            if i - start == 1:
                out.append(buffers[start])
                continue
            joined = PyBytes_FromStringAndSize(NULL, run)
            dst = PyBytes_AS_STRING(joined)
            at = 0
            for j in range(start, i):
                PyObject_GetBuffer(buffers[j], &view, PyBUF_SIMPLE)
                memcpy(dst + at, view.buf, view.len)
                at += view.len
                PyBuffer_Release(&view)
            out.append(joined)
    finally:
        free(sizes)
    return out


# ---------------------------------------------------------------------------- decoding


cdef inline long long _bounded(object value, long long limit) except? -2:
    """``value`` (an int of the header) if in [0, limit], -1 if negative, limit + 1 if
    larger."""
    cdef int overflow = 0
    cdef long long v = PyLong_AsLongLongAndOverflow(value, &overflow)
    if overflow or v > limit:
        return -1 if overflow < 0 else limit + 1
    return v if v >= 0 else -1


cdef Py_ssize_t _section_length(FramePlan plan, Py_ssize_t i, object header_value,
                                Py_ssize_t limit, Py_ssize_t *columns) except -1:
    """Byte length of raw field i's section from its header value, checked against its
    dtype; ``limit`` (the frame's size) bounds every sane length."""
    cdef RawField *r = &plan.raw[i]
    cdef long long n, c = 0
    columns[0] = 0
    if r.ndim == 2:
        n = _bounded(header_value[0], limit)
        c = _bounded(header_value[1], limit)
        if c < 0:
            raise BadFrame(f"bad {plan.name} section table: {plan.names[i]}: "
                           f"negative column count {header_value[1]}")
    else:
        n = _bounded(header_value, limit)
    if n < 0:
        raise BadFrame(f"bad {plan.name} section table: {plan.names[i]}: "
                       f"negative section length {header_value}")
    if n > limit:
        raise BadFrame(f"bad {plan.name} section table: {plan.names[i]}: "
                       f"a section of {header_value} bytes in a frame of {limit}")
    if r.ndim == 2:
        if n == 0:
            return 0
        if c == 0 or c > limit or n % (c * r.itemsize):
            raise BadFrame(f"bad {plan.name} section table: {plan.names[i]}: "
                           f"{n} bytes are not rows of {header_value[1]} columns")
        columns[0] = c
    elif n % r.itemsize:
        raise BadFrame(f"bad {plan.name} section table: {plan.names[i]}: section of {n} "
                       f"bytes does not hold whole {plan.dtypes[i]} values")
    return n


cdef object _array_view(cnp.dtype dtype, object frame, char *data, Py_ssize_t nbytes,
                        int ndim, Py_ssize_t columns):
    """A read-only array over ``nbytes`` of the frame at ``data``; its base is
    ``frame``."""
    cdef cnp.npy_intp dims[2]
    if ndim == 1:
        dims[0] = nbytes // dtype.itemsize
    else:
        dims[0] = nbytes // (dtype.itemsize * columns)
        dims[1] = columns
    Py_INCREF(dtype)
    arr = PyArray_NewFromDescr(<PyTypeObject *>cnp.ndarray, dtype, ndim, dims, NULL, data,
                               cnp.NPY_ARRAY_C_CONTIGUOUS | cnp.NPY_ARRAY_ALIGNED, None)
    cnp.set_array_base(arr, frame)
    return arr


def decode(FramePlan plan not None, frame, Py_ssize_t header_length):
    """Decode one complete frame of the plan's type (its prefix already checked).

    ``frame`` is a memoryview of exactly the frame; with raw fields it must be an owned,
    stable, read-only buffer: the arrays and payloads of the message view it.
    """
    if not PyMemoryView_Check(frame):
        raise TypeError("frame must be a memoryview")
    if plan.n_raw == 0:
        return _decode_header(plan, frame[_PREFIX:_PREFIX + header_length])
    return _decode_sections(plan, frame, header_length)


cdef object _decode_header(FramePlan plan, object header_view):
    try:
        return plan.decoder.decode(header_view)
    except _DecodeErrors as exc:  # a str field with bad UTF-8 is a UnicodeDecodeError
        raise BadFrame(f"bad {plan.name} header: {exc}") from None


cdef object _decode_sections(FramePlan plan, object frame, Py_ssize_t header_length):
    cdef Py_ssize_t end = _PREFIX + header_length
    header = _decode_header(plan, frame[_PREFIX:end])
    cdef Py_buffer *view = PyMemoryView_GET_BUFFER(frame)
    cdef Py_ssize_t size = view.len
    cdef char *data = <char *>view.buf
    cdef list values = list(_astuple(header))
    cdef Py_ssize_t lengths[MAX_RAW_FIELDS]
    cdef Py_ssize_t columns[MAX_RAW_FIELDS]
    cdef Py_ssize_t offset = _align8(end), start, i
    cdef RawField *r
    for i in range(plan.n_raw):
        lengths[i] = _section_length(plan, i, values[plan.raw[i].index], size, &columns[i])
        offset += _align8(lengths[i])
        if offset > size:
            break
    if offset > size:
        raise BadFrame(f"{plan.name} sections need more than the frame's {size} bytes")
    if offset != size:
        raise BadFrame(f"{plan.name} sections need {offset} bytes, frame has {size}")
    offset = _align8(end)
    for i in range(plan.n_raw):
        r = &plan.raw[i]
        start = offset
        offset += _align8(lengths[i])
        if r.kind == KIND_BYTES:
            values[r.index] = frame[start:start + lengths[i]]
        elif lengths[i] == 0:
            values[r.index] = plan.empties[i]
        else:
            values[r.index] = _array_view(plan.dtypes[i], frame, data + start, lengths[i],
                                          r.ndim, columns[i])
    msg = plan.cls(*values)
    problem = msg.consistency_problem()
    if problem:
        raise BadFrame(f"inconsistent {plan.name}: {problem}")
    return msg


# ---------------------------------------------------------------------------- receiving


cdef FramePlan _check_prefix(dict plans, Py_ssize_t total, int type_id, int version,
                             Py_ssize_t header_length, Py_ssize_t max_frame_size,
                             versions, str what):
    if total > max_frame_size:
        raise BadFrame(f"{what} of {total} bytes exceeds the limit {max_frame_size}")
    if version not in versions:
        raise UnsupportedVersion(
            f"protocol version {version} not supported (have {sorted(versions)})")
    plan = plans.get(type_id)
    if plan is None:
        raise BadFrame(f"unknown message type {type_id}")
    if header_length < 1 or _PREFIX + header_length > total:
        raise BadFrame(f"header length {header_length} does not fit a frame of {total} bytes")
    if (<FramePlan>plan).n_raw == 0 and _PREFIX + header_length != total:
        raise BadFrame(f"{(<FramePlan>plan).name} frame has trailing bytes")
    return <FramePlan>plan


def check_prefix(dict plans not None, Py_ssize_t total, int type_id, int version,
                 Py_ssize_t header_length, Py_ssize_t max_frame_size, versions,
                 str what="frame"):
    """The plan of a frame from its prefix (``plans``: type id -> FramePlan), or BadFrame /
    UnsupportedVersion: the frame is too large, of a version not in ``versions``, of an
    unknown type, or its header length does not fit."""
    return _check_prefix(plans, total, type_id, version, header_length, max_frame_size,
                         versions, what)


def decode_frames(src, Py_ssize_t pos, dict plans not None, Py_ssize_t max_frame_size,
                  versions, admit, list out not None):
    """Decode the complete frames of ``src`` (a memoryview of bytes) from ``pos`` on,
    appending the messages to ``out``; return where the first frame not complete in
    ``src`` starts (its prefix is not looked at), or ``len(src)``.

    ``admit(type_id, header_length)`` (None: everything is admitted) is asked about each
    frame before it is decoded; an exception it returns is raised.  A frame with raw
    sections is copied into a buffer of its own; other frames are decoded in place.
    """
    if not PyMemoryView_Check(src):
        raise TypeError("src must be a memoryview")
    cdef Py_buffer *view = PyMemoryView_GET_BUFFER(src)
    if not PyBuffer_IsContiguous(view, b'C'):
        raise TypeError("src must be contiguous")
    cdef const uint8_t *data = <const uint8_t *>view.buf
    cdef Py_ssize_t n = view.len, total, header_length
    cdef int type_id, version
    cdef FramePlan plan
    while n - pos >= _PREFIX:
        total = get_le32(data + pos)
        if n - pos < total:
            break
        type_id = data[pos + 4] | (data[pos + 5] << 8)
        version = data[pos + 6]
        header_length = get_le32(data + pos + 8)
        plan = _check_prefix(plans, total, type_id, version, header_length, max_frame_size,
                             versions, "frame")
        if admit is not None:
            refused = admit(type_id, header_length)
            if refused is not None:
                raise refused
        if plan.n_raw:
            frame = PyMemoryView_FromObject(
                PyByteArray_FromStringAndSize(<const char *>data + pos, total)).toreadonly()
            out.append(_decode_sections(plan, frame, header_length))
        else:
            out.append(_decode_header(plan, src[pos + _PREFIX:pos + total]))
        pos += total
    return pos
