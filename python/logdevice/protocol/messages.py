"""Every message nodes and clients exchange, as msgspec Structs.

Each class carries its wire id in ``TYPE`` (the frame's ``message_type``; see
``framing``).  Fields travel as a msgpack array in declaration order, so append new
fields at the end, with defaults.  Fields typed with a ``sections`` alias (``U64Array``,
``Payload``, ...) travel as raw sections: numpy arrays in, numpy arrays out, no
per-record objects.  Decoded arrays are read-only views into the frame.

Conventions: LSNs, log ids and request ids are ints (uint64 range); ``status`` is an
``E``; ``request_id`` is chosen by the requester and echoed by the reply (unique per
connection); node indices are the config's ``index``; times are milliseconds since the
Unix epoch unless named ``*_ms`` durations.  Messages with raw sections compare by
identity (numpy arrays have no single truth value).
"""

import typing
from collections.abc import Iterable, Sequence
from enum import IntEnum
from typing import Any, ClassVar, Literal

import msgspec
import numpy as np

from ldcore.colcheck import checksummed_problem, columns_problem, offsets_problem
from logdevice.errors import E
from logdevice.protocol.flags import RecordFlag
from logdevice.protocol.framing import PROTOCOL_VERSION, SUPPORTED_VERSIONS, register
from logdevice.protocol.sections import (
    EMPTY_I16_2D,
    EMPTY_I64,
    EMPTY_U16,
    EMPTY_U32,
    EMPTY_U64,
    ArraySpec,
    I16Matrix,
    I64Array,
    Payload,
    U16Array,
    U32Array,
    U64Array,
    pack_payloads,
)

__all__ = [
    "MessageType",
    "GapReason",
    "Message",
    "SequencerNode",
    "check_hello",
    "ALL_MESSAGES",
    "Hello",
    "HelloReply",
    "Error",
    "Append",
    "Appended",
    "AppendBatch",
    "AppendedBatch",
    "AppendLogs",
    "AppendedLogs",
    "Store",
    "Stored",
    "StoreLogs",
    "StoredLogs",
    "Release",
    "ReleaseBatch",
    "Start",
    "Started",
    "Records",
    "Gap",
    "Window",
    "Stop",
    "Heartbeat",
    "GetClusterView",
    "ClusterView",
    "GetTail",
    "Tail",
    "GetHead",
    "Head",
    "Trim",
    "Trimmed",
    "FindTime",
    "FindTimeReply",
    "DataSize",
    "DataSizeReply",
    "Seal",
    "Sealed",
    "CheckSeal",
    "SealState",
    "GetWriterBlobs",
    "WriterBlobs",
    "GetLogSummaries",
    "LogSummaries",
    "GetTails",
    "Tails",
    "GetRecordRows",
    "RecordRows",
    "GetCheckpoints",
    "SetCheckpoints",
    "Checkpoints",
    "GroupHeartbeat",
    "GroupAssignment",
    "GetRecordAvailability",
    "RecordAvailability",
    "GetPartitions",
    "PartitionList",
    "RebuildStore",
    "RebuildAmend",
    "RebuildStored",
    "GetReadStreams",
    "ReadStreamList",
    "GetRecoveries",
    "RecoveryList",
    "GetMetadata",
    "MetadataReply",
    "AdminRequest",
    "METADATA_KINDS",
    "ADMIN_ACTIONS",
    "table_columns",
    "table_reply",
]


class MessageType(IntEnum):
    """Wire ids of the message types (the frame's u16 ``message_type``)."""

    HELLO = 1
    HELLO_REPLY = 2
    ERROR = 3
    APPEND = 10
    APPENDED = 11
    APPEND_BATCH = 16
    APPENDED_BATCH = 17
    APPEND_LOGS = 26
    APPENDED_LOGS = 27
    STORE_LOGS = 18
    STORED_LOGS = 19
    STORE = 12
    STORED = 13
    RELEASE = 14
    RELEASE_BATCH = 15
    START = 20
    STARTED = 21
    RECORDS = 22
    GAP = 23
    WINDOW = 24
    STOP = 25
    HEARTBEAT = 30
    GET_CLUSTER_VIEW = 31
    CLUSTER_VIEW = 32
    GET_TAIL = 40
    TAIL = 41
    GET_HEAD = 42
    HEAD = 43
    TRIM = 44
    TRIMMED = 45
    FIND_TIME = 46
    FIND_TIME_REPLY = 47
    DATA_SIZE = 48
    DATA_SIZE_REPLY = 49
    SEAL = 50
    SEALED = 51
    CHECK_SEAL = 52
    SEAL_STATE = 53
    GET_WRITER_BLOBS = 54
    WRITER_BLOBS = 55
    GET_LOG_SUMMARIES = 56
    LOG_SUMMARIES = 57
    GET_TAILS = 58
    TAILS = 59
    GET_RECORD_ROWS = 64
    RECORD_ROWS = 65
    GET_CHECKPOINTS = 70
    SET_CHECKPOINTS = 71
    CHECKPOINTS = 72
    GROUP_HEARTBEAT = 73
    GROUP_ASSIGNMENT = 74
    GET_RECORD_AVAILABILITY = 60
    RECORD_AVAILABILITY = 61
    GET_PARTITIONS = 62
    PARTITION_LIST = 63
    REBUILD_STORE = 80
    REBUILD_STORED = 81
    REBUILD_AMEND = 82
    GET_READ_STREAMS = 90
    READ_STREAM_LIST = 91
    GET_RECOVERIES = 92
    RECOVERY_LIST = 93
    GET_METADATA = 100
    METADATA_REPLY = 101
    ADMIN_REQUEST = 102


class GapReason(IntEnum):
    """Why a storage node reports a gap on a read stream."""

    TRIM = 0  # at or below the trim point
    NO_RECORDS = 1  # this node has no record in [lo, hi]
    CHECKSUM_FAIL = 2  # the node has a copy but it fails its checksum: not sent
    UNDER_REPLICATED = 4  # the node may be missing records here (rebuilding)
    FILTERED_OUT = 5


class Message(msgspec.Struct, array_like=True):
    """Base of all messages; ``TYPE`` is the wire id."""

    TYPE: ClassVar[MessageType]

    def consistency_problem(self) -> str | None:
        """Cross-field consistency of raw sections; a description of the problem or None."""
        return None


# ------------------------------------------------------------------------ consistency


# The checks are ldcore.colcheck's loops in C: a message's columns are mostly a few entries
# long, where a numpy call per check would cost more than the check.
_check_columns = columns_problem  # (n, {name: column}, optional {name: column})
_check_offsets = offsets_problem  # (payload_offsets, n, payloads buffer)
# (flags, checksums, CHECKSUM flag): records flagged CHECKSUM come with their checksums
# (else nobody could verify them, and they would pass for verified)
_check_checksummed = checksummed_problem
_CHECKSUM = int(RecordFlag.CHECKSUM)


def _check_stored_records(msg: Any, optional: dict[str, np.ndarray] | None = None
                          ) -> str | None:
    """The record columns a STORE or REBUILD_STORE carries agree with each other."""
    n = len(msg.lsns)
    return _check_columns(
        n, {"timestamps": msg.timestamps, "flags": msg.flags, "waves": msg.waves,
            "copysets": msg.copysets}, optional,
    ) or _check_offsets(msg.payload_offsets, n, msg.payloads)


# ------------------------------------------------------------------------ handshake


@register
class Hello(Message):
    """Client or node -> node, first frame on every connection.

    Names the cluster and protocol version; the node answers HELLO_REPLY and closes the
    connection unless the status is OK (``check_hello``).  With security on, ``token``
    authenticates the sender (a principal's token or the node secret; "" for none, when
    a client certificate or nothing at all speaks for it).
    """

    TYPE = MessageType.HELLO
    cluster: str
    protocol_version: int = PROTOCOL_VERSION
    role: Literal["client", "node"] = "client"
    node_index: int | None = None  # the sender's index when role == "node"
    location: str = ""  # region.dc.cluster.row.rack of the sender (local SCD, placement)
    store_id: str = ""  # the identity of the sender's epoch store ("": not checked)
    token: str = ""  # shared secret of the sender's principal ("": none)

    def __repr__(self) -> str:  # a token must not end up in logs
        token = ", token=<hidden>" if self.token else ""
        return (f"Hello(cluster={self.cluster!r}, protocol_version={self.protocol_version}, "
                f"role={self.role!r}, node_index={self.node_index}, "
                f"location={self.location!r}, store_id={self.store_id!r}{token})")


