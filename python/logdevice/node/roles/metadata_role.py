"""The metadata gateway: clients read and change the cluster's metadata through nodes.

Only nodes open the epoch store.  A client, ``ldshell``, the checker or a Spark executor
asks any node: GET_METADATA reads (a log's epoch state and metadata history, the nodes'
authoritative status, the runtime log groups, the event log, the rebuilding set) and
ADMIN_REQUEST changes (create, update or remove a log group; drain or undrain a node,
mark its data unrecoverable, abort its rebuilding).  The request gate has already
checked the ACL (reads of a log need ``read`` on it, cluster-wide reads and every change
need ``admin``) before a handler here sees the request; this role validates what the
request says and does the store work in a thread of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from logdevice.epochstore import StatusHistory
from logdevice.errors import E
from logdevice.node.roles.role import NodeServices, Peer
from logdevice.node.roles.store_requests import StoreRequestRole
from logdevice.protocol import (
    ADMIN_ACTIONS,
    METADATA_KINDS,
    AdminRequest,
    GetMetadata,
    MetadataReply,
)
from logdevice.rebuilding.requests import cancel_rebuild, request_rebuild

#: At most this many logs in one ``log_states`` request.
MAX_LOGS_PER_REQUEST = 10_000


class MetadataRole(StoreRequestRole):
    """Answers GET_METADATA and ADMIN_REQUEST from the node's epoch store."""

    name = "metadata"

    def __init__(self, node: NodeServices) -> None:
        super().__init__(node)
        self._history = StatusHistory()  # the event log as read so far (role's thread)

    def handlers(self) -> Mapping[type, Any]:
        return {GetMetadata: self._on_get, AdminRequest: self._on_admin}

    # -- reads ------------------------------------------------------------------------------
    def _on_get(self, conn: Peer, msg: GetMetadata) -> None:
        def error(status: E, message: str) -> MetadataReply:
            return MetadataReply(request_id=msg.request_id, status=status, message=message)

        if msg.kind not in METADATA_KINDS:
            conn.send(error(E.INVALID_PARAM, f"unknown metadata kind {msg.kind!r}"))
            return
        log_ids = msg.log_ids.tolist()
        if len(log_ids) > MAX_LOGS_PER_REQUEST:
            conn.send(error(E.INVALID_PARAM, f"{len(log_ids)} logs in one request; at most "
                                             f"{MAX_LOGS_PER_REQUEST}"))
            return
        config = self.node.config
        unknown = [x for x in log_ids if not config.has_log(x)]
        if unknown:
            conn.send(error(E.NOTFOUND, f"logs not in the config: {unknown[:10]}"))
            return
        self.answer(conn, lambda: self._read(msg.kind, log_ids, msg.since),
                    lambda body: MetadataReply(request_id=msg.request_id, status=E.OK,
                                               body=body), error)

    def _read(self, kind: str, log_ids: list[int], since: int) -> Any:
        """The body of a GET_METADATA reply (in the role's thread)."""
        store = self.epoch_store()
        if kind == "log_states":
            states = store.get_many_plain(log_ids)
            return [[log_id, states.get(log_id)] for log_id in log_ids]
        if kind == "shard_statuses":  # every reader asks each second: fold new events only
            history = self._history.apply_all(store.events(self._history.version))
            statuses, since_ms = history.statuses()
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
        def error(status: E, message: str) -> MetadataReply:
            return MetadataReply(request_id=msg.request_id, status=status, message=message)

        def reply(body: Any) -> MetadataReply:
            return MetadataReply(request_id=msg.request_id, status=E.OK, body=body)

        if msg.action not in ADMIN_ACTIONS:
            conn.send(error(E.INVALID_PARAM, f"unknown admin action {msg.action!r}"))
            return
        if msg.action in ("drain", "mark_unrecoverable"):
            config = self.node.config
            self.answer(conn, lambda: {"version": request_rebuild(
                self.epoch_store(), config, msg.node, drain=msg.action == "drain",
                unrecoverable=msg.action == "mark_unrecoverable")}, reply, error)
            return
        if msg.action in ("undrain", "abort_rebuilding"):
            self.answer(conn, lambda: {"version": cancel_rebuild(
                self.epoch_store(), msg.node, undrain=msg.action == "undrain")}, reply, error)
            return
        if not self.node.has_role("logs_config"):
            conn.send(error(E.NOTSUPPORTED, "this node does not keep the log groups"))
            return
        source = self.node.role("logs_config").source
        if msg.action == "create_log_group":
            def work() -> None:
                source.create(msg.name, msg.lo, msg.hi, msg.attributes)
        elif msg.action == "update_log_group":
            def work() -> None:
                source.update(msg.name, msg.attributes)
        else:
            def work() -> None:
                source.remove(msg.name)

        def adopt(_: None) -> None:
            # The source already read the change back: the node adopts it now, so a
            # request for the new logs that follows this reply finds them here.
            self.node.set_config(source.config)

        self.answer(conn, work, lambda _: reply({"version": source.version}), error, adopt)
