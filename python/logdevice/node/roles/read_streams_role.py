"""The read-streams role: the asyncio side of serving read streams on a storage node.

Owns START, WINDOW and STOP.  Each stream is a ``ServerReadStream`` (the logic, in
``readstream.server``); this role only moves it along:

- START: answer STARTED (OK with the log's release pointer; NOTFOUND for a log not in the
  config; DISABLED on a node without storage; INVALID_PARAM for an empty range;
  SHUTDOWN while stopping), then take the stream's first step at once if it is short
  (a young log's few records leave with STARTED), else schedule it.  A START for a
  stream id the connection already uses rewinds: the new stream replaces the old one (a
  START with a lower filter version than the current stream's is stale and ignored).
- One pump task serves the ready streams round-robin, one ``step`` each per turn with a
  byte budget, and yields to the loop between turns.  A step with much to read runs in
  this role's reader thread (LogsDB reads release the GIL); a short one (a tailing
  reader's few new records) runs inline, which saves the thread hop.
- A stream caught up with the release pointer parks per log; ``on_release`` wakes it.  A
  stream at the end of its window waits for WINDOW; one past ``until_lsn`` stays (quiet)
  until STOP or the connection closes.
- Back-pressure: a connection whose unsent bytes pass ``HIGH_WATER`` is not served until
  they fall below ``LOW_WATER`` (checked on a short timer: the connection has no drain
  event), so a slow reader costs memory for one frame, not for its backlog.
- A read that fails (other than "partition dropped, retry") ends the stream with a
  STARTED carrying the error: the client treats the node as down for that stream.

``describe`` lists the open streams (GET_READ_STREAMS, ldshell's ``readers`` table).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, NamedTuple

from ldcore.lsn import LSN_MAX
from logdevice.config.location import Location, NodeLocationScope
from logdevice.config.model import METADATA_LOG_BIT
from logdevice.errors import E, LogDeviceError
from logdevice.node.roles.role import NodeServices, Peer, Role
from logdevice.node.roles.stats import ReadTotals
from logdevice.protocol import (
    GetReadStreams,
    ReadStreamList,
    Start,
    Started,
    StartFlag,
    Stop,
    Window,
    table_reply,
)
from logdevice.readstream.server import (
    DEFAULT_BUDGET_BYTES,
    ServerReadStream,
    StreamState,
)

if TYPE_CHECKING:
    from logdevice.config import Config
    from logdevice.storage.logsdb import LogsDB

log = logging.getLogger("logdevice.node.roles.read_streams_role")

__all__ = ["ReadStreamsRole", "ReadStreamRow"]

#: Unsent bytes on a connection above which its streams wait, and below which they go on.
HIGH_WATER = 4 << 20
LOW_WATER = 1 << 20
#: Seconds between checks of a back-pressured connection.
DRAIN_POLL = 0.005
#: A step that may look at more LSNs than this, holding more records than this, runs in
#: the reader thread (a new stream of a young log spans thousands of LSNs but reads a
#: handful of records).
INLINE_LSNS = 128
#: Seconds of inline stream steps the pump runs before it lets the loop turn (appends and
#: incoming frames wait at most this long; a turn's frames leave together).
PUMP_SLICE = 0.001
#: Seconds of first steps a loop turn's STARTs may take at once (the rest are scheduled).
START_SLICE = PUMP_SLICE


class ReadStreamRow(NamedTuple):
    """One open read stream, as ``ReadStreamsRole.describe`` reports it (the columns of
    READ_STREAM_LIST)."""

    read_stream_id: int
    log_id: int
    conn_id: int
    peer: str  # "client", or "N<index>" for another node (recovery digests)
    address: str  # host:port of the peer ("" in process)
    start_lsn: int
    until_lsn: int
    next_lsn: int  # the first LSN not looked at yet
    delivered_to: int  # everything up to here was sent or reported as a gap
    window_high: int
    last_released: int  # the log's release pointer on this node
    filter_version: int
    mode: str  # scd, local_scd, all_send_all, digest
    state: str  # what it waits for: ready, window, release, done
    known_down: tuple[int, ...]  # nodes the client said are down (SCD)
    records_sent: int
    bytes_sent: int
    gaps_sent: int
    started_ms: int  # wall clock when the stream opened (or was last rewound)
    age_ms: int


class _Entry:
    """A stream and the connection it belongs to."""

    __slots__ = ("conn", "stream", "queued", "closed", "started_ms", "t0")

    def __init__(self, conn: Peer, stream: ServerReadStream, t0: float) -> None:
        self.conn = conn
        self.stream = stream
        self.queued = False  # in the ready queue
        self.closed = False  # stopped, replaced or its connection gone
        self.started_ms = time.time_ns() // 1_000_000
        self.t0 = t0  # loop time it opened (its age)


def _mode(s: ServerReadStream) -> str:
    if s.digest:
        return "digest"
    if not s.scd:
        return "all_send_all"
    return "local_scd" if s.local_nodes is not None else "scd"


class ReadStreamsRole(Role):
    """Serves read streams from this node's LogsDB.

    Parameters
    ----------
    node : NodeServices
    db : LogsDB, optional
        The store to read; default: the storage role's (``node.role("storage").db``).
    budget_bytes : int
        Bytes one stream may send per turn before the next ready stream's turn.
    """

    name = "read_streams"

    def __init__(self, node: NodeServices, db: LogsDB | None = None, *,
                 budget_bytes: int = DEFAULT_BUDGET_BYTES) -> None:
        super().__init__(node)
        self._db = db
        self.budget_bytes = int(budget_bytes)
        self._streams: dict[tuple[int, int], _Entry] = {}
        self.totals = ReadTotals()  # closed streams' counts, for metrics
        self._by_conn: dict[int, dict[int, _Entry]] = {}
        # log -> the streams waiting for its next release: the entry itself while it is
        # the only one (most logs have one reader; a set costs 200 bytes), else a set
        self._tailing: dict[int, _Entry | set[_Entry]] = {}
        self._ready: deque[_Entry] = deque()
        self._blocked: dict[int, list[_Entry]] = {}  # conn id -> streams waiting for drain
        self._wake = asyncio.Event()
        self._pump_task: asyncio.Task[None] | None = None
        self._exec = ThreadPoolExecutor(1, thread_name_prefix="read-streams")
        self._region_nodes: dict[str, tuple[int, ...]] = {}
        self._stopping = False
        self._stepping = 0  # steps under way (the pump's in the thread, one inline)
        # First steps taken in on_start this loop turn may run until this (monotonic)
        # time; None: no START yet this turn.  (Thousands of STARTs arrive in one read:
        # stepping them all at once would hold the loop, heartbeats included, for a
        # second.)
        self._start_slice_end: float | None = None
        self.steps_inline = 0  # steps run on the event loop
        self.steps_in_thread = 0  # steps run in the reader thread

    def handlers(self) -> Mapping[type, Any]:
        return {Start: self.on_start, Window: self.on_window, Stop: self.on_stop,
                GetReadStreams: self.on_get_read_streams}

    # ------------------------------------------------------------------ life cycle

    async def start(self) -> None:
        self._pump_task = self.node.loop.create_task(self._pump(), name="read-streams")

    async def stop(self) -> None:
        self._stopping = True
        if self._pump_task is not None:
            self._pump_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pump_task
            self._pump_task = None
        for entry in list(self._streams.values()):
            self._drop(entry)

    def close(self) -> None:
        self._exec.shutdown(wait=True)

    @property
    def db(self) -> LogsDB | None:
        if self._db is not None:
            return self._db
        if self.node.has_role("storage"):
            return self.node.role("storage").db  # type: ignore[no-any-return]
        return None

    def _report_damage(self, damage: str) -> None:
        """A read found the store damaged: the storage role marks it for rebuilding."""
        if self.node.has_role("storage"):
            self.node.role("storage").report_damage(damage)

    def stream_count(self) -> int:
        return len(self._streams)

    @property
    def idle(self) -> bool:
        """No stream has anything to send right now (all parked or waiting)."""
        return not self._ready and not self._stepping

    # ------------------------------------------------------------------ handlers

    def on_start(self, conn: Peer, msg: Start, refreshed: bool = False) -> None:
        status = self._start_status(msg)
        if not refreshed and status == E.NOTFOUND:
            def again() -> None:
                if not conn.closed:
                    self.on_start(conn, msg, refreshed=True)

            if self.node.after_fresh_logs_config(again):
                return  # a log created a moment ago? decided after a fresh read
        key = (conn.id, int(msg.read_stream_id))
        old = self._streams.get(key)
        if old is not None:
            if msg.filter_version < old.stream.filter_version:
                return  # stale: a newer START for this stream came first
            self._drop(old)
        if status != E.OK:
            conn.send(Started(read_stream_id=msg.read_stream_id,
                              filter_version=msg.filter_version, status=status))
            return
        released = self.last_released(msg.log_id)
        stream = ServerReadStream(msg, self.node.index, local_nodes=self._local_nodes(conn, msg))
        entry = _Entry(conn, stream, self.node.loop.time())
        self._streams[key] = entry
        self._by_conn.setdefault(conn.id, {})[stream.read_stream_id] = entry
        self.totals.started += 1
        conn.send(Started(read_stream_id=msg.read_stream_id, filter_version=msg.filter_version,
                          status=E.OK, last_released=released))
        db = self.db
        if db is not None and not db.closed and self._start_slice_left():
            trim = db.trim_point(stream.log_id)
            if (stream.state(released, trim) is StreamState.READY
                    and self._inline(db, stream, released)
                    and getattr(conn, "write_buffer_size", 0) <= HIGH_WATER):
                # A short first step (a young log's few records) goes out with STARTED:
                # no trip through the ready queue.
                self._step_inline(entry, db, released, trim)
                return
        self._schedule(entry)

    def _start_slice_left(self) -> bool:
        """Whether this loop turn's STARTs may still take their first step at once (for
        ``START_SLICE`` seconds a turn)."""
        now = time.monotonic()
        if self._start_slice_end is None:
            self._start_slice_end = now + START_SLICE
            self.node.loop.call_soon(self._end_start_slice)
        return now <= self._start_slice_end

    def _end_start_slice(self) -> None:
        self._start_slice_end = None

    def on_config_change(self, old: Config, new: Config) -> None:
        """Streams of logs removed at runtime end: the client hears NOTFOUND (its reader
        ends the log with a NOTINCONFIG gap).  The records stay on disk."""
        self._region_nodes.clear()  # the node list may have changed
        for entry in list(self._streams.values()):
            s = entry.stream
            data_log = s.log_id & ~METADATA_LOG_BIT
            if old.has_log(data_log) and not new.has_log(data_log):
                self._drop(entry)
                entry.conn.send(Started(read_stream_id=s.read_stream_id,
                                        filter_version=s.filter_version, status=E.NOTFOUND))

    def on_window(self, conn: Peer, msg: Window) -> None:
        entry = self._streams.get((conn.id, int(msg.read_stream_id)))
        if entry is not None and entry.stream.on_window(msg.window_high, msg.filter_version):
            self._schedule(entry)

    def on_stop(self, conn: Peer, msg: Stop) -> None:
        entry = self._streams.get((conn.id, int(msg.read_stream_id)))
        if entry is not None:
            self._drop(entry)

    def on_get_read_streams(self, conn: Peer, msg: GetReadStreams) -> None:
        conn.send(table_reply(ReadStreamList, msg.request_id, self.node.index,
                              self.describe()))

    def on_release(self, log_id: int, lsn: int) -> None:
        waiting = self._tailing.pop(log_id, None)
        if isinstance(waiting, _Entry):
            self._schedule(waiting)
        elif waiting:
            for entry in waiting:
                self._schedule(entry)

    def holds(self, conn: Peer) -> bool:
        return bool(self._by_conn.get(conn.id))

    def on_connection_closed(self, conn: Peer) -> None:
        for entry in list(self._by_conn.get(conn.id, {}).values()):
            self._drop(entry)
        self._blocked.pop(conn.id, None)

    # ------------------------------------------------------------------ helpers

    def _start_status(self, msg: Start) -> E:
        if self._stopping:
            return E.SHUTDOWN
        log_id = int(msg.log_id)
        data_log = log_id & ~METADATA_LOG_BIT
        if data_log == 0 or not self.node.config.has_log(data_log):
            return E.NOTFOUND
        if self.db is None or not self.node.me.is_storage:
            return E.DISABLED
        if not 0 <= msg.start_lsn <= msg.until_lsn <= LSN_MAX:
            return E.INVALID_PARAM
        # SCD's known-down list and replication feed the shipping kernel: refuse what no
        # config could produce here rather than fail later inside the stream.
        has_node = self.node.config.has_node
        if not all(has_node(n) for n in msg.known_down) or not 1 <= msg.replication <= 255:
            return E.INVALID_PARAM
        return E.OK

    def last_released(self, log_id: int) -> int:
        """The release pointer of ``log_id`` as this node knows it (the storage role's:
        releases reach this role through it)."""
        if self.node.has_role("storage"):
            return self.node.role("storage").last_released(log_id)
        return self._db.last_released(log_id) if self._db is not None else 0

    def _local_nodes(self, conn: Peer, msg: Start) -> tuple[int, ...] | None:
        """Nodes in the client's region (local SCD), from the START or the HELLO."""
        if not msg.flags & StartFlag.LOCAL_SCD_ENABLED:
            return None
        text = msg.client_location or getattr(conn, "peer_location", "")
        try:
            region = Location.parse(text).label(NodeLocationScope.REGION)
        except ValueError:
            return None
        if not region:
            return None
        nodes = self._region_nodes.get(region)
        if nodes is None:
            nodes = tuple(sorted(
                n.index for n in self.node.config.nodes
                if n.location.label(NodeLocationScope.REGION) == region))
            self._region_nodes[region] = nodes
        return nodes

    def live_streams(self) -> list[ServerReadStream]:
        """The streams open now (metrics add their counts to ``totals``)."""
        return [e.stream for e in self._streams.values()]

    def describe(self) -> list[ReadStreamRow]:
        """One row per open stream, by connection and stream id."""
        now = self.node.loop.time()
        db = self.db
        rows = []
        for (conn_id, _), e in sorted(self._streams.items()):
            s, conn = e.stream, e.conn
            released = self.last_released(s.log_id)
            trim = db.trim_point(s.log_id) if db is not None and not db.closed else 0
            peer = f"N{conn.peer_node}" if conn.peer_role == "node" else "client"
            rows.append(ReadStreamRow(
                s.read_stream_id, s.log_id, conn_id, peer, getattr(conn, "peername", ""),
                s.start_lsn, s.until_lsn, s.next_lsn, s.reported_to, s.window_high,
                released, s.filter_version, _mode(s), s.state(released, trim).value,
                s.known_down, s.stats.records_sent, s.stats.payload_bytes_sent,
                s.stats.gaps_sent, e.started_ms, int((now - e.t0) * 1000)))
        return rows

    def _drop(self, entry: _Entry) -> None:
        entry.closed = True
        s = entry.stream
        self.totals.fold(s)
        self._streams.pop((entry.conn.id, s.read_stream_id), None)
        per_conn = self._by_conn.get(entry.conn.id)
        if per_conn is not None and per_conn.get(s.read_stream_id) is entry:
            del per_conn[s.read_stream_id]
            if not per_conn:
                del self._by_conn[entry.conn.id]
        self._unpark(s.log_id, entry)

    def _schedule(self, entry: _Entry, pointers: tuple[int, int] | None = None) -> None:
        """Queue ``entry`` if it has work, else park it where its wake-up comes from
        (``pointers``: the log's release pointer and trim point, if known)."""
        if entry.closed or entry.queued:
            return
        s = entry.stream
        if pointers is None:
            db = self.db
            trim = db.trim_point(s.log_id) if db is not None and not db.closed else 0
            pointers = self.last_released(s.log_id), trim
        state = s.state(*pointers)
        if state is StreamState.READY:
            self._unpark(s.log_id, entry)
            entry.queued = True
            self._ready.append(entry)
            self._wake.set()
        elif state is StreamState.RELEASE:
            self._park(s.log_id, entry)
        # WINDOW: on_window schedules it; DONE: nothing more to send.

    def _park(self, log_id: int, entry: _Entry) -> None:
        """``entry`` waits for the next release of ``log_id``."""
        held = self._tailing.get(log_id)
        if held is None:
            self._tailing[log_id] = entry
        elif isinstance(held, set):
            held.add(entry)
        elif held is not entry:
            self._tailing[log_id] = {held, entry}

    def _unpark(self, log_id: int, entry: _Entry) -> None:
        held = self._tailing.get(log_id)
        if held is entry:
            del self._tailing[log_id]
        elif isinstance(held, set):
            held.discard(entry)
            if not held:
                del self._tailing[log_id]

    # ------------------------------------------------------------------ the pump

    async def _pump(self) -> None:
        loop = self.node.loop
        clock = time.monotonic
        slice_end = clock() + PUMP_SLICE
        while True:
            if not self._ready:
                self._wake.clear()
                await self._wake.wait()
                slice_end = clock() + PUMP_SLICE
                continue
            if clock() > slice_end:
                await asyncio.sleep(0)
                slice_end = clock() + PUMP_SLICE
                continue  # the turn may have closed or rescheduled streams
            entry = self._ready.popleft()
            entry.queued = False
            if entry.closed:
                continue
            conn = entry.conn
            if conn.closed:
                self._drop(entry)
                continue
            if getattr(conn, "write_buffer_size", 0) > HIGH_WATER:
                self._wait_for_drain(entry)
                continue
            db = self.db
            if db is None or db.closed:
                self._drop(entry)
                continue
            s = entry.stream
            released = self.last_released(s.log_id)
            if not self._inline(db, s, released):
                self.steps_in_thread += 1
                failures = s.stats.checksum_failures
                self._stepping += 1
                try:
                    msgs = await loop.run_in_executor(
                        self._exec, s.step, db, released, db.trim_point(s.log_id),
                        self.budget_bytes)
                except Exception as exc:
                    self._step_failed(entry, exc)
                    continue
                finally:
                    self._stepping -= 1
                slice_end = clock() + PUMP_SLICE
                self._stepped(entry, msgs, failures)
            else:
                self._step_inline(entry, db, released, db.trim_point(s.log_id))

    def _inline(self, db: LogsDB, s: ServerReadStream, released: int) -> bool:
        """Whether a step of ``s`` is short enough to run on the loop: few LSNs to look
        at, or few records among them."""
        upto = min(s.until_lsn, s.window_high)
        span = (upto if s.digest else min(upto, released)) - s.next_lsn + 1
        return span <= INLINE_LSNS or db.records_within(s.log_id, s.next_lsn,
                                                        upto) <= INLINE_LSNS

    def _step_inline(self, entry: _Entry, db: LogsDB, released: int, trim: int) -> None:
        """One step of ``entry``'s stream on the loop; its messages go out and it is
        scheduled again."""
        s = entry.stream
        self.steps_inline += 1
        failures = s.stats.checksum_failures
        self._stepping += 1
        try:
            msgs = s.step(db, released, trim, self.budget_bytes)
        except Exception as exc:
            self._step_failed(entry, exc)
            return
        finally:
            self._stepping -= 1
        self._stepped(entry, msgs, failures, (released, trim))

    def _step_failed(self, entry: _Entry, exc: Exception) -> None:
        s = entry.stream
        if isinstance(exc, LogDeviceError):
            if exc.status == E.CHECKSUM_MISMATCH:  # RocksDB found a damaged block
                self._report_damage(f"reading log {s.log_id}: {exc}")
            if exc.status == E.AGAIN and not entry.closed:
                self._schedule(entry)  # a partition went away under the read: retry
            elif not entry.closed:
                self._fail(entry, exc.status, exc)
            return
        # a bug must not stop every other stream
        log.error("N%d: read stream %r failed", self.node.index, s, exc_info=exc)
        self._fail(entry, E.FAILED, exc)

    def _stepped(self, entry: _Entry, msgs: list[Any], failures: int,
                 pointers: tuple[int, int] | None = None) -> None:
        """After a step that found ``failures`` checksum failures before it: report new
        ones, send the messages, schedule the stream again (``pointers``: the log's
        release pointer and trim point, when they cannot have moved since the step)."""
        s = entry.stream
        if s.stats.checksum_failures > failures:
            self._report_damage(
                f"{s.stats.checksum_failures - failures} copies of log {s.log_id} "
                f"failed their checksum")
        if entry.closed:
            return  # stopped or rewound while reading: the client ignores these
        if msgs:
            entry.conn.send_many(msgs)
        self._schedule(entry, pointers)

    def _fail(self, entry: _Entry, status: E, exc: BaseException) -> None:
        s = entry.stream
        log.warning("N%d: read stream %d of log %d ends: %s", self.node.index,
                    s.read_stream_id, s.log_id, exc)
        entry.conn.send(Started(read_stream_id=s.read_stream_id,
                                filter_version=s.filter_version, status=status,
                                last_released=self.last_released(s.log_id)))
        self._drop(entry)

    def _wait_for_drain(self, entry: _Entry) -> None:
        conn_id = entry.conn.id
        waiting = self._blocked.get(conn_id)
        if waiting is not None:
            waiting.append(entry)
            return
        self._blocked[conn_id] = [entry]
        self.node.loop.call_later(DRAIN_POLL, self._check_drain, entry.conn)

    def _check_drain(self, conn: Peer) -> None:
        waiting = self._blocked.get(conn.id)
        if waiting is None:
            return
        if conn.closed:
            del self._blocked[conn.id]
            return
        if getattr(conn, "write_buffer_size", 0) > LOW_WATER:
            self.node.loop.call_later(DRAIN_POLL, self._check_drain, conn)
            return
        del self._blocked[conn.id]
        for entry in waiting:
            self._schedule(entry)
