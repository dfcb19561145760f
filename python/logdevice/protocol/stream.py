"""The asyncio glue shared by node and client: read frames off a stream, write them.

Deliberately thin: all parsing lives in ``FrameDecoder`` and ``encode``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from typing import Any

from logdevice.errors import E
from logdevice.protocol.framing import FrameDecoder, ProtocolError, encode, encode_many

__all__ = ["read_messages", "write_message", "write_messages"]

READ_CHUNK = 256 * 1024


async def read_messages(reader: asyncio.StreamReader, decoder: FrameDecoder | None = None,
                        *, chunk_size: int = READ_CHUNK) -> AsyncIterator[Any]:
    """Yield decoded messages until the peer closes the stream.

    Raises
    ------
    ProtocolError
        The bytes are not valid frames (E.BADMSG / E.PROTONOSUPPORT), or the peer closed
        the connection in the middle of a frame (E.PEER_CLOSED).
    """
    if decoder is None:
        decoder = FrameDecoder()
    while True:
        data = await reader.read(chunk_size)
        if not data:
            if decoder.pending:
                raise ProtocolError(
                    E.PEER_CLOSED, f"connection closed inside a frame ({decoder.pending} bytes)"
                )
            return
        for msg in decoder.feed(data):
            yield msg


def write_message(writer: asyncio.StreamWriter, msg: Any) -> None:
    """Queue one message on ``writer`` (raw sections are not copied here); await
    ``writer.drain()`` for back-pressure."""
    writer.writelines(encode(msg))


def write_messages(writer: asyncio.StreamWriter, msgs: Iterable[Any]) -> None:
    """Queue several messages with one ``writelines`` call."""
    writer.writelines(encode_many(msgs))
