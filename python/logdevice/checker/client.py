"""Asking storage nodes what they hold: GET_RECORD_AVAILABILITY over client connections.

``AvailabilityClient.stream`` reads one log from one node page by page (a
``NodeStream``); each page becomes a ``verdict.NodeHoldings`` (LSNs decoded from the BP-34
bytes, copysets as runs over the page's table), handed out window by window along with
the node's trim point and release pointer.  ``fetch_log`` takes everything at once.  The
client counts the bytes it received, so a check can report what it cost the network.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from ldcore import availability
from ldcore.lsn import LSN_MAX
from logdevice.checker.verdict import NodeHoldings
from logdevice.checker.wire import unpack_availability, unpack_runs
from logdevice.client.net.connection import Connection
from logdevice.config import Config
from logdevice.errors import E, LogDeviceError, TimedOutError, error_for
from logdevice.protocol import (
    GetClusterView,
    GetMetadata,
    GetRecordAvailability,
    RecordAvailability,
)
from logdevice.security import ConnectSecurity

__all__ = ["AvailabilityClient", "NodeStream", "Fetched", "REPLY_OVERHEAD", "DEFAULT_PAGE_RECORDS"]

#: Bytes of a reply besides its sections (frame prefix and header), for the byte count.
REPLY_OVERHEAD = 64
#: Records per reply asked for: ~0.5 MB on the wire for per-record copysets; fewer, larger
#: replies keep the per-reply costs (a round trip, a decode) small against the records.
DEFAULT_PAGE_RECORDS = 1 << 18


@dataclass
class Fetched:
    """One node's answer for one log: what it holds, its trim point and release pointer."""

    holdings: NodeHoldings
    trim_point: int
    last_released: int