@register
class HelloReply(Message):
    """Node -> connecting peer, answer to HELLO.  ``node_index`` is the replying node;
    ``features`` (``PeerFeature`` bits) what it understands beyond the messages of its
    protocol version (0 from a node from before features: it gets only those)."""

    TYPE = MessageType.HELLO_REPLY
    status: E
    node_index: int | None = None
    message: str = ""
    protocol_version: int = PROTOCOL_VERSION
    features: int = 0


@register
class Error(Message):
    """Node -> peer: a request could not be handled (unknown log, bad request, ...).

    ``request_id`` echoes the request (0 when none), ``in_reply_to`` its message type.
    """

    TYPE = MessageType.ERROR
    request_id: int
    status: E
    message: str = ""
    in_reply_to: int = 0


def check_hello(hello: Hello, cluster: str,
                versions: frozenset[int] | set[int] = SUPPORTED_VERSIONS,
                store_id: str = "") -> tuple[E, str]:
    """Decide whether to accept a HELLO: ``(E.OK, "")`` or ``(status, why)``.

    A wrong cluster name is ``E.ACCESS``; a protocol version we do not speak is
    ``E.PROTONOSUPPORT``; a node without an index is ``E.INVALID_PARAM``; a node whose
    epoch store has another identity than ours (``store_id``; two nodes on different
    stores would hand out the same epochs) is ``E.INVALID_CONFIG``.
    """
    if hello.cluster != cluster:
        return E.ACCESS, f"wrong cluster: this is {cluster!r}, peer wants {hello.cluster!r}"
    if hello.protocol_version not in versions:
        return E.PROTONOSUPPORT, (
            f"protocol version {hello.protocol_version} not supported "
            f"(this node speaks {sorted(versions)})"
        )
    if hello.role == "node" and hello.node_index is None:
        return E.INVALID_PARAM, "a node HELLO must carry its node_index"
    if hello.store_id and store_id and hello.store_id != store_id:
        who = f"N{hello.node_index}" if hello.role == "node" else "the peer"
        return E.INVALID_CONFIG, (
            f"epoch store mismatch: {who} uses an epoch store with identity "
            f"{hello.store_id}, this node's has {store_id}; every node of a cluster must use "
            "the same epoch store (a file: store on each machine is not shared: use "
            "zookeeper:)")
    return E.OK, ""


# ------------------------------------------------------------------------ write path


@register
class Append(Message, eq=False):
    """Client -> sequencer node: append one record (or one BufferedWriter blob).

    ``flags`` are ``AppendFlag`` bits; ``checksum`` is the crc32c of the payload when
    ``AppendFlag.CHECKSUM`` is set.  ``timeout_ms`` is how long the client waits for the
    answer (0: no limit): an append still waiting for its sequencer to activate past it is
    answered TIMEDOUT and not written.
    """

    TYPE = MessageType.APPEND
    request_id: int
    log_id: int
    payload: Payload = b""
    flags: int = 0
    timeout_ms: int = 0
    checksum: int = 0


@register
class Appended(Message):
    """Sequencer node -> client, answer to APPEND.

    OK: ``lsn`` and ``timestamp`` of the record.  ``redirect_to`` set (with status
    NOSEQUENCER): the log's sequencer runs on that node; retry there.
    """

    TYPE = MessageType.APPENDED
    request_id: int
    status: E
    lsn: int = 0
    timestamp: int = 0
    redirect_to: int | None = None
    message: str = ""


@register
class AppendBatch(Message, eq=False):
    """Client -> sequencer node: append several records to one log, in this order.

    Record i's payload is ``payloads[payload_offsets[i]:payload_offsets[i+1]]``; with
    ``AppendFlag.CHECKSUM`` in ``flags`` (which apply to every record) ``checksums[i]``
    is its crc32c.  BufferedWriter blobs are not batched (they go one per APPEND, where
    the sequencer recognises a retried blob).  Records the sequencer accepts together get
    consecutive LSNs.  Answered by one APPENDED_BATCH once every record has its outcome.
    """

    TYPE = MessageType.APPEND_BATCH
    request_id: int
    log_id: int
    flags: int = 0
    timeout_ms: int = 0
    payload_offsets: U64Array = EMPTY_U64
    payloads: Payload = b""
    checksums: U32Array = EMPTY_U32

    def consistency_problem(self) -> str | None:
        n = len(self.payload_offsets) - 1
        if n <= 0:
            return "an APPEND_BATCH without records"
        if self.flags & _CHECKSUM and len(self.checksums) != n:
            return _check_columns(n, {"checksums": self.checksums})
        return _check_offsets(self.payload_offsets, n, self.payloads)


@register
class AppendedBatch(Message, eq=False):
    """Sequencer node -> client, answer to APPEND_BATCH.

    ``status`` other than OK refuses the whole batch before any LSN was taken
    (``redirect_to`` and ``message`` as in APPENDED).  With OK, record i's outcome is
    ``statuses[i]`` (uint16 ``E`` values), and ``lsns[i]`` / ``timestamps[i]`` when that
    is OK (an LSN may also come with a failure: the record may have been stored).
    ``message`` then describes the first failure, ``redirect_to`` where to retry it.
    """

    TYPE = MessageType.APPENDED_BATCH
    request_id: int
    status: E
    statuses: U16Array = EMPTY_U16
    lsns: U64Array = EMPTY_U64
    timestamps: I64Array = EMPTY_I64
    redirect_to: int | None = None
    message: str = ""

    def consistency_problem(self) -> str | None:
        return _check_columns(len(self.statuses), {"lsns": self.lsns,
                                                   "timestamps": self.timestamps})


@register
class AppendLogs(Message, eq=False):
    """Client -> sequencer node: the APPEND_BATCHes of several logs in one frame.

    Part k stands for the APPEND_BATCH ``request_ids[k]`` of log ``log_ids[k]`` with
    ``flags[k]`` and ``timeouts_ms[k]``; its records are ``part_ends[k-1]`` (0 for the
    first part) to ``part_ends[k]``, their payloads indexing the one ``payloads`` buffer
    (``checksums`` is empty unless a part has ``AppendFlag.CHECKSUM``; a part without it
    has zeros there).  The node takes each part exactly as the APPEND_BATCH it stands for
    (``parts()``: the same checks, refusals and outcomes, each log on its own) and answers
    each by its request id as soon as it has its outcome (one part never waits for
    another: a log being activated holds up no other log's appends), the answers of a
    loop turn together in an APPENDED_LOGS.  ``request_id`` is the frame's own: only an
    ERROR refusing the whole frame (ACCESS) answers it.  Sent only to nodes whose
    HELLO_REPLY announced ``PeerFeature.APPEND_LOGS``.
    """

    TYPE = MessageType.APPEND_LOGS
    request_id: int
    request_ids: U64Array = EMPTY_U64
    log_ids: U64Array = EMPTY_U64
    flags: U32Array = EMPTY_U32
    timeouts_ms: U32Array = EMPTY_U32
    part_ends: U32Array = EMPTY_U32
    payload_offsets: U64Array = EMPTY_U64
    payloads: Payload = b""
    checksums: U32Array = EMPTY_U32

    def consistency_problem(self) -> str | None:
        n = len(self.payload_offsets) - 1
        if not len(self.log_ids):
            return "an APPEND_LOGS without parts"
        return _check_columns(len(self.log_ids), {
            "request_ids": self.request_ids, "flags": self.flags,
            "timeouts_ms": self.timeouts_ms,
            "part_ends": self.part_ends}) \
            or _check_parts(self.part_ends, n, strict=True) \
            or _check_columns(n, {}, {"checksums": self.checksums}) \
            or _check_checksummed(self.flags, self.checksums, _CHECKSUM) \
            or _check_offsets(self.payload_offsets, n, self.payloads)

    @classmethod
    def of(cls, parts: list[tuple[int, int, int, Sequence[Any], Sequence[int] | None]]
           ) -> "AppendLogs":
        """One frame of ``parts``, each ``(log_id, flags, timeout_ms, payloads,
        checksums)`` with at least one payload (``checksums``: None, or one per payload
        when ``flags`` has CHECKSUM).  Its request ids are for the sender to fill in."""
        n = len(parts)
        counts = [len(part[3]) for part in parts]
        offsets, payloads = pack_payloads([x for part in parts for x in part[3]])
        checked = any(part[4] is not None for part in parts)
        return cls(
            request_id=0,
            log_ids=np.fromiter((part[0] for part in parts), np.uint64, n),
            flags=np.fromiter((part[1] for part in parts), np.uint32, n),
            timeouts_ms=np.fromiter((part[2] for part in parts), np.uint32, n),
            part_ends=np.cumsum(np.array(counts, np.uint32), dtype=np.uint32),
            payload_offsets=offsets, payloads=payloads,
            checksums=np.concatenate([
                np.asarray(part[4], np.uint32) if part[4] is not None
                else np.zeros(k, np.uint32)
                for part, k in zip(parts, counts, strict=True)]) if checked else EMPTY_U32)

    def parts(self) -> list[AppendBatch]:
        """The APPEND_BATCHes this frame carries, in order (their columns are views of
        the frame)."""
        out = []
        buf = memoryview(self.payloads)
        checked = len(self.checksums) > 0
        rels, firsts, lasts = _part_offsets(self.payload_offsets, self.part_ends)
        lo = 0
        for rid, log_id, flags, timeout_ms, hi, rel, first, last in zip(
                self.request_ids.tolist(), self.log_ids.tolist(), self.flags.tolist(),
                self.timeouts_ms.tolist(), self.part_ends.tolist(), rels, firsts, lasts,
                strict=True):
            out.append(AppendBatch(
                request_id=rid, log_id=log_id, flags=flags, timeout_ms=timeout_ms,
                payload_offsets=rel, payloads=buf[first:last],
                checksums=self.checksums[lo:hi] if checked and flags & _CHECKSUM
                else EMPTY_U32))
            lo = hi
        return out


