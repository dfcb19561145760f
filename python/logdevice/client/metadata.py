"""The cluster's metadata as a client sees it: asked of any node, never of the epoch store.

``ClusterMetadata`` sends GET_METADATA and ADMIN_REQUEST (see ``node.roles.metadata_role``) to
the first node that answers and turns the replies back into the epoch store's types
(``LogEpochState``, ``LogsConfigState``, ``RebuildingSet``).  A status other than OK
raises the matching ``LogDeviceError`` (ACCESS for a principal the ACLs do not allow,
TIMEDOUT when no node answered in time).  The blocking methods run on the client's loop
and may be called from any thread but that loop's; the coroutines (``fetch``,
``change``, ``read_*``) run on that loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple, TypeVar

import numpy as np

from logdevice.backoff import ExponentialBackoff
from logdevice.client.core import ClientCore
from logdevice.client.net.loop import LoopThread
from logdevice.epochstore import EpochMetadata, LogEpochState, LogsConfigState, RebuildingSet
from logdevice.errors import E, error_for
from logdevice.protocol import AdminRequest, GetMetadata
from logdevice.shards import AuthoritativeStatus

__all__ = ["ClusterMetadata", "LOGS_PER_REQUEST", "LogHistory", "decode_log_histories",
           "decode_log_states", "decode_statuses"]

T = TypeVar("T")

#: Logs whose epoch states one request asks for.
LOGS_PER_REQUEST = 1000
#: ``log_states`` requests sent at once, to different nodes in turn (each node answers
#: its requests one after another, so more would only wait there, each on its own
#: timeout).
_REQUESTS_AT_ONCE = 4
_LOGS_PER_WAVE = LOGS_PER_REQUEST * _REQUESTS_AT_ONCE
#: Seconds added to a call's own deadline before the blocking wait gives up on it.
_WAIT_SLACK = 2.0
#: First and longest pause before asking again a node whose epoch store timed out.
_STORE_RETRY = (0.1, 1.0)
#: Seconds a node gets to answer the last time it is asked: less left, and the client
#: gives up with the node's last answer rather than a timeout of its own that names no
#: cause.
_LAST_ASK = 0.5


class ClusterMetadata:
    """Metadata reads and changes of one client, through its nodes.

    Parameters
    ----------
    loop : LoopThread
        The client's loop.
    core : ClientCore
        The client's connections (``any_node_call``).
    timeout : float
        Seconds each call may take.
    """

    def __init__(self, loop: LoopThread, core: ClientCore, timeout: float) -> None:
        self._loop = loop
        self._core = core
        self.timeout = timeout

    # -- the two requests -------------------------------------------------------------------
    async def fetch(self, kind: str, log_ids: Iterable[int] = (), since: int = 0,
                    timeout: float | None = None, spread: int = 0) -> Any:
        """The body of a GET_METADATA of ``kind`` (on the client's loop).

        A node whose epoch store could not answer (TIMEDOUT: ZooKeeper unreachable, say)
        answers at once; the client asks again, with backoff, until its own timeout, so a
        read made while ZooKeeper restarts waits for it as long as the caller allows.
        The error then is the node's last answer."""
        ids = np.array(list(log_ids), np.uint64)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (self.timeout if timeout is None else timeout)
        backoff = ExponentialBackoff(*_STORE_RETRY, jitter=0.5)
        while True:
            reply = await self._core.any_node_call(
                lambda: GetMetadata(request_id=0, kind=kind, log_ids=ids, since=since),
                deadline - loop.time(), f"metadata ({kind})", spread)
            if reply.status == E.OK:
                return reply.body
            pause = backoff.next_delay()
            if reply.status != E.TIMEDOUT or loop.time() + pause + _LAST_ASK > deadline:
                raise error_for(reply.status, f"metadata ({kind}): {reply.message}")
            await asyncio.sleep(pause)

    async def change(self, action: str, timeout: float | None = None, **fields: Any) -> Any:
        """Send ADMIN_REQUEST ``action`` with ``fields``; the reply's body (on the loop)."""
        reply = await self._core.any_node_call(
            lambda: AdminRequest(request_id=0, action=action, **fields),
            self.timeout if timeout is None else timeout, action.replace("_", " "))
        if reply.status != E.OK:
            raise error_for(reply.status, reply.message)
        return reply.body

    async def read_log_states(self, log_ids: Iterable[int], timeout: float | None = None
                              ) -> dict[int, LogEpochState | None]:
        """``log_states`` on the client's loop; the requests for many logs go out a few
        at once (the node reads the next while this client decodes one)."""
        return await self._read_per_log(log_ids, decode_log_states, timeout)

    async def read_log_histories(self, log_ids: Iterable[int], timeout: float | None = None
                                 ) -> dict[int, LogHistory | None]:
        """What a read placement needs of each log's state (its epoch and metadata
        history), read as ``read_log_states`` reads: the rest of each state is not built,
        which is most of the work for thousands of logs."""
        return await self._read_per_log(log_ids, decode_log_histories, timeout)

    async def _read_per_log(self, log_ids: Iterable[int],
                            decode: Callable[[Iterable[Any]], dict[int, T]],
                            timeout: float | None) -> dict[int, T]:
        ids = list(log_ids)
        out: dict[int, T] = {}
        for w in range(0, len(ids), _LOGS_PER_WAVE):
            wave = ids[w:w + _LOGS_PER_WAVE]
            for body in await asyncio.gather(*(
                    self.fetch("log_states", wave[i:i + LOGS_PER_REQUEST], timeout=timeout,
                               spread=i // LOGS_PER_REQUEST)
                    for i in range(0, len(wave), LOGS_PER_REQUEST))):
                out.update(decode(body))
        return out

    async def read_shard_statuses(self, timeout: float | None = None
                                  ) -> tuple[dict[int, AuthoritativeStatus], dict[int, int]]:
        """``shard_statuses`` on the client's loop."""
        return decode_statuses(await self.fetch("shard_statuses", timeout=timeout))

    def _run(self, coro_fn: Any, *args: Any, **kwargs: Any) -> Any:
        async def call() -> Any:
            return await coro_fn(*args, **kwargs)
        timeout = kwargs.get("timeout") or self.timeout
        return self._loop.run(call, timeout=timeout + _WAIT_SLACK)

    # -- reads (blocking) -------------------------------------------------------------------
    def log_states(self, log_ids: Iterable[int], *, timeout: float | None = None
                   ) -> dict[int, LogEpochState | None]:
        """Each log's epoch state (None: never activated); many logs are asked for
        ``LOGS_PER_REQUEST`` at a time, a few requests at once."""
        ids = list(log_ids)
        out: dict[int, LogEpochState | None] = {}
        for i in range(0, len(ids), _LOGS_PER_WAVE):  # each wave bounded by _run
            out.update(self._run(self.read_log_states, ids[i:i + _LOGS_PER_WAVE],
                                 timeout=timeout))
        return out

    def log_state(self, log_id: int, *, timeout: float | None = None
                  ) -> LogEpochState | None:
        return self.log_states([log_id], timeout=timeout)[log_id]

    def shard_statuses(self, *, timeout: float | None = None
                       ) -> tuple[dict[int, AuthoritativeStatus], dict[int, int]]:
        """Nodes that are not fully authoritative, with their status; and since when
        (ms)."""
        return self._run(self.read_shard_statuses, timeout=timeout)  # type: ignore[no-any-return]

    def logs_config(self, *, timeout: float | None = None) -> LogsConfigState:
        """The runtime log groups and their version."""
        body = self._run(self.fetch, "logs_config", timeout=timeout)
        return LogsConfigState.from_body(int(body["version"]), body)

    def events(self, since: int = 0, *, timeout: float | None = None
               ) -> list[dict[str, Any]]:
        """The event log from version ``since`` on (admin)."""
        return list(self._run(self.fetch, "events", since=since, timeout=timeout))

    def rebuilding_set(self, *, timeout: float | None = None) -> RebuildingSet:
        """The set of nodes being rebuilt (admin)."""
        return RebuildingSet.from_dict(self._run(self.fetch, "rebuilding_set",
                                                 timeout=timeout))

    def logs(self, *, timeout: float | None = None) -> list[int]:
        """Every configured log the epoch store knows (admin)."""
        return [int(x) for x in self._run(self.fetch, "logs", timeout=timeout)]

    # -- changes (blocking) -----------------------------------------------------------------
    def request_rebuild(self, node: int, *, drain: bool = False,
                        timeout: float | None = None) -> int:
        """Drain ``node`` (``drain``) or mark its data unrecoverable; the event's
        version (admin)."""
        action = "drain" if drain else "mark_unrecoverable"
        body = self._run(self.change, action, node=node, timeout=timeout)
        return int(body["version"])

    def cancel_rebuild(self, node: int, *, undrain: bool = False,
                       timeout: float | None = None) -> int:
        """Undrain ``node`` (``undrain``) or abort its rebuilding; the event's version
        (admin)."""
        action = "undrain" if undrain else "abort_rebuilding"
        body = self._run(self.change, action, node=node, timeout=timeout)
        return int(body["version"])

    def change_log_group(self, action: str, name: str, *, lo: int = 0, hi: int = 0,
                         attributes: Mapping[str, Any] | None = None,
                         timeout: float | None = None) -> int:
        """Create, update or remove (``action``: ``create_log_group``, ...) a runtime log
        group (admin); the LogsConfig version after the change."""
        body = self._run(self.change, action, name=name, lo=lo, hi=hi,
                         attributes=dict(attributes or {}), timeout=timeout)
        return int(body["version"])


def decode_log_states(body: Iterable[Any]) -> dict[int, LogEpochState | None]:
    """A ``log_states`` body as log id -> epoch state (None: never activated)."""
    return {int(log_id): None if d is None else LogEpochState.from_dict(d)
            for log_id, d in body}


class LogHistory(NamedTuple):
    """A log's current epoch and metadata history (of its ``LogEpochState``)."""

    epoch: int
    history: tuple[EpochMetadata, ...]


def decode_log_histories(body: Iterable[Any]) -> dict[int, LogHistory | None]:
    """A ``log_states`` body as log id -> its ``LogHistory`` (None: never activated)."""
    return {int(log_id): None if d is None else LogHistory(
                int(d.get("epoch", 0)),
                tuple(EpochMetadata.from_dict(m) for m in d.get("history", ())))
            for log_id, d in body}


def decode_statuses(body: Mapping[str, Any]
                    ) -> tuple[dict[int, AuthoritativeStatus], dict[int, int]]:
    """A ``shard_statuses`` body as (statuses, since_ms)."""
    return ({int(n): AuthoritativeStatus(s) for n, s in body["statuses"]},
            {int(n): int(t) for n, t in body["since_ms"]})
