"""Reader checkpoints, kept in the epoch store.

A named consumer's checkpoint says, per log, the last record it has processed: an LSN and
the batch offset within that LSN's BufferedWriter blob (a reader may stop in the middle
of a blob).  Resuming reads from that LSN again and skips what is at or before the
checkpoint.

Each name gets an entry of its own in the epoch store, beside the logs' epoch states,
under a key in a range no log can use (``2**62 + 2**61`` and up; user logs end below
``2**62``, internal and metadata logs are elsewhere), with the checkpoints in the entry's
``extra``.  So every backend that can hold a log's state holds checkpoints too, with the
same compare-and-set update, and a commit is one atomic write however many logs it names.

A name belongs to the principal that first stored under it (``owner``, kept in the
entry as ``principal``): another principal may neither read nor change it (ACCESS).
``owner=None`` (no security, or a node asking) is not checked.  Consumer groups are
owned the same way.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Protocol

from logdevice.epochstore.records import LogEpochState
from logdevice.epochstore.transitions import UpdateFn
from logdevice.errors import E, InvalidParamError, LogDeviceError

__all__ = ["CHECKPOINT_KEYS", "checkpoint_key", "is_checkpoint_key", "load_checkpoints",
           "store_checkpoints", "validate_name", "claim"]

#: First key of the checkpoint entries (keys up to 2**63 - 1).
CHECKPOINT_KEYS = 2**62 + 2**61
MAX_NAME = 255
Position = tuple[int, int]  # (lsn, batch offset)


class EntryStore(Protocol):
    """What checkpoints need of an epoch store (``EpochStore`` has it): a client that
    only checks names does not load the store."""

    def get(self, log_id: int) -> LogEpochState | None: ...

    def update(self, log_id: int, fn: UpdateFn) -> LogEpochState | None: ...


def validate_name(name: object) -> str:
    if not isinstance(name, str) or not name or len(name.encode()) > MAX_NAME:
        raise InvalidParamError(message=f"a checkpoint name is a non-empty string of at most "
                                        f"{MAX_NAME} bytes, got {name!r}")
    return name


def checkpoint_key(name: str) -> int:
    """The epoch store key of ``name``'s checkpoints."""
    digest = hashlib.blake2b(validate_name(name).encode(), digest_size=8).digest()
    return CHECKPOINT_KEYS + (int.from_bytes(digest, "big") & (2**61 - 1))


def is_checkpoint_key(key: int) -> bool:
    """Whether an epoch store key holds checkpoints, not a log."""
    return key >= CHECKPOINT_KEYS


def claim(extra: dict[str, Any], owner: str | None, what: str) -> None:
    """Check that ``owner`` may use the entry whose ``extra`` this is, and make it the
    entry's owner if it has none.  ACCESS for someone else's entry."""
    if owner is None:
        return
    held = extra.get("principal")
    if held is not None and held != owner:
        raise LogDeviceError(E.ACCESS, f"{what} belongs to another principal")
    extra["principal"] = owner


def _positions(state: LogEpochState | None, name: str) -> dict[int, Position]:
    if state is None:
        return {}
    owner = state.extra.get("checkpoint_name")
    if owner != name:
        raise LogDeviceError(E.FAILED, f"checkpoint names {owner!r} and {name!r} share a key: "
                                       "use another name")
    return {int(log): (int(p[0]), int(p[1]))
            for log, p in state.extra.get("checkpoints", {}).items()}


def load_checkpoints(store: EntryStore, name: str, owner: str | None = None
                     ) -> dict[int, Position]:
    """``name``'s checkpoints: log id -> (lsn, batch offset); empty if it has none."""
    state = store.get(checkpoint_key(name))
    if state is not None:
        claim(dict(state.extra), owner, f"consumer {name!r}")
    return _positions(state, name)


def store_checkpoints(store: EntryStore, name: str, positions: Mapping[int, Position],
                      owner: str | None = None) -> dict[int, Position]:
    """Set ``name``'s checkpoints of the given logs (others stay); all of them after."""
    key = checkpoint_key(name)
    clean = {int(log): (int(lsn), int(off)) for log, (lsn, off) in positions.items()}
    for log, (lsn, off) in clean.items():
        if not (0 < log < 2**64 and 0 <= lsn < 2**64 and 0 <= off < 2**32):
            raise InvalidParamError(message=f"bad checkpoint {log}: ({lsn}, {off})")

    def merge(cur: LogEpochState | None) -> LogEpochState:
        merged = _positions(cur, name)
        merged.update(clean)
        extra: dict[str, Any] = {"checkpoint_name": name,
                                 "checkpoints": {str(k): list(v)
                                                 for k, v in sorted(merged.items())}}
        if cur is not None and "principal" in cur.extra:
            extra["principal"] = cur.extra["principal"]
        claim(extra, owner, f"consumer {name!r}")
        return replace(cur, extra=extra) if cur is not None else LogEpochState(key,
                                                                               extra=extra)

    state = store.update(key, merge)
    return _positions(state, name)
