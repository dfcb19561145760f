"""Frames: how one message becomes bytes on a TCP stream and back (sans-I/O).

Wire layout of one frame (all integers little-endian)::

    0        4        6    7    8        12                        H (8-aligned if raw)
    +--------+--------+----+----+--------+-------------------------+----------------------
    | u32    | u16    | u8 | u8 | u32    | header: msgpack array   | raw sections...
    | frame_ | message| ver| flg| header_| of the message's fields |  each padded with
    | length | _type  |    |    | length | in declaration order    |  zeros to 8 bytes
    +--------+--------+----+----+--------+-------------------------+----------------------

- ``frame_length`` counts the whole frame, these 12 bytes included.
- ``message_type`` picks the message class (``messages.MessageType``); ``ver`` is the
  encoding version (``PROTOCOL_VERSION``); ``flg`` is reserved: senders write 0,
  receivers ignore it.
- The header is the message's msgpack array (msgspec, ``array_like``).  A raw field
  (see ``sections``) holds its section's byte length there instead of its value.
- If the message type has raw fields, the header is padded so the first section starts
  at an 8-aligned offset, and every section is padded to a multiple of 8 bytes; frame
  buffers are 16-aligned in memory, so decoded uint64 arrays are aligned.  Sections
  follow in field order.  Without raw fields there is no padding.
- Fields appended at the end of a message (with defaults) stay compatible: old readers
  ignore trailing header elements, new readers default missing ones.  Anything else
  needs a new ``PROTOCOL_VERSION``.

The per-frame work is compiled: ``register`` makes each type a plan
(``ldcore.frames.FramePlan``: which fields are raw, their dtypes, the header's msgspec
decoder) and ``ldcore.frames`` encodes and decodes with it.  Arrays already in the wire's
form (the spec's dtype and dimensions, C order) are used as they are; any other value goes
through its spec's ``prepare`` (``sections``), so what is accepted and how it converts is
the spec's business.  The messages' ``consistency_problem()`` runs on every raw-field
message, both ways.

Decoding is strict: an oversized frame, an unknown message type, a malformed header or
section table raise ``ProtocolError(E.BADMSG)``, an unsupported version
``ProtocolError(E.PROTONOSUPPORT)``.  The caller then closes the connection.  The
decoder checks the 12-byte prefix before it buffers anything, and never allocates the
claimed length up front: a frame's buffer grows with the bytes that actually arrived
(first ``INITIAL_FRAME_BUFFER``, then doubling), so a peer that claims 64 MiB and sends
12 bytes costs about 64 KiB, and a connection never holds more than about twice the
largest frame it may send.
"""

from __future__ import annotations

import struct
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import msgspec

from ldcore import frames
from logdevice.errors import E, InvalidParamError, LogDeviceError, error_for
from logdevice.protocol.sections import ArraySpec, BytesSpec

__all__ = [
    "PROTOCOL_VERSION",
    "SUPPORTED_VERSIONS",
    "DEFAULT_MAX_FRAME_SIZE",
    "INITIAL_FRAME_BUFFER",
    "PREFIX_SIZE",
    "ProtocolError",
    "FrameDecoder",
    "encode",
    "encode_frame",
    "coalesce",
    "decode_frame",
    "register",
    "message_class",
]

PROTOCOL_VERSION = 1
SUPPORTED_VERSIONS: frozenset[int] = frozenset({1})
DEFAULT_MAX_FRAME_SIZE = 64 * 1024 * 1024 + 64 * 1024  # a 64 MiB batch plus its header
PREFIX_SIZE = 12
_PREFIX = struct.Struct("<IHBBI")
# Incomplete frames at least this large get their own buffer at once, so their bytes are
# copied once (plus the doublings past INITIAL_FRAME_BUFFER) however they are chunked.
_OWN_BUFFER_THRESHOLD = 64 * 1024
#: The first allocation for an incomplete frame; larger frames grow by doubling as their
#: bytes arrive (costs an extra copy of at most the frame's size, for frames over 64 KiB):
#: a peer that starts many large frames and trickles them holds little each.
INITIAL_FRAME_BUFFER = 64 << 10


class ProtocolError(LogDeviceError):
    """The peer sent something that is not a valid frame; close the connection."""

    status = E.BADMSG


@dataclass(frozen=True, slots=True)
class _TypeInfo:
    cls: type
    type_id: int
    decoder: msgspec.msgpack.Decoder
    raw: tuple[tuple[int, str, ArraySpec | BytesSpec], ...]  # (field index, name, spec)
    plan: frames.FramePlan


