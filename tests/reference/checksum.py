"""Plain-Python CRC32C (Castagnoli), bit by bit: the reference for ``ldcore.checksum``."""

POLY = 0x82F63B78  # 0x1EDC6F41 bit-reversed


def crc32c(data: bytes, value: int = 0) -> int:
    """Finished CRC32C of ``data``, continuing from a previous finished ``value``."""
    crc = value ^ 0xFFFFFFFF
    for byte in bytes(data):
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ POLY if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def crc32c_many(buffer: bytes, offsets) -> list[int]:
    """CRC32C of each ``buffer[offsets[i]:offsets[i + 1]]``."""
    buf = bytes(buffer)
    offs = [int(o) for o in offsets]
    return [crc32c(buf[a:b]) for a, b in zip(offs, offs[1:], strict=False)]
