"""The metadata gateway: clients read and change the cluster's metadata through nodes.

Only nodes open the epoch store.  A client, ``ldshell``, the checker or a Spark executor
asks any node: GET_METADATA reads (a log's epoch state and metadata history, the nodes'
authoritative status, the runtime log groups, the event log, the rebuilding set) and
ADMIN_REQUEST changes (create, update or remove a log group; drain a node or mark its
data unrecoverable).  The request gate has already checked the ACL (reads of a log need
``read`` on it, cluster-wide reads and every change need ``admin``) before a handler here
sees the request; this role validates what the request says and does the store work in a
thread of its own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from logdevice.epochstore import EpochStore, statuses_since
from logdevice.errors import E, LogDeviceError
from logdevice.node.role import Peer, Role
from logdevice.protocol import (
    ADMIN_ACTIONS,
    METADATA_KINDS,
    AdminReply,
    AdminRequest,
    GetMetadata,
    MetadataReply,
)
from logdevice.rebuilding.requests import request_rebuild
from logdevice.security.store import open_cluster_store

if TYPE_CHECKING:
    from logdevice.node.server import Node

log = logging.getLogger("logdevice.node.metadata")

#: At most this many logs in one ``log_states`` request.
MAX_LOGS_PER_REQUEST = 10_000


class MetadataRole(Role):
    """Answers GET_METADATA and ADMIN_REQUEST from the node's epoch store."""

    name = "metadata"

    def __init__(self, node: Node) -> None:
        super().__init__(node)
        self._exec = ThreadPoolExecutor(1, thread_name_prefix="metadata")
        self._store: EpochStore | None = None

    def handlers(self) -> Mapping[type, Any]:
        return {GetMetadata: self._on_get, AdminRequest: self._on_admin}

    def close(self) -> None:
        self._exec.shutdown(wait=True)
        if self._store is not None:
            self._store.close()
            self._store = None

    def _epoch_store(self) -> EpochStore:
        if self._store is None:
            self._store = open_cluster_store(self.node.config)
        return self._store

    def _run(self, conn: Peer, work: Callable[[], Any], reply: Callable[..., Any],
             then: Callable[[Any], None] | None = None) -> None:
        """``work()`` in the role's thread, ``then(result)`` on the loop, then
        ``reply(status, message, body)`` to ``conn``."""
        async def run() -> None:
            try:
                body = await self.node.loop.run_in_executor(self._exec, work)
                if then is not None:
                    then(body)
            except LogDeviceError as exc:
                conn.send(reply(exc.status, exc.message or str(exc), None))
                return
            except Exception as exc:
                log.exception("N%d: metadata request failed", self.node.index)
                conn.send(reply(E.FAILED, f"internal error: {type(exc).__name__}: {exc}",
                                None))
                return
            conn.send(reply(E.OK, "", body))

        self.node.loop.create_task(run())

    # -- reads ------------------------------------------------------------------------------
    def _on_get(self, conn: Peer, msg: GetMetadata) -> None:
        def reply(status: E, message: str, body: Any) -> MetadataReply:
            return MetadataReply(request_id=msg.request_id, status=status, message=message,
                                 body=body)

        if msg.kind not in METADATA_KINDS:
            conn.send(reply(E.INVALID_PARAM, f"unknown metadata kind {msg.kind!r}", None))
            return
        log_ids = msg.log_ids.tolist()
        if len(log_ids) > MAX_LOGS_PER_REQUEST:
            conn.send(reply(E.INVALID_PARAM, f"{len(log_ids)} logs in one request; at most "
                                             f"{MAX_LOGS_PER_REQUEST}", None))
            return
        config = self.node.config
        unknown = [x for x in log_ids if not config.has_log(x)]
        if unknown:
            conn.send(reply(E.NOTFOUND, f"logs not in the config: {unknown[:10]}", None))
            return
        self._run(conn, lambda: self._read(msg.kind, log_ids, msg.since), reply)

    def _read(self, kind: str, log_ids: list[int], since: int) -> Any:
        """The body of a GET_METADATA reply (in the role's thread)."""
        store = self._epoch_store()
        if kind == "log_states":
            out = []
            for log_id in log_ids:
                state = store.get(log_id)
                out.append([log_id, None if state is None else state.to_dict()])
            return out
        if kind == "shard_statuses":
            statuses, since_ms = statuses_since(store.events())
            return {"statuses": [[n, int(s)] for n, s in statuses.items()],
                    "since_ms": [[n, t] for n, t in since_ms.items()]}
        if kind == "logs_config":
            groups = store.logs_config()
            return {"version": groups.version, "groups": [dict(g) for g in groups.groups]}
        if kind == "events":
            return store.events(since)
        if kind == "rebuilding_set":
            return store.rebuilding_set().to_dict()
        assert kind == "logs"
        config = self.node.config
        return [x for x in store.logs() if config.has_log(x)]

    # -- changes ----------------------------------------------------------------------------
    def _on_admin(self, conn: Peer, msg: AdminRequest) -> None:
        def reply(status: E, message: str, body: Any) -> AdminReply:
            return AdminReply(request_id=msg.request_id, status=status, message=message,
                              body=body)

        if msg.action not in ADMIN_ACTIONS:
            conn.send(reply(E.INVALID_PARAM, f"unknown admin action {msg.action!r}", None))
            return
        if msg.action in ("drain", "mark_unrecoverable"):
            config = self.node.config
            self._run(conn, lambda: {"version": request_rebuild(
                self._epoch_store(), config, msg.node, drain=msg.action == "drain",
                unrecoverable=msg.action == "mark_unrecoverable")}, reply)
            return
        if not self.node.has_role("logs_config"):
            conn.send(reply(E.NOTSUPPORTED, "this node does not keep the log groups", None))
            return
        source = self.node.role("logs_config").source
        if msg.action == "create_log_group":
            def work() -> Any:
                return source.create(msg.name, msg.lo, msg.hi, msg.attributes).name
        elif msg.action == "update_log_group":
            def work() -> Any:
                return source.update(msg.name, msg.attributes).name
        else:
            def work() -> Any:
                source.remove(msg.name)
                return msg.name

        def adopt(name: str) -> None:
            # The source already read the change back: the node adopts it now, so a
            # request for the new logs that follows this reply finds them here.
            self.node.set_config(source.config)

        self._run(conn, work, lambda st, why, name: reply(
            st, why, None if name is None else {"name": name, "version": source.version}),
            adopt)

