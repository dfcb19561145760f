"""What a read stream asks its I/O layer to send, and the constants it reads records by.

The read stream never touches a socket: after each event the I/O layer drains
``ReadStream.take_actions()`` and turns each action into a protocol message
(``SendStart`` -> START, ``SendWindow`` -> WINDOW, ``SendStop`` -> STOP).
"""

from __future__ import annotations

from dataclasses import dataclass

from logdevice.protocol.flags import (
    FLAG_BRIDGE,
    FLAG_BUFFERED_WRITER_BLOB,
    FLAG_HOLE,
    FLAG_WRITTEN_BY_RECOVERY,
)
from logdevice.protocol.messages import GapReason

__all__ = [
    "SendStart",
    "SendWindow",
    "SendStop",
    "GapReason",
    "FLAG_BRIDGE",
    "FLAG_BUFFERED_WRITER_BLOB",
    "FLAG_HOLE",
    "FLAG_WRITTEN_BY_RECOVERY",
]


@dataclass(frozen=True, slots=True)
class SendStart:
    """Open (or rewind) the stream on ``node``: send released records of
    ``[start_lsn, until_lsn]`` up to ``window_high``; single copy delivery with
    ``known_down`` when ``scd``.  Replies must carry ``filter_version``."""

    node: int
    start_lsn: int
    until_lsn: int
    window_high: int
    scd: bool
    known_down: tuple[int, ...]
    filter_version: int


@dataclass(frozen=True, slots=True)
class SendWindow:
    """The window slid: ``node`` may now send up to ``window_high``."""

    node: int
    window_high: int
    filter_version: int


@dataclass(frozen=True, slots=True)
class SendStop:
    """Close the stream on ``node`` (until_lsn reached or the stream is being dropped)."""

    node: int
