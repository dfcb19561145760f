"""Plain-Python BufferedWriter blob codec: the reference for ``ldcore.codec``.

Same layout as ``src/ldcore/codec.pyx`` (see the drawing there): ``0xb1``, flags (low 3
bits compression, bit 3 checksum, bit 4 producer), optional CRC32C of everything else
(little-endian), optional producer id and sequence number (u64 LE each), varint count,
then ``[varint len][bytes]...`` or ``[varint size][zstd frame of that]``.
"""

import zstandard

from tests.reference.checksum import crc32c

MAGIC = 0xB1
NONE = 0
ZSTD = 1
FLAG_CHECKSUM = 0x08
FLAG_PRODUCER = 0x10


class RefCodecError(ValueError):
    pass


def write_varint(v: int) -> bytes:
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    value = 0
    for k in range(10):
        if pos + k >= len(data):
            raise RefCodecError("truncated varint")
        b = data[pos + k]
        value |= (b & 0x7F) << (7 * k)
        if b < 0x80:
            if value >= 1 << 64:
                raise RefCodecError("varint overflows 64 bits")
            return value, pos + k + 1
    raise RefCodecError("varint longer than 10 bytes")


def _body(payloads) -> bytes:
    return b"".join(write_varint(len(p)) + bytes(p) for p in payloads)


def _seal(flags: int, rest: bytes, checksum: bool) -> bytes:
    head = bytes([MAGIC, flags | (FLAG_CHECKSUM if checksum else 0)])
    if not checksum:
        return head + rest
    crc = crc32c(rest, crc32c(head))
    return head + crc.to_bytes(4, "little") + rest


def encode(payloads, compression: str = "zstd", level: int = 1, checksum: bool = True,
           producer: tuple[int, int] | None = None) -> bytes:
    payloads = [bytes(p) for p in payloads]
    body = _body(payloads)
    count = write_varint(len(payloads))
    extra = 0
    if producer is not None:
        extra = FLAG_PRODUCER
        count = producer[0].to_bytes(8, "little") + producer[1].to_bytes(8, "little") + count
    plain = _seal(NONE | extra, count + body, checksum)
    if compression == "zstd" and body:
        frame = zstandard.ZstdCompressor(level=level).compress(body)
        packed = _seal(ZSTD | extra, count + write_varint(len(body)) + frame, checksum)
        if len(packed) < len(plain):
            return packed
    return plain


def _split(body: bytes, count: int) -> list[bytes]:
    pos, out = 0, []
    for _ in range(count):
        n, pos = read_varint(body, pos)
        if n > len(body) - pos:
            raise RefCodecError("payload runs past the end")
        out.append(body[pos : pos + n])
        pos += n
    if pos != len(body):
        raise RefCodecError("trailing bytes")
    return out


def producer_of(blob: bytes) -> tuple[int, int] | None:
    blob = bytes(blob)
    if len(blob) < 2 or blob[0] != MAGIC or not blob[1] & FLAG_PRODUCER:
        return None
    pos = 6 if blob[1] & FLAG_CHECKSUM else 2
    return (int.from_bytes(blob[pos:pos + 8], "little"),
            int.from_bytes(blob[pos + 8:pos + 16], "little"))


def decode(blob: bytes) -> list[bytes]:
    blob = bytes(blob)
    if len(blob) < 2 or blob[0] != MAGIC:
        raise RefCodecError("bad magic or truncated")
    flags = blob[1]
    if flags & 0xE0 or flags & 0x07 > ZSTD:
        raise RefCodecError("unknown flags")
    pos = 2
    if flags & FLAG_CHECKSUM:
        if len(blob) < 7:
            raise RefCodecError("truncated")
        stored = int.from_bytes(blob[2:6], "little")
        if stored != crc32c(blob[6:], crc32c(blob[:2])):
            raise RefCodecError("checksum mismatch")
        pos = 6
    if flags & FLAG_PRODUCER:
        if len(blob) < pos + 17:
            raise RefCodecError("truncated")
        pos += 16
    count, pos = read_varint(blob, pos)
    if flags & 0x07 == NONE:
        return _split(blob[pos:], count)
    size, pos = read_varint(blob, pos)
    d = zstandard.ZstdDecompressor().decompressobj()
    try:
        body = d.decompress(blob[pos:])
    except zstandard.ZstdError as e:
        raise RefCodecError(str(e)) from None
    if not d.eof or d.unused_data or len(body) != size:
        raise RefCodecError("bad zstd frame")
    return _split(body, count)
