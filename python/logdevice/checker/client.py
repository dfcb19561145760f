"""Asking storage nodes what they hold: GET_RECORD_AVAILABILITY over client connections.

``AvailabilityClient.fetch_log`` pages through one log on one node and returns a
``verdict.NodeHoldings`` (LSNs decoded from the BP-34 bytes; per LSN, its copyset's row in
the node's copyset tables, from the runs) with the node's trim point and release
pointer.  It counts the bytes it received,
so a check can report what it cost the network.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from ldcore import availability
from logdevice.checker.runs import check_runs
from logdevice.checker.verdict import NodeHoldings
from logdevice.checker.wire import unpack_availability, unpack_runs
from logdevice.client.connection import Connection
from logdevice.config import Config
from logdevice.errors import E, LogDeviceError
from logdevice.protocol import GetRecordAvailability, RecordAvailability
from logdevice.security import ConnectSecurity

__all__ = ["AvailabilityClient", "Fetched", "REPLY_OVERHEAD", "DEFAULT_PAGE_RECORDS"]

LSN_MAX = 2**64 - 1
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
        self._decoder = ThreadPoolExecutor(2, thread_name_prefix="checker-decode")

    def conn(self, node: int) -> Connection:
        c = self.conns.get(node)
        if c is None:  # reused across rounds: it reconnects when needed
            n = self.config.node(node)
            c = self.conns[node] = Connection(node, n.host, n.port, self.config.cluster,
                                              connect_timeout=self.timeout,
                                              security=self.security)
        return c

    async def fetch_log(self, node: int, log_id: int) -> Fetched:
        """Everything ``node`` holds of ``log_id`` (every page)."""
        loop = asyncio.get_running_loop()
        lsns: list[np.ndarray] = []
        run_lengths: list[np.ndarray] = []
        run_rows: list[np.ndarray] = []  # each run's copyset: a row of the pages' tables
        tables: list[np.ndarray] = []
        trim, released = 0, 0

        def ask(lo: int) -> asyncio.Future[RecordAvailability]:
            return asyncio.ensure_future(self.conn(node).request(
                GetRecordAvailability(request_id=0, log_id=log_id, lo=lo, hi=LSN_MAX - 1,
                                      max_records=self.page_records),
                loop.time() + self.timeout))

        pending = ask(1)
        try:
            while True:
                reply: RecordAvailability = await pending
                if reply.status != E.OK:
                    raise LogDeviceError(reply.status, f"N{node} answered {reply.status.name} "
                                                       f"for log {log_id}")
                done = reply.done or reply.next_lsn <= reply.lo
                if not done:  # the node reads the next page while we decode this one
                    pending = ask(reply.next_lsn)
                self.bytes_received += REPLY_OVERHEAD + sum(len(memoryview(x)) for x in (
                    reply.availability, reply.availability_packed, reply.runs_zstd)) + (
                    reply.run_lengths.nbytes + reply.run_copysets.nbytes + reply.copysets.nbytes)
                try:  # decoding releases the GIL: other nodes' replies go on meanwhile
                    page, lengths, rows = await loop.run_in_executor(self._decoder,
                                                                     self._decode, reply)
                except ValueError as exc:  # AvailabilityError is a ValueError too
                    raise LogDeviceError(E.BADMSG, f"N{node}: bad RECORD_AVAILABILITY: {exc}"
                                         ) from None
                # The pages' tables are stacked: offset this page's rows past the others.
                lsns.append(page)
                run_lengths.append(lengths)
                run_rows.append(rows + sum(len(t) for t in tables))
                # A node holding nothing of the log sends a (0, 0) table: no width to infer.
                table = np.asarray(reply.copysets, np.int16)
                tables.append(table.reshape(len(table), -1 if table.size else 0))
                trim, released = reply.trim_point, reply.last_released
                if done:
                    break
        finally:
            if not pending.done():  # an error while the next page was on its way
                pending.cancel()
        holdings = await loop.run_in_executor(self._decoder, self._holdings, node, lsns,
                                              run_lengths, run_rows, tables)
        return Fetched(holdings, trim, released)

    @staticmethod
    def _holdings(node: int, lsns: list[np.ndarray], run_lengths: list[np.ndarray],
                  run_rows: list[np.ndarray], tables: list[np.ndarray]) -> NodeHoldings:
        """The pages of one node put together (``ValueError`` if they disagree)."""
        width = max((t.shape[1] for t in tables), default=0)
        table = (np.concatenate([np.pad(t, ((0, 0), (0, width - t.shape[1])),
                                        constant_values=-1) for t in tables])
                 if tables else np.empty((0, 0), np.int16))
        return NodeHoldings(node, np.concatenate(lsns), np.concatenate(run_lengths),
                            np.concatenate(run_rows), table)

    @staticmethod
    def _decode(reply: RecordAvailability) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(stored LSNs, run lengths, each run's row in ``reply.copysets``) of a reply,
        packed or not; ``ValueError`` if they do not fit together."""
        if reply.n_runs:
            held = unpack_availability(reply.availability_packed)
            lengths, index = unpack_runs(reply.runs_zstd, reply.n_runs, reply.index_width)
        else:
            held = availability.decode(reply.availability)
            lengths, index = reply.run_lengths, reply.run_copysets
        lsns = held.to_array().view(np.uint64)  # ids are >= 0
        lengths, index = check_runs(lengths, index, len(reply.copysets), len(lsns))
        return lsns, lengths, index

    async def fetch_node(self, node: int, logs: Iterable[int]) -> dict[int, Fetched]:
        """Every log of ``logs`` from ``node``; raises if the node fails on any."""
        out = {}
        for log_id in logs:
            out[log_id] = await self.fetch_log(node, log_id)
        return out

    async def close(self) -> None:
        for c in self.conns.values():
            await c.aclose()
        self._decoder.shutdown(wait=True)
