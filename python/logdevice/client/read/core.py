"""The loop side of readers: drives one ``ReadStream`` per log over the client's connections.

``StreamRouter`` (one per client) hands out read stream ids, is the ``listener`` of every
connection a reader uses, and routes STARTED / RECORDS / GAP by ``read_stream_id`` and
connection losses by node to the reader that owns the stream.

``ReaderCore`` (one per reader) turns each stream's actions into messages (START opens
the connection first when needed, WINDOW, STOP), feeds it what the nodes send, runs its
timers (``tick`` at ``next_deadline``), and polls what it can deliver into the reader's
``ReaderQueue``.  RECORDS frames go in whole: checksums are verified for the frame at once
(``crc32c_many`` against the frame's ``checksums``) and a copy that fails is reported to
the stream as a checksum failure, so it is never delivered.  A START refused for lack of
rights (STARTED with ACCESS) ends the log's stream with an ACCESS gap over the rest of
its range.  A stream that reaches none of its nodes (every one refuses connections) for the
client's ``unreachable_timeout`` after it started ends with CONNFAILED, which the next
``read`` raises.  Everything here runs on the client's loop thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypedDict

import numpy as np

from ldcore.checksum import crc32c, crc32c_many
from logdevice.client.net.connection import Connection
from logdevice.client.read.placement import ReadPlacement
from logdevice.client.read.queue import ReaderQueue
from logdevice.client.settings import ClientSettings
from logdevice.errors import E, LogDeviceError, error_for
from logdevice.protocol import Gap, GapReason, Records, Start, Started, StartFlag, Stop, Window
from logdevice.protocol.flags import FLAG_BUFFERED_WRITER_BLOB, FLAG_CHECKSUM
from logdevice.protocol.framing import encode
from logdevice.readstream import ReadBatch, ReadStream, SendStart, SendStop, SendWindow
from logdevice.readstream.fmajority import FailureDomainNodeSet
from logdevice.records import GapRecord, GapType
from logdevice.timers import DeadlineTimers

__all__ = ["StreamRouter", "ReaderCore", "ReaderOptions", "ReaderOptionKwargs", "ReaderStats",
           "bad_copies"]

log = logging.getLogger("logdevice.client.read.reader")

#: Seconds between reads of the event log while streams are open.
STATUS_REFRESH = 1.0
PLACEMENT_RETRY = 1.0  # seconds between lookups of a newer epoch's placement that failed
_NOT_BLOB = np.uint32(~FLAG_BUFFERED_WRITER_BLOB & 0xFFFFFFFF)
_CHECKSUM = np.uint32(FLAG_CHECKSUM)
_FIRST = np.zeros(1, np.intp)  # bad_copies of a frame whose one record is bad
_SCD_FLAG = int(StartFlag.SINGLE_COPY_DELIVERY)  # (enum arithmetic, per START, is slow)
_NO_PAYLOAD_FLAG = int(StartFlag.NO_PAYLOAD)
#: A START encoded for one node of a stream: (what it says, its frame's buffers).
_EncodedStart = tuple[tuple[Any, ...], list[Any]]
_FIRST.flags.writeable = False


@dataclass(frozen=True, slots=True)
class ReaderOptions:
    """Tunables of one reader (defaults from the cluster config's settings)."""

    buffer_size: int = 512
    window_bytes: int = 4 << 20
    flow_control_threshold: float = 0.7
    grace_period: float = 0.1
    scd_timeout: float = 5.0
    scd_all_send_all_timeout: float = 10.0
    max_buffered_records: int = 262_144
    max_buffered_bytes: int = 64 << 20


class ReaderOptionKwargs(TypedDict, total=False):
    """The keyword options of ``Client.create_reader`` and the other reader factories
    (``**options: Unpack[ReaderOptionKwargs]``): the fields of ``ReaderOptions``, by name
    and type (a unit test keeps the two the same).  Any other name is refused with
    ``InvalidParamError`` listing these.

    buffer_size : int
        The read window, in LSNs (default: the config's ``read_window_size``).
    window_bytes : int
        Lets the window grow past ``buffer_size``, up to 32 times, while that many LSNs
        of the records read so far carry at most this many payload bytes: small records
        are read in fewer round trips (default: the config's ``read_window_bytes``,
        4 MiB; 0 if ``buffer_size`` is given and this is not: a window asked for is
        kept).
    flow_control_threshold : float
        Fraction of the window consumed before it slides (default: the config's
        ``read_flow_control_threshold``).
    grace_period : float
        Seconds to wait for slow nodes before reporting a gap (default: the config's
        ``gap_grace_period_ms``).
    scd_timeout, scd_all_send_all_timeout : float
        Single copy delivery failover timers, seconds (default: the config's
        ``scd_timeout_ms`` and ``scd_all_send_all_timeout_ms``).
    max_buffered_records, max_buffered_bytes : int
        Bounds of the queue between the reader's streams and ``read`` (default 262144
        records, 64 MiB).
    """

    buffer_size: int
    window_bytes: int
    flow_control_threshold: float
    grace_period: float
    scd_timeout: float
    scd_all_send_all_timeout: float
    max_buffered_records: int
    max_buffered_bytes: int


@dataclass
class ReaderStats:
    """Counters of one reader (loop side)."""

    records_frames: int = 0  # RECORDS frames received
    records_received: int = 0  # copies received (duplicates included)
    payload_bytes_received: int = 0
    gaps_received: int = 0
    checksum_failures: int = 0  # copies that failed their crc32c here
    checksum_fail_gaps: int = 0  # CHECKSUM_FAIL gaps: a node found its copy bad on read
    starts_sent: int = 0
    windows_sent: int = 0


def bad_copies(msg: Records) -> np.ndarray | None:
    """Indices of the records of a RECORDS frame whose payload does not match the crc32c
    the node sent with it (records flagged CHECKSUM only); None when all match."""
    if not len(msg.checksums):
        return None
    if len(msg.checksums) == 1:  # a tailing reader's record: scalars, not arrays
        if not int(msg.flags[0]) & FLAG_CHECKSUM:
            return None
        offsets = msg.payload_offsets
        payload = msg.payloads[int(offsets[0]):int(offsets[1])]
        return None if crc32c(payload) == int(msg.checksums[0]) else _FIRST
    crc = crc32c_many(msg.payloads, msg.payload_offsets)
    mismatch = ((msg.flags & _CHECKSUM) != 0) & (crc != msg.checksums)
    bad = mismatch.nonzero()[0]
    return bad if len(bad) else None


class Connections(Protocol):
    """What readers need of the client's core (``ClientCore``): its connections (made on
    first use by ``conn``) and settings."""

    conns: dict[int, Connection]
    settings: ClientSettings

    def conn(self, node: int) -> Connection: ...


class StreamRouter:
    """Read stream ids and message routing for every reader of one client (loop side)."""

    def __init__(self, core: Connections) -> None:
        self.core = core
        self._ids = itertools.count(1)
        self.streams: dict[int, tuple[ReaderCore, _LogStream]] = {}

    def new_id(self) -> int:
        return next(self._ids)

    def conn(self, node: int) -> Connection:
        c = self.core.conn(node)
        c.listener = self
        return c

    def on_stream_message(self, node: int, msg: Any) -> None:
        entry = self.streams.get(getattr(msg, "read_stream_id", -1))
        if entry is not None:
            entry[0].on_message(entry[1], node, msg)

    def on_connection_lost(self, node: int) -> None:
        for reader, st in list(self.streams.values()):
            if node in st.placement.nodeset:
                reader.on_connection_lost(st, node)


class _LogStream:
    """One log being read: its ``ReadStream`` and I/O bookkeeping."""

    __slots__ = ("log_id", "rsid", "rs", "placement", "connecting",
                 "last_released", "started", "closed", "until_lsn", "born", "reached",
                 "refused", "unreachable_check", "scd", "looking_up", "new_placement")

    def __init__(self, log_id: int, rsid: int, rs: ReadStream, placement: ReadPlacement,
                 until_lsn: int) -> None:
        self.log_id = log_id
        self.rsid = rsid
        self.rs = rs
        self.placement = placement
        self.until_lsn = until_lsn
        self.connecting: dict[int, SendStart] = {}  # node -> START to send once connected
        self.last_released = 0  # highest release pointer a STARTED reported
        self.started: set[int] = set()  # nodes that answered START with OK
        self.closed = False
        # Until some node of the nodeset is reached, the stream fails with CONNFAILED once
        # every one of them refused a connection and ``unreachable_timeout`` passed.
        self.born = 0.0  # loop time of the start
        self.reached = False  # a connection to a node of the nodeset worked
        self.refused: dict[int, str] = {}  # node -> why connecting failed
        self.unreachable_check: asyncio.TimerHandle | None = None
        self.scd = False
        # A newer epoch's placement: looked up (in a thread), then the stream restarts
        # with it once everything it delivered was handed out.
        self.looking_up = False
        self.new_placement: ReadPlacement | None = None


class ReaderCore:
    """Drives the read streams of one reader (loop side only).

    Parameters
    ----------
    router : StreamRouter
    queue : ReaderQueue
        Where deliverables go (the reader's threads take them out).
    options : ReaderOptions
    loop : asyncio event loop
        The client's loop (also the streams' clock).
    statuses, placement : coroutine functions, optional
        The nodes' authoritative statuses and a log's read placement, asked of the
        nodes on this loop (``PlacementSource``).
    """

    def __init__(self, router: StreamRouter, queue: ReaderQueue, options: ReaderOptions,
                 loop: asyncio.AbstractEventLoop,
                 statuses: Callable[[], Awaitable[dict[int, int] | None]] | None = None,
                 placement: Callable[[int, int, int], Awaitable[ReadPlacement]] | None = None
                 ) -> None:
        self.router = router
        self.queue = queue
        self.options = options
        self.loop = loop
        self.streams: dict[int, _LogStream] = {}
        self.no_payload = False
        self.stats = ReaderStats()
        self._starved: dict[int, _LogStream] = {}
        self._closed = False
        self._statuses = statuses
        self._placement = placement  # (log, from, until) -> ReadPlacement, on this loop
        self._refill_pending = False
        self._watch: asyncio.Task[None] | None = None
        # Streams messages moved this loop turn, held (``ReadStream.hold``) and acted on
        # (``_after``) once at its end: a node's STARTED and first GAP, or every node's
        # answers read in one turn, cost one pass of the stream, not one each.
        self._moved: dict[int, _LogStream] = {}
        self._act_scheduled = False
        self._timers: DeadlineTimers[_LogStream] = DeadlineTimers(loop, self._on_timer)

    # ------------------------------------------------------------------ user requests

    def start(self, log_id: int, from_lsn: int, until_lsn: int, placement: ReadPlacement,
              scd: bool) -> None:
        """Open (or restart) the stream of ``log_id`` over ``[from_lsn, until_lsn]``."""
        if self._closed:
            raise LogDeviceError(E.SHUTDOWN, "the reader is closed")
        if log_id in self.streams:
            self.stop(log_id)
        o = self.options
        rs = ReadStream(log_id, from_lsn, until_lsn, placement.nodeset, placement.replication,
                        scd=scd, authoritative=placement.authoritative, clock=self.loop.time,
                        locations=placement.locations, buffer_size=o.buffer_size,
                        window_bytes=o.window_bytes,
                        grace_period=o.grace_period, scd_timeout=o.scd_timeout,
                        scd_all_send_all_timeout=o.scd_all_send_all_timeout,
                        flow_control_threshold=o.flow_control_threshold,
                        known_epoch=placement.known_epoch if self._placement else None)
        st = _LogStream(log_id, self.router.new_id(), rs, placement, until_lsn)
        st.scd = scd
        st.born = self.loop.time()
        self.streams[log_id] = st
        self.router.streams[st.rsid] = (self, st)
        if self._statuses is not None and (self._watch is None or self._watch.done()):
            self._watch = self.loop.create_task(self._watch_statuses())
        self._after(st)

    def stop(self, log_id: int) -> None:
        st = self.streams.pop(log_id, None)
        if st is None:
            return
        st.rs.stop()
        self._send(st, st.rs.take_actions())
        self._drop(st)

    def force_no_scd(self) -> None:
        for st in list(self.streams.values()):
            st.rs.force_no_scd()
            self._after(st)

    def close(self) -> None:
        self._closed = True
        if self._watch is not None:
            self._watch.cancel()
        for log_id in list(self.streams):
            self.stop(log_id)
        self._timers.close()

    async def _watch_statuses(self) -> None:
        """Follow the event log (authoritative status of nodes) while streams are open."""
        source = self._statuses
        assert source is not None
        while self.streams and not self._closed:
            await asyncio.sleep(STATUS_REFRESH)
            try:
                statuses = await source()
            except Exception:  # the store went away: keep what we know
                continue
            if statuses is not None and not self._closed:
                self.set_authoritative(statuses)

    def schedule_refill(self) -> None:
        """Poll the held-back streams soon (callable from any thread: the queue's
        ``on_room``)."""
        if self._refill_pending:
            return
        self._refill_pending = True
        with contextlib.suppress(RuntimeError):  # the loop is closed
            self.loop.call_soon_threadsafe(self.refill)

    def refill(self) -> None:
        """The queue has room again: poll the streams that were held back."""
        self._refill_pending = False
        starved, self._starved = self._starved, {}
        for st in starved.values():
            if not st.closed:
                self._after(st)

    def set_authoritative(self, statuses: dict[int, int]) -> None:
        """The event log changed: update every stream's view of its nodes."""
        for st in list(self.streams.values()):
            changed = False
            for node in st.placement.nodeset:
                new = statuses.get(node, 0)
                if st.placement.authoritative.get(node, 0) != new:
                    st.placement.authoritative[node] = new
                    st.rs.set_authoritative(node, new)
                    changed = True
            if changed:  # a stream nothing changed for has nothing new to do
                self._after(st)

    def healthy(self, log_id: int) -> bool | None:
        """Whether the stream of ``log_id`` has working streams on an f-majority of its
        nodes (None: the log is not being read)."""
        st = self.streams.get(log_id)
        if st is None:
            return None
        good = []
        for node in st.placement.nodeset:
            c = self.router.core.conns.get(node)
            if c is not None and c.connected and st.rs.sender(node).connected \
                    and node not in st.connecting:
                good.append(node)
        p = st.placement
        return FailureDomainNodeSet(p.nodeset, p.replication, p.locations).is_fmajority(good)

    def describe(self) -> str:
        """The state of every stream, for error messages and debugging."""
        lines = [f"queue: rows={self.queue.rows} gaps={self.queue.gaps} "
                 f"starved={self.queue.starved} held={sorted(self._starved)}"]
        now = self.loop.time()
        for st in self.streams.values():
            rs = st.rs
            d = rs.next_deadline()
            lines.append(
                f"log {st.log_id} stream {st.rsid}: next={rs.next_lsn} "
                f"window_high={rs.window_high} fv={rs.filter_version} scd={rs.scd_active} "
                f"known_down={sorted(rs.known_down)} deadline="
                f"{'-' if d is None else f'{d - now:+.3f}s'} timer="
                f"{'-' if (t := self._timers.deadline(st)) is None else f'{t - now:+.3f}s'} "
                f"connecting={sorted(st.connecting)} started={sorted(st.started)}")
            for n in st.placement.nodeset:
                c = self.router.core.conns.get(n)
                lines.append(f"  {rs.sender(n)} conn={'up' if c and c.connected else 'down'}")
        return "\n".join(lines)

    def release_info(self, log_id: int) -> tuple[int, bool]:
        """``(release pointer, sure)`` for a log being read: the highest last-released
        LSN any node reported in STARTED, and whether an f-majority of the nodeset has
        reported (then no released record lies past it, bar RELEASEs in flight)."""
        st = self.streams.get(log_id)
        if st is None:
            return 0, False
        p = st.placement
        sure = FailureDomainNodeSet(p.nodeset, p.replication, p.locations).is_fmajority(
            st.started)
        return st.last_released, sure

    # ------------------------------------------------------------------ events

    def on_message(self, st: _LogStream, node: int, msg: Any) -> None:
        if st.closed:
            return
        t = type(msg)
        if t is not Records and t is not Gap and t is not Started:
            return
        rs = st.rs
        try:
            if st.rsid not in self._moved:
                # Its first message this turn: the stream holds the turn's messages and
                # moves on from them all at once, when _act settles it.
                rs.hold()
                self._moved[st.rsid] = st
                if not self._act_scheduled:
                    self._act_scheduled = True
                    self.loop.call_soon(self._act)
            if t is Records:
                self._on_records(st, node, msg)
            elif t is Gap:
                self.stats.gaps_received += 1
                if msg.reason == GapReason.CHECKSUM_FAIL:
                    self.stats.checksum_fail_gaps += 1
                rs.on_gap(node, int(msg.lo), int(msg.hi), int(msg.reason),
                          int(msg.filter_version))
            else:
                if msg.status in (E.ACCESS, E.NOTFOUND):
                    self._refused(st, node, E(msg.status))
                    return
                if msg.status == E.OK:
                    st.started.add(node)
                    st.last_released = max(st.last_released, int(msg.last_released))
                rs.on_started(node, E(msg.status), int(msg.filter_version))
        except Exception as exc:  # a bug: surface it to the reading threads
            log.exception("reader: handling %s from N%d failed", type(msg).__name__, node)
            self.queue.fail(exc)

    def _act(self) -> None:
        """The end of a loop turn's messages: act on every stream they moved."""
        self._act_scheduled = False
        moved, self._moved = self._moved, {}
        for st in moved.values():
            if st.closed:
                continue
            try:
                self._after(st)
            except Exception as exc:  # a bug: surface it to the reading threads
                log.exception("reader: acting on log %d's stream failed", st.log_id)
                self.queue.fail(exc)

    def _refused(self, st: _LogStream, node: int, status: E = E.ACCESS) -> None:
        """``node`` refused to read the log to us: its ACL (ACCESS) or the log is not in
        its config (NOTFOUND: removed at runtime).  The rest of the range is an ACCESS or
        NOTINCONFIG gap and the log's stream ends (every node applies the same ACL and
        log groups)."""
        log.warning("log %d: N%d refused to read it to this client (%s)", st.log_id, node,
                    status.name)
        gap = GapType.ACCESS if status == E.ACCESS else GapType.NOTINCONFIG
        rs = st.rs
        self.stats.gaps_received += 1
        self._after(st)  # deliver what is ready first, if anything
        if st.closed:
            return
        lo, hi = rs.next_lsn, st.until_lsn
        rs.stop()
        self._send(st, rs.take_actions())
        self._drop(st)
        self.streams.pop(st.log_id, None)
        if lo <= hi:
            self.queue.put(st.log_id, ReadBatch.empty(st.log_id,
                                                      [GapRecord(st.log_id, gap, lo, hi)]))
        self.queue.log_done(st.log_id)

    def _on_records(self, st: _LogStream, node: int, msg: Records) -> None:
        lsns = msg.lsns
        n = len(lsns)
        stats = self.stats
        stats.records_frames += 1
        stats.records_received += n
        flags = msg.flags
        bad = None
        if self.no_payload:
            # Without payloads a BufferedWriter blob cannot be unpacked: deliver it as one
            # record with an empty payload.
            flags = flags & _NOT_BLOB
        else:
            stats.payload_bytes_received += memoryview(msg.payloads).nbytes
            bad = bad_copies(msg)
            if bad is not None:
                stats.checksum_failures += len(bad)
                log.warning("log %d: %d record(s) from N%d failed their checksum (first %s)",
                            st.log_id, len(bad), node, int(lsns[bad[0]]))
        st.rs.on_records(node, lsns, msg.timestamps, flags, msg.payloads,
                         msg.payload_offsets, int(msg.filter_version), bad=bad)

    def on_connection_lost(self, st: _LogStream, node: int) -> None:
        if st.closed or node in st.connecting:
            return
        st.rs.on_connection_closed(node)
        self._after(st)

    def _on_timer(self, st: _LogStream) -> None:
        if st.closed:
            return
        st.rs.tick()
        self._after(st)

    # ------------------------------------------------------------------ output

    def _after(self, st: _LogStream) -> None:
        """After any event: send what the stream asks, deliver what it can, re-arm."""
        rs = st.rs
        rs.settle()  # (a turn's messages held it)
        self._send(st, rs.take_actions())
        if st.closed:
            return
        if rs.pending:  # (timers run on their own: _on_timer)
            room = self.queue.room()
            if room > 0:
                batch = rs.poll_batch(room)
                self.queue.put(st.log_id, batch)
                if len(batch) >= room:
                    self._hold(st)
                self._send(st, rs.take_actions())
            else:
                self._hold(st)
        if rs.done:
            self._drop(st)
            self.streams.pop(st.log_id, None)
            self.queue.log_done(st.log_id)
            return
        self._arm(st)
        if st.new_placement is not None and not rs.pending:
            # Everything delivered was handed out: restart where the stream is.
            self.start(st.log_id, rs.next_lsn, st.until_lsn, st.new_placement, st.scd)
        elif rs.wants_epoch and not st.looking_up and self._placement is not None:
            self._look_up(st)

    def _look_up(self, st: _LogStream) -> None:
        """The stream reached an epoch its placement does not cover: look it up again
        (it asks a node); a failed lookup is retried after a pause."""
        st.looking_up = True
        assert self._placement is not None
        done = asyncio.ensure_future(self._placement(st.log_id, st.rs.next_lsn,
                                                     st.until_lsn), loop=self.loop)

        def landed(f: asyncio.Future[ReadPlacement]) -> None:
            if st.closed or self.streams.get(st.log_id) is not st:
                return
            exc = f.exception() if not f.cancelled() else None
            placement = f.result() if exc is None and not f.cancelled() else None
            if placement is None or (placement.known_epoch is not None
                                     and placement.known_epoch < st.rs.wants_epoch):
                log.warning("log %d: cannot look up the placement of epoch %d (%s); "
                            "retrying", st.log_id, st.rs.wants_epoch, exc or "not issued")
                self.loop.call_later(PLACEMENT_RETRY, self._retry_look_up, st)
                return
            st.new_placement = placement
            self._after(st)

        done.add_done_callback(landed)

    def _retry_look_up(self, st: _LogStream) -> None:
        st.looking_up = False
        if not st.closed and self.streams.get(st.log_id) is st:
            self._after(st)

    def _hold(self, st: _LogStream) -> None:
        self._starved[st.rsid] = st
        if self.queue.hold():
            self.schedule_refill()

    def _arm(self, st: _LogStream) -> None:
        d = st.rs.next_deadline()
        if d is not None:
            self._timers.arm(st, d)

    def _drop(self, st: _LogStream) -> None:
        st.closed = True
        self._timers.cancel(st)
        if st.unreachable_check is not None:
            st.unreachable_check.cancel()
            st.unreachable_check = None
        self.router.streams.pop(st.rsid, None)
        self._starved.pop(st.rsid, None)

    # ------------------------------------------------------------------ sending

    def _send(self, st: _LogStream, actions: list[Any]) -> None:
        start: _EncodedStart | None = None
        for a in actions:
            t = type(a)
            if t is SendWindow:
                pending = st.connecting.get(a.node)
                if pending is not None:
                    # Still connecting: the START that goes out once connected carries
                    # the new window (the stream counts it as sent).
                    if pending.filter_version == a.filter_version:
                        st.connecting[a.node] = dataclasses.replace(
                            pending, window_high=max(pending.window_high, a.window_high))
                    continue
                c = self.router.core.conns.get(a.node)
                if c is not None and c.connected:
                    c.post(Window(read_stream_id=st.rsid, filter_version=a.filter_version,
                                  window_high=a.window_high))
                    self.stats.windows_sent += 1
            elif t is SendStart:
                start = self._send_start(st, a, start)
            elif t is SendStop:
                st.connecting.pop(a.node, None)
                c = self.router.core.conns.get(a.node)
                if c is not None and c.connected:
                    c.post(Stop(read_stream_id=st.rsid))

    def _start_message(self, st: _LogStream, a: SendStart) -> Start:
        flags = _SCD_FLAG if a.scd else 0
        if self.no_payload:
            flags |= _NO_PAYLOAD_FLAG
        return Start(read_stream_id=st.rsid, log_id=st.log_id, start_lsn=a.start_lsn,
                     until_lsn=a.until_lsn, window_high=a.window_high, flags=flags,
                     filter_version=a.filter_version, known_down=list(a.known_down),
                     replication=st.placement.replication_factor)

    def _send_start(self, st: _LogStream, a: SendStart,
                    last: _EncodedStart | None = None) -> _EncodedStart | None:
        """Send (or queue until connected) ``a``.  ``last``: a START of the stream just
        encoded for another node; the nodes of a stream mostly get the same one, encoded
        once.  Returns the START last encoded."""
        try:
            c = self.router.conn(a.node)
        except LogDeviceError:  # the client is closing
            return last
        if c.connected and a.node not in st.connecting:
            st.reached = True
            what = (a.start_lsn, a.until_lsn, a.window_high, a.scd, a.known_down,
                    a.filter_version)
            if last is None or last[0] != what:
                last = (what, encode(self._start_message(st, a)))
            c.post_encoded(last[1])
            self.stats.starts_sent += 1
            return last
        first = a.node not in st.connecting
        st.connecting[a.node] = a  # the latest START wins
        if first:
            self.loop.create_task(self._connect_then_start(st, c, a.node))
        return last

    def _check_unreachable(self, st: _LogStream) -> None:
        """A stream that has reached none of its nodes since it started, every one of which
        refused a connection, ends with CONNFAILED once ``unreachable_timeout`` has passed
        (the next ``read`` raises it), as appends and tail queries do: with the whole
        nodeset down, reading would otherwise only wait out the caller's timeout.  A
        stream that reached a node once keeps retrying (nodes restart; readers ride it
        out, ``is_connection_healthy`` tells)."""
        nodes = st.placement.nodeset
        if st.closed or st.reached or not nodes or not set(nodes) <= st.refused.keys():
            return
        now = self.loop.time()
        due = st.born + self.router.core.settings.unreachable_timeout
        if now < due:
            if st.unreachable_check is None:
                st.unreachable_check = self.loop.call_at(due, self._unreachable_due, st)
            return
        last = next(reversed(st.refused.values()))
        exc = error_for(E.CONNFAILED, f"reading log {st.log_id}: no node of its nodeset "
                                      f"{list(nodes)} reachable for "
                                      f"{now - st.born:.1f} s (last: {last})")
        log.info("%s", exc.message)
        rs = st.rs
        rs.stop()
        self._send(st, rs.take_actions())
        self._drop(st)
        self.streams.pop(st.log_id, None)
        self.queue.log_failed(st.log_id, exc)

    def _unreachable_due(self, st: _LogStream) -> None:
        st.unreachable_check = None
        self._check_unreachable(st)

    async def _connect_then_start(self, st: _LogStream, c: Connection, node: int) -> None:
        try:
            await c.connect()
        except LogDeviceError as exc:
            if exc.status == E.CONNFAILED and not st.closed:
                st.refused.pop(node, None)  # the latest failure last
                st.refused[node] = exc.message
            if st.connecting.pop(node, None) is not None and not st.closed:
                st.rs.on_connection_closed(node)
                self._after(st)
            self._check_unreachable(st)
            return
        st.reached = True
        a = st.connecting.pop(node, None)
        if a is None or st.closed:
            return
        if c.connected:
            c.post(self._start_message(st, a))
            self.stats.starts_sent += 1
        else:
            st.rs.on_connection_closed(node)
            self._after(st)