@register
class AppendedLogs(Message, eq=False):
    """Sequencer node -> client: the APPENDED_BATCHes answering several APPEND_LOGS
    parts (of one frame or several) in one frame.

    Part k is the APPENDED_BATCH of request ``request_ids[k]``: its ``statuses[k]``,
    ``redirect_to[k]`` (-1: none) and ``messages[k]`` are that reply's ``status``,
    ``redirect_to`` and ``message``; its per-record outcomes (``record_statuses``,
    ``lsns``, ``timestamps``) run from ``part_ends[k-1]`` (0 for the first) to
    ``part_ends[k]`` (none when the whole part was refused).  ``parts()`` gives the
    APPENDED_BATCHes back.
    """

    TYPE = MessageType.APPENDED_LOGS
    request_ids: U64Array = EMPTY_U64
    statuses: U16Array = EMPTY_U16
    redirect_to: I64Array = EMPTY_I64
    messages: list[str] = msgspec.field(default_factory=list)
    part_ends: U32Array = EMPTY_U32
    record_statuses: U16Array = EMPTY_U16
    lsns: U64Array = EMPTY_U64
    timestamps: I64Array = EMPTY_I64

    def consistency_problem(self) -> str | None:
        if len(self.messages) != len(self.statuses):
            return f"{len(self.messages)} messages for {len(self.statuses)} parts"
        return _check_columns(len(self.statuses), {
            "request_ids": self.request_ids, "redirect_to": self.redirect_to,
            "part_ends": self.part_ends}) \
            or _check_columns(len(self.lsns), {"record_statuses": self.record_statuses,
                                               "timestamps": self.timestamps}) \
            or _check_parts(self.part_ends, len(self.lsns), strict=False)

    @classmethod
    def of(cls, answers: list[AppendedBatch]) -> "AppendedLogs":
        """One frame of ``answers``."""
        n = len(answers)
        ends = np.cumsum(np.fromiter((len(a.statuses) for a in answers), np.uint32, n),
                         dtype=np.uint32)
        filled = [a for a in answers if len(a.statuses)]
        return cls(
            request_ids=np.fromiter((a.request_id for a in answers), np.uint64, n),
            statuses=np.fromiter((a.status for a in answers), np.uint16, n),
            redirect_to=np.fromiter((-1 if a.redirect_to is None else a.redirect_to
                                     for a in answers), np.int64, n),
            messages=[a.message for a in answers], part_ends=ends,
            record_statuses=np.concatenate([a.statuses for a in filled]).astype(
                np.uint16, copy=False) if filled else EMPTY_U16,
            lsns=np.concatenate([a.lsns for a in filled]).astype(np.uint64, copy=False)
            if filled else EMPTY_U64,
            timestamps=np.concatenate([a.timestamps for a in filled]).astype(
                np.int64, copy=False) if filled else EMPTY_I64)

    def parts(self) -> list[AppendedBatch]:
        """The APPENDED_BATCHes this frame carries, in order."""
        out = []
        lo = 0
        for rid, status, redirect, message, hi in zip(
                self.request_ids.tolist(), self.statuses.tolist(), self.redirect_to.tolist(),
                self.messages, self.part_ends.tolist(), strict=True):
            out.append(AppendedBatch(
                request_id=rid, status=E(status),
                statuses=self.record_statuses[lo:hi], lsns=self.lsns[lo:hi],
                timestamps=self.timestamps[lo:hi],
                redirect_to=None if redirect < 0 else redirect, message=message))
            lo = hi
        return out


@register
class Store(Message, eq=False):
    """Sequencer -> storage node: a batch of records of one log to store (one wave each).

    Per record i: ``lsns[i]``, ``timestamps[i]``, ``flags[i]`` (``RecordFlag``),
    ``waves[i]``, ``copysets[i]`` (node indices, padded with -1), payload
    ``payloads[payload_offsets[i]:payload_offsets[i+1]]`` and, when flagged CHECKSUM,
    ``checksums[i]`` (crc32c).  ``last_known_good`` is the sequencer's LNG (an LSN of
    ``epoch``): everything at or below it is fully replicated.  ``recovery_epoch`` is
    non-zero for copies stored by epoch recovery (the sealing sequencer's epoch).
    """

    TYPE = MessageType.STORE
    request_id: int
    log_id: int
    epoch: int
    last_known_good: int = 0
    recovery_epoch: int = 0
    lsns: U64Array = EMPTY_U64
    timestamps: I64Array = EMPTY_I64
    flags: U32Array = EMPTY_U32
    waves: U32Array = EMPTY_U32
    copysets: I16Matrix = EMPTY_I16_2D
    payload_offsets: U64Array = EMPTY_U64
    payloads: Payload = b""
    checksums: U32Array = EMPTY_U32

    def consistency_problem(self) -> str | None:
        return _check_stored_records(self, {"checksums": self.checksums}) \
            or _check_checksummed(self.flags, self.checksums, _CHECKSUM)


@register
class Stored(Message, eq=False):
    """Storage node -> sequencer, answer to STORE (same ``request_id``).

    ``statuses[i]`` (uint16 ``E`` values) is the outcome for ``lsns[i]``.  Empty arrays
    mean the whole batch had ``status`` (e.g. NOTFOUND, DISABLED, NOSPC).  With PREEMPTED,
    ``sealed_by`` is the node whose recovery sealed the epoch, when this node knows it
    (-1: unknown): the preempted sequencer sends the log's appends there.
    """

    TYPE = MessageType.STORED
    request_id: int
    log_id: int
    node_index: int
    status: E = E.OK
    lsns: U64Array = EMPTY_U64
    statuses: U16Array = EMPTY_U16
    sealed_by: int = -1

    def consistency_problem(self) -> str | None:
        return _check_columns(len(self.lsns), {"statuses": self.statuses})


def _part_offsets(offsets: np.ndarray, ends: np.ndarray
                  ) -> tuple[list[np.ndarray], list[int], list[int]]:
    """Per part of a multi-log frame (part k: records ``ends[k - 1]`` to ``ends[k]``):
    its payload offsets from 0, and its first and last byte in the frame's payloads.
    For many parts the offsets are worked out for all at once: per part, numpy's calls
    cost more than the work."""
    ends_l = ends.tolist()
    starts_l = [0, *ends_l[:-1]]
    if len(ends_l) < _MANY_PARTS:
        firsts = [int(offsets[lo]) for lo in starts_l]
        return [offsets[lo:hi + 1] - np.uint64(first) if first else offsets[lo:hi + 1]
                for lo, hi, first in zip(starts_l, ends_l, firsts, strict=True)], \
            firsts, [int(offsets[hi]) for hi in ends_l]
    firsts = offsets[starts_l].tolist()
    lasts = offsets[ends_l].tolist()
    ends_a = np.array(ends_l, np.intp)
    counts = ends_a - np.array(starts_l, np.intp)
    m = len(ends_l)
    # Part k's k-th offset row onwards: its record offsets, then its end offset.
    at = np.arange(len(offsets) + m - 1) - np.repeat(np.arange(m), counts + 1)
    rel = offsets[at] - np.repeat(offsets[starts_l], counts + 1)
    return [rel[lo + k:hi + k + 1] for k, (lo, hi) in enumerate(zip(starts_l, ends_l,
                                                                     strict=True))], \
        firsts, lasts


_MANY_PARTS = 16


def _check_parts(ends: np.ndarray, n: int, strict: bool) -> str | None:
    """``ends`` (part k's records end at ``ends[k]``) cover ``n`` records in order;
    ``strict``: every part has at least one record."""
    prev = 0
    for end in ends.tolist():
        if end < prev or (strict and end == prev):
            return "part_ends out of order" + (" (or an empty part)" if strict else "")
        prev = end
    if prev != n:
        return f"part_ends end at {prev}, the frame has {n} records"
    return None


