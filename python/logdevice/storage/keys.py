"""LogsDB's on-disk formats, encoded and decoded a whole batch at a time with numpy.

Keys are big-endian so RocksDB's byte order is (log, LSN) order; values are little-endian.

Data record, in a partition column family::

    key   = b"d" | log id u64 BE | lsn u64 BE                               (17 bytes)
    value = head | payload
    head  = 0: u16 head length H = 24 + 2k   2: u8 format (1)   3: u8 k (copyset size)
            4: i64 timestamp (ms)   12: u32 flags   16: u32 wave   20: u32 crc32c(payload)
           24: u16 x k copyset (node indices)

The head length leads the value so the binding's bulk reader can split heads (decoded
here) from payloads (handed out as one contiguous buffer) without knowing the format.

Copyset index (CSI) entries, in the same partition column family, one per record::

    key   = b"C" | log id u64 BE | lsn u64 BE | type u8 (CSI_SINGLE)        (18 bytes)
    value = u32 flags | u8 k | u16 x k copyset

or one per write batch ("range" entries; ``B`` keys, never overlapping each other)::

    key   = b"B" | log id u64 BE | first lsn u64 BE | type u8               (18 bytes)
    CSI_BLOCK value = u64 last lsn | u32 flags | u8 k | u16 x k copyset
        every LSN in [first, last] has this flag word and copyset (sticky copysets)
    CSI_RUN value   = u64 last lsn | u32 count | u8 width w |
                      count x (u64 lsn | u32 flags | u8 k | u16 x w copyset)
        exactly the listed LSNs, each with its own flags and copyset

Range entries are only written over LSN ranges the log has nowhere yet; a record written
again later gets a single entry, and a single entry wins over a range entry.  Keeping the
two kinds under different prefixes lets a reader find the one range entry that may cover
an LSN with a single ``seek_for_prev``.

Amendment entries, in the partition holding the record, at most one per record::

    key   = b"a" | log id u64 BE | lsn u64 BE                               (17 bytes)
    value = u32 flags | u32 wave | u8 k | u16 x k copyset

An amendment changes the flags and copyset of a copy already held (rebuilding amends the
copyset of the copies that survive, a drain flags a moved copy DRAINED) without writing
its payload again: RocksDB cannot rewrite part of a value, and writing the whole value
again would cost as much as the copy itself.  It wins over the flags and copyset of the
record head, which stays as written; it names the copy it amends (its wave and whether
recovery wrote it) and readers apply it to that copy only.  The amendment and a single CSI
entry with the same flags and copyset are written together, after checking (under the
write lock) that the copy held is the one named.  Writing the record again deletes its
amendment in the same batch (the newest write wins, whichever kind it is), as do deletes
of the record.  Amendments are not counted in the partition directory's bytes.

Writer entries, in the partition holding the record, one per BufferedWriter blob that
names its writer (an idempotent producer, see :mod:`.producers`)::

    key   = b"w" | log id u64 BE | lsn u64 BE                               (17 bytes)
    value = u64 producer id | u64 blob sequence number | i64 timestamp (ms)

An entry may outlive its record (a recovery hole plug or a purge overwrote or deleted the
copy): readers of the entries check the record is still the blob.

Metadata column family (``meta``), values little-endian::

    b"t" | log  -> trim point        b"m" | log -> last released
    b"s" | log  -> seal epoch        b"c" | log -> last clean epoch          (u64)
    b"P" | pid        -> partition: start ms, min ts, max ts (i64), records, bytes (u64)
    b"p" | pid | log  -> the log in the partition: min lsn, max lsn (u64),
                         min ts, max ts (i64), records, bytes (u64)
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np

from ldcore import storefmt
from logdevice.errors import E, error_for

DATA = b"d"
AMEND = b"a"
AMEND_END = bytes([AMEND[0] + 1])  # exclusive upper bound of every amendment key
WRITER = b"w"
CSI = b"C"
CSI_RANGE = b"B"
CSI_SINGLE = 0
CSI_BLOCK = 1
CSI_RUN = 2
DATA_KEY_LEN = 17
CSI_KEY_LEN = 18
HEAD_FIXED = 24
FORMAT = 1
MAX_NODE = 32767  # copysets come back as int16
MAX_COPYSET = 255

META_TRIM = b"t"
META_RELEASED = b"m"
META_SEAL = b"s"
META_CLEAN = b"c"
META_PARTITION = b"P"
META_DIR = b"p"
META_KEY_LEN = 9  # a per-log metadata key: its kind, then the log id

_U64BE = struct.Struct(">Q")
_U64LE = struct.Struct("<Q")
PARTITION_VALUE = struct.Struct("<qqqQQ")  # start, min ts, max ts, records, bytes
DIR_VALUE = struct.Struct("<QQqqQQ")  # min lsn, max lsn, min ts, max ts, records, bytes


# --------------------------------------------------------------------------- keys


def check_log_id(log_id) -> int:
    """``log_id`` as an int, INVALID_PARAM unless it is a log id keys can hold (1 ..
    2**64 - 1)."""
    log_id = int(log_id)
    if not 0 < log_id < 2**64:
        raise error_for(E.INVALID_PARAM, f"logsdb: invalid log id {log_id}")
    return log_id


def data_key(log_id: int, lsn: int) -> bytes:
    return DATA + _U64BE.pack(log_id) + _U64BE.pack(lsn)


def amend_key(log_id: int, lsn: int) -> bytes:
    return AMEND + _U64BE.pack(log_id) + _U64BE.pack(lsn)


def writer_key(log_id: int, lsn: int) -> bytes:
    return WRITER + _U64BE.pack(log_id) + _U64BE.pack(lsn)


#: A writer entry's value: producer id, blob sequence number, timestamp.
WRITER_VALUE = struct.Struct("<QQq")


def csi_key(log_id: int, lsn: int, kind: int = CSI_SINGLE) -> bytes:
    return CSI + _U64BE.pack(log_id) + _U64BE.pack(lsn) + bytes((kind,))


def csi_range_key(log_id: int, first: int, kind: int) -> bytes:
    return CSI_RANGE + _U64BE.pack(log_id) + _U64BE.pack(first) + bytes((kind,))


def u64be(value: int) -> bytes:
    """8 bytes, big-endian: how keys hold log ids and LSNs."""
    return _U64BE.pack(value)


def log_prefix(prefix: bytes, log_id: int) -> bytes:
    return prefix + _U64BE.pack(log_id)


def meta_key(kind: bytes, log_id: int) -> bytes:
    return kind + _U64BE.pack(log_id)


def meta_keys(kind: bytes, log_ids: np.ndarray) -> np.ndarray:
    """``meta_key(kind, log_id)`` of each of ``log_ids`` (uint64), back to back."""
    out = np.empty((len(log_ids), META_KEY_LEN), np.uint8)
    out[:, 0] = kind[0]
    out[:, 1:] = _be_bytes(log_ids)
    return out.reshape(-1)


def partition_key(pid: int) -> bytes:
    return META_PARTITION + _U64BE.pack(pid)


def dir_prefix(pid: int) -> bytes:
    return META_DIR + _U64BE.pack(pid)


def dir_key(pid: int, log_id: int) -> bytes:
    return META_DIR + _U64BE.pack(pid) + _U64BE.pack(log_id)


def u64(value: int) -> bytes:
    return _U64LE.pack(value)


def read_u64(data: bytes) -> int:
    return _U64LE.unpack(data)[0]


def read_be(data, at: int) -> int:
    return _U64BE.unpack_from(data, at)[0]


def fixed_offsets(n: int, width: int) -> np.ndarray:
    return np.arange(n + 1, dtype=np.uint64) * np.uint64(width)


def _be_bytes(values: np.ndarray) -> np.ndarray:
    """(n, 8) uint8: each uint64 big-endian."""
    return values.astype(">u8").view(np.uint8).reshape(-1, 8)


def data_keys(log_id: int, lsns: np.ndarray) -> np.ndarray:
    """Keys of records ``lsns`` of ``log_id``, back to back (17 bytes each)."""
    n = len(lsns)
    out = np.empty((n, DATA_KEY_LEN), np.uint8)
    out[:, 0] = DATA[0]
    out[:, 1:9] = np.frombuffer(_U64BE.pack(log_id), np.uint8)
    out[:, 9:17] = _be_bytes(lsns)
    return out.reshape(-1)


def amend_keys(log_id: int, lsns: np.ndarray) -> np.ndarray:
    """Keys of the amendments of records ``lsns`` of ``log_id``, back to back (17 bytes
    each: data keys under the amendment prefix)."""
    out = data_keys(log_id, lsns).reshape(-1, DATA_KEY_LEN)
    out[:, 0] = AMEND[0]
    return out.reshape(-1)


def csi_keys(log_id: int, lsns: np.ndarray, kinds) -> np.ndarray:
    n = len(lsns)
    out = np.empty((n, CSI_KEY_LEN), np.uint8)
    out[:, 0] = CSI[0]
    out[:, 1:9] = np.frombuffer(_U64BE.pack(log_id), np.uint8)
    out[:, 9:17] = _be_bytes(lsns)
    out[:, 17] = kinds
    return out.reshape(-1)


def lsns_of_keys(keys: np.ndarray, n: int, width: int) -> np.ndarray:
    """The LSN field (bytes 9..17) of n fixed-width keys."""
    return storefmt.key_lsns(keys, n, width)


# --------------------------------------------------------------------------- copysets


def normalize_copysets(copysets, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Left-packed copysets as (n, K) int64 with -1 padding, and each row's size."""
    cs = np.asarray(copysets)
    if cs.ndim == 1 and n and cs.size == 0:
        cs = cs.reshape(n, 0)
    if cs.ndim != 2 or cs.shape[0] != n:
        raise error_for(E.INVALID_PARAM, f"copysets must be 2-D with {n} rows, got {cs.shape}")
    if cs.shape[1] > MAX_COPYSET:
        raise error_for(E.INVALID_PARAM, f"copysets wider than {MAX_COPYSET}")
    if cs.dtype.kind not in "iu":
        raise error_for(E.INVALID_PARAM, f"copysets must be integers, got {cs.dtype}")
    cs = cs.astype(np.int64, copy=False)
    valid = cs >= 0
    if cs.size and int(cs.max(initial=0)) > MAX_NODE:
        raise error_for(E.INVALID_PARAM, f"node index above {MAX_NODE} in copysets")
    counts = valid.sum(axis=1)
    if not valid.all():
        order = np.argsort(~valid, axis=1, kind="stable")
        cs = np.where(np.arange(cs.shape[1]) < counts[:, None],
                      np.take_along_axis(cs, order, axis=1), -1)
    return cs, counts