_BY_ID: dict[int, _TypeInfo] = {}
_BY_CLS: dict[type, _TypeInfo] = {}
_PLANS: dict[int, frames.FramePlan] = {}
_ENCODER = msgspec.msgpack.Encoder()


def register(cls: type) -> type:
    """Class decorator: make a ``msgspec.Struct`` (array_like) with ``TYPE`` a message.

    Fields annotated with a ``sections`` spec become raw sections.
    """
    type_id = int(cls.TYPE)  # type: ignore[attr-defined]
    if type_id in _BY_ID:
        raise ValueError(f"message type {type_id} registered twice")
    hints = typing.get_type_hints(cls, include_extras=True)
    header_fields: list[tuple[Any, ...]] = []
    raw: list[tuple[int, str, ArraySpec | BytesSpec]] = []
    for index, f in enumerate(msgspec.structs.fields(cls)):
        spec = next(
            (m for m in getattr(hints[f.name], "__metadata__", ())
             if isinstance(m, ArraySpec | BytesSpec)),
            None,
        )
        if spec is None:
            if f.default is not msgspec.NODEFAULT:
                header_fields.append((f.name, f.type, f.default))
            elif f.default_factory is not msgspec.NODEFAULT:
                factory = msgspec.field(default_factory=f.default_factory)
                header_fields.append((f.name, f.type, factory))
            else:
                header_fields.append((f.name, f.type))
        else:
            raw.append((index, f.name, spec))
            two_d = isinstance(spec, ArraySpec) and spec.ndim == 2
            header_fields.append((f.name, tuple[int, int], (0, 0)) if two_d else (f.name, int, 0))
    if raw:
        header_cls = msgspec.defstruct(
            f"{cls.__name__}Header", header_fields, array_like=True, module=cls.__module__
        )
        decoder = msgspec.msgpack.Decoder(header_cls)
    else:
        decoder = msgspec.msgpack.Decoder(cls)
    plan = frames.FramePlan(
        type_id, cls, decoder, _ENCODER,
        [(index, name, spec.dtype, spec.ndim, spec.empty, spec.prepare)
         if isinstance(spec, ArraySpec) else (index, name, None, 1, None, spec.prepare)
         for index, name, spec in raw],
    )
    info = _TypeInfo(cls, type_id, decoder, tuple(raw), plan)
    _BY_ID[type_id] = info
    _BY_CLS[cls] = info
    _PLANS[type_id] = plan
    return cls


def message_class(type_id: int) -> type | None:
    """The registered class for a message type id, or None."""
    info = _BY_ID.get(type_id)
    return info.cls if info else None


# ---------------------------------------------------------------------------- encoding