@register
class StoreLogs(Message, eq=False):
    """Sequencer -> storage node: the STOREs of several logs in one frame.

    Part k stands for the STORE ``request_ids[k]`` of log ``log_ids[k]``, with that
    STORE's ``epochs[k]``, ``last_known_good[k]`` and ``recovery_epochs[k]``; its records
    are ``part_ends[k-1]`` (0 for the first part) to ``part_ends[k]``.  The record
    columns are STORE's, of all parts back to back (``payload_offsets`` index the one
    ``payloads`` buffer; ``checksums`` is empty unless a record is flagged CHECKSUM).  A
    log may appear in several parts (several epochs).  The storage node takes each part
    exactly as the STORE it stands for (``parts()``: the same checks per log, the same
    outcomes) and answers each by its request id, in a STORED or as a part of a
    STORED_LOGS.  Sent only to nodes whose HELLO_REPLY announced
    ``PeerFeature.STORE_LOGS``; older nodes get one STORE per log.
    """

    TYPE = MessageType.STORE_LOGS
    request_ids: U64Array = EMPTY_U64
    log_ids: U64Array = EMPTY_U64
    epochs: U64Array = EMPTY_U64
    last_known_good: U64Array = EMPTY_U64
    recovery_epochs: U64Array = EMPTY_U64
    part_ends: U32Array = EMPTY_U32
    lsns: U64Array = EMPTY_U64
    timestamps: I64Array = EMPTY_I64
    flags: U32Array = EMPTY_U32
    waves: U32Array = EMPTY_U32
    copysets: I16Matrix = EMPTY_I16_2D
    payload_offsets: U64Array = EMPTY_U64
    payloads: Payload = b""
    checksums: U32Array = EMPTY_U32

    def consistency_problem(self) -> str | None:
        return _check_columns(len(self.request_ids), {
            "log_ids": self.log_ids, "epochs": self.epochs,
            "last_known_good": self.last_known_good, "recovery_epochs": self.recovery_epochs,
            "part_ends": self.part_ends}) \
            or _check_parts(self.part_ends, len(self.lsns), strict=True) \
            or _check_stored_records(self, {"checksums": self.checksums}) \
            or _check_checksummed(self.flags, self.checksums, _CHECKSUM)

    @classmethod
    def of(cls, stores: list[Store]) -> "StoreLogs":
        """One frame of ``stores`` (each with at least one record)."""
        n = len(stores)
        counts = [len(s.lsns) for s in stores]
        ends = np.cumsum(np.array(counts, np.uint32), dtype=np.uint32)
        width = max(s.copysets.shape[1] for s in stores)
        copysets = [s.copysets if s.copysets.shape[1] == width else np.pad(
            s.copysets, ((0, 0), (0, width - s.copysets.shape[1])), constant_values=-1)
            for s in stores]
        sizes = [int(s.payload_offsets[-1]) for s in stores]
        bases = np.zeros(n, np.uint64)
        np.cumsum(np.array(sizes[:-1], np.uint64), out=bases[1:])
        offsets = np.empty(int(ends[-1]) + 1, np.uint64)
        offsets[0] = 0
        offsets[1:] = np.concatenate([s.payload_offsets[1:] for s in stores])
        offsets[1:] += np.repeat(bases, counts)
        if any(len(s.checksums) for s in stores):
            checksums = np.concatenate([
                s.checksums if len(s.checksums) else np.zeros(c, np.uint32)
                for s, c in zip(stores, counts, strict=True)])
        else:
            checksums = EMPTY_U32
        return cls(
            request_ids=np.fromiter((s.request_id for s in stores), np.uint64, n),
            log_ids=np.fromiter((s.log_id for s in stores), np.uint64, n),
            epochs=np.fromiter((s.epoch for s in stores), np.uint64, n),
            last_known_good=np.fromiter((s.last_known_good for s in stores), np.uint64, n),
            recovery_epochs=np.fromiter((s.recovery_epoch for s in stores), np.uint64, n),
            part_ends=ends,
            lsns=np.concatenate([s.lsns for s in stores]),
            timestamps=np.concatenate([s.timestamps for s in stores]),
            flags=np.concatenate([s.flags for s in stores]),
            waves=np.concatenate([s.waves for s in stores]),
            copysets=np.concatenate(copysets),
            payload_offsets=offsets,
            payloads=b"".join(s.payloads for s in stores),
            checksums=checksums)

    def parts(self) -> list[Store]:
        """The STOREs this frame carries, in order (their columns are views of it)."""
        out = []
        buf = memoryview(self.payloads)
        checked = len(self.checksums) > 0
        rels, firsts, lasts = _part_offsets(self.payload_offsets, self.part_ends)
        lo = 0
        for rid, log_id, epoch, lng, rec_epoch, hi, rel, first, last in zip(
                self.request_ids.tolist(), self.log_ids.tolist(), self.epochs.tolist(),
                self.last_known_good.tolist(), self.recovery_epochs.tolist(),
                self.part_ends.tolist(), rels, firsts, lasts, strict=True):
            out.append(Store(
                request_id=rid, log_id=log_id, epoch=epoch, last_known_good=lng,
                recovery_epoch=rec_epoch, lsns=self.lsns[lo:hi],
                timestamps=self.timestamps[lo:hi], flags=self.flags[lo:hi],
                waves=self.waves[lo:hi], copysets=self.copysets[lo:hi],
                payload_offsets=rel, payloads=buf[first:last],
                checksums=self.checksums[lo:hi] if checked else EMPTY_U32))
            lo = hi
        return out


@register
class StoredLogs(Message, eq=False):
    """Storage node -> sequencer: the answers to several STOREs (or parts of STORE_LOGS
    frames) in one frame.

    Part k is the STORED of request ``request_ids[k]`` (log ``log_ids[k]``): its
    ``statuses[k]`` and ``sealed_by[k]`` are STORED's ``status`` and ``sealed_by``, its
    per-record outcomes ``lsns`` / ``record_statuses`` from ``part_ends[k-1]`` (0 for the
    first) to ``part_ends[k]`` (none: the whole STORE had ``statuses[k]``).  ``parts()``
    gives the STOREDs back.  Sent only to a peer that sent STORE_LOGS on the connection.
    """

    TYPE = MessageType.STORED_LOGS
    node_index: int
    request_ids: U64Array = EMPTY_U64
    log_ids: U64Array = EMPTY_U64
    statuses: U16Array = EMPTY_U16
    sealed_by: I64Array = EMPTY_I64
    part_ends: U32Array = EMPTY_U32
    lsns: U64Array = EMPTY_U64
    record_statuses: U16Array = EMPTY_U16

    def consistency_problem(self) -> str | None:
        return _check_columns(len(self.request_ids), {
            "log_ids": self.log_ids, "statuses": self.statuses, "sealed_by": self.sealed_by,
            "part_ends": self.part_ends}) \
            or _check_columns(len(self.lsns), {"record_statuses": self.record_statuses}) \
            or _check_parts(self.part_ends, len(self.lsns), strict=False)

    def parts(self) -> list[Stored]:
        """The STOREDs this frame carries, in order."""
        out = []
        lo = 0
        node = self.node_index
        for rid, log_id, status, sealed_by, hi in zip(
                self.request_ids.tolist(), self.log_ids.tolist(), self.statuses.tolist(),
                self.sealed_by.tolist(), self.part_ends.tolist(), strict=True):
            if hi > lo:
                out.append(Stored(request_id=rid, log_id=log_id, node_index=node,
                                  status=E(status), lsns=self.lsns[lo:hi],
                                  statuses=self.record_statuses[lo:hi], sealed_by=sealed_by))
            else:
                out.append(Stored(request_id=rid, log_id=log_id, node_index=node,
                                  status=E(status), sealed_by=sealed_by))
            lo = hi
        return out

    @classmethod
    def of(cls, node_index: int, replies: list[Stored]) -> "StoredLogs":
        """One frame of ``replies`` (STOREDs of ``node_index``)."""
        n = len(replies)
        ends = np.empty(n, np.uint32)
        total = 0
        for k, r in enumerate(replies):
            total += len(r.lsns)
            ends[k] = total
        with_records = [r for r in replies if len(r.lsns)]
        return cls(
            node_index=node_index,
            request_ids=np.fromiter((r.request_id for r in replies), np.uint64, n),
            log_ids=np.fromiter((r.log_id for r in replies), np.uint64, n),
            statuses=np.fromiter((r.status for r in replies), np.uint16, n),
            sealed_by=np.fromiter((r.sealed_by for r in replies), np.int64, n),
            part_ends=ends,
            lsns=np.concatenate([r.lsns for r in with_records]).astype(np.uint64, copy=False)
            if with_records else EMPTY_U64,
            record_statuses=np.concatenate([r.statuses for r in with_records]).astype(
                np.uint16, copy=False) if with_records else EMPTY_U16)


