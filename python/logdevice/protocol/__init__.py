"""The wire protocol between nodes and clients (sans-I/O).

- ``framing``: frame layout, ``encode`` / ``encode_frame`` / ``FrameDecoder``,
  ``ProtocolError``.
- ``messages``: every message type (msgspec Structs), ``MessageType``, ``GapReason``,
  ``check_hello``.
- ``sections``: raw sections (numpy arrays and payload buffers beside the header).
- ``flags``: record, append and START flag bits, the features a node announces.
- ``stream``: the thin asyncio glue (``read_messages``, ``write_message``).
"""

from logdevice.protocol import messages as _messages
from logdevice.protocol.flags import AppendFlag, PeerFeature, RecordFlag, StartFlag
from logdevice.protocol.framing import (
    DEFAULT_MAX_FRAME_SIZE,
    PROTOCOL_VERSION,
    SUPPORTED_VERSIONS,
    FrameDecoder,
    ProtocolError,
    coalesce,
    decode_frame,
    encode,
    encode_frame,
    encode_many,
)
from logdevice.protocol.messages import *  # noqa: F403  (every message type is public here)
from logdevice.protocol.sections import pack_payloads, unpack_payloads
from logdevice.protocol.stream import read_messages, write_message, write_messages

__all__ = [
    "AppendFlag",
    "PeerFeature",
    "RecordFlag",
    "StartFlag",
    "DEFAULT_MAX_FRAME_SIZE",
    "PROTOCOL_VERSION",
    "SUPPORTED_VERSIONS",
    "FrameDecoder",
    "ProtocolError",
    "coalesce",
    "decode_frame",
    "encode",
    "encode_frame",
    "encode_many",
    "pack_payloads",
    "unpack_payloads",
    "read_messages",
    "write_message",
    "write_messages",
    *_messages.__all__,
]
