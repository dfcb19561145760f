"""Flag bits that travel on the wire.

- ``RecordFlag``: per record, in the ``flags`` arrays of STORE and RECORDS (and stored
  with the record in LogsDB).  Bit positions follow LogDevice's local log store record
  format.  HOLE, BRIDGE, WRITTEN_BY_RECOVERY and DRAINED are defined once, in
  ``ldcore.scd`` (its kernel reads them), and imported here.
- ``AppendFlag``: on APPEND and APPEND_BATCH (the record flags a client may set, and
  ``NO_REDIRECT``, a request to the node that is never stored).
- ``StartFlag``: on START, with LogDevice's numbering.
- ``PeerFeature``: in HELLO_REPLY, what the answering node understands beyond the
  messages every node of this protocol version takes (see ``PeerFeature``).

All are ``IntFlag`` so they combine with ``|`` and work against numpy flag arrays
(``flags & RecordFlag.HOLE``).  The ``FLAG_*`` aliases are plain ints for kernels.
"""

from __future__ import annotations

from enum import IntFlag

from ldcore import scd as _scd

__all__ = [
    "RecordFlag",
    "AppendFlag",
    "StartFlag",
    "PeerFeature",
    "NODE_FEATURES",
    "FLAG_CHECKSUM",
    "FLAG_CHECKSUM_64BIT",
    "FLAG_AMEND",
    "FLAG_HOLE",
    "FLAG_BRIDGE",
    "FLAG_BUFFERED_WRITER_BLOB",
    "FLAG_WRITTEN_BY_RECOVERY",
    "FLAG_DRAINED",
]


class RecordFlag(IntFlag):
    """Per-record flags (uint32 on the wire)."""

    NONE = 0
    CHECKSUM = 1 << 2  # checksums[i] is the crc32c of the payload
    CHECKSUM_64BIT = 1 << 3  # reserved: a 64-bit checksum (not used yet)
    AMEND = 1 << 5  # STORE: metadata only (new copyset / seal epoch), payload unchanged
    HOLE = _scd.FLAG_HOLE  # a hole plug stored by recovery: no record at this LSN
    BUFFERED_WRITER_BLOB = 1 << 7  # the payload is a BufferedWriter blob
    WRITTEN_BY_RECOVERY = _scd.FLAG_WRITTEN_BY_RECOVERY  # (re)stored by epoch recovery
    BRIDGE = _scd.FLAG_BRIDGE  # a bridge record: the epoch ends here
    DRAINED = _scd.FLAG_DRAINED  # copyset-index flag: being drained, do not ship this copy


class AppendFlag(IntFlag):
    """Flags a client sets on APPEND (record flags keep ``RecordFlag``'s bits).

    ``NO_REDIRECT``: the client could not reach the node the cluster says sequences the
    log; the receiving node serves the append itself, activating a sequencer for the log
    (a new epoch) if it has none, instead of redirecting (LogDevice's flag of the same
    name).  It is not a record flag: the sequencer never stores it."""

    NONE = 0
    CHECKSUM = RecordFlag.CHECKSUM
    BUFFERED_WRITER_BLOB = RecordFlag.BUFFERED_WRITER_BLOB
    NO_REDIRECT = 1 << 24


class StartFlag(IntFlag):
    """START flags, LogDevice's numbering."""

    NONE = 0
    NO_PAYLOAD = 8  # send records without their payloads
    DIGEST = 32  # recovery digest: include waves, copysets, hole plugs
    SINGLE_COPY_DELIVERY = 128
    LOCAL_SCD_ENABLED = 2048  # client_location is set: prefer copies in the client's region


FLAG_CHECKSUM = int(RecordFlag.CHECKSUM)
FLAG_CHECKSUM_64BIT = int(RecordFlag.CHECKSUM_64BIT)
FLAG_AMEND = int(RecordFlag.AMEND)
FLAG_HOLE = int(RecordFlag.HOLE)
FLAG_BRIDGE = int(RecordFlag.BRIDGE)
FLAG_BUFFERED_WRITER_BLOB = int(RecordFlag.BUFFERED_WRITER_BLOB)
FLAG_WRITTEN_BY_RECOVERY = int(RecordFlag.WRITTEN_BY_RECOVERY)
FLAG_DRAINED = int(RecordFlag.DRAINED)


class PeerFeature(IntFlag):
    """What a node says it understands, in its HELLO_REPLY's ``features``.

    A peer only sends a message a feature names to a node that announced the feature
    (a node from before it answers 0, and keeps getting the older messages): nodes of
    mixed versions, during a rolling upgrade, talk in what both understand.

    ``STORE_LOGS``: the node takes STORE_LOGS frames (the STOREs of several logs in
    one frame) and answers them with STORED_LOGS.  ``APPEND_LOGS``: it takes APPEND_LOGS
    frames (a client's APPEND_BATCHes of several logs in one frame) and answers them with
    APPENDED_LOGS."""

    NONE = 0
    STORE_LOGS = 1 << 0
    APPEND_LOGS = 1 << 1


#: What this version of the node understands (its HELLO_REPLY says so).
NODE_FEATURES = PeerFeature.STORE_LOGS | PeerFeature.APPEND_LOGS