@register
class Release(Message):
    """Sequencer -> storage nodes of the nodeset: records up to ``lsn`` are released.

    ``epoch`` is the releasing sequencer's: every epoch before it is clean (recovered),
    which a storage node that missed the recovery must catch up with (purge) before it
    serves what is released."""

    TYPE = MessageType.RELEASE
    log_id: int
    lsn: int
    epoch: int


@register
class ReleaseBatch(Message, eq=False):
    """Sequencer -> storage node: RELEASE for many logs at once (``lsns[i]`` and the
    sequencer's ``epochs[i]`` for ``log_ids[i]``)."""

    TYPE = MessageType.RELEASE_BATCH
    log_ids: U64Array = EMPTY_U64
    lsns: U64Array = EMPTY_U64
    epochs: U64Array = EMPTY_U64

    def consistency_problem(self) -> str | None:
        return _check_columns(len(self.log_ids), {"lsns": self.lsns, "epochs": self.epochs})


# ------------------------------------------------------------------------ read path


@register
class Start(Message):
    """Client -> every storage node of the nodeset: open (or rewind) a read stream.

    The node sends released records of ``[start_lsn, until_lsn]`` in LSN order, up to
    ``window_high``.  ``flags`` are ``StartFlag`` bits.  A rewind re-sends START with a
    higher ``filter_version``; replies carry the version they answer.  SCD uses
    ``known_down``, ``replication``, ``reorder_seed`` (None: no shuffle) and
    ``client_location`` (local SCD).
    """

    TYPE = MessageType.START
    read_stream_id: int
    log_id: int
    start_lsn: int
    until_lsn: int
    window_high: int
    flags: int = 0
    filter_version: int = 1
    known_down: list[int] = msgspec.field(default_factory=list)
    replication: int = 1
    reorder_seed: int | None = None
    client_location: str = ""


@register
class Started(Message):
    """Storage node -> client, answer to START.  ``last_released`` is the node's
    release pointer for the log."""

    TYPE = MessageType.STARTED
    read_stream_id: int
    filter_version: int
    status: E
    last_released: int = 0


@register
class Records(Message, eq=False):
    """Storage node -> client: a batch of records of a read stream, in LSN order.

    Per record i: ``lsns[i]``, ``timestamps[i]``, ``flags[i]`` (``RecordFlag``), payload
    ``payloads[payload_offsets[i]:payload_offsets[i+1]]`` (empty with NO_PAYLOAD),
    ``checksums[i]`` when flagged CHECKSUM.  ``waves`` and ``copysets`` are empty unless
    asked for (DIGEST).
    """

    TYPE = MessageType.RECORDS
    read_stream_id: int
    filter_version: int
    lsns: U64Array = EMPTY_U64
    timestamps: I64Array = EMPTY_I64
    flags: U32Array = EMPTY_U32
    payload_offsets: U64Array = EMPTY_U64
    payloads: Payload = b""
    checksums: U32Array = EMPTY_U32
    waves: U32Array = EMPTY_U32
    copysets: I16Matrix = EMPTY_I16_2D

    def consistency_problem(self) -> str | None:
        n = len(self.lsns)
        return _check_columns(
            n,
            {"timestamps": self.timestamps, "flags": self.flags},
            {"checksums": self.checksums, "waves": self.waves, "copysets": self.copysets},
        ) or _check_offsets(self.payload_offsets, n, self.payloads) \
            or _check_checksummed(self.flags, self.checksums, _CHECKSUM)


@register
class Gap(Message):
    """Storage node -> client: nothing to send in ``[lo, hi]`` (inclusive) for ``reason``."""

    TYPE = MessageType.GAP
    read_stream_id: int
    filter_version: int
    lo: int
    hi: int
    reason: GapReason = GapReason.NO_RECORDS


@register
class Window(Message):
    """Client -> storage node: the read stream's window slid; send up to ``window_high``."""

    TYPE = MessageType.WINDOW
    read_stream_id: int
    filter_version: int
    window_high: int


@register
class Stop(Message):
    """Client -> storage node: close the read stream."""

    TYPE = MessageType.STOP
    read_stream_id: int


# ------------------------------------------------------------------------ cluster


@register
class Heartbeat(Message):
    """Node -> every other node, periodically: I am up, and whom I believe alive.

    ``generation`` grows on each restart of the node, so stale heartbeats are told apart.
    """

    TYPE = MessageType.HEARTBEAT
    node_index: int
    generation: int
    time_ms: int
    alive: list[int] = msgspec.field(default_factory=list)
    config_version: int = 0


@register
class GetClusterView(Message):
    """Client -> any node: which nodes are alive and where sequencers may run."""

    TYPE = MessageType.GET_CLUSTER_VIEW
    request_id: int


class SequencerNode(msgspec.Struct, array_like=True):
    """A live sequencer node and its weight for rendezvous placement."""

    node_index: int
    weight: float = 1.0


@register
class ClusterView(Message):
    """Node -> client, answer to GET_CLUSTER_VIEW, from the node's failure detector."""

    TYPE = MessageType.CLUSTER_VIEW
    request_id: int
    status: E = E.OK
    node_index: int = -1
    config_version: int = 0
    alive: list[int] = msgspec.field(default_factory=list)
    sequencers: list[SequencerNode] = msgspec.field(default_factory=list)
    time_ms: int = 0
    #: For each node this one holds dead: for how long (ms), since it was last live here
    #: (``FailureDetector.dead_for``).
    dead_for_ms: dict[int, int] = msgspec.field(default_factory=dict)


# ------------------------------------------------------------------------ admin / client calls


@register
class GetTail(Message):
    """Client -> the log's sequencer node: tail of the log (also answers is_log_empty).
    ``no_redirect``: as ``AppendFlag.NO_REDIRECT`` on APPEND."""

    TYPE = MessageType.GET_TAIL
    request_id: int
    log_id: int
    no_redirect: bool = False


@register
class Tail(Message):
    """Sequencer node -> client: ``lsn`` is the last released LSN (LSN_INVALID if none)
    and ``timestamp`` that record's; ``redirect_to`` as in APPENDED."""

    TYPE = MessageType.TAIL
    request_id: int
    status: E
    log_id: int = 0
    lsn: int = 0
    timestamp: int = 0
    redirect_to: int | None = None


@register
class GetHead(Message):
    """Client -> storage nodes: the log's trim point."""

    TYPE = MessageType.GET_HEAD
    request_id: int
    log_id: int


@register
class Head(Message):
    """Storage node -> client: ``trim_point`` and the timestamp of its first record
    after it (0 if unknown)."""

    TYPE = MessageType.HEAD
    request_id: int
    status: E
    log_id: int = 0
    trim_point: int = 0
    timestamp: int = 0


@register
class Trim(Message):
    """Client -> every storage node of the log: trim everything at or below ``lsn``.

    A node that knows the log's release pointer refuses (TOOBIG) a trim past it unless
    ``force`` (which needs ``admin`` on the log besides ``trim``): a trim past the tail
    would swallow records not yet written."""

    TYPE = MessageType.TRIM
    request_id: int
    log_id: int
    lsn: int
    force: bool = False


@register
class Trimmed(Message):
    """Storage node -> client, answer to TRIM, with the node's trim point after it."""

    TYPE = MessageType.TRIMMED
    request_id: int
    status: E
    log_id: int = 0
    trim_point: int = 0


@register
class FindTime(Message):
    """Client -> storage nodes: where does ``timestamp`` (ms) fall in the log?"""

    TYPE = MessageType.FIND_TIME
    request_id: int
    log_id: int
    timestamp: int


@register
class FindTimeReply(Message):
    """Storage node -> client: ``lo`` is its last LSN with a timestamp below the target
    (LSN_INVALID if none), ``hi`` its first at or above it (LSN_MAX if none)."""

    TYPE = MessageType.FIND_TIME_REPLY
    request_id: int
    status: E
    log_id: int = 0
    lo: int = 0
    hi: int = 0


@register
class DataSize(Message):
    """Client -> storage nodes: bytes of payload with timestamps in [start_ms, end_ms]."""

    TYPE = MessageType.DATA_SIZE
    request_id: int
    log_id: int
    start_ms: int
    end_ms: int


@register
class DataSizeReply(Message):
    """Storage node -> client: ``size`` bytes stored on this node for the range."""

    TYPE = MessageType.DATA_SIZE_REPLY
    request_id: int
    status: E
    log_id: int = 0
    size: int = 0