class AvailabilityClient:
    """Connections to the storage nodes and paged GET_RECORD_AVAILABILITY calls.

    Parameters
    ----------
    config : Config
    timeout : float
        Seconds for connecting and for each reply.
    page_records : int
        Records per reply asked for.
    security : ConnectSecurity, optional
        TLS and token of the connections (default: plain TCP, anonymous).
    """

    def __init__(self, config: Config, *, timeout: float = 5.0,
                 page_records: int = DEFAULT_PAGE_RECORDS,
                 security: ConnectSecurity | None = None) -> None:
        self.config = config
        self.security = security
        self.timeout = timeout
        self.page_records = page_records
        self.conns: dict[int, Connection] = {}
        self.bytes_received = 0  # sections of every reply, plus REPLY_OVERHEAD each
        # Replies are decoded off the event loop, two at a time (the work releases the GIL).
        self.decoder = ThreadPoolExecutor(2, thread_name_prefix="checker-decode")

    def conn(self, node: int) -> Connection:
        c = self.conns.get(node)
        if c is None:  # reused across rounds: it reconnects when needed
            n = self.config.node(node)
            c = self.conns[node] = Connection(node, n.host, n.port, self.config.cluster,
                                              connect_timeout=self.timeout,
                                              security=self.security)
        return c

    def stream(self, node: int, log_id: int, lo: int = 1,
               hi: int = LSN_MAX - 1) -> NodeStream:
        """``node``'s records of ``log_id`` in ``[lo, hi]``, page by page (``NodeStream``)."""
        return NodeStream(self, node, log_id, lo, hi)

    async def fetch_log(self, node: int, log_id: int) -> Fetched:
        """Everything ``node`` holds of ``log_id`` at once (small logs, tools; the checker
        itself goes window by window)."""
        stream = self.stream(node, log_id)
        try:
            await stream.fill(LSN_MAX)
            return Fetched(_concat(node, stream.take(LSN_MAX - 1)), stream.trim_point,
                           stream.last_released)
        finally:
            stream.close()

    def count(self, reply: RecordAvailability) -> None:
        """Add a reply to ``bytes_received``."""
        self.bytes_received += REPLY_OVERHEAD + sum(len(memoryview(x)) for x in (
            reply.availability, reply.availability_packed, reply.runs_zstd)) + (
            reply.run_lengths.nbytes + reply.run_copysets.nbytes + reply.copysets.nbytes)

    @staticmethod
    def decode(node: int, reply: RecordAvailability) -> NodeHoldings:
        """What a reply lists, packed or not; ``ValueError`` if its parts do not fit
        together."""
        if reply.n_runs:
            held = unpack_availability(reply.availability_packed)
            lengths, index = unpack_runs(reply.runs_zstd, reply.n_runs, reply.index_width)
        else:
            held = availability.decode(reply.availability)
            lengths, index = reply.run_lengths, reply.run_copysets
        lsns = held.to_array().view(np.uint64)  # ids are >= 0
        # A node holding nothing of the log sends a (0, 0) table: no width to infer.
        table = np.asarray(reply.copysets, np.int16)
        # NodeHoldings checks that the runs fit the LSNs and the table (ValueError if not).
        return NodeHoldings(node, lsns, lengths, index,
                            table.reshape(len(table), -1 if table.size else 0))

    async def fetch_node(self, node: int, logs: Iterable[int]) -> dict[int, Fetched]:
        """Every log of ``logs`` from ``node``; raises if the node fails on any."""
        out = {}
        for log_id in logs:
            out[log_id] = await self.fetch_log(node, log_id)
        return out

    async def _any_node(self, make: Callable[[], Any], what: str,
                        skip: Collection[int] = ()) -> Any:
        """The reply to ``make()`` of the first node (in config order, ``skip`` left
        out) that answers; TIMEDOUT when none does."""
        loop = asyncio.get_running_loop()
        last = "no node to ask"
        for n in self.config.nodes:
            if n.index in skip:
                continue
            try:
                reply = await self.conn(n.index).request(make(), loop.time() + self.timeout)
            except OSError as exc:
                last = f"N{n.index}: {exc}"
                continue
            except LogDeviceError as exc:
                if exc.status not in (E.CONNFAILED, E.TIMEDOUT):
                    raise
                last = f"N{n.index}: {exc}"
                continue
            if reply.status != E.OK:
                raise error_for(reply.status, f"N{n.index}: {what}: {reply.message}")
            return reply
        raise TimedOutError(message=f"no node answered for the {what}; last: {last}")

    async def metadata(self, kind: str, log_ids: Iterable[int] = ()) -> Any:
        """The body of a GET_METADATA of ``kind`` (see ``node.roles.metadata_role``), from the
        first node that answers: the checker never opens the epoch store."""
        ids = np.array(list(log_ids), np.uint64)
        reply = await self._any_node(
            lambda: GetMetadata(request_id=0, kind=kind, log_ids=ids), f"metadata ({kind})")
        return reply.body

    async def dead_for_ms(self, skip: Collection[int] = ()) -> dict[int, int]:
        """The cluster's view of who is down: each node the first node that answers (of
        those not in ``skip``) holds dead, with for how long (ms), from its failure
        detector (GET_CLUSTER_VIEW)."""
        view = await self._any_node(lambda: GetClusterView(request_id=0), "cluster view",
                                    skip)
        return {int(n): int(ms) for n, ms in view.dead_for_ms.items()}

    async def close(self) -> None:
        for c in self.conns.values():
            await c.aclose()
        self.decoder.shutdown(wait=True)


