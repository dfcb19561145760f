"""``ld.Client``: the synchronous, thread-safe face of a client.

A ``Client`` runs its own asyncio loop in one background daemon thread (``LoopThread``);
every method hands a coroutine of ``ClientCore`` to that loop and waits for it, bounded
by the client's timeout.  Any number of threads may call it at once, and many appends
in flight share one connection per node (pipelined, matched by request id).

The loop thread, the core, the settings and what readers share are held by the client's
``ClientContext`` (``client.context``), which the client hands to the readers and writers
it creates; they use nothing else of the client.

Bad input is refused before anything is sent: a log that is not in the config gives
``NotFoundError`` (E.NOTFOUND), a payload over the limit ``TooBigError`` (E.TOOBIG),
a wrong type ``InvalidParamError``.  Every failure is a ``LogDeviceError`` with
``.status``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, TypeVar, Unpack, cast

import numpy as np

from ldcore.checksum import crc32c
from logdevice import validate
from logdevice.client import combine, reader_queries, summaries
from logdevice.client.append_batcher import AppendBatcher
from logdevice.client.buffered_writer import (
    BufferedWriter,
    BufferedWriterKwargs,
    check_option_names,
)
from logdevice.client.checkpointed_reader import CheckpointedReader
from logdevice.client.combine import HeadAttributes, TailAttributes
from logdevice.client.context import ClientContext
from logdevice.client.group_reader import GroupReader
from logdevice.client.metadata import decode_statuses
from logdevice.client.payloads import as_payload
from logdevice.client.reader import AsyncReader, Reader
from logdevice.client.reader_core import ReaderOptionKwargs
from logdevice.client.settings import ClientSettingKwargs, ClientSettings
from logdevice.client.summaries import LogSummary, RecordRowsFound
from logdevice.config import Config, LogGroup
from logdevice.epochstore.checkpoints import validate_name
from logdevice.errors import E, InvalidParamError, LogDeviceError, TimedOutError, error_for
from logdevice.protocol import (
    DataSize,
    FindTime,
    GetCheckpoints,
    GetHead,
    GetLogSummaries,
    GetRecordRows,
    GroupHeartbeat,
    SetCheckpoints,
    Trim,
)
from logdevice.records import LSN_MAX

__all__ = ["Client"]

T = TypeVar("T")

# Logs per GET_LOG_SUMMARIES: keeps the answers well below the frame limit.
LOGS_PER_REQUEST = 50_000

# Added to the client timeout when a sync call waits for its coroutine: the coroutine
# enforces the timeout itself; this only catches a stuck loop.
_WAIT_SLACK = 5.0


class Client:
    """A connection to one cluster.

    Parameters
    ----------
    config : path or Config
        The cluster config file, or an already loaded ``Config``.
    timeout : float
        Seconds any call may take before it fails with ``TimedOutError`` (E.TIMEDOUT).
    **settings : ClientSettingKwargs
        Client settings (meaning and defaults: ``ClientSettings``): ``connect_timeout``,
        ``max_payload_size``, ``initial_backoff``, ``max_backoff``,
        ``view_refresh_interval``, ``suspect_time``, ``append_checksum``,
        ``max_redirects``, ``max_appends_in_flight``, ``unreachable_timeout``,
        ``keepalive_timeout``, ``view_max_age``, ``append_batch_bytes``,
        ``append_linger``, ``tls_cert``, ``tls_key``, ``tls_ca``, ``token``.  Another name:
        ``InvalidParamError`` listing these.

    Examples
    --------
    >>> with ld.Client("cluster.json") as client:          # doctest: +SKIP
    ...     lsn = client.append(1, b"hello")
    """

    def __init__(self, config: str | os.PathLike[str] | Config, timeout: float = 10.0,
                 **settings: Unpack[ClientSettingKwargs]) -> None:
        loaded = config if isinstance(config, Config) else Config.load(config)
        timeout = validate.timeout(timeout, positive=True)
        # The loop, core, runtime log groups and what readers share live in the context;
        # readers and writers get the context, not the client.
        self._ctx = ClientContext(loaded, ClientSettings.from_config(loaded, settings),
                                  timeout, owner=self)
        self._core = self._ctx.core
        self._loop = self._ctx.loop
        self._appends = AppendBatcher(self._loop, self._core)
        self._ctx.on_close(self._appends.close)
        self._tails_seen: dict[int, TailAttributes] = {}  # written on the client loop

    def __repr__(self) -> str:
        state = "closed" if self._ctx.closed else "open"
        return f"<Client cluster={self.config.cluster!r} {state}>"

    @property
    def context(self) -> ClientContext:
        """What this client's readers and writers work with: its loop, core, settings,
        log groups and shared reader state (see ``ClientContext``)."""
        return self._ctx

    @property
    def config(self) -> Config:
        """The effective config: the config file's, with the log groups created at
        runtime (kept current)."""
        return self._ctx.config

    @config.setter
    def config(self, config: Config) -> None:
        self._ctx.adopt_config(config)

    @property
    def settings(self) -> ClientSettings:
        """The client settings (``ClientSettings``)."""
        return self._ctx.settings

    @property
    def timeout(self) -> float:
        """Seconds any call may take (the default of every call's ``timeout``)."""
        return self._ctx.timeout

    @timeout.setter
    def timeout(self, timeout: float) -> None:
        self._ctx.timeout = timeout

    # ------------------------------------------------------------------ checks

    def _log_group(self, log_id: int) -> LogGroup:
        return self._ctx.log_group(log_id)

    # ------------------------------------------------------------------ log groups

    def create_log_group(self, name: str, lo: int, hi: int, *,
                         replication: int | Mapping[str, int],
                         nodeset_size: int | None = None, scd: bool | None = None,
                         sticky_copysets: bool | None = None,
                         backlog_retention_ms: int | None = None,
                         max_writes_in_flight: int | None = None,
                         **attributes: Any) -> LogGroup:
        """Create the log group ``name`` over log ids ``lo..hi`` (inclusive) at runtime.

        The group is stored in the epoch store (LogsConfig); nodes and clients pick it up
        without a restart (within ``logs_config_poll_ms``; a call naming one of its logs
        reads it at once).  It is validated like a ``logs`` entry of the config file.

        Parameters
        ----------
        name : str
            Unique among all log groups, the config file's included.
        lo, hi : int
            The id range; it may not overlap another group's.
        replication : int or dict
            Copies per record, e.g. ``2`` or ``{"rack": 2, "node": 3}``.
        nodeset_size, scd, sticky_copysets, backlog_retention_ms, max_writes_in_flight
            As in the config file (None: the default).
        **attributes
            The other attributes of a config file entry: ``sticky_block_bytes``,
            ``sticky_block_ms``, ``store_timeout_ms``, ``acl``.

        Returns
        -------
        LogGroup

        Raises
        ------
        InvalidParamError
            A bad or unknown attribute (the message lists the valid names).
        LogDeviceError
            EXISTS: the name is taken or the range overlaps a group (both are named).
        """
        self._ctx.check_open()
        attrs = {"replication": replication, "nodeset_size": nodeset_size, "scd": scd,
                 "sticky_copysets": sticky_copysets,
                 "backlog_retention_ms": backlog_retention_ms,
                 "max_writes_in_flight": max_writes_in_flight, **attributes}
        return self._ctx.log_groups.create(name, lo, hi, {k: v for k, v in attrs.items()
                                                      if v is not None})

    def update_log_group(self, name: str, **changes: Any) -> LogGroup:
        """Change attributes of a group created at runtime, e.g.
        ``update_log_group("events", replication=3)``; a value None puts the default back.

        A change of what a sequencer is built from (replication, nodeset size, sticky
        copysets, window, store timeouts) starts a new epoch of each log of the group:
        records from then on follow it, earlier ones keep the placement they were
        written with.

        Raises
        ------
        NotFoundError
            No runtime group has this name.
        InvalidParamError
            An unknown attribute or a bad value, or a group of the config file.
        """
        self._ctx.check_open()
        return self._ctx.log_groups.update(name, changes)

    def remove_log_group(self, name: str) -> None:
        """Remove a group created at runtime: appends to its logs get NOTFOUND and
        readers see a NOTINCONFIG gap.  Its records stay on the nodes until they are
        trimmed or expire; a group created again over the range reads them again.

        Raises
        ------
        NotFoundError
            No runtime group has this name.
        """
        self._ctx.check_open()
        self._ctx.log_groups.remove(name)

    def log_groups(self) -> list[LogGroup]:
        """Every log group, the config file's first, then those created at runtime (as
        of a read of the epoch store now)."""
        self._ctx.check_open()
        self._ctx.log_groups.refresh()
        return list(self.config.logs)

    def _call(self, fn: Callable[..., Coroutine[Any, Any, T]], *args: Any,
              timeout: float | None) -> T:
        self._ctx.check_open()
        t = self._timeout(timeout)
        return cast(T, self._loop.run(fn, *args, timeout=t + _WAIT_SLACK))

    def _timeout(self, timeout: float | None) -> float:
        t = validate.optional_timeout(timeout)
        return self.timeout if t is None else t

    def _prepare_append(self, log_id: int, payload: Any) -> tuple[Any, int]:
        """The checked payload and its crc32c (0 unless the client sends checksums)."""
        ctx = self._ctx
        ctx.log_group(log_id)
        data = as_payload(payload)
        size = len(data)
        settings = ctx.settings
        if size > settings.max_payload_size:
            raise error_for(E.TOOBIG, f"payload of {size} bytes exceeds the limit of "
                                      f"{settings.max_payload_size} bytes")
        return data, crc32c(data) if settings.append_checksum else 0

    # ------------------------------------------------------------------ appends

    def append(self, log_id: int, payload: Any, *, timeout: float | None = None) -> int:
        """Append one record and wait until it is acknowledged (stored on R nodes).

        Returns
        -------
        int
            The record's LSN.  LSNs of records appended synchronously to one log by one
            client increase.

        Raises
        ------
        NotFoundError, TooBigError, InvalidParamError
            Bad input (nothing sent).
        TimedOutError
            Not acknowledged within the timeout, or its sequencer node stopped answering
            for ``keepalive_timeout`` (it may still be stored).
        LogDeviceError
            The sequencer refused it (SEQNOBUFS, OVERLOADED, NOSPC, ...) or the
            connection dropped after it was sent (PEER_CLOSED).
        """
        if self._loop.in_loop_thread():
            raise InvalidParamError(
                message="a blocking append from the client's own loop thread (a future "
                        "callback) would deadlock; use append_async there")
        fut = self.append_async(log_id, payload, timeout=timeout)
        wait = self._timeout(timeout) + _WAIT_SLACK
        try:
            return fut.result(wait)
        except concurrent.futures.TimeoutError:
            raise TimedOutError(message=f"append to log {log_id}: no answer within "
                                        f"{wait:g} s") from None

    def append_async(self, log_id: int, payload: Any, *,
                     timeout: float | None = None) -> concurrent.futures.Future[int]:
        """Start an append; a Future of its LSN (failures as for ``append``).

        Bad input raises here, at once.  The payload is copied unless it is ``bytes``.
        Appends to one log that queue while the client is busy travel to the sequencer
        together (``append_batch_bytes``, ``append_linger``).
        """
        ctx = self._ctx
        ctx.check_open()
        data, checksum = self._prepare_append(log_id, payload)
        return self._appends.submit(log_id, data, checksum,
                                    ctx.timeout if timeout is None else self._timeout(timeout))

    # ------------------------------------------------------------------ tail and head

    @property
    def stats(self) -> dict[str, int]:
        """Back-pressure and batching figures: ``appends_waited`` (appends that queued in
        this client because the log had as many in flight as allowed),
        ``refusals_retried`` (appends a sequencer refused before taking an LSN, tried
        again) and ``append_batches`` (APPEND_BATCH frames the single-record appends
        travelled in, retries included); ``storage_requests`` and
        ``sequencer_requests``: requests sent to storage nodes (one per node of each
        storage-side call) and to sequencer nodes (each attempt, GET_TAILS included)."""
        return dict(self._core.stats)

    def get_tail_lsn(self, log_id: int, *, timeout: float | None = None) -> int:
        """The last released LSN of the log (LSN_INVALID if nothing was released)."""
        return self.get_tail_attributes(log_id, timeout=timeout).last_released_real_lsn

    def get_tail_attributes(self, log_id: int, *,
                            timeout: float | None = None) -> TailAttributes:
        """Last released LSN, its timestamp (and byte offset when tracked), from the
        log's sequencer."""
        self._log_group(log_id)
        return self._call(self._tail, log_id, self._timeout(timeout),
                          timeout=timeout)

    async def _tail(self, log_id: int, timeout: float) -> TailAttributes:
        return self._tail_reply(log_id, await self._core.get_tail(log_id, timeout))

    def _tail_reply(self, log_id: int, reply: Any) -> TailAttributes:
        """A sequencer's OK TAIL of ``log_id`` as ``TailAttributes``, never below what
        this client reported before."""
        tail = TailAttributes(int(reply.lsn), int(reply.timestamp), None)
        # Never report less than this client already did: a sequencer that has not yet
        # learned it was replaced may still answer with its older release.
        seen = self._tails_seen.get(log_id)
        if seen is not None and seen.last_released_real_lsn > tail.last_released_real_lsn:
            return seen
        self._tails_seen[log_id] = tail
        return tail

    def get_head_attributes(self, log_id: int, *,
                            timeout: float | None = None) -> HeadAttributes:
        """Trim point and the timestamp of the first record after it (see ``combine``)."""
        group = self._log_group(log_id)
        return self._call(self._storage, log_id, lambda: GetHead(request_id=0, log_id=log_id),
                          combine.combine_head, group, self._timeout(timeout),
                          timeout=timeout)

    def is_log_empty(self, log_id: int, *, timeout: float | None = None) -> bool:
        """True if the log holds no record past its trim point.

        Answered by reading (see ``reader_queries``): the log is read without payloads
        from its trim point until the first record or past the last released LSN.
        """
        self._log_group(log_id)
        return reader_queries.is_log_empty(self, log_id, self._timeout(timeout))

    # ------------------------------------------------------------------ storage-side calls

    def trim(self, log_id: int, lsn: int, *, force: bool = False,
             timeout: float | None = None) -> None:
        """Trim the log: records at or below ``lsn`` go away; the trim point is persisted
        on the storage nodes.  Needs OK answers from an f-majority of them, else
        ``LogDeviceError(E.PARTIAL)`` (some trimmed) or the common failure.  A trim past
        the log's tail would swallow records not written yet: the nodes refuse it
        (``TooBigError``) unless ``force`` (which needs ``admin`` on the log)."""
        group = self._log_group(log_id)
        validate.lsn(lsn, "trim lsn", below_max=True)
        msg = Trim(request_id=0, log_id=log_id, lsn=lsn, force=bool(force))
        self._call(self._storage, log_id, lambda: msg, combine.combine_trim, group,
                   self._timeout(timeout), timeout=timeout)

    def find_time(self, log_id: int, ms: float, *, timeout: float | None = None) -> int:
        """The first LSN whose record has a timestamp >= ``ms`` (ms since the Unix epoch);
        one past the last record if all are older.  The rule is in ``combine``."""
        group = self._log_group(log_id)
        t = _as_ms(ms, "ms")
        return self._call(self._storage, log_id,
                          lambda: FindTime(request_id=0, log_id=log_id, timestamp=t),
                          combine.combine_find_time, group, self._timeout(timeout),
                          timeout=timeout)

    def data_size(self, log_id: int, start_ms: float, end_ms: float, *,
                  timeout: float | None = None) -> int:
        """Payload bytes of the log's records with timestamps in ``[start_ms, end_ms]``
        (BufferedWriter payloads counted one by one).

        Exact: the range is read (single copy delivery), so the cost grows with the data;
        ``approximate_data_size`` is the cheap estimate from storage-node statistics.
        """
        self._log_group(log_id)
        a, b = _as_ms(start_ms, "start_ms"), _as_ms(end_ms, "end_ms")
        if b < a:
            raise InvalidParamError(message=f"end_ms {b} is before start_ms {a}")
        return reader_queries.data_size(self, log_id, a, b, self._timeout(timeout))

    def approximate_data_size(self, log_id: int, start_ms: float, end_ms: float, *,
                              timeout: float | None = None) -> int:
        """Estimated bytes stored for the log's records with timestamps in
        ``[start_ms, end_ms]``, from each storage node's partition statistics (stored
        record size, headers included; partitions partly in range count in proportion
        to their time overlap), divided by the replication factor."""
        group = self._log_group(log_id)
        a, b = _as_ms(start_ms, "start_ms"), _as_ms(end_ms, "end_ms")
        if b < a:
            raise InvalidParamError(message=f"end_ms {b} is before start_ms {a}")
        return self._call(self._storage, log_id,
                          lambda: DataSize(request_id=0, log_id=log_id, start_ms=a, end_ms=b),
                          combine.combine_data_size, group, self._timeout(timeout),
                          timeout=timeout)

    async def _storage(self, log_id: int, make: Any, rule: Any, group: LogGroup,
                       timeout: float) -> Any:
        """``make()`` to every storage node of the log, the answers combined by ``rule``
        over an f-majority as the read path counts one (failure domains, the nodes'
        authoritative statuses as the nodes tell them)."""
        loop = self._loop.loop
        start = loop.time()
        answers = await self._core.storage_call(log_id, make, timeout,
                                                group.replication_factor)
        try:
            statuses, _since = decode_statuses(await self._ctx.metadata.fetch(
                "shard_statuses", timeout=max(0.1, timeout - (loop.time() - start))))
        except LogDeviceError:  # no node could say: every node counts as it answered
            statuses = {}
        locations = {n.index: n.location for n in self.config.nodes}
        return rule(answers, combine.storage_nodeset(answers, group.replication.to_dict(),
                                                     locations, statuses))

    # ------------------------------------------------------------------ many logs at once

    def log_summaries(self, log_ids: Sequence[int], *, find_times: Sequence[float] = (),
                      size_window: tuple[float, float] | None = None, tails: bool = True,
                      timeout: float | None = None) -> list[LogSummary]:
        """Trim point, last released LSN, time span, size estimate and ``find_time``
        answers of many logs, in one request to each storage node (and, with ``tails``,
        one to each sequencer node); the rules are in ``client.summaries``.

        Parameters
        ----------
        log_ids : sequence of int
        find_times : sequence of float
            Timestamps (ms) to locate in every log: ``LogSummary.find_time`` holds, in
            this order, what ``find_time`` would answer.
        size_window : (start_ms, end_ms), optional
            The window of ``est_bytes`` (default: all records above the trim point), as
            for ``approximate_data_size``.
        tails : bool
            Also ask the logs' sequencers (``get_tail_attributes``, batched per node):
            ``last_released`` then covers every acknowledged append.  Without, it is the
            storage nodes' release pointer: released, but possibly a little older.

        Returns
        -------
        list of LogSummary
            One per log, in the order of ``log_ids``.

        Raises
        ------
        NotFoundError
            A log that is not in the config (nothing sent).
        LogDeviceError
            The first log without an f-majority of answers (PARTIAL or the common
            failure) or whose tail failed; its message names the log.
        """
        logs = [int(x) for x in log_ids]
        groups = [self._log_group(x) for x in logs]
        times = [_as_ms(t, "find_times") for t in find_times]
        a, b = (0, 2**62) if size_window is None else (
            _as_ms(size_window[0], "size_window"), _as_ms(size_window[1], "size_window"))
        if b < a:
            raise InvalidParamError(message=f"size_window ends ({b}) before it starts ({a})")
        found = self._call(self._summaries, logs, groups, times, a, b, tails,
                           self._timeout(timeout), timeout=timeout)
        for s in found:
            if isinstance(s, LogDeviceError):
                raise s
        return cast(list[LogSummary], found)

    async def _summaries(self, logs: list[int], groups: list[LogGroup], times: list[int],
                         a: int, b: int, tails: bool, timeout: float
                         ) -> list[LogSummary | LogDeviceError]:
        loop = self._loop.loop
        start = loop.time()
        seq = asyncio.ensure_future(self._core.get_tails(logs, timeout)) if tails else None
        out: list[LogSummary | LogDeviceError] = []
        for lo in range(0, len(logs), LOGS_PER_REQUEST):
            chunk = logs[lo:lo + LOGS_PER_REQUEST]
            msg = GetLogSummaries(request_id=0, log_ids=np.array(chunk, np.uint64),
                                  find_times=np.array(times, np.int64), size_from_ms=a,
                                  size_to_ms=b)
            answers = await self._many_logs_call(lambda m=msg: m, groups[lo:lo + len(chunk)],
                                                 timeout - (loop.time() - start))
            nodesets = await self._nodesets(answers, groups[lo:lo + len(chunk)],
                                            timeout - (loop.time() - start))
            out += summaries.combine_summaries(chunk, answers, nodesets, len(times))
        if seq is not None:
            tails_found: dict[int, TailAttributes | LogDeviceError] = {
                log_id: t if isinstance(t, LogDeviceError) else self._tail_reply(log_id, t)
                for log_id, t in (await seq).items()}
            out = summaries.with_tails(out, tails_found)
        return out

    def record_rows(self, ranges: Mapping[int, tuple[int, int]], *,
                    max_rows: int | None = None, timeout: float | None = None
                    ) -> dict[int, RecordRowsFound]:
        """The records of LSN ranges of many logs with the rows each holds (a
        BufferedWriter blob: its payload count, from its header; a plain record: 1; hole
        plugs and bridges: 0), in one request to each storage node.

        Parameters
        ----------
        ranges : mapping of log id to (lo, hi)
            Inclusive LSN ranges of released records.
        max_rows : int, optional
            Each node stops a log once the rows it listed exceed this, so a log may come
            back incomplete: ``next_lsn`` says how far it is complete (ask again from
            there).

        Returns
        -------
        dict of log id to RecordRowsFound
            The records in ``[lo, next_lsn - 1]``, in LSN order.

        Raises
        ------
        NotFoundError, InvalidParamError
            A log not in the config, a bad range (nothing sent).
        LogDeviceError
            The first log without an f-majority of answers; its message names it.
        """
        logs = [int(x) for x in ranges]
        groups = [self._log_group(x) for x in logs]
        for log_id in logs:
            lo, hi = ranges[log_id]
            if not (isinstance(lo, int) and isinstance(hi, int) and lo >= 0 and hi < LSN_MAX):
                raise InvalidParamError(message=f"record_rows: log {log_id}: bad range "
                                                f"({lo!r}, {hi!r})")
        if max_rows is not None:
            validate.count(max_rows, "max_rows", minimum=1)
        his = [ranges[x][1] for x in logs]
        msg = GetRecordRows(request_id=0, log_ids=np.array(logs, np.uint64),
                            los=np.array([ranges[x][0] for x in logs], np.uint64),
                            his=np.array(his, np.uint64), max_rows=max_rows or 0)
        found = self._call(self._record_rows, msg, logs, his, groups,
                           self._timeout(timeout), timeout=timeout)
        for r in found:
            if isinstance(r, LogDeviceError):
                raise r
        return {r.log_id: r for r in cast(list[RecordRowsFound], found)}

    async def _record_rows(self, msg: GetRecordRows, logs: list[int], his: list[int],
                           groups: list[LogGroup], timeout: float
                           ) -> list[RecordRowsFound | LogDeviceError]:
        loop = self._loop.loop
        start = loop.time()
        answers = await self._many_logs_call(lambda: msg, groups, timeout)
        nodesets = await self._nodesets(answers, groups, timeout - (loop.time() - start))
        return summaries.combine_record_rows(logs, his, answers, nodesets)

    async def _many_logs_call(self, make: Any, groups: Sequence[LogGroup],
                              timeout: float) -> dict[int, Any]:
        """``make()`` (about many logs) to every storage node; node -> reply or
        exception, stragglers awaited as the strictest f-majority of the logs needs."""
        nodes = [n.index for n in self.config.storage_nodes()]
        need = max((combine.f_majority(len(nodes), g.replication_factor) for g in groups),
                   default=1)
        return await self._core.storage_call_nodes(nodes, make, max(0.1, timeout), need)

    async def _nodesets(self, answers: Mapping[int, Any], groups: Sequence[LogGroup],
                        timeout: float) -> list[Any]:
        """Each log's nodeset as ``_storage`` judges it (one object per replication
        property: logs with the same one share it)."""
        try:
            statuses, _since = decode_statuses(await self._ctx.metadata.fetch(
                "shard_statuses", timeout=max(0.1, timeout)))
        except LogDeviceError:
            statuses = {}
        locations = {n.index: n.location for n in self.config.nodes}
        by_replication: dict[str, Any] = {}
        out = []
        for g in groups:
            rep = g.replication.to_dict()
            key = repr(sorted(rep.items()))
            if key not in by_replication:
                by_replication[key] = combine.storage_nodeset(answers, rep, locations,
                                                              statuses)
            out.append(by_replication[key])
        return out

    # ------------------------------------------------------------------ checkpoints

    def load_checkpoints(self, name: str, *,
                         timeout: float | None = None) -> dict[int, tuple[int, int]]:
        """The checkpoints of consumer ``name``: log id -> (lsn, batch offset) of the last
        record it processed (empty if it has none).  Kept in the cluster's epoch store,
        reached through any node."""
        return self._call(self._checkpoints,
                          lambda: GetCheckpoints(request_id=0, name=validate_name(name)),
                          self._timeout(timeout), timeout=timeout)

    def store_checkpoints(self, name: str, positions: Mapping[int, tuple[int, int]], *,
                          timeout: float | None = None) -> dict[int, tuple[int, int]]:
        """Set consumer ``name``'s checkpoints of the given logs, atomically (others stay
        as they are); all of its checkpoints after the change."""
        validate_name(name)
        for log_id in positions:
            self._log_group(log_id)
        logs = sorted(positions)
        msg = SetCheckpoints(
            request_id=0, name=name, log_ids=np.array(logs, np.uint64),
            lsns=np.array([positions[k][0] for k in logs], np.uint64),
            batch_offsets=np.array([positions[k][1] for k in logs], np.uint32))
        return self._call(self._checkpoints, lambda: msg,
                          self._timeout(timeout), timeout=timeout)

    def group_heartbeat(self, group: str, member: str, logs: Sequence[int], *,
                        session_timeout: float = 10.0, leave: bool = False,
                        timeout: float | None = None) -> tuple[int, list[int]]:
        """``member`` of consumer group ``group`` (reading ``logs``) is alive for
        ``session_timeout`` more seconds (or leaves): the group's generation and the logs
        the member reads now.  ``GroupReader`` calls it; tools may, to look."""
        for log_id in logs:
            self._log_group(log_id)
        msg = GroupHeartbeat(request_id=0, group=validate_name(group), member=member,
                             log_ids=np.array(sorted(set(logs)), np.uint64),
                             session_ms=int(session_timeout * 1000), leave=leave)
        return self._call(self._group_heartbeat, msg,
                          self._timeout(timeout), timeout=timeout)

    async def _group_heartbeat(self, msg: GroupHeartbeat, timeout: float
                               ) -> tuple[int, list[int]]:
        reply = await self._core.any_node_call(lambda: msg, timeout, "group heartbeat")
        if reply.status != E.OK:
            raise error_for(reply.status, f"group {msg.group!r}: {reply.message}")
        return int(reply.generation), reply.log_ids.tolist()

    async def _checkpoints(self, make: Any, timeout: float) -> dict[int, tuple[int, int]]:
        reply = await self._core.any_node_call(make, timeout, "checkpoints")
        if reply.status != E.OK:
            raise error_for(reply.status, f"checkpoints of {reply.name!r}: {reply.message}")
        return {log: (lsn, off) for log, lsn, off in zip(
            reply.log_ids.tolist(), reply.lsns.tolist(), reply.batch_offsets.tolist(),
            strict=True)}

    # ------------------------------------------------------------------ writers

    def create_buffered_writer(self, **options: Unpack[BufferedWriterKwargs]
                               ) -> BufferedWriter:
        """A ``BufferedWriter`` on this client.

        Parameters
        ----------
        **options : BufferedWriterKwargs
            ``size_trigger`` (int or None, default 1 MB), ``time_trigger`` (seconds or
            None, default 0.05), ``count_trigger`` (int or None, default None),
            ``compression`` ("zstd" or "none"), ``compression_level`` (int, default 1),
            ``mode`` ("independent" or "one_at_a_time"), ``retries`` (int, default 3),
            ``backoff`` (seconds, or (initial, max); default (0.05, 2.0)),
            ``memory_limit_bytes`` (int or None, default 256 MiB), ``block`` (bool,
            default True); their meaning: ``BufferedWriter``.

        Raises
        ------
        InvalidParamError
            An unknown option (the message lists the known ones) or a bad value.
        """
        check_option_names(options)
        self._ctx.check_open()
        return BufferedWriter(self._ctx, **options)

    # ------------------------------------------------------------------ readers

    def create_reader(self, max_logs: int = 1, **options: Unpack[ReaderOptionKwargs]
                      ) -> Reader:
        """A ``Reader`` of up to ``max_logs`` logs at once.

        Parameters
        ----------
        max_logs : int
            How many logs it may read at once.
        **options : ReaderOptionKwargs
            ``buffer_size`` (int, the read window in LSNs), ``flow_control_threshold``
            (float), ``grace_period``, ``scd_timeout``, ``scd_all_send_all_timeout``
            (seconds); defaults from the config's settings.  ``max_buffered_records``
            (int, default 262144) and ``max_buffered_bytes`` (int, default 64 MiB).

        Raises
        ------
        InvalidParamError
            An unknown option (the message lists the known ones) or a bad value.
        """
        return Reader(self._ctx, max_logs, **options)

    def create_checkpointed_reader(self, name: str, max_logs: int = 1,
                                   **options: Unpack[ReaderOptionKwargs]
                                   ) -> CheckpointedReader:
        """A ``Reader`` that resumes each log after consumer ``name``'s checkpoint and
        commits where the application got to (see ``CheckpointedReader``).  ``max_logs``
        and ``**options`` as for ``create_reader``."""
        return CheckpointedReader(self, name, self.create_reader(max_logs, **options))

    def create_group_reader(self, group: str, logs: Sequence[int], *,
                            member: str | None = None, session_timeout: float = 10.0,
                            **options: Unpack[ReaderOptionKwargs]) -> GroupReader:
        """Join consumer group ``group`` reading ``logs``: each log is read by one member
        at a time, from the group's checkpoints (see ``GroupReader``).  ``member``: this
        member's name (default: host, process id and a random part); ``session_timeout``:
        seconds of silence after which it counts as gone; ``**options``: reader options,
        as for ``create_reader``."""
        return GroupReader(self, group, logs, member=member,
                           session_timeout=session_timeout, **options)

    def create_async_reader(self, max_logs: int = 1, **options: Unpack[ReaderOptionKwargs]
                            ) -> AsyncReader:
        """An ``AsyncReader`` (the asyncio flavour of ``Reader``); ``max_logs`` and
        ``**options`` as for ``create_reader``."""
        return AsyncReader(self._ctx, max_logs, **options)

    @property
    def bytes_received(self) -> int:
        """Bytes this client has read from all node connections so far (reads, replies)."""
        return sum(c.bytes_received for c in list(self._core.conns.values()))

    # ------------------------------------------------------------------ closing

    def close(self) -> None:
        """Close writers (their unsent payloads fail with E.SHUTDOWN), connections and
        the loop thread.  Idempotent."""
        self._ctx.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _as_ms(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidParamError(message=f"{name} must be a number of milliseconds, got {value!r}")
    return int(value)
