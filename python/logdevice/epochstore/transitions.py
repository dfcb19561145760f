"""How the epoch store's states change: pure functions of the current state.

A backend's ``update`` is an atomic read-modify-write of one log: it reads the current
``LogEpochState`` (None when absent), calls an ``UpdateFn`` on it and writes the result
with ``next_state`` (which sets the next version), retrying on a lost compare-and-set.
So every function here may be called more than once and must only compute from its
argument; it refuses a change by raising (``VersionMismatchError``, INVALID_PARAM,
NOTFOUND), which aborts the update.  ``activation``, ``compare_and_set_to`` and
``advance_clean_epoch`` are the update functions behind ``EpochStore.activate``,
``compare_and_set`` and ``set_last_clean_epoch``; ``next_logs_config`` does for the
runtime log groups what ``next_state`` does for a log.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from logdevice.epochstore.outcome import EpochOutcome
from logdevice.epochstore.records import (
    EPOCH_MAX,
    EPOCH_MIN,
    MAX_OUTCOMES,
    EpochMetadata,
    LogEpochState,
    LogsConfigState,
    TailRecord,
    VersionMismatchError,
)
from logdevice.errors import E, InvalidParamError, LogDeviceError, NotFoundError

__all__ = ["UpdateFn", "LogsConfigFn", "MetadataArg", "next_state", "next_logs_config",
           "activation", "compare_and_set_to", "advance_clean_epoch"]

UpdateFn = Callable[[LogEpochState | None], LogEpochState | None]
LogsConfigFn = Callable[[tuple[Mapping[str, Any], ...]], Any]
MetadataArg = (EpochMetadata | Mapping[str, Any] | None
               | Callable[[LogEpochState | None], EpochMetadata | Mapping[str, Any] | None])


def next_state(log_id: int, cur: LogEpochState | None,
               fn: Callable[[LogEpochState | None], LogEpochState | None]
               ) -> tuple[LogEpochState, dict[str, Any]] | None:
    """What a backend's ``update`` writes: ``fn(cur)`` with the next version, and its
    JSON body (without the version, which the backend keeps itself); None when ``fn``
    changes nothing."""
    new = fn(cur)
    if new is None:
        return None
    new = replace(new, log_id=log_id, version=(cur.version if cur else 0) + 1)
    body = new.to_dict()
    del body["version"]
    return new, body


def next_logs_config(cur: LogsConfigState, fn: LogsConfigFn) -> LogsConfigState | None:
    """What a backend's ``update_logs_config`` writes: ``fn``'s groups with the next
    version; None when ``fn`` returns None (nothing to change)."""
    groups = fn(cur.groups)
    if groups is None:
        return None
    groups = tuple(groups)
    for g in groups:
        if not isinstance(g, Mapping):
            raise InvalidParamError(message=f"a log group is a JSON object, got {g!r}")
    new = LogsConfigState(version=cur.version + 1, groups=tuple(dict(g) for g in groups))
    try:
        json.dumps(new.to_body())
    except (TypeError, ValueError) as e:
        raise InvalidParamError(message=f"log groups must be JSON: {e}") from None
    return new


def activation(log_id: int, metadata: MetadataArg,
               expected_version: int | None) -> Callable[[LogEpochState | None], LogEpochState]:
    """The ``update`` function of a sequencer activation (see ``EpochStore.activate``)."""
    def bump(cur: LogEpochState | None) -> LogEpochState:
        have = cur.version if cur is not None else 0
        if expected_version is not None and have != expected_version:
            raise VersionMismatchError(message=f"log {log_id} is at version {have}, "
                                               f"expected {expected_version}", current=cur)
        base = cur if cur is not None else LogEpochState(log_id)
        epoch = max(base.epoch + 1, EPOCH_MIN)
        if epoch > EPOCH_MAX:
            raise LogDeviceError(E.TOOBIG, f"log {log_id} has used every epoch")
        wanted = metadata(cur) if callable(metadata) else metadata
        history = base.history
        if wanted is None:
            if not history:
                raise InvalidParamError(message=f"log {log_id} has no metadata yet: its "
                                                "first activation needs a nodeset and "
                                                "replication")
        else:
            md = EpochMetadata.coerce(wanted)
            if not history or not history[-1].same_placement(md):
                history = history + (replace(md, first_epoch=epoch),)
        return replace(base, epoch=epoch, history=history)

    return bump


def compare_and_set_to(log_id: int, expected_version: int, new_state: LogEpochState
                       ) -> Callable[[LogEpochState | None], LogEpochState]:
    """The ``update`` function of ``EpochStore.compare_and_set``."""
    def cas(cur: LogEpochState | None) -> LogEpochState:
        have = cur.version if cur is not None else 0
        if have != expected_version:
            raise VersionMismatchError(message=f"log {log_id} is at version {have}, "
                                               f"expected {expected_version}", current=cur)
        if cur is not None and (new_state.epoch < cur.epoch
                                or new_state.last_clean_epoch < cur.last_clean_epoch):
            raise InvalidParamError(message=f"log {log_id}: epoch and last clean epoch "
                                            f"may not go backwards")
        return replace(new_state, log_id=log_id)

    return cas


def advance_clean_epoch(log_id: int, epoch: int, tail: TailRecord | None,
                        outcomes: tuple[EpochOutcome, ...]) -> UpdateFn:
    """The ``update`` function of ``EpochStore.set_last_clean_epoch``."""
    def advance(cur: LogEpochState | None) -> LogEpochState | None:
        if cur is None:
            raise NotFoundError(message=f"log {log_id} is not in the epoch store")
        if epoch > cur.epoch:
            raise InvalidParamError(message=f"log {log_id}: last clean epoch {epoch} is "
                                            f"past the current epoch {cur.epoch}")
        if epoch <= cur.last_clean_epoch:
            return None
        new_tail = cur.tail
        if tail is not None and (new_tail is None or tail.lsn >= new_tail.lsn):
            new_tail = tail
        known = {o.epoch: o for o in cur.recovered}
        known.update((o.epoch, o) for o in outcomes)
        kept = tuple(known[e] for e in sorted(known)[-MAX_OUTCOMES:])
        return replace(cur, last_clean_epoch=epoch, tail=new_tail, recovered=kept)

    return advance
