"""What the client accepts as a payload: bytes, str, or a buffer of plain data.

``as_payload`` makes the immutable bytes-like an append keeps until it is sent;
``as_byte_view`` the flat byte view BufferedWriter packs from.  Both refuse, with
``InvalidParamError``, what would store the wrong bytes: buffers of Python objects (their
memory holds addresses) and non-contiguous buffers.
"""

from __future__ import annotations

import re
from typing import Any

from logdevice.errors import InvalidParamError

__all__ = ["as_payload", "as_byte_view"]

# Buffer formats whose memory is the data itself: bytes, bools, integers, floats (with an
# optional byte order and repeat count).  Anything else, above all 'O' (a numpy object
# array: its memory holds addresses of Python objects), is refused.
_PLAIN_FORMAT = re.compile(r"^[@=<>!]?\d*[bBcxs?hHiIlLqQnNefd]$")


def as_byte_view(payload: Any, what: str = "payload") -> memoryview:
    """A flat byte view of a buffer holding plain data.

    ``InvalidParamError`` for objects that are not buffers, buffers of Python objects
    (numpy ``dtype=object``) or of other non-plain formats, and non-contiguous buffers.
    """
    try:
        mv = memoryview(payload)
    except TypeError:
        raise InvalidParamError(
            message=f"{what} must be bytes-like or str, not {type(payload).__name__}"
        ) from None
    if not _PLAIN_FORMAT.match(mv.format):
        why = ("it holds pointers to Python objects, not their bytes: serialise them first"
               if "O" in mv.format else "view it as bytes first, e.g. a.view(numpy.uint8)")
        raise InvalidParamError(
            message=f"{what} is a buffer of format {mv.format!r} ({type(payload).__name__}): "
                    f"only plain data (bytes, numbers) can be appended; {why}")
    if not mv.c_contiguous:
        raise InvalidParamError(
            message=f"{what} is a non-contiguous {type(payload).__name__} (strides "
                    f"{mv.strides}): pass a contiguous copy, e.g. numpy.ascontiguousarray(a)")
    return mv.cast("B") if mv.format != "B" or mv.ndim != 1 else mv


def as_payload(payload: Any) -> bytes:
    """A payload as an immutable bytes-like the client may keep until it is sent.

    ``bytes`` pass as they are; ``str`` is UTF-8 encoded; other buffers of plain data
    (bytearray, memoryview, numpy arrays of numbers) are copied, so the caller may reuse
    them at once.  Object arrays and non-contiguous buffers are refused
    (``InvalidParamError``).
    """
    if isinstance(payload, bytes):
        return payload
    if isinstance(payload, str):
        return payload.encode()
    return bytes(as_byte_view(payload))
