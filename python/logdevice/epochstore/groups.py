"""Consumer groups, kept in the epoch store: members, and which member reads which log.

A group reads a fixed set of logs; each log is read by at most one member at a time.
Members heartbeat; one that stays silent past its session timeout is gone.  Every
heartbeat runs ``settle`` on the group's state in one compare-and-set update:

1. members whose session expired, or that leave, are dropped with their logs;
2. the wanted owner of each log is picked by rendezvous hashing over the members (a
   member joining or leaving moves only the logs it gains or loses);
3. a log nobody owns goes to its wanted owner; a log whose owner is heartbeating but is
   no longer its wanted owner is let go (the owner stops reading it on this answer) and
   is handed over on the wanted owner's next heartbeat, so two members never read it at
   the same time as long as members act on their answers within a heartbeat.

The group's checkpoints (``checkpoints``, under the group's name) carry the reading
position from one owner to the next: a member that dies replays at most what it had not
committed.  ``settle`` is sans-I/O (plain dicts in, plain dicts out); ``heartbeat`` wraps
it in the store's update.  Groups have keys of their own, like checkpoints, in a range no
log uses (``2**62 + 2**60`` up to the checkpoints' range).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from logdevice.epochstore.base import EpochStore
from logdevice.epochstore.checkpoints import CHECKPOINT_KEYS, claim, validate_name
from logdevice.epochstore.records import LogEpochState
from logdevice.errors import E, InvalidParamError, LogDeviceError

__all__ = ["GROUP_KEYS", "group_key", "settle", "heartbeat"]

GROUP_KEYS = 2**62 + 2**60


def group_key(group: str) -> int:
    digest = hashlib.blake2b(b"group:" + validate_name(group).encode(), digest_size=8).digest()
    key = GROUP_KEYS + (int.from_bytes(digest, "big") % (CHECKPOINT_KEYS - GROUP_KEYS))
    assert GROUP_KEYS <= key < CHECKPOINT_KEYS
    return key


def _score(log_id: int, member: str) -> bytes:
    return hashlib.blake2b(f"{log_id}:{member}".encode(), digest_size=8).digest()


def wanted_owners(logs: Sequence[int], members: Sequence[str]) -> dict[int, str]:
    """Log -> member, by rendezvous hashing (highest score wins)."""
    out: dict[int, str] = {}
    for log in logs:
        if members:
            out[log] = max(members, key=lambda m: _score(log, m))  # noqa: B023 (used now)
    return out


def settle(state: dict[str, Any], member: str, logs: Sequence[int], now_ms: int,
           session_ms: int, leave: bool = False) -> tuple[dict[str, Any], list[int]]:
    """The group's state after ``member`` heartbeats at ``now_ms`` (or leaves), and the
    logs it owns now.  ``state`` is not modified."""
    logs = sorted({int(x) for x in logs})
    known = state.get("logs")
    if known is not None and sorted(known) != logs:
        raise InvalidParamError(message=f"group {state.get('group')!r} reads logs {known}, "
                                        f"not {logs}")
    members = {m: int(t) for m, t in state.get("members", {}).items() if int(t) >= now_ms}
    if leave:
        members.pop(member, None)
    else:
        members[member] = now_ms + session_ms
    owners = {int(k): v for k, v in state.get("owners", {}).items() if v in members}
    wanted = wanted_owners(logs, sorted(members))
    generation = int(state.get("generation", 0))
    changed = False
    for log in logs:
        owner, want = owners.get(log), wanted.get(log)
        if owner is None and want == member and not leave:
            owners[log] = member  # unowned: the wanted owner takes it when it comes by
            changed = True
        elif owner == member and want != member:
            del owners[log]  # let it go; the wanted owner takes it on its heartbeat
            changed = True
    if changed or members.keys() != state.get("members", {}).keys():
        generation += 1
    new = {"group": state.get("group"), "logs": logs, "members": members,
           "owners": {str(k): v for k, v in sorted(owners.items())}, "generation": generation}
    mine = sorted(log for log, owner in owners.items() if owner == member)
    return new, mine


def heartbeat(store: EpochStore, group: str, member: str, logs: Sequence[int], now_ms: int,
              session_ms: int, leave: bool = False, owner: str | None = None
              ) -> tuple[int, list[int]]:
    """One heartbeat (or leave) of ``member``: (the group's generation, its logs).  The
    group belongs to the principal that made it (``owner``; None: not checked)."""
    key = group_key(group)
    if not member or len(member.encode()) > 255:
        raise InvalidParamError(message=f"bad member name {member!r}")
    result: list[Any] = []

    def update(cur: LogEpochState | None) -> LogEpochState:
        extra: dict[str, Any] = dict(cur.extra) if cur is not None else {"group": group}
        if extra.get("group") != group:
            raise LogDeviceError(E.FAILED, f"groups {extra.get('group')!r} and {group!r} "
                                           "share a key: use another name")
        claim(extra, owner, f"consumer group {group!r}")
        new, mine = settle(extra, member, logs, now_ms, session_ms, leave)
        if "principal" in extra:
            new["principal"] = extra["principal"]
        result[:] = [new["generation"], mine]
        return replace(cur, extra=new) if cur is not None else LogEpochState(key, extra=new)

    store.update(key, update)
    return result[0], result[1]
