"""Flag bits that travel on the wire.

- ``RecordFlag``: per record, in the ``flags`` arrays of STORE and RECORDS (and stored
  with the record in LogsDB).  Bit values are ours; the names follow LogDevice.
- ``AppendFlag``: on APPEND (the record flags a client may set).
- ``StartFlag``: on START, with LogDevice's numbering (REFERENCE.md §A2).

All are ``IntFlag`` so they combine with ``|`` and work against numpy flag arrays
(``flags & RecordFlag.HOLE``).  The ``FLAG_*`` aliases are plain ints for kernels.
"""

from __future__ import annotations

from enum import IntFlag

__all__ = [
    "RecordFlag",
    "AppendFlag",
    "StartFlag",
    "FLAG_CHECKSUM",
    "FLAG_CHECKSUM_64BIT",
    "FLAG_HOLE",
    "FLAG_BRIDGE",
    "FLAG_BUFFERED_WRITER_BLOB",
    "FLAG_WRITTEN_BY_RECOVERY",
    "FLAG_DRAINED",
]


class RecordFlag(IntFlag):
    """Per-record flags (uint32 on the wire)."""

    NONE = 0
    CHECKSUM = 1 << 0  # checksums[i] is the crc32c of the payload
    CHECKSUM_64BIT = 1 << 1  # reserved: a 64-bit checksum (not used yet)
    HOLE = 1 << 2  # a hole plug stored by recovery: no record at this LSN
    BRIDGE = 1 << 3  # a bridge record: the epoch ends here
    BUFFERED_WRITER_BLOB = 1 << 4  # the payload is a BufferedWriter blob (REFERENCE §A8)
    WRITTEN_BY_RECOVERY = 1 << 5  # this copy was (re)stored by epoch recovery
    DRAINED = 1 << 6  # copyset-index flag: this copy is being drained, do not ship it


class AppendFlag(IntFlag):
    """Flags a client sets on APPEND (same bits as ``RecordFlag``)."""

    NONE = 0
    CHECKSUM = RecordFlag.CHECKSUM
    BUFFERED_WRITER_BLOB = RecordFlag.BUFFERED_WRITER_BLOB


class StartFlag(IntFlag):
    """START flags, LogDevice's numbering."""

    NONE = 0
    NO_PAYLOAD = 8  # send records without their payloads
    DIGEST = 32  # recovery digest: include waves, copysets, hole plugs
    SINGLE_COPY_DELIVERY = 128
    INCLUDE_BYTE_OFFSET = 512
    LOCAL_SCD_ENABLED = 2048  # client_location is set: prefer copies in the client's region


FLAG_CHECKSUM = int(RecordFlag.CHECKSUM)
FLAG_CHECKSUM_64BIT = int(RecordFlag.CHECKSUM_64BIT)
FLAG_HOLE = int(RecordFlag.HOLE)
FLAG_BRIDGE = int(RecordFlag.BRIDGE)
FLAG_BUFFERED_WRITER_BLOB = int(RecordFlag.BUFFERED_WRITER_BLOB)
FLAG_WRITTEN_BY_RECOVERY = int(RecordFlag.WRITTEN_BY_RECOVERY)
FLAG_DRAINED = int(RecordFlag.DRAINED)
