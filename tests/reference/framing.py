"""Plain-Python reference for ``ldcore.frames`` and ``ldcore.colcheck``: the generic frame
codec, one step at a time, with numpy for the consistency checks.

This is how ``logdevice.protocol.framing`` encoded and decoded frames before the compiled
plans: the message as a list (``astuple``), each raw field through its spec's
``prepare`` / ``section_length`` / ``view``, the message rebuilt for its consistency
check, msgspec for the header, ``struct`` for the prefix.  The property tests hold the
compiled codec to its bytes and its verdicts (the same message, or an error of the same
status); the codec benchmark measures it as the reference.

``hot_messages(n)`` builds one message of each hot type, with ``n`` records (goldens,
property tests and the codec benchmark use them).

The consistency checks of the hot messages (STORE, STORED, APPEND_BATCH, APPENDED_BATCH,
RECORDS) are restated here with numpy; every other type uses its own
``consistency_problem()``.
"""

from __future__ import annotations

import struct
import typing
from collections.abc import Callable
from typing import Any

import msgspec
import numpy as np

from logdevice.errors import E, InvalidParamError, error_for
from logdevice.protocol import messages as m
from logdevice.protocol.flags import RecordFlag
from logdevice.protocol.framing import DEFAULT_MAX_FRAME_SIZE, PROTOCOL_VERSION, ProtocolError
from logdevice.protocol.sections import ArraySpec, BytesSpec

PREFIX_SIZE = 12
_PREFIX = struct.Struct("<IHBBI")
_PAD = [b"\0" * n for n in range(8)]
_ENCODER = msgspec.msgpack.Encoder()
CHECKSUM = int(RecordFlag.CHECKSUM)

# ------------------------------------------------------------------------ checks (numpy)


def columns_problem(n: int, required: dict[str, Any],
                    optional: dict[str, Any] | None = None) -> str | None:
    for name, arr in required.items():
        if len(arr) != n:
            return f"{name} has {len(arr)} entries, expected {n}"
    for name, arr in (optional or {}).items():
        if len(arr) not in (0, n):
            return f"{name} has {len(arr)} entries, expected 0 or {n}"
    return None


def offsets_problem(offsets: np.ndarray, n: int, payloads: Any) -> str | None:
    payload_bytes = memoryview(payloads).nbytes
    if len(offsets) == 0:
        return None if n == 0 and payload_bytes == 0 else "payload_offsets missing"
    if len(offsets) != n + 1:
        return f"payload_offsets has {len(offsets)} entries, expected {n + 1}"
    if offsets[0] != 0 or offsets[-1] != payload_bytes:
        return f"payload_offsets span [{offsets[0]}, {offsets[-1]}], payloads {payload_bytes} B"
    if n > 1 and bool(np.any(offsets[1:] < offsets[:-1])):
        return "payload_offsets decrease"
    return None


def checksummed_problem(flags: np.ndarray, checksums: np.ndarray,
                        checksum_flag: int = CHECKSUM) -> str | None:
    if len(checksums) or not len(flags):
        return None
    if bool(np.any(np.asarray(flags, np.uint32) & np.uint32(checksum_flag))):
        return "records are flagged CHECKSUM but the checksums column is empty"
    return None


def _store(msg: Any) -> str | None:
    n = len(msg.lsns)
    return columns_problem(
        n, {"timestamps": msg.timestamps, "flags": msg.flags, "waves": msg.waves,
            "copysets": msg.copysets}, {"checksums": msg.checksums},
    ) or offsets_problem(msg.payload_offsets, n, msg.payloads) \
        or checksummed_problem(msg.flags, msg.checksums)


def _append_batch(msg: Any) -> str | None:
    n = max(0, len(msg.payload_offsets) - 1)
    if n == 0:
        return "an APPEND_BATCH without records"
    if msg.flags & CHECKSUM:
        problem = columns_problem(n, {"checksums": msg.checksums})
        if problem:
            return problem
    return offsets_problem(msg.payload_offsets, n, msg.payloads)


def _records(msg: Any) -> str | None:
    n = len(msg.lsns)
    return columns_problem(
        n, {"timestamps": msg.timestamps, "flags": msg.flags},
        {"checksums": msg.checksums, "waves": msg.waves, "copysets": msg.copysets},
    ) or offsets_problem(msg.payload_offsets, n, msg.payloads) \
        or checksummed_problem(msg.flags, msg.checksums)


CONSISTENCY: dict[type, Callable[[Any], str | None]] = {
    m.Store: _store,
    m.Stored: lambda msg: columns_problem(len(msg.lsns), {"statuses": msg.statuses}),
    m.AppendBatch: _append_batch,
    m.AppendedBatch: lambda msg: columns_problem(
        len(msg.statuses), {"lsns": msg.lsns, "timestamps": msg.timestamps}),
    m.Records: _records,
}


