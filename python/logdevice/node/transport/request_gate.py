"""The one place a node checks what a peer may ask, before any role sees the request.

With security on, ``Node.dispatch`` asks ``RequestGate.refusal`` about every message
received: None lets it through, anything else is the reply to send instead (status
ACCESS).  The rules, by message type:

- node requests (STORE, SEAL, RELEASE, heartbeats, rebuilding copies, the replies nodes
  send each other: every type not listed below) come only from nodes;
- APPEND and APPEND_BATCH need ``append`` on their log, APPEND_LOGS on every log it
  names (one it may not append to refuses the whole frame: the client sends its parts
  again one APPEND_BATCH each, nothing of the frame having been appended); START (never
  with the DIGEST flag, which only recovery on a node uses), GET_TAIL, GET_HEAD,
  FIND_TIME and DATA_SIZE need ``read``; GET_TAILS, GET_LOG_SUMMARIES and GET_RECORD_ROWS
  need ``read`` on every log they name; TRIM needs ``trim`` (and ``admin`` as well when
  forced past the tail); GET_RECORD_AVAILABILITY
  (the checker) needs ``admin``; what ldshell asks nodes about themselves
  (GET_PARTITIONS, GET_READ_STREAMS, GET_RECOVERIES) needs ``admin`` in the cluster's
  default ACL;
- SET_CHECKPOINTS and GROUP_HEARTBEAT need ``read`` on every log they name;
  GET_CHECKPOINTS needs an authenticated principal;
- GET_METADATA of ``log_states`` needs ``read`` or ``admin`` on every log it names; of
  ``shard_statuses`` and ``logs_config`` (every reader needs them) an authenticated
  principal; of anything else (``events``, ``rebuilding_set``, ``logs``) ``admin`` in the
  cluster's default ACL.  Every ADMIN_REQUEST (log group changes, drains,
  mark-unrecoverable) needs ``admin`` in the cluster's default ACL;
- GET_CLUSTER_VIEW (routing needs it before anything else), WINDOW and STOP (they act on
  a read stream whose START was checked) are open to every peer that passed HELLO.

Before any of that, ``admit_from_client`` looks at each frame a client sends while only
its 12-byte prefix has arrived: a type no rule names (a node's message, a reply) or a
header over ``CLIENT_MAX_HEADER`` bytes closes the connection before anything of the
frame is buffered or decoded, so a client cannot make the node build what only nodes may
send.

A request naming a log the node's config does not know is judged only after the node
read the runtime log groups again (``Node.dispatch``, ``names_unknown_log``): a group
created a moment ago, and not yet polled, is judged by its own ACL, not the default's.

A refused START is answered with STARTED(ACCESS), which the reader turns into an ACCESS
gap; everything else gets an ERROR frame, which clients raise as ``AccessError``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from logdevice.config.model import METADATA_LOG_BIT
from logdevice.errors import E
from logdevice.protocol import (
    AdminRequest,
    Append,
    AppendBatch,
    AppendLogs,
    DataSize,
    Error,
    FindTime,
    GetCheckpoints,
    GetClusterView,
    GetHead,
    GetLogSummaries,
    GetMetadata,
    GetPartitions,
    GetReadStreams,
    GetRecordAvailability,
    GetRecordRows,
    GetRecoveries,
    GetTail,
    GetTails,
    GroupHeartbeat,
    Message,
    MessageType,
    ProtocolError,
    SetCheckpoints,
    Start,
    Started,
    Stop,
    Trim,
    Window,
)
from logdevice.protocol.flags import StartFlag
from logdevice.security import Authorizer, Principal

__all__ = ["RequestGate", "admit_from_client", "CLIENT_MAX_HEADER"]

#: A rule: (authorizer, principal, message) -> None if allowed, else why not.
Rule = Callable[[Authorizer, Principal, Any], str | None]


def _on_log(action: str) -> Rule:
    def rule(authz: Authorizer, who: Principal, msg: Any) -> str | None:
        if authz.allowed(who, msg.log_id, action):
            return None
        return f"{who} may not {action} log {msg.log_id}"
    return rule


def _on_each_log(action: str) -> Rule:
    def rule(authz: Authorizer, who: Principal, msg: Any) -> str | None:
        for log_id in msg.log_ids.tolist():
            if not authz.allowed(who, log_id, action):
                return f"{who} may not {action} log {log_id}"
        return None
    return rule


def _cluster(action: str) -> Rule:
    def rule(authz: Authorizer, who: Principal, msg: Any) -> str | None:
        return None if authz.allowed_cluster(who, action) else \
            f"{who} may not {action} the cluster"
    return rule


def _authenticated(authz: Authorizer, who: Principal, msg: Any) -> str | None:
    return None if who.is_authenticated else "anonymous peers may not do this"


def _metadata(authz: Authorizer, who: Principal, msg: Any) -> str | None:
    if msg.kind == "log_states" and len(msg.log_ids):
        # Readers need it to start reading, the checker (``admin`` on logs) to judge.
        for log_id in msg.log_ids.tolist():
            if not (authz.allowed(who, log_id, "read") or authz.allowed(who, log_id, "admin")):
                return f"{who} may not read log {log_id}"
        return None
    if msg.kind in ("shard_statuses", "logs_config"):
        return _authenticated(authz, who, msg)
    return _cluster("admin")(authz, who, msg)


def _start(authz: Authorizer, who: Principal, msg: Any) -> str | None:
    if msg.flags & StartFlag.DIGEST:  # recovery's view of a node's copies: nodes only
        return "only nodes may open a DIGEST read stream"
    return _on_log("read")(authz, who, msg)


def _trim(authz: Authorizer, who: Principal, msg: Any) -> str | None:
    why = _on_log("trim")(authz, who, msg)
    if why is None and msg.force:  # past the tail: an admin's call
        why = _on_log("admin")(authz, who, msg)
    return why


def _open(authz: Authorizer, who: Principal, msg: Any) -> str | None:
    return None


RULES: dict[type[Message], Rule] = {
    Append: _on_log("append"),
    AppendBatch: _on_log("append"),
    AppendLogs: _on_each_log("append"),
    Start: _start,
    GetTail: _on_log("read"),
    GetHead: _on_log("read"),
    FindTime: _on_log("read"),
    DataSize: _on_log("read"),
    GetTails: _on_each_log("read"),
    GetLogSummaries: _on_each_log("read"),
    GetRecordRows: _on_each_log("read"),
    Trim: _trim,
    GetRecordAvailability: _on_log("admin"),
    GetPartitions: _cluster("admin"),
    GetReadStreams: _cluster("admin"),
    GetRecoveries: _cluster("admin"),
    SetCheckpoints: _on_each_log("read"),
    GroupHeartbeat: _on_each_log("read"),
    GetCheckpoints: _authenticated,
    GetMetadata: _metadata,
    AdminRequest: _cluster("admin"),
    GetClusterView: _open,
    Window: _open,
    Stop: _open,
}


#: Message types a client may send: the requests above.
CLIENT_TYPES: frozenset[int] = frozenset(int(cls.TYPE) for cls in RULES)
#: The largest msgpack header a client's request may have.  Clients' requests carry
#: scalars, names and small attribute maps in the header (bulk data travels in raw
#: sections), so this bounds what decoding a header can allocate.
CLIENT_MAX_HEADER = 64 * 1024


def admit_from_client(type_id: int, header_length: int) -> ProtocolError | None:
    """None if a client may send a frame of this type and header length, else the error
    (ACCESS) that closes its connection."""
    if type_id not in CLIENT_TYPES:
        return ProtocolError(E.ACCESS, f"clients may not send {_type_name(type_id)}")
    if header_length > CLIENT_MAX_HEADER:
        return ProtocolError(E.ACCESS, f"a {_type_name(type_id)} header of {header_length} "
                                       f"bytes is over the {CLIENT_MAX_HEADER} bytes a "
                                       f"client's request may have")
    return None


def _type_name(type_id: int) -> str:
    try:
        return MessageType(type_id).name
    except ValueError:
        return f"message type {type_id}"


class RequestGate:
    """Checks each request against ``authorizer`` (see the module docstring)."""

    def __init__(self, authorizer: Authorizer) -> None:
        self.authorizer = authorizer

    def names_unknown_log(self, principal: Principal | None, msg: Any) -> bool:
        """Whether a client's ``msg`` names a log the node's config does not know.  Such
        a log may belong to a group created at runtime a moment ago, whose own ACL must
        judge it: the node reads the runtime log groups again before ``refusal``
        decides (the default ACL judges a log that is still unknown after that read, and
        its handler answers NOTFOUND)."""
        if principal is None or principal.is_node or type(msg) not in RULES:
            return False
        ids = getattr(msg, "log_ids", None)
        if ids is not None:
            named = ids.tolist()
        else:
            log_id = getattr(msg, "log_id", None)
            named = [] if log_id is None else [log_id]
        config = self.authorizer.config
        return any(not config.has_log(log_id & ~METADATA_LOG_BIT) for log_id in named)

    def refusal(self, principal: Principal | None, msg: Any) -> Any | None:
        """None if a peer authenticated as ``principal`` may send ``msg``; otherwise the
        reply that refuses it."""
        if principal is not None and principal.is_node:
            return None
        rule = RULES.get(type(msg))
        if principal is None:  # not through HELLO: nothing is allowed
            why: str | None = "the peer did not authenticate"
        elif rule is None:
            why = f"only nodes may send {type(msg).__name__}"
        else:
            why = rule(self.authorizer, principal, msg)
        if why is None:
            return None
        if type(msg) is Start:
            return Started(read_stream_id=msg.read_stream_id,
                           filter_version=msg.filter_version, status=E.ACCESS)
        return Error(request_id=getattr(msg, "request_id", 0), status=E.ACCESS, message=why,
                     in_reply_to=int(msg.TYPE))