@register
class Seal(Message):
    """Recovering sequencer -> storage nodes: refuse STOREs of epochs <= ``seal_epoch``.

    The node persists the seal before it answers.  ``epoch`` is the epoch in recovery
    whose state SEALED reports (0: ``seal_epoch``).
    """

    TYPE = MessageType.SEAL
    request_id: int
    log_id: int
    seal_epoch: int
    epoch: int = 0


@register
class Sealed(Message):
    """Storage node -> sequencer, answer to SEAL: what the node holds for recovery.

    ``last_known_good``: highest LNG the node saw for ``epoch`` (an LSN; one past the
    epoch when the node's release pointer is already beyond it); ``max_seen_lsn``:
    highest LSN of the epoch stored (``compose(epoch, ESN_MAX)`` when unknown).  With
    PREEMPTED, ``seal_epoch`` is the higher seal already in force.
    """

    TYPE = MessageType.SEALED
    request_id: int
    status: E
    log_id: int = 0
    node_index: int = -1
    seal_epoch: int = 0
    last_known_good: int = 0
    max_seen_lsn: int = 0
    epoch: int = 0


@register
class CheckSeal(Message):
    """Sequencer node -> storage node, before answering GET_TAIL: how far is ``log_id``
    sealed?  (``epoch``: the asking sequencer's.)  Changes nothing."""

    TYPE = MessageType.CHECK_SEAL
    request_id: int
    log_id: int
    epoch: int


@register
class SealState(Message):
    """Storage node -> sequencer node, answer to CHECK_SEAL: ``seal_epoch`` is the
    highest epoch of the log the node refuses STOREs of (0: none), ``sealed_by`` the
    node whose seal that is (-1: not known here)."""

    TYPE = MessageType.SEAL_STATE
    request_id: int
    status: E
    log_id: int = 0
    node_index: int = -1
    seal_epoch: int = 0
    sealed_by: int = -1


@register
class GetWriterBlobs(Message):
    """Sequencer node -> storage node, before it takes a retried BufferedWriter blob:
    the blobs held here of writers that name themselves, with timestamps of at least
    ``since_ms``.  (``epoch``: the asking sequencer's; the node first catches up with the
    recoveries of the epochs before it, as for a release.)  Changes nothing."""

    TYPE = MessageType.GET_WRITER_BLOBS
    request_id: int
    log_id: int
    epoch: int
    since_ms: int


@register
class WriterBlobs(Message):
    """Storage node -> sequencer node, answer to GET_WRITER_BLOBS: per blob, its LSN,
    writer (producer id), the writer's sequence number for it, its timestamp and the
    crc32c of its payload.  AGAIN:
    a purge is under way, ask again; REBUILDING: this node's copies are being rebuilt,
    its answer would miss some."""

    TYPE = MessageType.WRITER_BLOBS
    request_id: int
    status: E
    log_id: int = 0
    node_index: int = -1
    lsns: U64Array = EMPTY_U64
    producers: U64Array = EMPTY_U64
    seqs: U64Array = EMPTY_U64
    timestamps: I64Array = EMPTY_I64
    checksums: U32Array = EMPTY_U32

    def consistency_problem(self) -> str | None:
        return _check_columns(len(self.lsns), {"producers": self.producers,
                                               "seqs": self.seqs,
                                               "timestamps": self.timestamps,
                                               "checksums": self.checksums})


# ------------------------------------------------------------------------ checkpoints


@register
class GetLogSummaries(Message, eq=False):
    """Client -> every storage node: what the node knows of each log of ``log_ids``, in
    one answer (planning a read of many logs).  ``find_times``: timestamps (ms) to
    locate in every log, as FIND_TIME would; ``size_from_ms`` .. ``size_to_ms``: the
    window of the byte estimate, as DATA_SIZE's.  Changes nothing."""

    TYPE = MessageType.GET_LOG_SUMMARIES
    request_id: int
    log_ids: U64Array = EMPTY_U64
    find_times: I64Array = EMPTY_I64
    size_from_ms: int = 0
    size_to_ms: int = 2**62


@register
class LogSummaries(Message, eq=False):
    """Storage node -> client, answer to GET_LOG_SUMMARIES, one row per asked log in
    the asked order: ``statuses[i]`` (uint16 ``E``: OK, or NOTFOUND for a log not in the
    config), the node's ``trim_points[i]``, release pointer ``last_released[i]``,
    highest stored LSN ``local_tails[i]``, the timestamps of its oldest and newest
    records above the trim point as its partitions know them (``min_timestamps[i]``,
    ``max_timestamps[i]``; 0: none), and ``nbytes[i]``, bytes stored in the size
    window (DATA_SIZE's estimate).  For find time k of log i, ``find_lo[i * K + k]`` and
    ``find_hi[i * K + k]`` are FIND_TIME_REPLY's ``lo`` and ``hi`` (K: the number of
    find times asked).  A ``status`` other than OK (DISABLED, SHUTDOWN) answers for
    every log."""

    TYPE = MessageType.LOG_SUMMARIES
    request_id: int
    status: E
    node_index: int = -1
    log_ids: U64Array = EMPTY_U64
    statuses: U16Array = EMPTY_U16
    trim_points: U64Array = EMPTY_U64
    last_released: U64Array = EMPTY_U64
    local_tails: U64Array = EMPTY_U64
    min_timestamps: I64Array = EMPTY_I64
    max_timestamps: I64Array = EMPTY_I64
    nbytes: U64Array = EMPTY_U64
    find_lo: U64Array = EMPTY_U64
    find_hi: U64Array = EMPTY_U64

    def consistency_problem(self) -> str | None:
        n = len(self.log_ids)
        problem = _check_columns(n, {
            "statuses": self.statuses, "trim_points": self.trim_points,
            "last_released": self.last_released, "local_tails": self.local_tails,
            "min_timestamps": self.min_timestamps, "max_timestamps": self.max_timestamps,
            "nbytes": self.nbytes})
        if problem:
            return problem
        if len(self.find_lo) != len(self.find_hi) or (
                n and len(self.find_lo) % n) or (not n and len(self.find_lo)):
            return f"find_lo/find_hi ({len(self.find_lo)}, {len(self.find_hi)} entries) " \
                   f"are not a whole number of rows of {n} logs"
        return None


@register
class GetTails(Message, eq=False):
    """Client -> a sequencer node: GET_TAIL of each log of ``log_ids`` (those the
    client routes to this node), answered together once every log has its answer."""

    TYPE = MessageType.GET_TAILS
    request_id: int
    log_ids: U64Array = EMPTY_U64


@register
class Tails(Message, eq=False):
    """Sequencer node -> client, answer to GET_TAILS: per asked log, in order, what
    TAIL would say: ``statuses[i]`` (uint16 ``E``), ``lsns[i]`` and ``timestamps[i]``
    when OK, ``redirect_to[i]`` with NOSEQUENCER (-1: none)."""

    TYPE = MessageType.TAILS
    request_id: int
    status: E
    log_ids: U64Array = EMPTY_U64
    statuses: U16Array = EMPTY_U16
    lsns: U64Array = EMPTY_U64
    timestamps: I64Array = EMPTY_I64
    redirect_to: I64Array = EMPTY_I64

    def consistency_problem(self) -> str | None:
        return _check_columns(len(self.log_ids), {
            "statuses": self.statuses, "lsns": self.lsns, "timestamps": self.timestamps,
            "redirect_to": self.redirect_to})


@register
class GetRecordRows(Message, eq=False):
    """Client -> every storage node: the rows of the records held here in
    ``[los[i], his[i]]`` of each log ``log_ids[i]`` (a BufferedWriter blob holds many,
    read from its header; a plain record one; hole plugs and bridges none).  The node
    stops a log once the rows it listed exceed ``max_rows`` (0: no limit), and a reply
    once it read ``max_records`` records (0: the node's default).  Changes nothing."""

    TYPE = MessageType.GET_RECORD_ROWS
    request_id: int
    log_ids: U64Array = EMPTY_U64
    los: U64Array = EMPTY_U64
    his: U64Array = EMPTY_U64
    max_rows: int = 0
    max_records: int = 0

    def consistency_problem(self) -> str | None:
        return _check_columns(len(self.log_ids), {"los": self.los, "his": self.his})


