"""The client's calls, each written once: checks, then a coroutine on the client's loop.

Every call of ``Client`` (blocking) and ``AsyncClient`` (asyncio) but appends is made by
a method of ``ClientCalls`` of the same name, in two steps:

- the checks, in the caller's thread: bad input raises here, before anything is sent
  (``NotFoundError`` for a log not in the config, ``InvalidParamError``, ...); what
  passes becomes a ``Call``: a coroutine function of this module, its arguments and the
  call's timeout;
- the coroutine, on the client's loop thread (``LoopThread``), which enforces that
  timeout itself.  ``run`` submits it and blocks the caller until it is done; ``wait``
  awaits its future from the caller's event loop (``LoopThread.wait``): no thread waits
  for it.  Both add a slack to the timeout that only catches a stuck loop, and check
  first that the client is open.

So ``Client.find_time`` is ``calls.run(calls.find_time(...))`` and
``AsyncClient.find_time`` is ``await calls.wait(calls.find_time(...))``.  The coroutines
are made of the ``ClientCore`` requests (sequencer, storage fan-out, any node) and the
``combine`` / ``summaries`` rules; ``is_log_empty`` and ``data_size`` read the log
(``read.queries``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, NamedTuple, TypeVar

import numpy as np

from logdevice import validate
from logdevice.client import combine, summaries
from logdevice.client.combine import HeadAttributes, TailAttributes
from logdevice.client.context import ClientContext
from logdevice.client.metadata import decode_statuses
from logdevice.client.net.loop import LOOP_SLACK
from logdevice.client.read import queries as reader_queries
from logdevice.client.summaries import LogSummary, RecordRowsFound
from logdevice.config import LogGroup
from logdevice.epochstore.checkpoints import validate_name
from logdevice.errors import E, InvalidParamError, LogDeviceError, error_for
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

__all__ = ["Call", "ClientCalls"]

T = TypeVar("T")

# Logs per GET_LOG_SUMMARIES: keeps the answers well below the frame limit.
LOGS_PER_REQUEST = 50_000


def _as_ms(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidParamError(message=f"{name} must be a number of milliseconds, got {value!r}")
    return int(value)


def _time_range(start_ms: Any, end_ms: Any) -> tuple[int, int]:
    a, b = _as_ms(start_ms, "start_ms"), _as_ms(end_ms, "end_ms")
    if b < a:
        raise InvalidParamError(message=f"end_ms {b} is before start_ms {a}")
    return a, b


class Call(NamedTuple):
    """A checked call: ``fn(*args)`` on the client's loop, which takes at most
    ``timeout`` seconds."""

    fn: Callable[..., Coroutine[Any, Any, Any]]
    args: tuple[Any, ...]
    timeout: float


class ClientCalls:
    """The calls of one client (its ``ClientContext``); what the client reported as a
    log's tail is kept here, so it never reports less later."""

    def __init__(self, ctx: ClientContext) -> None:
        self.context = ctx
        self._tails_seen: dict[int, TailAttributes] = {}  # written on the client loop

    # ------------------------------------------------------------------ running a call

    def run(self, call: Call) -> Any:
        """Run ``call`` on the client's loop and wait for it (blocking)."""
        self.context.check_open()
        return self.context.loop.run(call.fn, *call.args, timeout=call.timeout + LOOP_SLACK)

    async def wait(self, call: Call) -> Any:
        """Run ``call`` on the client's loop and await it from the caller's loop."""
        self.context.check_open()
        return await self.context.loop.wait(call.fn, *call.args,
                                            timeout=call.timeout + LOOP_SLACK)

    def timeout(self, timeout: Any) -> float:
        """A call's timeout: checked, the client's when None."""
        t = validate.optional_timeout(timeout)
        return self.context.timeout if t is None else t

    # ------------------------------------------------------------------ tail and head

    def tail_attributes(self, log_id: int, timeout: float | None) -> Call:
        self.context.log_group(log_id)
        t = self.timeout(timeout)
        return Call(self.tail_on_loop, (log_id, t), t)

    async def tail_on_loop(self, log_id: int, timeout: float) -> TailAttributes:
        return self._tail_reply(log_id, await self.context.core.get_tail(log_id, timeout))

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

    def head_attributes(self, log_id: int, timeout: float | None) -> Call:
        group = self.context.log_group(log_id)
        t = self.timeout(timeout)
        return Call(self.head_on_loop, (log_id, t, group), t)

    async def head_on_loop(self, log_id: int, timeout: float,
                           group: LogGroup | None = None) -> HeadAttributes:
        return await self._storage(  # type: ignore[no-any-return]
            log_id, lambda: GetHead(request_id=0, log_id=log_id), combine.combine_head,
            group, timeout)

    def is_log_empty(self, log_id: int, timeout: float | None) -> Call:
        self.context.log_group(log_id)
        t = self.timeout(timeout)
        return Call(reader_queries.is_log_empty, (self, log_id, t), t)

    # ------------------------------------------------------------------ storage-side calls

    def trim(self, log_id: int, lsn: int, force: bool, timeout: float | None) -> Call:
        group = self.context.log_group(log_id)
        validate.lsn(lsn, "trim lsn", below_max=True)
        msg = Trim(request_id=0, log_id=log_id, lsn=lsn, force=bool(force))
        t = self.timeout(timeout)
        return Call(self._storage, (log_id, lambda: msg, combine.combine_trim, group, t), t)

    def find_time(self, log_id: int, ms: float, timeout: float | None) -> Call:
        group = self.context.log_group(log_id)
        at = _as_ms(ms, "ms")
        t = self.timeout(timeout)
        return Call(self.find_time_on_loop, (log_id, at, t, group), t)

    async def find_time_on_loop(self, log_id: int, ms: int, timeout: float,
                                group: LogGroup | None = None) -> int:
        return await self._storage(  # type: ignore[no-any-return]
            log_id, lambda: FindTime(request_id=0, log_id=log_id, timestamp=ms),
            combine.combine_find_time, group, timeout)

    def data_size(self, log_id: int, start_ms: float, end_ms: float,
                  timeout: float | None) -> Call:
        self.context.log_group(log_id)
        a, b = _time_range(start_ms, end_ms)
        t = self.timeout(timeout)
        return Call(reader_queries.data_size, (self, log_id, a, b, t), t)

    def approximate_data_size(self, log_id: int, start_ms: float, end_ms: float,
                              timeout: float | None) -> Call:
        group = self.context.log_group(log_id)
        a, b = _time_range(start_ms, end_ms)
        t = self.timeout(timeout)
        return Call(self._storage, (
            log_id, lambda: DataSize(request_id=0, log_id=log_id, start_ms=a, end_ms=b),
            combine.combine_data_size, group, t), t)

    async def _storage(self, log_id: int, make: Any, rule: Any, group: LogGroup | None,
                       timeout: float) -> Any:
        """``make()`` to every storage node of the log, the answers combined by ``rule``
        over an f-majority as the read path counts one (failure domains, the nodes'
        authoritative statuses as the nodes tell them); ``group``: the log's (None: as
        the config has it now)."""
        ctx = self.context
        if group is None:
            group = ctx.config.log_group(log_id)
        loop = asyncio.get_running_loop()
        start = loop.time()
        answers = await ctx.core.storage_call(log_id, make, timeout, group.replication_factor)
        nodesets = await self._nodesets(answers, [group], timeout - (loop.time() - start))
        return rule(answers, nodesets[0])

    # ------------------------------------------------------------------ many logs at once

    def log_summaries(self, log_ids: Sequence[int], find_times: Sequence[float],
                      size_window: tuple[float, float] | None, tails: bool,
                      timeout: float | None) -> Call:
        logs = [int(x) for x in log_ids]
        groups = [self.context.log_group(x) for x in logs]
        times = [_as_ms(t, "find_times") for t in find_times]
        a, b = (0, 2**62) if size_window is None else (
            _as_ms(size_window[0], "size_window"), _as_ms(size_window[1], "size_window"))
        if b < a:
            raise InvalidParamError(message=f"size_window ends ({b}) before it starts ({a})")
        t = self.timeout(timeout)
        return Call(self._summaries, (logs, groups, times, a, b, tails, t), t)

    async def _summaries(self, logs: list[int], groups: list[LogGroup], times: list[int],
                         a: int, b: int, tails: bool, timeout: float) -> list[LogSummary]:
        loop = asyncio.get_running_loop()
        start = loop.time()
        core = self.context.core
        seq = asyncio.ensure_future(core.get_tails(logs, timeout)) if tails else None
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
        return [_raise_failure(s) for s in out]

    def record_rows(self, ranges: Mapping[int, tuple[int, int]], max_rows: int | None,
                    timeout: float | None) -> Call:
        logs = [int(x) for x in ranges]
        groups = [self.context.log_group(x) for x in logs]
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
        t = self.timeout(timeout)
        return Call(self._record_rows, (msg, logs, his, groups, t), t)

    async def _record_rows(self, msg: GetRecordRows, logs: list[int], his: list[int],
                           groups: list[LogGroup], timeout: float
                           ) -> dict[int, RecordRowsFound]:
        loop = asyncio.get_running_loop()
        start = loop.time()
        answers = await self._many_logs_call(lambda: msg, groups, timeout)
        nodesets = await self._nodesets(answers, groups, timeout - (loop.time() - start))
        found = summaries.combine_record_rows(logs, his, answers, nodesets)
        return {r.log_id: r for r in map(_raise_failure, found)}

    async def _many_logs_call(self, make: Any, groups: Sequence[LogGroup],
                              timeout: float) -> dict[int, Any]:
        """``make()`` (about many logs) to every storage node; node -> reply or
        exception, stragglers awaited as the strictest f-majority of the logs needs."""
        nodes = [n.index for n in self.context.config.storage_nodes()]
        need = max((combine.f_majority(len(nodes), g.replication_factor) for g in groups),
                   default=1)
        return await self.context.core.storage_call_nodes(nodes, make, max(0.1, timeout),
                                                          need)

    async def _nodesets(self, answers: Mapping[int, Any], groups: Sequence[LogGroup],
                        timeout: float) -> list[Any]:
        """Each log's nodeset to combine ``answers`` over: an f-majority as the read path
        counts one (failure domains, the nodes' authoritative statuses as the nodes tell
        them; none known: every node counts as it answered).  One object per replication
        property: logs with the same one share it."""
        try:
            statuses, _since = decode_statuses(await self.context.metadata.fetch(
                "shard_statuses", timeout=max(0.1, timeout)))
        except LogDeviceError:
            statuses = {}
        locations = {n.index: n.location for n in self.context.config.nodes}
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

    # ------------------------------------------------------------------ checkpoints, groups

    def load_checkpoints(self, name: str, timeout: float | None) -> Call:
        t = self.timeout(timeout)
        return Call(self._checkpoints, (
            lambda: GetCheckpoints(request_id=0, name=validate_name(name)), t), t)

    def store_checkpoints(self, name: str, positions: Mapping[int, tuple[int, int]],
                          timeout: float | None) -> Call:
        validate_name(name)
        for log_id in positions:
            self.context.log_group(log_id)
        logs = sorted(positions)
        msg = SetCheckpoints(
            request_id=0, name=name, log_ids=np.array(logs, np.uint64),
            lsns=np.array([positions[k][0] for k in logs], np.uint64),
            batch_offsets=np.array([positions[k][1] for k in logs], np.uint32))
        t = self.timeout(timeout)
        return Call(self._checkpoints, (lambda: msg, t), t)

    async def _checkpoints(self, make: Any, timeout: float) -> dict[int, tuple[int, int]]:
        reply = await self.context.core.any_node_call(make, timeout, "checkpoints")
        if reply.status != E.OK:
            raise error_for(reply.status, f"checkpoints of {reply.name!r}: {reply.message}")
        return {log: (lsn, off) for log, lsn, off in zip(
            reply.log_ids.tolist(), reply.lsns.tolist(), reply.batch_offsets.tolist(),
            strict=True)}

    def group_heartbeat(self, group: str, member: str, logs: Sequence[int],
                        session_timeout: float, leave: bool, timeout: float | None) -> Call:
        for log_id in logs:
            self.context.log_group(log_id)
        msg = GroupHeartbeat(request_id=0, group=validate_name(group), member=member,
                             log_ids=np.array(sorted(set(logs)), np.uint64),
                             session_ms=int(session_timeout * 1000), leave=leave)
        t = self.timeout(timeout)
        return Call(self._group_heartbeat, (msg, t), t)

    async def _group_heartbeat(self, msg: GroupHeartbeat, timeout: float
                               ) -> tuple[int, list[int]]:
        reply = await self.context.core.any_node_call(lambda: msg, timeout,
                                                      "group heartbeat")
        if reply.status != E.OK:
            raise error_for(reply.status, f"group {msg.group!r}: {reply.message}")
        return int(reply.generation), reply.log_ids.tolist()


def _raise_failure(found: T | LogDeviceError) -> T:
    """A per-log answer; the first log's failure is the call's."""
    if isinstance(found, LogDeviceError):
        raise found
    return found