def _pack_rows(full: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ``full`` cut to ``lengths`` and joined, with n + 1 offsets."""
    n, width = full.shape
    offsets = np.zeros(n + 1, np.uint64)
    np.cumsum(lengths, out=offsets[1:])
    if n == 0 or bool(np.all(lengths == width)):
        return full.reshape(-1), offsets
    return full[np.arange(width) < lengths[:, None]], offsets


def _copyset_bytes(cs: np.ndarray) -> np.ndarray:
    return np.where(cs >= 0, cs, 0).astype("<u2").view(np.uint8).reshape(len(cs), -1)


# --------------------------------------------------------------------------- record heads


def encode_heads(timestamps, flags, waves, checksums, cs, counts) -> tuple[np.ndarray, np.ndarray]:
    """Heads of n records (see the module docstring), back to back, and n + 1 offsets."""
    n, width = cs.shape
    full = np.zeros((n, HEAD_FIXED + 2 * width), np.uint8)
    lengths = HEAD_FIXED + 2 * counts
    full[:, 0:2] = lengths.astype("<u2").view(np.uint8).reshape(n, 2)
    full[:, 2] = FORMAT
    full[:, 3] = counts
    full[:, 4:12] = np.asarray(timestamps).astype("<i8").view(np.uint8).reshape(n, 8)
    full[:, 12:16] = np.asarray(flags).astype("<u4").view(np.uint8).reshape(n, 4)
    full[:, 16:20] = np.asarray(waves).astype("<u4").view(np.uint8).reshape(n, 4)
    full[:, 20:24] = np.asarray(checksums).astype("<u4").view(np.uint8).reshape(n, 4)
    full[:, HEAD_FIXED:] = _copyset_bytes(cs)
    return _pack_rows(full, lengths)


def _uniform(buf: np.ndarray, offsets: np.ndarray) -> np.ndarray | None:
    """The rows as an (n, length) view when they all have the same length, else None."""
    n = len(offsets) - 1
    if n <= 0:
        return None
    length = int(offsets[1] - offsets[0])
    o0 = int(offsets[0])
    if int(offsets[-1]) - o0 != n * length:
        return None
    if not bool(np.all(offsets[1:] - offsets[:-1] == length)):
        return None
    return buf[o0 : o0 + n * length].reshape(n, length)


def _rows(buf: np.ndarray, offsets: np.ndarray, width: int) -> np.ndarray:
    """(n, width) uint8: the first ``width`` bytes of each row (past-the-end reads clipped)."""
    n = len(offsets) - 1
    if n <= 0:
        return np.zeros((0, width), np.uint8)
    rows = _uniform(buf, offsets)
    if rows is not None and rows.shape[1] >= width:
        return rows[:, :width]
    if len(buf) == 0:
        return np.zeros((n, width), np.uint8)
    idx = offsets[:-1, None] + np.arange(width, dtype=np.uint64)
    return buf[np.minimum(idx, len(buf) - 1)]


def _field(rows: np.ndarray, at: int, dtype: str) -> np.ndarray:
    size = np.dtype(dtype).itemsize
    cols = rows[:, at : at + size]
    if cols.strides[1] != 1:
        cols = np.ascontiguousarray(cols)
    return cols.view(dtype)[:, 0]  # a strided view; callers' astype makes the one copy


def _decode_copysets(buf, starts, counts) -> np.ndarray:
    n = len(starts)
    kmax = int(counts.max(initial=0))
    if n == 0 or kmax == 0:
        return np.full((n, kmax), -1, np.int16)
    idx = starts[:, None] + np.arange(2 * kmax, dtype=np.uint64)
    raw = buf[np.minimum(idx, len(buf) - 1)]
    cs = np.ascontiguousarray(raw).view("<u2").astype(np.int16)
    cs[np.arange(kmax) >= counts[:, None]] = -1
    return cs


def decode_heads(heads: np.ndarray, offsets: np.ndarray):
    """(timestamps i64, flags u32, waves u32, checksums u32, copysets int16 2-D, padded
    with -1); CHECKSUM_MISMATCH for a head of another format or cut short (corrupt)."""
    try:
        return storefmt.decode_heads(heads, offsets)
    except storefmt.RecordFormatError as exc:
        raise error_for(E.CHECKSUM_MISMATCH, f"logsdb: {exc} (corrupt record?)") from None


# --------------------------------------------------------------------------- CSI values


def encode_csi_values(flags, cs, counts) -> tuple[np.ndarray, np.ndarray]:
    """Values of single CSI entries: u32 flags | u8 k | u16 x k."""
    n, width = cs.shape
    full = np.zeros((n, 5 + 2 * width), np.uint8)
    full[:, 0:4] = np.asarray(flags).astype("<u4").view(np.uint8).reshape(n, 4)
    full[:, 4] = counts
    full[:, 5:] = _copyset_bytes(cs)
    return _pack_rows(full, 5 + 2 * counts)


def decode_csi(keys: np.ndarray, values: np.ndarray, value_offsets: np.ndarray):
    """Single CSI entries -> (lsns u64, flags u32, copysets int16 2-D)."""
    n = len(value_offsets) - 1
    rows = _rows(values, value_offsets, 5)
    counts = rows[:, 4].astype(np.int64)
    return (
        lsns_of_keys(keys, n, CSI_KEY_LEN),
        _field(rows, 0, "<u4").astype(np.uint32),
        _decode_copysets(values, value_offsets[:-1] + np.uint64(5), counts),
    )


def encode_amends(flags, waves, cs, counts) -> tuple[np.ndarray, np.ndarray]:
    """Values of amendment entries: u32 flags | u32 wave | u8 k | u16 x k."""
    n, width = cs.shape
    full = np.zeros((n, 9 + 2 * width), np.uint8)
    full[:, 0:4] = np.asarray(flags).astype("<u4").view(np.uint8).reshape(n, 4)
    full[:, 4:8] = np.asarray(waves).astype("<u4").view(np.uint8).reshape(n, 4)
    full[:, 8] = counts
    full[:, 9:] = _copyset_bytes(cs)
    return _pack_rows(full, 9 + 2 * counts)


def decode_amends(keys: np.ndarray, values: np.ndarray, value_offsets: np.ndarray):
    """Amendment entries -> (lsns u64, flags u32, waves u32, copysets int16 2-D)."""
    n = len(value_offsets) - 1
    rows = _rows(values, value_offsets, 9)
    counts = rows[:, 8].astype(np.int64)
    return (
        lsns_of_keys(keys, n, DATA_KEY_LEN),
        _field(rows, 0, "<u4").astype(np.uint32),
        _field(rows, 4, "<u4").astype(np.uint32),
        _decode_copysets(values, value_offsets[:-1] + np.uint64(9), counts),
    )


def encode_block(last: int, flag: int, copyset: np.ndarray, count: int) -> bytes:
    """Value of a CSI block: every LSN of ``[first, last]`` has this flag word and copyset."""
    return (_U64LE.pack(last) + struct.pack("<IB", flag, count)
            + copyset[:count].astype("<u2").tobytes())


_RUN_HEAD = struct.Struct("<QIB")  # last lsn, count, copyset width


def _run_dtype(width: int) -> np.dtype:
    return np.dtype([("lsn", "<u8"), ("flags", "<u4"), ("k", "u1"), ("cs", "<u2", (width,))])


def encode_run(lsns, flags, cs, counts) -> bytes:
    """Value of a CSI run: the listed LSNs, each with its own flags and copyset."""
    n, width = cs.shape
    rows = np.zeros(n, _run_dtype(width))
    rows["lsn"], rows["flags"], rows["k"] = lsns, flags, counts
    rows["cs"] = np.where(cs >= 0, cs, 0)
    return _RUN_HEAD.pack(int(lsns[-1]), n, width) + rows.tobytes()


def range_last(value: bytes) -> int:
    """Last LSN covered by a block or run entry."""
    return _U64LE.unpack_from(value, 0)[0]


def range_count(first: int, kind: int, value: bytes) -> int:
    """How many LSNs a block or run entry lists."""
    if kind == CSI_BLOCK:
        return range_last(value) - first + 1
    return _RUN_HEAD.unpack_from(value, 0)[1]


def decode_range(first: int, kind: int, value: bytes):
    """A block or run entry -> (lsns u64, flags u32, copysets int16 2-D), all its LSNs."""
    return decode_ranges([(first, kind, value)])


def _decode_block(first: int, value: bytes):
    last, flag, count = struct.unpack_from("<QIB", value, 0)
    cs = np.frombuffer(value, "<u2", count, 13).astype(np.int16)
    n = last - first + 1
    lsns = np.arange(n, dtype=np.uint64) + np.uint64(first)
    return lsns, np.full(n, flag, np.uint32), np.tile(cs, (n, 1))


def decode_ranges(entries: Sequence[tuple[int, int, bytes]]):
    """Block and run entries ``(first, kind, value)`` in LSN order -> (lsns u64, flags
    u32, copysets int16 2-D, -1 padded) of all their LSNs.  Runs that follow each other
    are decoded in one kernel call: a page of a log written in batches is thousands of
    run entries."""
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    runs: list[bytes] = []

    def decode_runs() -> None:
        if runs:
            try:
                parts.append(storefmt.decode_csi_runs(runs))
            except storefmt.RecordFormatError as exc:
                raise error_for(E.CHECKSUM_MISMATCH, f"logsdb: {exc}") from None
            runs.clear()

    for first, kind, value in entries:
        if kind == CSI_RUN:
            runs.append(value)
            continue
        if kind != CSI_BLOCK:
            raise error_for(E.CHECKSUM_MISMATCH, f"logsdb: unknown CSI entry type {kind}")
        decode_runs()
        parts.append(_decode_block(first, value))
    decode_runs()
    if not parts:
        return np.empty(0, np.uint64), np.empty(0, np.uint32), np.empty((0, 0), np.int16)
    if len(parts) == 1:
        return parts[0]
    width = max(p[2].shape[1] for p in parts)
    return (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]),
            np.concatenate([np.pad(p[2], ((0, 0), (0, width - p[2].shape[1])),
                                   constant_values=-1) for p in parts]))