@register
class RecordRows(Message, eq=False):
    """Storage node -> client, answer to GET_RECORD_ROWS: per asked log, in order,
    ``statuses[i]`` and ``next_lsns[i]``: the records held here in ``[los[i],
    next_lsns[i] - 1]`` are listed (``his[i] + 1``: the whole range).  The records, in
    LSN order per log: record j is ``lsns[j]`` of the asked log ``record_logs[j]`` (an
    index into ``log_ids``) with ``rows[j]`` rows."""

    TYPE = MessageType.RECORD_ROWS
    request_id: int
    status: E
    node_index: int = -1
    log_ids: U64Array = EMPTY_U64
    statuses: U16Array = EMPTY_U16
    next_lsns: U64Array = EMPTY_U64
    record_logs: U32Array = EMPTY_U32
    lsns: U64Array = EMPTY_U64
    rows: U32Array = EMPTY_U32

    def consistency_problem(self) -> str | None:
        n = len(self.log_ids)
        problem = _check_columns(n, {"statuses": self.statuses, "next_lsns": self.next_lsns}) \
            or _check_columns(len(self.lsns), {"record_logs": self.record_logs,
                                               "rows": self.rows})
        if problem:
            return problem
        if len(self.record_logs) and int(self.record_logs.max()) >= n:
            return "record_logs names a log that was not asked"
        return None


@register
class GetCheckpoints(Message):
    """Client -> any node: the checkpoints of the consumer ``name``."""

    TYPE = MessageType.GET_CHECKPOINTS
    request_id: int
    name: str


@register
class SetCheckpoints(Message, eq=False):
    """Client -> any node: set ``name``'s checkpoints of ``log_ids[i]`` to
    (``lsns[i]``, ``batch_offsets[i]``), atomically; answered with CHECKPOINTS."""

    TYPE = MessageType.SET_CHECKPOINTS
    request_id: int
    name: str
    log_ids: U64Array = EMPTY_U64
    lsns: U64Array = EMPTY_U64
    batch_offsets: U32Array = EMPTY_U32

    def consistency_problem(self) -> str | None:
        return _check_columns(len(self.log_ids),
                              {"lsns": self.lsns, "batch_offsets": self.batch_offsets})


@register
class Checkpoints(Message, eq=False):
    """Node -> client: every checkpoint of ``name`` (after the change, for SET)."""

    TYPE = MessageType.CHECKPOINTS
    request_id: int
    status: E
    name: str = ""
    log_ids: U64Array = EMPTY_U64
    lsns: U64Array = EMPTY_U64
    batch_offsets: U32Array = EMPTY_U32
    message: str = ""

    def consistency_problem(self) -> str | None:
        return _check_columns(len(self.log_ids),
                              {"lsns": self.lsns, "batch_offsets": self.batch_offsets})


@register
class GroupHeartbeat(Message, eq=False):
    """Client -> any node: ``member`` of consumer group ``group`` (which reads
    ``log_ids``) is alive for ``session_ms`` more, or leaves."""

    TYPE = MessageType.GROUP_HEARTBEAT
    request_id: int
    group: str
    member: str
    log_ids: U64Array = EMPTY_U64
    session_ms: int = 10_000
    leave: bool = False


@register
class GroupAssignment(Message, eq=False):
    """Node -> client: the logs ``member`` reads now, in the group's ``generation``."""

    TYPE = MessageType.GROUP_ASSIGNMENT
    request_id: int
    status: E
    generation: int = 0
    log_ids: U64Array = EMPTY_U64
    message: str = ""
@register
class GetRecordAvailability(Message):
    """Checker -> storage node: which records of ``log_id`` in ``[lo, hi]`` do you hold?

    The node answers from its copyset index (no payload is read), at most
    ``max_records`` records per reply (0: the node's default), within its records/s
    budget for checks (the ``checker_records_per_second`` setting).
    """

    TYPE = MessageType.GET_RECORD_AVAILABILITY
    request_id: int
    log_id: int
    lo: int
    hi: int
    max_records: int = 0
    compress: bool = True


@register
class RecordAvailability(Message, eq=False):
    """Storage node -> checker, answer to GET_RECORD_AVAILABILITY.

    ``availability`` is ``ldcore.availability.encode`` of the LSNs the node stores in
    ``[lo, next_lsn - 1]`` above its trim point (BP-34's condensed format, byte for byte).
    Their copysets travel as runs: run ``i`` covers the next ``run_lengths[i]`` stored
    LSNs (in LSN order), which all have copyset ``copysets[run_copysets[i]]`` (a row of
    the distinct copysets, node indices padded with -1).  ``done`` is true once the
    reply reaches ``hi``; otherwise ask again from ``next_lsn``.  ``trim_point`` and
    ``last_released`` are the node's for the log.  When asked to ``compress`` (and the
    page is not empty), the availability travels as ``availability_packed``
    (``checker.wire.pack_availability``, which unpacks to the exact BP-34 bytes) and the
    run arrays as ``runs_zstd`` (``checker.wire.pack_runs``: ``n_runs`` uint32 lengths,
    then the copyset indices ``index_width`` bytes each, zstd).
    """

    TYPE = MessageType.RECORD_AVAILABILITY
    request_id: int
    status: E
    log_id: int = 0
    node_index: int = -1
    lo: int = 0
    next_lsn: int = 0
    done: bool = True
    trim_point: int = 0
    last_released: int = 0
    availability: Payload = b""
    run_lengths: U32Array = EMPTY_U32
    run_copysets: U32Array = EMPTY_U32
    copysets: I16Matrix = EMPTY_I16_2D
    runs_zstd: Payload = b""
    n_runs: int = 0
    index_width: int = 0
    availability_packed: Payload = b""

    def consistency_problem(self) -> str | None:
        return _check_columns(len(self.run_lengths), {"run_copysets": self.run_copysets})


@register
class GetPartitions(Message):
    """Admin tool -> storage node: describe your LogsDB time partitions."""

    TYPE = MessageType.GET_PARTITIONS
    request_id: int


@register
class PartitionList(Message, eq=False):
    """Storage node -> admin tool, answer to GET_PARTITIONS: one entry per partition,
    oldest first: ``ids[i]``, its start time ``start_ms[i]``, the timestamps of its records
    (``min_ts[i]`` .. ``max_ts[i]``), how many records and bytes it holds."""

    TYPE = MessageType.PARTITION_LIST
    request_id: int
    status: E
    node_index: int = -1
    ids: I64Array = EMPTY_I64
    start_ms: I64Array = EMPTY_I64
    min_ts: I64Array = EMPTY_I64
    max_ts: I64Array = EMPTY_I64
    records: I64Array = EMPTY_I64
    nbytes: I64Array = EMPTY_I64

    def consistency_problem(self) -> str | None:
        return _check_columns(len(self.ids), {
            "start_ms": self.start_ms, "min_ts": self.min_ts, "max_ts": self.max_ts,
            "records": self.records, "nbytes": self.nbytes})


# ------------------------------------------------------------------------ rebuilding


@register
class RebuildStore(Message, eq=False):
    """Donor node -> storage node: copies of records of one log made by rebuilding.

    The columns are those of STORE; ``copysets[i]`` is record i's amended copyset.  The
    receiver writes each record as given, replacing a copy it already holds unless its
    own copy is newer.  (Copies that survive get REBUILD_AMEND instead.)
    """

    TYPE = MessageType.REBUILD_STORE
    request_id: int
    log_id: int
    set_version: int
    lsns: U64Array = EMPTY_U64
    timestamps: I64Array = EMPTY_I64
    flags: U32Array = EMPTY_U32
    waves: U32Array = EMPTY_U32
    copysets: I16Matrix = EMPTY_I16_2D
    payload_offsets: U64Array = EMPTY_U64
    payloads: Payload = b""

    def consistency_problem(self) -> str | None:
        return _check_stored_records(self)


@register
class RebuildAmend(Message, eq=False):
    """Donor node -> storage node: new flags and copysets for copies of one log the
    receiver already holds; no payloads.

    Record i's copy is amended to ``flags[i]`` and ``copysets[i]`` where it is the copy
    the donor holds (wave ``waves[i]``, written by recovery or not as ``flags[i]`` says).
    A copy that is newer is left alone; LSNs the receiver lacks or holds in an older
    version come back in REBUILD_STORED's ``need_copies``: they need a full copy.
    """

    TYPE = MessageType.REBUILD_AMEND
    request_id: int
    log_id: int
    set_version: int
    lsns: U64Array = EMPTY_U64
    flags: U32Array = EMPTY_U32
    waves: U32Array = EMPTY_U32
    copysets: I16Matrix = EMPTY_I16_2D

    def consistency_problem(self) -> str | None:
        return _check_columns(len(self.lsns), {"flags": self.flags, "waves": self.waves,
                                               "copysets": self.copysets})


@register
class RebuildStored(Message, eq=False):
    """Storage node -> donor, answer to REBUILD_STORE or REBUILD_AMEND (same
    ``request_id``): OK once the copies are written or amended, or why not (NOTFOUND,
    DISABLED, REBUILDING: the receiver is in the rebuilding set itself, SHUTDOWN, ...).
    ``need_copies``: the LSNs of a REBUILD_AMEND the receiver needs full copies of."""

    TYPE = MessageType.REBUILD_STORED
    request_id: int
    status: E
    node_index: int = -1
    need_copies: U64Array = EMPTY_U64