def consistency_problem(msg: Any) -> str | None:
    check = CONSISTENCY.get(type(msg))
    return check(msg) if check is not None else msg.consistency_problem()


# ------------------------------------------------------------------------ layouts


class Layout(typing.NamedTuple):
    cls: type
    type_id: int
    decoder: msgspec.msgpack.Decoder[Any]
    raw: tuple[tuple[int, str, ArraySpec | BytesSpec], ...]


def _layout(cls: type) -> Layout:
    hints = typing.get_type_hints(cls, include_extras=True)
    header_fields: list[tuple[Any, ...]] = []
    raw: list[tuple[int, str, ArraySpec | BytesSpec]] = []
    for index, f in enumerate(msgspec.structs.fields(cls)):
        spec = next((x for x in getattr(hints[f.name], "__metadata__", ())
                     if isinstance(x, ArraySpec | BytesSpec)), None)
        if spec is None:
            if f.default is not msgspec.NODEFAULT:
                header_fields.append((f.name, f.type, f.default))
            elif f.default_factory is not msgspec.NODEFAULT:
                header_fields.append((f.name, f.type,
                                      msgspec.field(default_factory=f.default_factory)))
            else:
                header_fields.append((f.name, f.type))
        else:
            raw.append((index, f.name, spec))
            two_d = isinstance(spec, ArraySpec) and spec.ndim == 2
            header_fields.append((f.name, tuple[int, int], (0, 0)) if two_d
                                 else (f.name, int, 0))
    if raw:
        header_cls = msgspec.defstruct(f"Ref{cls.__name__}Header", header_fields,
                                       array_like=True)
        decoder = msgspec.msgpack.Decoder(header_cls)
    else:
        decoder = msgspec.msgpack.Decoder(cls)
    return Layout(cls, int(cls.TYPE), decoder, tuple(raw))  # type: ignore[attr-defined]


BY_CLS = {cls: _layout(cls) for cls in m.ALL_MESSAGES}
BY_ID = {layout.type_id: layout for layout in BY_CLS.values()}

# ------------------------------------------------------------------------ the codec