def encode(msg: Any, *, version: int = PROTOCOL_VERSION,
           max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> list[bytes | bytearray | memoryview]:
    """Encode one message as a list of buffers for ``writer.writelines``.

    The first buffer holds the 12-byte prefix and the header; raw sections follow as
    memoryviews of the caller's arrays and payload buffers (not copied, so do not mutate
    them until written).

    Raises
    ------
    InvalidParamError
        ``msg`` is not a registered message, a raw field has the wrong shape, or the
        message's own consistency check fails.
    TooBigError
        The frame would exceed ``max_frame_size``.
    """
    info = _BY_CLS.get(type(msg))
    if info is None:
        raise InvalidParamError(message=f"not a protocol message: {type(msg).__name__}")
    try:
        return frames.encode(info.plan, msg, version, max_frame_size)  # type: ignore[no-any-return]
    except frames.FrameTooBig as exc:
        raise error_for(E.TOOBIG, str(exc)) from None
    except frames.EncodeError as exc:
        raise InvalidParamError(message=str(exc)) from None


def encode_frame(msg: Any, **kwargs: Any) -> bytes:
    """Encode one message as a single ``bytes`` (copies the raw sections)."""
    return b"".join(encode(msg, **kwargs))


#: Buffers smaller than this are joined with their neighbours by ``coalesce``.
COALESCE_BELOW = 16 * 1024


def coalesce(buffers: list[Any]) -> list[Any]:
    """``encode``'s buffers of any number of frames, made ready for one ``writelines``:
    each run of buffers under ``COALESCE_BELOW`` bytes joined into one bytes object,
    larger ones (payloads) left where they are.  uvloop's ``writelines`` costs about a
    microsecond per buffer that is not bytes, five for a small RECORDS frame: a node
    answering thousands of read streams spent a sixth of its time there."""
    return frames.coalesce(buffers, COALESCE_BELOW)  # type: ignore[no-any-return]


def encode_many(msgs: Iterable[Any]) -> list[bytes | bytearray | memoryview]:
    """Buffers for several messages, for one ``writelines`` call."""
    out: list[bytes | bytearray | memoryview] = []
    for msg in msgs:
        out.extend(encode(msg))
    return out


# ---------------------------------------------------------------------------- decoding


def _check_prefix(total: int, type_id: int, version: int, header_length: int,
                  max_frame_size: int, versions: frozenset[int], what: str = "frame"
                  ) -> _TypeInfo:
    try:
        plan = frames.check_prefix(_PLANS, total, type_id, version, header_length,
                                   max_frame_size, versions, what)
    except frames.BadFrame as exc:
        raise _protocol_error(exc) from None
    return _BY_ID[plan.type_id]


def _protocol_error(exc: frames.BadFrame) -> ProtocolError:
    status = E.PROTONOSUPPORT if isinstance(exc, frames.UnsupportedVersion) else E.BADMSG
    return ProtocolError(status, str(exc))


def _decode(info: _TypeInfo, frame: memoryview, header_length: int) -> Any:
    """Decode a complete frame.  For raw types ``frame`` must be an owned, stable buffer."""
    try:
        return frames.decode(info.plan, frame, header_length)
    except frames.BadFrame as exc:
        raise ProtocolError(E.BADMSG, str(exc)) from None


def decode_frame(data: bytes | bytearray | memoryview, *,
                 max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
                 versions: frozenset[int] = SUPPORTED_VERSIONS) -> Any:
    """Decode exactly one complete frame (tests, tools).  Arrays view a private copy."""
    mv = memoryview(data).cast("B")
    if len(mv) < PREFIX_SIZE:
        raise ProtocolError(E.BADMSG, f"frame of {len(mv)} bytes is shorter than its prefix")
    total, type_id, version, _flags, hl = _PREFIX.unpack_from(mv, 0)
    info = _check_prefix(total, type_id, version, hl, max_frame_size, versions)
    if total != len(mv):
        raise ProtocolError(E.BADMSG, f"frame says {total} bytes, got {len(mv)}")
    if info.raw:
        mv = memoryview(bytearray(mv)).toreadonly()
    return _decode(info, mv, hl)


class FrameDecoder:
    """Incremental decoder: bytes in (any chunking), messages out.

    Parameters
    ----------
    max_frame_size : int
        Frames claiming more bytes are refused before anything is buffered.
    versions : frozenset[int]
        Accepted encoding versions.
    first_frame_max_size : int, optional
        A smaller limit for the first frame only (a node's inbound connections: the
        HELLO, before the peer was accepted).  With it, the decoder also holds what
        follows the first frame until ``resume()``: the receiver decides who the peer is
        (and sets ``admit``) before any later frame is looked at.

    Attributes
    ----------
    admit : callable (message type, header length) -> ProtocolError or None, optional
        Asked about each frame's 12-byte prefix before anything of the frame is
        buffered or decoded; an error refuses the frame (the decoder fails with it).  A
        node sets it from what the peer's role may send.

    Notes
    -----
    Complete control frames are decoded in place from the input.  An incomplete one is
    kept in a small bytearray that is topped up only to that frame's end, so buffering
    never exceeds one small frame and is never re-copied.  A frame with raw sections
    (complete or not), or any incomplete frame of 64 KiB or more, gets its own buffer
    as soon as its 12-byte prefix is validated, sized to what arrived (at least
    ``INITIAL_FRAME_BUFFER``, at most the frame) and doubled as more arrives; the arrays
    decoded from it view that buffer (never the caller's).
    After a ``ProtocolError`` the decoder stays failed: every later ``feed`` raises the
    same error.
    """

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
                 versions: frozenset[int] | Iterable[int] = SUPPORTED_VERSIONS,
                 first_frame_max_size: int | None = None) -> None:
        self.max_frame_size = max_frame_size
        self.versions = frozenset(versions)
        self._first_max = first_frame_max_size  # None once the first frame is through
        self._buf = bytearray()
        self._frame: bytearray | None = None  # a frame being filled in its own buffer
        self._frame_fill = 0
        self._frame_total = 0
        self._frame_meta: tuple[_TypeInfo, int] | None = None
        self._error: ProtocolError | None = None
        self.admit: Callable[[int, int], ProtocolError | None] | None = None
        self._hold = first_frame_max_size is not None  # hold what follows the first frame
        self._held = False  # the first frame is out: later bytes wait for resume()

    @property
    def pending(self) -> int:
        """Bytes received that do not yet form a complete frame."""
        return len(self._buf) + (self._frame_fill if self._frame is not None else 0)

    def feed(self, data: bytes | bytearray | memoryview) -> list[Any]:
        """Add received bytes; return the messages completed by them, in order.

        Raises
        ------
        ProtocolError
            The stream is not valid (see the module docstring).
        """
        if self._error is not None:
            raise self._error
        if self._held:
            self._buf += data
            return []
        out: list[Any] = []
        try:
            mv = memoryview(data) if type(data) is bytes else memoryview(data).cast("B")
            while mv and not self._held:
                if self._frame is not None:
                    mv = self._fill(mv, out)
                elif self._buf:
                    # _buf holds less than one small frame: top it up to that frame only,
                    # so the rest of the input is parsed in place.
                    have = len(self._buf)
                    if have < PREFIX_SIZE:
                        need = PREFIX_SIZE - have
                    else:
                        need = _PREFIX.unpack_from(self._buf)[0] - have
                    self._buf += mv[:need]
                    mv = mv[need:]
                    with memoryview(self._buf) as src:
                        used = self._parse(src, out)
                    del self._buf[:used]
                else:  # everything: the rest goes to _buf or to a frame's own buffer
                    used = self._parse(mv, out)
                    if self._frame is None and used < len(mv):
                        self._buf += mv[used:]
                    return out
            if self._held:
                self._buf += mv
        except ProtocolError as exc:
            self._error = exc
            raise
        return out

    def resume(self) -> list[Any]:
        """Decode what arrived after the first frame (see ``first_frame_max_size``), and
        from now on everything as it comes; the messages completed so far."""
        self._held = False
        data, self._buf = bytes(self._buf), bytearray()
        return self.feed(data) if data else []

    def _frame_done(self) -> None:
        if self._hold:
            self._hold, self._held = False, True

    def _fill(self, mv: memoryview, out: list[Any]) -> memoryview:
        frame = self._frame
        assert frame is not None and self._frame_meta is not None
        fill, total = self._frame_fill, self._frame_total
        take = min(total - fill, len(mv))
        if fill + take > len(frame):  # grow with what arrived: double, up to the frame
            grown = bytearray(min(total, max(2 * len(frame), fill + take)))
            grown[:fill] = memoryview(frame)[:fill]
            self._frame = frame = grown
        frame[fill : fill + take] = mv[:take]
        self._frame_fill = fill = fill + take
        if fill == total:
            info, hl = self._frame_meta
            self._frame = None
            self._frame_meta = None
            self._frame_fill = 0
            out.append(_decode(info, memoryview(frame).toreadonly(), hl))
            self._frame_done()
        return mv[take:]

    def _parse(self, src: memoryview, out: list[Any]) -> int:
        """Decode whole frames from ``src``; return how many bytes were consumed."""
        pos = 0
        n = len(src)
        while n - pos >= PREFIX_SIZE and not self._held:
            if self._first_max is None and not self._hold:
                try:  # every complete frame from pos on
                    pos = frames.decode_frames(src, pos, _PLANS, self.max_frame_size,
                                               self.versions, self.admit, out)
                except frames.BadFrame as exc:
                    raise _protocol_error(exc) from None
                if n - pos < PREFIX_SIZE:
                    break
            # the first frame (its own limit, and maybe holding what follows), or one that
            # is not complete in src
            total, type_id, version, _flags, hl = _PREFIX.unpack_from(src, pos)
            if self._first_max is not None:
                info = _check_prefix(total, type_id, version, hl,
                                     min(self._first_max, self.max_frame_size), self.versions,
                                     "first frame")
                self._first_max = None
            else:
                info = _check_prefix(total, type_id, version, hl, self.max_frame_size,
                                     self.versions)
            if self.admit is not None:
                refused = self.admit(type_id, hl)
                if refused is not None:
                    raise refused
            if n - pos >= total:
                if info.raw:
                    frame = memoryview(bytearray(src[pos : pos + total])).toreadonly()
                else:
                    frame = src[pos : pos + total]
                out.append(_decode(info, frame, hl))
                pos += total
                self._frame_done()
            elif info.raw or total >= _OWN_BUFFER_THRESHOLD:
                frame_buf = bytearray(min(total, max(INITIAL_FRAME_BUFFER, n - pos)))
                frame_buf[: n - pos] = src[pos:n]
                self._frame = frame_buf
                self._frame_fill = n - pos
                self._frame_total = total
                self._frame_meta = (info, hl)
                return n
            else:
                break
        return pos