# ------------------------------------------------------------------------ admin tables
# Replies that carry a table: after request_id, status and node_index every field is a
# column, all of one length (``columns``).


@register
class GetReadStreams(Message):
    """Admin tool -> storage node: describe the read streams open on you."""

    TYPE = MessageType.GET_READ_STREAMS
    request_id: int


@register
class ReadStreamList(Message, eq=False):
    """Storage node -> admin tool, answer to GET_READ_STREAMS: one entry per open stream.

    Per stream: its id on the connection and the log; the connection (``conn_id``,
    ``peer``: "client" or "N<index>", ``address``); the range asked for (``start_lsn`` ..
    ``until_lsn``), the next LSN the node looks at (``next_lsn``), everything up to
    ``delivered_to`` sent or reported as a gap, the flow-control ``window_high`` and the
    log's ``last_released`` on the node; ``filter_version`` (grows with each rewind),
    ``mode`` (scd, local_scd, all_send_all, digest), ``state`` (what it waits for: ready,
    window, release, done) and SCD's ``known_down`` nodes; records, payload bytes and gaps
    sent; when it opened (``started_ms``) and how long ago (``age_ms``).
    """

    TYPE = MessageType.READ_STREAM_LIST
    request_id: int
    status: E
    node_index: int = -1
    read_stream_id: U64Array = EMPTY_U64
    log_id: U64Array = EMPTY_U64
    conn_id: I64Array = EMPTY_I64
    peer: list[str] = msgspec.field(default_factory=list)
    address: list[str] = msgspec.field(default_factory=list)
    start_lsn: U64Array = EMPTY_U64
    until_lsn: U64Array = EMPTY_U64
    next_lsn: U64Array = EMPTY_U64
    delivered_to: U64Array = EMPTY_U64
    window_high: U64Array = EMPTY_U64
    last_released: U64Array = EMPTY_U64
    filter_version: U64Array = EMPTY_U64
    mode: list[str] = msgspec.field(default_factory=list)
    state: list[str] = msgspec.field(default_factory=list)
    known_down: list[list[int]] = msgspec.field(default_factory=list)
    records_sent: U64Array = EMPTY_U64
    bytes_sent: U64Array = EMPTY_U64
    gaps_sent: U64Array = EMPTY_U64
    started_ms: I64Array = EMPTY_I64
    age_ms: I64Array = EMPTY_I64

    def consistency_problem(self) -> str | None:
        return _check_table(self)


@register
class GetRecoveries(Message):
    """Admin tool -> any node: describe the epoch recoveries you run and recently ran."""

    TYPE = MessageType.GET_RECOVERIES
    request_id: int


@register
class RecoveryList(Message, eq=False):
    """Node -> admin tool, answer to GET_RECOVERIES: one entry per epoch of each epoch
    recovery the node's sequencers run now or finished lately (the oldest first).

    Per entry: ``log_id``, the ``epoch`` recovered and the ``seal_epoch`` (the recovering
    sequencer's epoch - 1); ``attempt`` (1 for the first); ``state`` (sealing, digesting,
    mutating, clean, updating; done or failed once over) and, once over, ``status`` (an
    ``E`` name) and ``message``; the epoch's ``nodeset``, the nodes that answered SEAL
    (``sealed``) and finished their digest (``digested``); the last known good LSN found
    (``lng``), the records the mutation re-replicates, its hole plugs, its bridge record's
    LSN and the decisions not yet stored (``pending``); ``last_clean_epoch`` as recorded
    in the epoch store (0 until then); when it started (``started_ms``) and how long it
    ran (``duration_ms``, so far while it runs).
    """

    TYPE = MessageType.RECOVERY_LIST
    request_id: int
    status: E
    node_index: int = -1
    log_id: U64Array = EMPTY_U64
    epoch: U64Array = EMPTY_U64
    seal_epoch: U64Array = EMPTY_U64
    attempt: U64Array = EMPTY_U64
    state: list[str] = msgspec.field(default_factory=list)
    outcome: list[str] = msgspec.field(default_factory=list)
    message: list[str] = msgspec.field(default_factory=list)
    nodeset: list[list[int]] = msgspec.field(default_factory=list)
    sealed: list[list[int]] = msgspec.field(default_factory=list)
    digested: list[list[int]] = msgspec.field(default_factory=list)
    lng: U64Array = EMPTY_U64
    records: U64Array = EMPTY_U64
    holes: U64Array = EMPTY_U64
    bridge: U64Array = EMPTY_U64
    pending: U64Array = EMPTY_U64
    last_clean_epoch: U64Array = EMPTY_U64
    started_ms: I64Array = EMPTY_I64
    duration_ms: I64Array = EMPTY_I64

    def consistency_problem(self) -> str | None:
        return _check_table(self)


# ------------------------------------------------------------------------ metadata gateway

#: What GET_METADATA may ask for (``kind``), and what the reply's ``body`` holds:
#: ``log_states``: {log id: the log's epoch state as a dict, or None} for ``log_ids``;
#: ``shard_statuses``: {"statuses": {node: status}, "since_ms": {node: ms}} (nodes not
#: fully authoritative, and since when); ``logs_config``: {"version", "groups"};
#: ``events``: the event log from version ``since`` on; ``rebuilding_set``: its fields;
#: ``logs``: the ids of every configured log the epoch store knows.
METADATA_KINDS = frozenset({"log_states", "shard_statuses", "logs_config", "events",
                            "rebuilding_set", "logs"})
#: What ADMIN_REQUEST may do (``action``).
ADMIN_ACTIONS = frozenset({"create_log_group", "update_log_group", "remove_log_group",
                           "drain", "mark_unrecoverable", "undrain", "abort_rebuilding"})


@register
class GetMetadata(Message, eq=False):
    """Client -> any node: read the cluster's metadata (see ``METADATA_KINDS``).  Clients
    never open the epoch store: a node reads it for them."""

    TYPE = MessageType.GET_METADATA
    request_id: int
    kind: str
    log_ids: U64Array = EMPTY_U64
    since: int = 0


@register
class MetadataReply(Message):
    """Node -> client: what GET_METADATA asked for, as plain msgpack values; or the outcome
    of an ADMIN_REQUEST (``body``: {"version": ...} of the LogsConfig after a log group
    change, of the event after a drain)."""

    TYPE = MessageType.METADATA_REPLY
    request_id: int
    status: E
    message: str = ""
    body: Any = None


@register
class AdminRequest(Message):
    """Client -> any node: change the cluster's metadata (``ADMIN_ACTIONS``); the node
    checks the ``admin`` ACL, then writes the epoch store, and answers METADATA_REPLY.

    ``name``, ``lo``, ``hi`` and ``attributes`` describe a log group (``attributes`` of an
    update are the changes, None meaning "back to the default"); ``node`` is the node a
    drain or mark-unrecoverable is about."""

    TYPE = MessageType.ADMIN_REQUEST
    request_id: int
    action: str
    name: str = ""
    lo: int = 0
    hi: int = 0
    attributes: dict[str, Any] = msgspec.field(default_factory=dict)
    node: int = -1


#: The fields of a table reply that are not columns.
TABLE_HEADER = ("request_id", "status", "node_index")


def table_columns(cls: type[Message]) -> tuple[str, ...]:
    """The column fields of a table reply (READ_STREAM_LIST, RECOVERY_LIST), in order."""
    return tuple(f for f in cls.__struct_fields__ if f not in TABLE_HEADER)


def table_reply(cls: type[Message], request_id: int, node_index: int,
                rows: Iterable[Any]) -> Any:
    """An OK table reply of type ``cls`` from ``rows`` (named tuples whose fields include
    the columns): numeric columns become arrays of the field's dtype, tuples lists."""
    rows = list(rows)
    hints = typing.get_type_hints(cls, include_extras=True)
    cols: dict[str, Any] = {}
    for name in table_columns(cls):
        values = [getattr(r, name) for r in rows]
        spec = next((m for m in getattr(hints[name], "__metadata__", ())
                     if isinstance(m, ArraySpec)), None)
        cols[name] = np.asarray(values, spec.dtype) if spec is not None else [
            list(v) if isinstance(v, tuple) else v for v in values]
    return cls(request_id=request_id, status=E.OK, node_index=node_index, **cols)


def _check_table(msg: Message) -> str | None:
    names = table_columns(type(msg))
    n = len(getattr(msg, names[0]))
    for name in names[1:]:
        if len(getattr(msg, name)) != n:
            return f"{name} has {len(getattr(msg, name))} entries, expected {n}"
    return None


ALL_MESSAGES: tuple[type[Message], ...] = tuple(
    cls for cls in Message.__subclasses__() if hasattr(cls, "TYPE")
)
