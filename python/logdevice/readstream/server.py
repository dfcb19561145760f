"""The storage-node side of one read stream, as a state machine without network I/O.

A client opens a read stream on every node of a log's nodeset with START; this module
decides, for one such stream, what the node sends next:

- only released records (at or below the release pointer), in LSN order, batched into
  large RECORDS frames;
- with single copy delivery (SCD) only the records this node is the shipper of: the
  decision is made on the copyset index (CSI) arrays by ``ldcore.scd.ship_mask`` for a
  whole chunk at once, and only the chosen records are then read from disk, so skipped
  payloads are never read.  A short stretch (a tailing reader's few new records, up to
  ``TAIL_SPAN`` LSNs), or any range holding at most ``FEW_RECORDS`` records (a young
  log), is instead read whole in one pass and decided on the records' own copysets
  (stored with the same values as their CSI entries): one read where the CSI and then
  the chosen records took two;
- explicit gaps: TRIM ``[start, trim point]``; NO_RECORDS "I have nothing to send you in
  ``[x, y]``" after the last thing sent, up to where the node has looked (the tail, the
  window's end, the end of a budget-limited turn), so the client's gap detection moves
  on; CHECKSUM_FAIL for a single LSN whose stored copy fails its crc32c (that copy is
  never sent as data);
- flow control: nothing past ``window_high`` until WINDOW raises it; the stream is done
  past ``until_lsn``.

``ServerReadStream.step(db, last_released, trim_point, budget_bytes)`` reads LogsDB and
returns the messages to send now; ``state(last_released)`` says what the stream waits for.
The disk is the only I/O here (the caller may run ``step`` in a thread): no sockets, no
clock, no event loop, so tests drive it directly against a real LogsDB.

A START with DIGEST (epoch recovery) reads past the release pointer, in all-send-all
mode, and its RECORDS carry waves and copysets.

Records are sent with their stored crc32c in ``checksums`` and the CHECKSUM flag set, so
the client can check them end to end.  With NO_PAYLOAD, payloads are neither copied out of
LogsDB (header-only reads), sent nor checked (the reader never sees them).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

import numpy as np

from ldcore.lsn import LSN_MAX
from ldcore.scd import ship_mask
from logdevice.protocol.flags import FLAG_CHECKSUM, FLAG_DRAINED, StartFlag
from logdevice.protocol.messages import Gap, GapReason, Records, Start
from logdevice.storage.batch import RecordBatch

if TYPE_CHECKING:
    from logdevice.storage.logsdb import LogsDB

__all__ = [
    "ServerReadStream",
    "StreamState",
    "ReadStats",
    "DEFAULT_BUDGET_BYTES",
    "MAX_FRAME_BYTES",
    "MAX_FRAME_RECORDS",
]

MAX_FRAME_BYTES = 1 << 20  # payload bytes per RECORDS frame (one larger record still goes)
MAX_FRAME_RECORDS = 4096
DEFAULT_BUDGET_BYTES = 1 << 20  # what one step() sends at most (about; >= one record)
CSI_CHUNK = 16384  # CSI rows read per SCD decision
TAIL_SPAN = 16  # SCD over at most this many LSNs: one read of the records, no CSI read
FEW_RECORDS = 4  # ... or over a range the partition directory says holds at most this many
_RECORD_OVERHEAD = 32  # bytes charged per record besides its payload (lsn, ts, flags, crc)
_CSI_ROW_COST = 4  # bytes charged per CSI row looked at, so scans that ship nothing end
_EMPTY_U32 = np.empty(0, np.uint32)


class StreamState(Enum):
    """What a stream waits for (``ServerReadStream.state``)."""

    READY = "ready"  # has released LSNs to look at within its window
    WINDOW = "window"  # past window_high: waits for WINDOW
    RELEASE = "release"  # caught up with the release pointer: waits for RELEASE (tailing)
    DONE = "done"  # past until_lsn: nothing more, ever


@dataclass(slots=True)
class ReadStats:
    """What a stream read and sent (counted in this module, for tests and metrics)."""

    csi_rows: int = 0  # copyset index rows examined (SCD)
    records_read: int = 0  # records whose data (head + payload) was read from disk
    payload_bytes_read: int = 0
    range_reads: int = 0  # LogsDB.read_records calls (all-send-all)
    cache_reads: int = 0  # reads answered by the store's record cache instead
    point_reads: int = 0  # LogsDB.read_records_at calls (SCD: the shipped LSNs only)
    records_sent: int = 0
    payload_bytes_sent: int = 0
    frames_sent: int = 0
    gaps_sent: int = 0
    checksum_failures: int = 0


_SCD = int(StartFlag.SINGLE_COPY_DELIVERY)
_NO_PAYLOAD = int(StartFlag.NO_PAYLOAD)
_DIGEST = int(StartFlag.DIGEST)
_LOCAL_SCD = int(StartFlag.LOCAL_SCD_ENABLED)


class ServerReadStream:
    """One read stream of one client on this storage node.

    Parameters
    ----------
    start : Start
        The START message that opened (or rewound) the stream.
    me : int
        This node's index (the SCD decision asks "am I the shipper?").
    local_nodes : iterable of int, optional
        Nodes in the client's region, for local SCD (used only with LOCAL_SCD_ENABLED).
    max_frame_bytes, max_frame_records : int
        Size of RECORDS frames.
    csi_chunk : int
        Copyset index rows read per SCD decision.
    """

    def __init__(
        self,
        start: Start,
        me: int,
        *,
        local_nodes: Iterable[int] | None = None,
        max_frame_bytes: int = MAX_FRAME_BYTES,
        max_frame_records: int = MAX_FRAME_RECORDS,
        csi_chunk: int = CSI_CHUNK,
    ) -> None:
        self.read_stream_id = int(start.read_stream_id)
        self.log_id = int(start.log_id)
        self.filter_version = int(start.filter_version)
        self.start_lsn = max(int(start.start_lsn), 1)
        self.until_lsn = min(int(start.until_lsn), LSN_MAX)
        self.window_high = int(start.window_high)
        # (an int, tested as one: enum arithmetic, and even making the enum, is slow per
        # START)
        self.flags = flags = int(start.flags)
        kd = start.known_down
        self.known_down = tuple(sorted({int(n) for n in kd})) if kd else ()
        self.replication = int(start.replication)
        self.reorder_seed = start.reorder_seed
        self.me = int(me)
        self.scd = bool(flags & _SCD)
        self.no_payload = bool(flags & _NO_PAYLOAD)
        # A recovery digest reads what the sequencer never released, with waves and
        # copysets; it is never single-copy.
        self.digest = bool(flags & _DIGEST)
        if self.digest:
            self.scd = False
        self.local_nodes: tuple[int, ...] | None = None
        if flags & _LOCAL_SCD and local_nodes is not None:
            self.local_nodes = tuple(sorted({int(n) for n in local_nodes}))
        self.max_frame_bytes = max(int(max_frame_bytes), 1)
        self.max_frame_records = max(int(max_frame_records), 1)
        self.csi_chunk = max(int(csi_chunk), 1)
        self.next_lsn = self.start_lsn  # first LSN not yet looked at
        self.reported_to = self.start_lsn - 1  # the client knows about everything up to here
        self.stats = ReadStats()
        # Payload bytes per record, to size SCD point reads to the budget before reading.
        self._avg_record = 512.0
        self._guessing = True  # no record read yet: the estimate is a guess
        self._from_memory = False  # the last range read came from the record cache

    def __repr__(self) -> str:
        return (f"ServerReadStream(id={self.read_stream_id}, log={self.log_id}, "
                f"v{self.filter_version}, next={self.next_lsn}, window={self.window_high}, "
                f"until={self.until_lsn}, scd={self.scd})")

    # ------------------------------------------------------------------ events

    def on_window(self, window_high: int, filter_version: int) -> bool:
        """WINDOW from the client; returns whether the window grew.  A WINDOW of another
        filter version (from before a rewind) is ignored."""
        if int(filter_version) != self.filter_version or int(window_high) <= self.window_high:
            return False
        self.window_high = int(window_high)
        return True

    def state(self, last_released: int, trim_point: int = 0) -> StreamState:
        """What the stream waits for, given the log's release pointer and trim point
        (a trim point at or past ``next_lsn`` is a TRIM gap to send now)."""
        if self.next_lsn > self.until_lsn:
            return StreamState.DONE
        if self.next_lsn <= trim_point:
            return StreamState.READY
        if self.next_lsn > self.window_high:
            return StreamState.WINDOW
        if self.next_lsn > last_released and not self.digest:
            return StreamState.RELEASE
        return StreamState.READY

    @property
    def done(self) -> bool:
        return self.next_lsn > self.until_lsn

    # ------------------------------------------------------------------ the read step

    def step(self, db: LogsDB, last_released: int, trim_point: int,
             budget_bytes: int = DEFAULT_BUDGET_BYTES) -> list[Records | Gap]:
        """Read what can be sent now and return it as messages, in LSN order.

        Sends at most about ``budget_bytes`` (payload plus a small per-record and per-CSI-
        row charge; always at least one record when one is due), then one NO_RECORDS gap
        covering what was looked at past the last thing sent.
        """
        out: list[Records | Gap] = []
        if self.done:
            return out
        if self.next_lsn <= trim_point:
            hi = min(int(trim_point), self.until_lsn)
            self._gap(out, self.next_lsn, hi, GapReason.TRIM)
            self.next_lsn = hi + 1
            if self.done:
                return out
        hi = min(self.until_lsn, self.window_high)
        if not self.digest:
            hi = min(hi, int(last_released))
        self._skip_to_cached(db, hi)
        budget = int(budget_bytes)
        frame = _Frame()
        # A range holding a few records at most is read whole, as a tail is: one read
        # instead of a copyset index read and a point read (a young log's first step).
        few = self.scd and hi - self.next_lsn >= TAIL_SPAN and \
            db.records_within(self.log_id, self.next_lsn, hi) <= FEW_RECORDS
        while self.next_lsn <= hi and budget > 0:
            room_n = self.max_frame_records - frame.records
            room_b = max(min(budget, self.max_frame_bytes - frame.bytes), 1)
            if self.scd and (few or hi - self.next_lsn < TAIL_SPAN):
                rb, scanned_to, cost = self._read_scd_tail(db, hi, room_n, room_b)
            elif self.scd:
                self._from_memory = False
                rb, scanned_to, cost = self._read_scd(db, hi, room_n, room_b)
            else:
                rb, scanned_to, cost = self._read_all(db, hi, room_n, room_b)
            budget -= cost + rb.nbytes + _RECORD_OVERHEAD * len(rb)
            if len(rb):
                self._take(out, frame, rb, checked=self._from_memory)
            self.next_lsn = scanned_to + 1
            if frame.records >= self.max_frame_records or frame.bytes >= self.max_frame_bytes:
                self._flush(out, frame)
        self._flush(out, frame)
        limit = self.until_lsn if self.digest else min(self.until_lsn, int(last_released))
        if self.next_lsn == self.window_high + 1 and self.next_lsn <= limit:
            # The window ended on an empty stretch: the gap may reach past it, up to the
            # next stored record (else a reader crawls through an empty range, e.g. the
            # start of a log before epoch 1, one window per round trip).
            cache = db.cache
            found = None if cache is None else cache.next_lsn(self.log_id, self.next_lsn,
                                                              limit)
            if found is None:
                nxt = db.read_records(self.log_id, self.next_lsn, limit, max_records=1,
                                      payloads=False)
                found = int(nxt.lsns[0]) if len(nxt) else limit + 1
            self.next_lsn = found
        if self.next_lsn - 1 > self.reported_to:
            self._gap(out, self.reported_to + 1, self.next_lsn - 1, GapReason.NO_RECORDS)
        return out

    def _skip_to_cached(self, db: LogsDB, hi: int) -> None:
        """Start at the record cache when the partition directory says the log has
        nothing stored between ``next_lsn`` and where the cache knows it: a new log's
        stream from LSN 1 then reads its first records from memory, where it took a copyset
        index read and a point read from RocksDB."""
        cache = db.cache
        lo = None if cache is None else cache.start(self.log_id)
        if lo is None or lo <= self.next_lsn:
            return
        to = min(lo, hi + 1)
        if db.records_within(self.log_id, self.next_lsn, to - 1) == 0:
            self.next_lsn = to

    def _read_scd(self, db: LogsDB, hi: int, room_n: int,
                  room_b: int) -> tuple[RecordBatch, int, int]:
        """SCD: decide on the CSI, then read only the shipped records' data."""
        csi = db.read_csi(self.log_id, self.next_lsn, hi, max_entries=self.csi_chunk)
        self.stats.csi_rows += len(csi)
        scanned_to = min(int(csi.next_lsn) - 1, hi)
        cost = _CSI_ROW_COST * len(csi)
        if not len(csi):
            return RecordBatch.empty(self.log_id, scanned_to + 1), scanned_to, cost
        mask = ship_mask(csi.copysets, self.me, self.known_down, seed=self.reorder_seed,
                         local_nodes=self.local_nodes, flags=csi.flags)
        lsns = csi.lsns[mask]
        want = int(min(room_n, max(1, room_b // (self._avg_record + _RECORD_OVERHEAD))))
        if len(lsns) > want:
            lsns = lsns[:want]
            scanned_to = int(lsns[-1])
        if not len(lsns):
            return RecordBatch.empty(self.log_id, scanned_to + 1), scanned_to, cost
        rb = db.read_records_at(self.log_id, lsns, payloads=not self.no_payload)
        self.stats.point_reads += 1
        self._count_read(rb)
        return rb, scanned_to, cost

    def _read_scd_tail(self, db: LogsDB, hi: int, room_n: int,
                       room_b: int) -> tuple[RecordBatch, int, int]:
        """SCD over a short stretch: read it whole, decide on the records' copysets."""
        rb = self._read_range(db, hi, room_n, room_b)
        scanned_to = min(int(rb.next_lsn) - 1, hi)
        if len(rb):
            mask = ship_mask(rb.copysets, self.me, self.known_down, seed=self.reorder_seed,
                             local_nodes=self.local_nodes, flags=rb.flags)
            rb = _kept(rb, mask)
        self._count_read(rb)
        return rb, scanned_to, 0

    def _read_all(self, db: LogsDB, hi: int, room_n: int,
                  room_b: int) -> tuple[RecordBatch, int, int]:
        """All-send-all: every record of the range except drained copies."""
        rb = self._read_range(db, hi, room_n, room_b)
        self._count_read(rb)
        scanned_to = min(int(rb.next_lsn) - 1, hi)
        if len(rb):
            rb = _kept(rb, (rb.flags & np.uint32(FLAG_DRAINED)) == 0)
        return rb, scanned_to, 0

    def _read_range(self, db: LogsDB, hi: int, room_n: int, room_b: int) -> RecordBatch:
        """The records of ``[next_lsn, hi]`` within the limits: from the store's record
        cache when it knows the range, else from LogsDB."""
        payloads = not self.no_payload
        cache = db.cache
        if cache is not None:
            rb = cache.read(self.log_id, self.next_lsn, hi, max_records=room_n,
                            max_bytes=room_b, payloads=payloads)
            if rb is not None:
                self.stats.cache_reads += 1
                self._from_memory = True
                return rb
        self._from_memory = False
        self.stats.range_reads += 1
        return db.read_records(self.log_id, self.next_lsn, hi, max_records=room_n,
                               max_bytes=room_b, payloads=payloads)

    def _count_read(self, rb: RecordBatch) -> None:
        if not self._from_memory:
            self.stats.records_read += len(rb)
            self.stats.payload_bytes_read += rb.nbytes
        if len(rb):
            seen = rb.nbytes / len(rb)
            self._avg_record = seen if self._guessing else 0.5 * (self._avg_record + seen)
            self._guessing = False

    # ------------------------------------------------------------------ output

    def _take(self, out: list[Records | Gap], frame: _Frame, rb: RecordBatch,
              checked: bool = False) -> None:
        """Queue the records of ``rb``; a copy failing its checksum becomes a gap
        (``checked``: copies kept in memory, whose checksums were computed from them)."""
        if self.no_payload or checked:
            frame.add(rb)
            return
        bad = (~rb.checksum_ok()).nonzero()[0]
        start = 0
        for i in bad.tolist():
            if i > start:
                frame.add(rb.take(slice(start, i)))
            self._flush(out, frame)
            lsn = int(rb.lsns[i])
            self._gap(out, lsn, lsn, GapReason.CHECKSUM_FAIL)
            self.stats.checksum_failures += 1
            start = i + 1
        if start < len(rb):
            frame.add(rb if start == 0 else rb.take(slice(start, len(rb))))

    def _flush(self, out: list[Records | Gap], frame: _Frame) -> None:
        if not frame.records:
            return
        parts = frame.parts
        rb = parts[0].compact() if len(parts) == 1 else RecordBatch.concat(parts)
        frame.clear()
        n = len(rb)
        if self.no_payload:
            payloads: bytes | memoryview = b""
            offsets = np.zeros(n + 1, np.uint64)
            checksums = _EMPTY_U32
            flags = rb.flags & np.uint32(~FLAG_CHECKSUM & 0xFFFFFFFF)
        else:  # compact and concat rebased the offsets to 0: what RECORDS carries
            payloads = rb.payloads.data
            offsets = rb.offsets
            checksums = rb.checksums
            flags = rb.flags | np.uint32(FLAG_CHECKSUM)
        records = Records(
            read_stream_id=self.read_stream_id, filter_version=self.filter_version,
            lsns=rb.lsns, timestamps=rb.timestamps, flags=flags, payload_offsets=offsets,
            payloads=payloads, checksums=checksums,
        )
        if self.digest:
            records.waves, records.copysets = rb.waves, rb.copysets
        out.append(records)
        self.reported_to = int(rb.lsns[-1])
        self.stats.records_sent += n
        self.stats.payload_bytes_sent += 0 if self.no_payload else rb.nbytes
        self.stats.frames_sent += 1

    def _gap(self, out: list[Records | Gap], lo: int, hi: int, reason: GapReason) -> None:
        out.append(Gap(read_stream_id=self.read_stream_id, filter_version=self.filter_version,
                       lo=lo, hi=hi, reason=reason))
        self.reported_to = max(self.reported_to, hi)
        self.stats.gaps_sent += 1


class _Frame:
    """Record batches collected for the next RECORDS frame."""

    __slots__ = ("parts", "records", "bytes")

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.parts: list[RecordBatch] = []
        self.records = 0
        self.bytes = 0

    def add(self, rb: RecordBatch) -> None:
        self.parts.append(rb)
        self.records += len(rb)
        self.bytes += rb.nbytes


def _kept(rb: RecordBatch, mask: np.ndarray) -> RecordBatch:
    """The rows of ``rb`` where ``mask`` is set: ``rb`` itself when all are, views of it
    when they are one run (a tail read keeps a record or two of a few), else a copy.
    (Array methods, not numpy's functions: for a handful of rows their Python wrappers
    cost more than the work.)"""
    rows = mask.nonzero()[0]
    n = len(rows)
    if n == len(rb):
        return rb
    if n == 0:
        return rb.slice(0, 0)
    first, last = int(rows[0]), int(rows[-1])
    if last - first + 1 == n:
        return rb.slice(first, last + 1)
    return rb.take(rows)