class NodeStream:
    """One node's records of one log in ``[lo, hi]``, read page by page into a buffer that
    the caller empties window by window (``fill``, then ``take``): a check of a huge log
    holds a few pages per node, never the whole log.  The next page is asked for as soon
    as a reply arrives, so the node reads it while this side decodes and judges, up to
    twice what the last ``fill`` wanted.

    ``trim_point`` and ``last_released`` are the node's, from its latest reply.  Errors
    (``LogDeviceError``, ``OSError``) come out of ``fill``; calling ``fill`` again asks
    again from where the stream stands.
    """

    def __init__(self, asker: AvailabilityClient, node: int, log_id: int, lo: int,
                 hi: int) -> None:
        self.asker, self.node, self.log_id, self.hi = asker, node, log_id, hi
        self.next_lsn = lo
        self.done = lo > hi
        self.trim_point = self.last_released = 0
        self._pages: list[NodeHoldings] = []
        self._buffered = 0
        self._pending: asyncio.Future[RecordAvailability] | None = None

    @property
    def horizon(self) -> int:
        """Every record of the node up to this LSN is in the buffer."""
        return self.hi if self.done else self.next_lsn - 1

    def _ask(self) -> None:
        loop = asyncio.get_running_loop()
        self._pending = asyncio.ensure_future(self.asker.conn(self.node).request(
            GetRecordAvailability(request_id=0, log_id=self.log_id, lo=self.next_lsn,
                                  hi=self.hi, max_records=self.asker.page_records),
            loop.time() + self.asker.timeout))

    async def fill(self, want: int) -> None:
        """Read until ``want`` records are buffered or the node has no more."""
        loop = asyncio.get_running_loop()
        while not self.done and self._buffered < want:
            if self._pending is None:
                self._ask()
            assert self._pending is not None
            try:
                reply = await self._pending
            finally:
                self._pending = None
            if reply.status != E.OK:
                raise LogDeviceError(reply.status, f"N{self.node} answered "
                                                   f"{reply.status.name} for log {self.log_id}")
            self.done = reply.done or reply.next_lsn <= reply.lo or reply.next_lsn > self.hi
            self.next_lsn = reply.next_lsn
            if not self.done and self._buffered < 2 * want:  # read ahead meanwhile
                self._ask()
            self.asker.count(reply)
            try:  # decoding releases the GIL: other nodes' replies go on meanwhile
                page = await loop.run_in_executor(self.asker.decoder,
                                                  AvailabilityClient.decode, self.node, reply)
            except ValueError as exc:  # AvailabilityError is a ValueError too
                raise LogDeviceError(E.BADMSG, f"N{self.node}: bad RECORD_AVAILABILITY: "
                                               f"{exc}") from None
            self._pages.append(page)
            self._buffered += len(page.lsns)
            self.trim_point, self.last_released = reply.trim_point, reply.last_released

    def last_at_or_below(self, upto: int) -> int | None:
        """The highest buffered LSN at or below ``upto`` (None if there is none)."""
        for page in reversed(self._pages):
            i = int(np.searchsorted(page.lsns, np.uint64(upto), "right"))
            if i:
                return int(page.lsns[i - 1])
        return None

    def take(self, upto: int) -> list[NodeHoldings]:
        """The buffered pages' records at or below ``upto``, removed from the buffer, as
        the pages they came in (``verdict.judge`` takes them so: no copy joins them)."""
        taken, kept = [], []
        for page in self._pages:
            if not len(page.lsns) or int(page.lsns[-1]) <= upto:
                taken.append(page)
            elif int(page.lsns[0]) > upto:
                kept.append(page)
            else:
                taken.append(page.within(0, upto))
                kept.append(page.within(upto + 1, LSN_MAX))
        self._pages = kept
        self._buffered = sum(len(p.lsns) for p in kept)
        return taken

    def close(self) -> None:
        """Stop the page on its way, if any."""
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None


def _concat(node: int, pages: list[NodeHoldings]) -> NodeHoldings:
    """Pages of one node as one holding: their tables stacked, rows offset to match."""
    if len(pages) == 1:
        return pages[0]
    if not pages:
        return NodeHoldings(node, np.empty(0, np.uint64), np.empty(0, np.int64),
                            np.empty(0, np.int64), np.empty((0, 0), np.int16))
    width = max(p.table.shape[1] for p in pages)
    offsets = np.cumsum([0] + [len(p.table) for p in pages[:-1]])
    table = np.concatenate([np.pad(p.table, ((0, 0), (0, width - p.table.shape[1])),
                                   constant_values=-1) for p in pages])
    return NodeHoldings(node, np.concatenate([p.lsns for p in pages]),
                        np.concatenate([p.run_lengths for p in pages]),
                        np.concatenate([p.run_rows + at for p, at in
                                        zip(pages, offsets.tolist(), strict=True)]), table)

