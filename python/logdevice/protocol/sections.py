"""Raw sections: bulk buffers that travel beside a message header, not inside it.

A message field annotated with one of the aliases below (``U64Array``, ``I16Matrix``,
``Payload``, ...) is not msgpack-encoded.  Its bytes go on the wire as one contiguous raw
section after the header, and the header holds only its length at the field's position:
an ``int`` byte length for 1-D arrays and byte buffers, ``[byte length, columns]`` for
2-D arrays.  The dtype and the number of dimensions are fixed by the annotation, so the
receiver rebuilds each array with ``np.frombuffer`` straight on the received frame: no
copy, no per-record Python object.  Arrays are little-endian on the wire.

Decoded arrays and payload memoryviews are read-only views into the frame buffer; they
keep it alive.  Copy them (``arr.copy()``, ``bytes(mv)``) to modify or to let the frame go.

Also here: ``pack_payloads`` / ``unpack_payloads`` for the offsets + one-buffer layout
that RECORDS and STORE use for payloads.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "ArraySpec",
    "BytesSpec",
    "Payload",
    "U8Array",
    "U16Array",
    "U32Array",
    "U64Array",
    "I64Array",
    "I16Matrix",
    "empty_array",
    "pack_payloads",
    "unpack_payloads",
]


_NO_BYTES = memoryview(b"")


class ArraySpec:
    """A numpy array field: fixed little-endian dtype and number of dimensions (1 or 2).

    On encode a value may be any array-like; it is converted (copied only when its dtype
    or layout differs).  2-D arrays carry their column count in the header.
    """

    __slots__ = ("dtype", "ndim", "empty")

    def __init__(self, dtype: str, ndim: int = 1) -> None:
        if ndim not in (1, 2):
            raise ValueError("ArraySpec supports 1-D and 2-D arrays")
        self.dtype = np.dtype(dtype)
        self.ndim = ndim
        self.empty = empty_array(self.dtype, ndim)

    def __repr__(self) -> str:
        return f"ArraySpec({self.dtype.str!r}, ndim={self.ndim})"

    def prepare(self, value: Any) -> tuple[np.ndarray, memoryview, Any]:
        """Normalise ``value``; return (array, raw bytes view, header value)."""
        arr = np.ascontiguousarray(value, dtype=self.dtype)
        if arr.ndim != self.ndim:
            if self.ndim == 2 and arr.size == 0:
                arr = arr.reshape(0, 0)
            else:
                raise ValueError(f"expected a {self.ndim}-D array, got shape {arr.shape}")
        # C-contiguous: a flat byte view, no copy (cast refuses zeros in the shape)
        raw = arr.data.cast("B") if arr.size else _NO_BYTES
        if self.ndim == 1:
            return arr, raw, raw.nbytes
        return arr, raw, (raw.nbytes, int(arr.shape[1]))

    def section_length(self, header_value: Any) -> int:
        """Byte length of the section, validated against the dtype (ValueError if bad)."""
        if self.ndim == 1:
            nbytes = header_value
            unit = self.dtype.itemsize
        else:
            nbytes, cols = header_value
            if cols < 0:
                raise ValueError(f"negative column count {cols}")
            unit = self.dtype.itemsize * cols
            if unit == 0:
                if nbytes:
                    raise ValueError("a 2-D array with zero columns must be empty")
                return 0
        if nbytes < 0 or nbytes % unit:
            raise ValueError(f"section of {nbytes} bytes does not hold whole {self.dtype} rows")
        return nbytes

    def view(self, frame: memoryview, offset: int, header_value: Any) -> np.ndarray:
        """The array over ``frame[offset:...]``; zero copy."""
        nbytes = header_value if self.ndim == 1 else header_value[0]
        if nbytes == 0:
            return self.empty
        arr = np.frombuffer(frame, dtype=self.dtype, count=nbytes // self.dtype.itemsize,
                            offset=offset)
        if self.ndim == 2:
            arr = arr.reshape(-1, header_value[1])
        return arr


class BytesSpec:
    """An opaque byte buffer (e.g. all payloads of a batch, back to back)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "BytesSpec()"

    def prepare(self, value: Any) -> tuple[Any, memoryview, int]:
        raw = memoryview(value)
        if raw.format != "B" or raw.ndim != 1 or not raw.c_contiguous:
            raw = raw.cast("B") if raw.c_contiguous else memoryview(bytes(raw))
        return value, raw, raw.nbytes

    def section_length(self, header_value: Any) -> int:
        if header_value < 0:
            raise ValueError(f"negative section length {header_value}")
        return header_value

    def view(self, frame: memoryview, offset: int, header_value: Any) -> memoryview:
        return frame[offset : offset + header_value]


def empty_array(dtype: Any, ndim: int = 1) -> np.ndarray:
    """A shared read-only empty array (used as field defaults)."""
    arr = np.empty((0,) * ndim, dtype=dtype)
    arr.flags.writeable = False
    return arr


U8Array = Annotated[np.ndarray, ArraySpec("<u1")]
U16Array = Annotated[np.ndarray, ArraySpec("<u2")]
U32Array = Annotated[np.ndarray, ArraySpec("<u4")]
U64Array = Annotated[np.ndarray, ArraySpec("<u8")]
I64Array = Annotated[np.ndarray, ArraySpec("<i8")]
I16Matrix = Annotated[np.ndarray, ArraySpec("<i2", ndim=2)]
"""2-D int16 (copysets: one row per record, padded with -1)."""
Payload = Annotated[bytes | bytearray | memoryview, BytesSpec()]
"""Any bytes-like on encode; a read-only memoryview into the frame on decode."""

EMPTY_U8 = empty_array("<u1")
EMPTY_U16 = empty_array("<u2")
EMPTY_U32 = empty_array("<u4")
EMPTY_U64 = empty_array("<u8")
EMPTY_I64 = empty_array("<i8")
EMPTY_I16_2D = empty_array("<i2", 2)


def pack_payloads(payloads: Sequence[bytes | bytearray | memoryview]) -> tuple[
    npt.NDArray[np.uint64], bytes
]:
    """Lay out payloads back to back: ``(offsets[n+1], buffer)``.

    ``payload i == buffer[offsets[i]:offsets[i+1]]``.  Takes a Python sequence, so this
    walks it once; producers that already hold a buffer + offsets should pass those.
    """
    lengths = np.fromiter((len(p) for p in payloads), dtype=np.uint64, count=len(payloads))
    offsets = np.zeros(len(payloads) + 1, dtype=np.uint64)
    np.cumsum(lengths, out=offsets[1:])
    return offsets, b"".join(payloads)


def unpack_payloads(offsets: npt.ArrayLike, buffer: bytes | memoryview) -> list[memoryview]:
    """Per-record memoryviews of ``buffer`` (convenience; not for hot paths)."""
    mv = memoryview(buffer)
    bounds = np.asarray(offsets, dtype=np.uint64).tolist()
    return [mv[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
