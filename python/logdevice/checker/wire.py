"""How a RECORD_AVAILABILITY's big sections are squeezed for the wire (sans-I/O).

A node's records under per-record random copysets make both sections large: its LSNs are
a random two thirds of the log (BP-34 then needs one 24-byte group per run of held LSNs,
about 6 bytes per record), and its copyset runs are short.  Both are very regular, so:

- ``pack_availability``: the BP-34 groups as columns (first start as a delta from the
  previous group, last start minus first, size, period), each column byte-transposed,
  then zstd.  ``unpack_availability`` gives back the decoded availability of those exact
  groups, checked as a decode of the BP-34 bytes checks them (without rebuilding the
  bytes): the format on the node and in the checker stays BP-34.
- ``pack_runs``: run lengths (uint32) then copyset indices (1, 2 or 4 bytes), zstd.

Together they bring a check of a random-copyset log down to about 1.5 bytes per record
and replica pair, where the raw sections take about 14.
"""

from __future__ import annotations

import numpy as np
import zstandard

from ldcore import availability

__all__ = ["pack_availability", "unpack_availability", "pack_runs", "unpack_runs"]

_GROUP = np.dtype([("first", ">i8"), ("last", ">i8"), ("size", ">i4"), ("period", ">i4")])
_COLUMNS = (("<i8", 8), ("<i8", 8), ("<i4", 4), ("<i4", 4))
_LEVEL = 1


def _shuffle(col: np.ndarray) -> bytes:
    """Byte-transpose: all first bytes, then all second bytes, ... (zeros line up)."""
    return col.view(np.uint8).reshape(len(col), col.itemsize).T.tobytes()


def _unshuffle(buf: bytes | memoryview, n: int, dtype: str, width: int) -> np.ndarray:
    return np.frombuffer(buf, np.uint8).reshape(width, n).T.copy().view(dtype).reshape(n)


def pack_availability(data: bytes | bytearray | memoryview) -> bytes:
    """BP-34 bytes (``ldcore.availability.encode``) -> the packed form."""
    data = bytes(data)
    if len(data) < availability.HEADER_SIZE or (len(data) - availability.HEADER_SIZE) % 24:
        raise ValueError(f"{len(data)} bytes are not a BP-34 availability")
    n = (len(data) - availability.HEADER_SIZE) // 24
    if data[:4] != bytes(4) or int.from_bytes(data[4:8], "big") != n or any(data[8:64]):
        raise ValueError("not a version-0 BP-34 availability (header)")
    g = np.frombuffer(data, _GROUP, n, availability.HEADER_SIZE)
    first = g["first"].astype(np.int64)
    cols = (np.diff(first, prepend=np.int64(0)), g["last"].astype(np.int64) - first,
            g["size"].astype(np.int32), g["period"].astype(np.int32))
    raw = n.to_bytes(8, "little") + b"".join(
        _shuffle(np.ascontiguousarray(c, dtype)) for c, (dtype, _) in
        zip(cols, _COLUMNS, strict=True))
    return zstandard.ZstdCompressor(level=_LEVEL).compress(raw)


def unpack_availability(packed: bytes | bytearray | memoryview,
                        max_groups: int = 1 << 26) -> availability.Availability:
    """The packed form -> the decoded availability of the BP-34 bytes it packs (its groups,
    checked as ``availability.decode`` checks them; the bytes are not rebuilt).
    ``ValueError`` if it is not one."""
    try:
        raw = zstandard.ZstdDecompressor().decompress(
            bytes(packed), max_output_size=8 + 24 * max_groups)
    except zstandard.ZstdError as exc:
        raise ValueError(f"availability does not decompress: {exc}") from None
    if len(raw) < 8:
        raise ValueError("packed availability too short")
    n = int.from_bytes(raw[:8], "little")
    if n > max_groups or len(raw) != 8 + 24 * n:
        raise ValueError(f"packed availability: {len(raw)} bytes for {n} groups")
    cols, at, view = [], 8, memoryview(raw)
    for dtype, width in _COLUMNS:
        cols.append(_unshuffle(view[at:at + n * width], n, dtype, width))
        at += n * width
    first = np.cumsum(cols[0])
    return availability.from_groups(first, first + cols[1], cols[2], cols[3])


_WIDTHS = {1: np.uint8, 2: np.uint16, 4: np.uint32}


def pack_runs(run_lengths: np.ndarray, run_copysets: np.ndarray,
              n_distinct: int) -> tuple[bytes, int]:
    """``(zstd bytes, index width)`` of the run arrays (see the module docstring)."""
    width = 1 if n_distinct <= 0x100 else 2 if n_distinct <= 0x10000 else 4
    raw = (np.asarray(run_lengths, "<u4").tobytes()
           + np.asarray(run_copysets).astype(np.dtype(_WIDTHS[width]).newbyteorder("<"))
           .tobytes())
    return zstandard.ZstdCompressor(level=_LEVEL).compress(raw), width


def unpack_runs(data: bytes | bytearray | memoryview, n_runs: int,
                width: int) -> tuple[np.ndarray, np.ndarray]:
    """The inverse of ``pack_runs``: (run_lengths uint32, run_copysets uint32).

    Raises ``ValueError`` when the bytes do not hold ``n_runs`` runs of that width.
    """
    if width not in _WIDTHS or n_runs < 0:
        raise ValueError(f"bad run encoding: {n_runs} runs, index width {width}")
    size = n_runs * (4 + width)
    try:
        raw = zstandard.ZstdDecompressor().decompress(bytes(data), max_output_size=size)
    except zstandard.ZstdError as exc:
        raise ValueError(f"runs do not decompress: {exc}") from None
    if len(raw) != size:
        raise ValueError(f"runs hold {len(raw)} bytes, expected {size}")
    lengths = np.frombuffer(raw, "<u4", n_runs).astype(np.uint32)
    index = np.frombuffer(raw, np.dtype(_WIDTHS[width]).newbyteorder("<"), n_runs,
                          4 * n_runs).astype(np.uint32)
    return lengths, index