def encode(msg: Any, *, version: int = PROTOCOL_VERSION,
           max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> list[Any]:
    info = BY_CLS.get(type(msg))
    if info is None:
        raise InvalidParamError(message=f"not a protocol message: {type(msg).__name__}")
    head = bytearray(PREFIX_SIZE)
    if not info.raw:
        _ENCODER.encode_into(msg, head, PREFIX_SIZE)
        total = len(head)
        _check_size(total, max_frame_size, info)
        _PREFIX.pack_into(head, 0, total, info.type_id, version, 0, total - PREFIX_SIZE)
        return [head]
    values = list(msgspec.structs.astuple(msg))
    sections: list[memoryview] = []
    changed: dict[str, Any] = {}
    for index, name, spec in info.raw:
        value = values[index]
        try:
            normalised, raw, header_value = spec.prepare(value)
        except (TypeError, ValueError) as exc:
            raise InvalidParamError(message=f"{info.cls.__name__}.{name}: {exc}") from None
        if normalised is not value:
            changed[name] = normalised
        values[index] = header_value
        sections.append(raw)
    checked = msgspec.structs.replace(msg, **changed) if changed else msg
    problem = consistency_problem(checked)
    if problem:
        raise InvalidParamError(message=f"{info.cls.__name__}: {problem}")
    _ENCODER.encode_into(values, head, PREFIX_SIZE)
    header_length = len(head) - PREFIX_SIZE
    head += _PAD[-len(head) & 7]
    out: list[Any] = [head]
    total = len(head)
    for raw in sections:
        if raw.nbytes:
            out.append(raw)
            pad = -raw.nbytes & 7
            if pad:
                out.append(_PAD[pad])
            total += raw.nbytes + pad
    _check_size(total, max_frame_size, info)
    _PREFIX.pack_into(head, 0, total, info.type_id, version, 0, header_length)
    return out


def _check_size(total: int, max_frame_size: int, info: Layout) -> None:
    if total > max_frame_size:
        raise error_for(E.TOOBIG,
                        f"{info.cls.__name__} frame of {total} bytes exceeds {max_frame_size}")


def encode_frame(msg: Any, **kwargs: Any) -> bytes:
    return b"".join(encode(msg, **kwargs))


def decode_body(info: Layout, frame: memoryview, header_length: int) -> Any:
    """A complete frame whose prefix was checked (``frame`` owned, for raw types)."""
    end = PREFIX_SIZE + header_length
    try:
        header = info.decoder.decode(frame[PREFIX_SIZE:end])
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise ProtocolError(E.BADMSG, f"bad {info.cls.__name__} header: {exc}") from None
    if not info.raw:
        return header
    values = list(msgspec.structs.astuple(header))
    offset = (end + 7) & ~7
    placed = []
    try:
        for index, _name, spec in info.raw:
            hv = values[index]
            length = spec.section_length(hv)
            placed.append((index, spec, offset, hv))
            offset += (length + 7) & ~7
    except (TypeError, ValueError) as exc:
        raise ProtocolError(E.BADMSG, f"bad section table: {exc}") from None
    if offset != len(frame):
        raise ProtocolError(E.BADMSG, f"sections need {offset} bytes, frame has {len(frame)}")
    for index, spec, off, hv in placed:
        values[index] = spec.view(frame, off, hv)
    msg = info.cls(*values)
    problem = consistency_problem(msg)
    if problem:
        raise ProtocolError(E.BADMSG, f"inconsistent {info.cls.__name__}: {problem}")
    return msg


def decode_frame(data: bytes | bytearray | memoryview) -> Any:
    """Exactly one complete frame (prefix checks as ``FrameDecoder``'s, default limits),
    copied into a buffer of its own as the decoder does."""
    mv = memoryview(bytearray(data)).toreadonly()
    if len(mv) < PREFIX_SIZE:
        raise ProtocolError(E.BADMSG, "shorter than a prefix")
    total, type_id, version, _flags, hl = _PREFIX.unpack_from(mv, 0)
    if total > DEFAULT_MAX_FRAME_SIZE:
        raise ProtocolError(E.BADMSG, "too big")
    if version != PROTOCOL_VERSION:
        raise ProtocolError(E.PROTONOSUPPORT, f"version {version}")
    info = BY_ID.get(type_id)
    if info is None:
        raise ProtocolError(E.BADMSG, f"unknown message type {type_id}")
    if hl < 1 or PREFIX_SIZE + hl > total or (not info.raw and PREFIX_SIZE + hl != total):
        raise ProtocolError(E.BADMSG, "bad header length")
    if total != len(mv):
        raise ProtocolError(E.BADMSG, "frame length")
    return decode_body(info, mv, hl)


# ------------------------------------------------------------------------ hot messages

EPOCH = 5 << 32
TS = 1_700_000_000_000


def record_columns(n: int, payload_size: int = 3) -> dict:
    lengths = (np.arange(n, dtype=np.uint64) % 3) + payload_size
    offsets = np.zeros(n + 1, np.uint64)
    np.cumsum(lengths, out=offsets[1:])
    payloads = (np.arange(int(offsets[-1]), dtype=np.uint64) * 7 % 251).astype(np.uint8).tobytes()
    return dict(lsns=np.arange(EPOCH | 10, (EPOCH | 10) + n, dtype=np.uint64),
                timestamps=np.arange(TS, TS + n, dtype=np.int64),
                flags=np.full(n, CHECKSUM, np.uint32),
                payload_offsets=offsets, payloads=payloads,
                checksums=np.arange(0xDEADBEEF, 0xDEADBEEF + n, dtype=np.uint32))


def hot_messages(n: int) -> dict:
    """One message of each hot type, with ``n`` records where it has records."""
    c = record_columns(n)
    lsns = c["lsns"]
    return {
        "Store": m.Store(request_id=2, log_id=77, epoch=5, last_known_good=EPOCH | 9,
                         waves=np.ones(n, np.uint32),
                         copysets=np.tile(np.array([0, 2, -1], np.int16), (n, 1)), **c),
        "Stored": m.Stored(request_id=2, log_id=77, node_index=1, lsns=lsns,
                           statuses=np.zeros(n, np.uint16)),
        "Append": m.Append(request_id=1, log_id=77, payload=c["payloads"], flags=CHECKSUM,
                           timeout_ms=500, checksum=0xDEADBEEF),
        "AppendBatch": m.AppendBatch(request_id=3, log_id=77, flags=CHECKSUM, timeout_ms=900,
                                     payload_offsets=c["payload_offsets"],
                                     payloads=c["payloads"], checksums=c["checksums"]),
        "Appended": m.Appended(request_id=1, status=E.OK, lsn=EPOCH | 10, timestamp=TS),
        "AppendedBatch": m.AppendedBatch(request_id=3, status=E.OK,
                                         statuses=np.zeros(n, np.uint16), lsns=lsns,
                                         timestamps=c["timestamps"]),
        "Release": m.Release(log_id=77, lsn=(EPOCH | 9) + max(n, 1), epoch=5),
        "Records": m.Records(read_stream_id=7, filter_version=3, **c),
    }
