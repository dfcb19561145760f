"""Which BufferedWriter blobs a shard holds, by writer: what a new sequencer needs to
answer a retried blob with the LSN its first attempt got.

An idempotent writer puts its producer id and the blob's sequence number in the blob's
header.  Every write of such a blob also writes a small writer entry (``keys.WRITER``)
in the record's partition, so the blobs of a time window are found without reading a
payload: ``scan`` iterates the entries of the partitions that may hold the window and
keeps those whose record is still that blob (recovery may have overwritten the copy with
a hole plug, a purge deleted it, a trim passed it).  Entries go with their partition
when retention drops it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import numpy as np

from ldcore import codec
from logdevice.protocol.flags import FLAG_BUFFERED_WRITER_BLOB
from logdevice.records import LSN_MAX
from logdevice.storage import keys as K
from logdevice.storage.flags import FLAG_HOLE

if TYPE_CHECKING:
    from logdevice.storage.batch import RecordBatch
    from logdevice.storage.partitioned import PartitionedDB

__all__ = ["WriterEntries", "writer_entries", "scan"]


class WriterEntries(NamedTuple):
    """Blobs by writer, in LSN order (parallel arrays)."""

    lsns: np.ndarray  # uint64
    producers: np.ndarray  # uint64
    seqs: np.ndarray  # uint64
    timestamps: np.ndarray  # int64
    checksums: np.ndarray  # uint32: crc32c of the payload

    @classmethod
    def empty(cls) -> WriterEntries:
        return cls(np.empty(0, np.uint64), np.empty(0, np.uint64), np.empty(0, np.uint64),
                   np.empty(0, np.int64), np.empty(0, np.uint32))


def writer_entries(log_id: int, lsns: np.ndarray, timestamps: np.ndarray,
                   flags: np.ndarray, payloads: Any, offsets: np.ndarray
                   ) -> list[tuple[bytes, bytes]]:
    """(key, value) of the writer entries of records about to be written: one per blob
    whose header names its writer."""
    blobs = np.flatnonzero(flags & np.uint32(FLAG_BUFFERED_WRITER_BLOB))
    if not len(blobs):
        return []
    view = memoryview(payloads).cast("B") if not isinstance(payloads, bytes) else payloads
    out = []
    for i in blobs.tolist():
        try:
            found = codec.producer_of(view[int(offsets[i]):int(offsets[i + 1])])
        except codec.CodecError:
            continue  # the sequencer checked the blob; a copy we cannot parse names no one
        if found is not None:
            out.append((K.writer_key(log_id, int(lsns[i])),
                        K.WRITER_VALUE.pack(found[0], found[1], int(timestamps[i]))))
    return out


class BlobSource(Protocol):
    """What ``scan`` uses of its store (``logsdb.LogsDB`` is one)."""

    parts: PartitionedDB

    def trim_point(self, log_id: int) -> int: ...

    def read_records_at(self, log_id: int, lsns: Any, *, payloads: bool = True
                        ) -> RecordBatch: ...


def scan(store: BlobSource, log_id: int, since_ms: int) -> WriterEntries:
    """The blobs with a writer that ``store`` holds for ``log_id`` with a timestamp of at
    least ``since_ms``.  Blocking (RocksDB)."""
    trim = store.trim_point(log_id)
    prefix = K.log_prefix(K.WRITER, log_id)
    lower = K.writer_key(log_id, trim + 1)
    upper = K.writer_key(log_id, LSN_MAX) + b"\x00"
    rows: dict[int, tuple[int, int, int]] = {}
    for pid, usage in store.parts.directory.ranges(log_id, trim + 1, LSN_MAX):
        if usage.max_ts < since_ms:
            continue
        with store.parts.db.iterator(store.parts.cf(pid), lower, upper) as it:
            it.seek(lower)
            for key, value in it:
                producer, seq, ts = K.WRITER_VALUE.unpack(value)
                if ts >= since_ms:
                    rows[K.read_be(key, len(prefix))] = (producer, seq, ts)
    if not rows:
        return WriterEntries.empty()
    # Keep an entry only while its record is still that blob (not a hole plug, purged,
    # trimmed); a record written again as another blob has an entry of its own.
    held = store.read_records_at(log_id, np.array(sorted(rows), np.uint64), payloads=False)
    ok = (held.flags & np.uint32(FLAG_BUFFERED_WRITER_BLOB)) != 0
    ok &= (held.flags & np.uint32(FLAG_HOLE)) == 0
    kept = held.lsns[ok]
    found = [rows[int(x)] for x in kept.tolist()]
    return WriterEntries(kept.astype(np.uint64), np.array([f[0] for f in found], np.uint64),
                         np.array([f[1] for f in found], np.uint64),
                         np.array([f[2] for f in found], np.int64),
                         held.checksums[ok].astype(np.uint32))
