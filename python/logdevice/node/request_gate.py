"""The one place a node checks what a peer may ask, before any role sees the request.

With security on, ``Node.dispatch`` asks ``RequestGate.refusal`` about every message
received: None lets it through, anything else is the reply to send instead (status
ACCESS).  The rules, by message type:

- node requests (STORE, SEAL, RELEASE, heartbeats, rebuilding copies, the replies nodes
  send each other: every type not listed below) come only from nodes;
- APPEND and APPEND_BATCH need ``append`` on their log; START, GET_TAIL, GET_HEAD,
  FIND_TIME and DATA_SIZE need ``read``; TRIM needs ``trim``; GET_RECORD_AVAILABILITY
  (the checker) needs ``admin``; what ldshell asks nodes about themselves
  (GET_PARTITIONS, GET_READ_STREAMS, GET_RECOVERIES) needs ``admin`` in the cluster's
  default ACL;
- SET_CHECKPOINTS and GROUP_HEARTBEAT need ``read`` on every log they name;
  GET_CHECKPOINTS needs an authenticated principal;
- GET_CLUSTER_VIEW (routing needs it before anything else), WINDOW and STOP (they act on
  a read stream whose START was checked) are open to every peer that passed HELLO.

A refused START is answered with STARTED(ACCESS), which the reader turns into an ACCESS
gap; everything else gets an ERROR frame, which clients raise as ``AccessError``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from logdevice.errors import E
from logdevice.protocol import (
    Append,
    AppendBatch,
    DataSize,
    Error,
    FindTime,
    GetCheckpoints,
    GetClusterView,
    GetHead,
    GetPartitions,
    GetReadStreams,
    GetRecordAvailability,
    GetRecoveries,
    GetTail,
    GroupHeartbeat,
    SetCheckpoints,
    Start,
    Started,
    Stop,
    Trim,
    Window,
)
from logdevice.security import Authorizer, Principal

__all__ = ["RequestGate"]

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


def _open(authz: Authorizer, who: Principal, msg: Any) -> str | None:
    return None


RULES: dict[type, Rule] = {
    Append: _on_log("append"),
    AppendBatch: _on_log("append"),
    Start: _on_log("read"),
    GetTail: _on_log("read"),
    GetHead: _on_log("read"),
    FindTime: _on_log("read"),
    DataSize: _on_log("read"),
    Trim: _on_log("trim"),
    GetRecordAvailability: _on_log("admin"),
    GetPartitions: _cluster("admin"),
    GetReadStreams: _cluster("admin"),
    GetRecoveries: _cluster("admin"),
    SetCheckpoints: _on_each_log("read"),
    GroupHeartbeat: _on_each_log("read"),
    GetCheckpoints: _authenticated,
    GetClusterView: _open,
    Window: _open,
    Stop: _open,
}


class RequestGate:
    """Checks each request against ``authorizer`` (see the module docstring)."""

    def __init__(self, authorizer: Authorizer) -> None:
        self.authorizer = authorizer

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
