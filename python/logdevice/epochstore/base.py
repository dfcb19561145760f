"""The epoch store interface: ``EpochStore``, a durable compare-and-set store of per-log
epoch state (``records``) and the event log.

Every change of a log is a compare-and-set on its ``version``, so two sequencers
activating the same log get distinct epochs, and a sequencer acting on a stale read is
refused.  Backends implement ``update`` (an atomic read-modify-write of one log), ``get``,
``logs``, ``remove``, the event log and the runtime log groups (``logs_config`` and
``update_logs_config``, a versioned document changed by compare-and-set); everything else
here is built on those, with the update functions of ``transitions``.  ``update``'s
function may be called more than once (a backend may retry on conflicts), so it must only
compute from its argument.  ``update_many`` does several logs' updates at once; a backend
that can (one SQLite transaction, one ZooKeeper ``multi``) overrides it, so that a burst
of sequencer activations (``activate_many``) costs one store round trip, not one per log.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

from logdevice.epochstore.events import RebuildingSet, ShardStatusFold, ShardView
from logdevice.epochstore.outcome import EpochOutcome
from logdevice.epochstore.records import (
    EpochMetadata,
    LogEpochState,
    LogsConfigState,
    TailRecord,
    check_log_id,
)
from logdevice.epochstore.transitions import (
    LogsConfigFn,
    MetadataArg,
    UpdateFn,
    activation,
    advance_clean_epoch,
    compare_and_set_to,
)
from logdevice.errors import E, LogDeviceError, NotFoundError
from logdevice.shards import AuthoritativeStatus

__all__ = ["EpochStore"]


class _EntryFailed(Exception):
    """An ``update_many`` entry's function raised ``error``: only that entry fails."""

    def __init__(self, error: LogDeviceError) -> None:
        super().__init__(str(error))
        self.error = error


class _EntryGuard:
    """Wraps an update function so its own errors fail its entry, not the batch."""

    __slots__ = ("fn",)

    def __init__(self, fn: UpdateFn) -> None:
        self.fn = fn

    def __call__(self, cur: LogEpochState | None) -> LogEpochState | None:
        try:
            return self.fn(cur)
        except LogDeviceError as exc:
            raise _EntryFailed(exc) from None


class EpochStore(ABC):
    """A durable compare-and-set store of per-log epoch state and the event log.

    Thread-safe; close it (or use it as a context manager) when done.  Errors are
    ``LogDeviceError``: NOTFOUND for an unknown log, AGAIN (``VersionMismatchError``) for a
    lost compare-and-set, TIMEDOUT when the store stays busy, INVALID_PARAM for bad input.
    """

    uri: str = ""

    def __init__(self) -> None:
        self._fold = ShardStatusFold()
        self._fold_lock = threading.Lock()

    # -- what a backend provides ----------------------------------------------------------
    @abstractmethod
    def get(self, log_id: int) -> LogEpochState | None:
        """The log's state, or None when the store has never seen it."""

    @abstractmethod
    def update(self, log_id: int, fn: UpdateFn) -> LogEpochState | None:
        """Atomically replace the log's state with ``fn(current)``.

        ``fn`` gets the current state (None if absent) and returns the new one (its
        ``version`` is ignored: the store sets ``current.version + 1``), or None to change
        nothing; it may raise to abort.  Returns the state now stored.
        """

    @abstractmethod
    def remove(self, log_id: int, expected_version: int | None = None) -> bool:
        """Forget a log (True if it was there); AGAIN if ``expected_version`` is stale."""

    @abstractmethod
    def logs(self) -> list[int]:
        """Ids of every log in the store, ascending."""

    @abstractmethod
    def append_event(self, event: Mapping[str, Any]) -> int:
        """Append an event (see ``events.py``); returns its version (1, 2, ...)."""

    @abstractmethod
    def events(self, since_version: int = 0) -> list[dict[str, Any]]:
        """Events after ``since_version``, oldest first, each with ``version`` and
        ``time_ms`` added."""

    @abstractmethod
    def cluster_identity(self, cluster: str) -> str:
        """The id of the cluster that owns this store.

        The first call on a new store records ``cluster`` (the config's cluster name) and a
        fresh random id; later calls return that id.  Nodes compare ids with their peers:
        two nodes whose ids differ use different stores and must not serve one cluster
        together.  INVALID_CONFIG when the store belongs to a cluster of another name.
        """

    @abstractmethod
    def logs_config(self) -> LogsConfigState:
        """The runtime log groups and their version (version 0, no groups, when never
        written).  One small read: nodes and clients poll it."""

    @abstractmethod
    def update_logs_config(self, fn: LogsConfigFn) -> LogsConfigState:
        """Atomically replace the runtime log groups with ``fn(current groups)``.

        ``fn`` returns the new groups (JSON objects), or None to change nothing; it may
        raise to abort, and may be called more than once (on a lost compare-and-set), so
        it must only compute from its argument.  Returns the state now stored.
        """

    @abstractmethod
    def close(self) -> None:
        """Release the store's resources; further calls fail with SHUTDOWN."""

    # -- built on top ---------------------------------------------------------------------
    def activate(self, log_id: int, metadata: MetadataArg = None,
                 expected_version: int | None = None) -> tuple[int, LogEpochState]:
        """Hand out the log's next epoch (EPOCH_MIN first) for a sequencer activation.

        ``metadata`` is the placement the new epoch will use (an ``EpochMetadata`` or its
        dict; ``first_epoch`` is ignored), or a function of the current state returning it,
        or None to keep the current one.  A history entry is appended when it differs from
        the current one.  With ``expected_version`` the activation only happens if the log
        is still at that version (AGAIN otherwise).  Returns ``(epoch, new_state)``.
        """
        log_id = check_log_id(log_id)
        state = self.update(log_id, activation(log_id, metadata, expected_version))
        assert state is not None
        return state.epoch, state

    def get_many(self, log_ids: Sequence[int]) -> dict[int, LogEpochState]:
        """The state of each of ``log_ids`` the store knows (the others are left out),
        each as ``get`` would read it; a backend reads them together."""
        out = {}
        for log_id in log_ids:
            state = self.get(log_id)
            if state is not None:
                out[state.log_id] = state
        return out

    def get_many_plain(self, log_ids: Sequence[int]) -> dict[int, dict[str, Any]]:
        """``get_many`` in the plain form (``LogEpochState.to_dict``), for passing on: a
        backend that stores that form hands it over as read, without building the
        states (the reader of the plain form checks it as it builds them)."""
        return {log_id: state.to_dict() for log_id, state in self.get_many(log_ids).items()}

    def epochs(self, log_ids: Sequence[int]) -> dict[int, int]:
        """The current epoch of each of ``log_ids`` the store knows (the others are left
        out), each as ``get`` would read it; a backend reads them together."""
        out = {}
        for log_id in log_ids:
            state = self.get(log_id)
            if state is not None:
                out[state.log_id] = state.epoch
        return out

    def update_many(self, changes: Sequence[tuple[int, UpdateFn]]
                    ) -> list[LogEpochState | None | LogDeviceError]:
        """Several ``update`` calls, applied in order, in as few store round trips as the
        backend allows.  Each entry's result is what ``update`` would have returned, or
        the ``LogDeviceError`` its function raised (that entry changed nothing; the
        others still apply).  A failure of the store itself (unreachable, closed) raises.
        """
        out: list[LogEpochState | None | LogDeviceError] = []
        for log_id, fn in changes:
            try:
                out.append(self.update(log_id, _EntryGuard(fn)))
            except _EntryFailed as failed:
                out.append(failed.error)
        return out

    def activate_many(self, requests: Sequence[tuple[int, MetadataArg]]
                      ) -> list[tuple[int, LogEpochState] | LogDeviceError]:
        """``activate`` for several logs at once (``update_many``): per request, the new
        epoch and state, or the error that request alone failed with."""
        changes = [(check_log_id(log_id), activation(log_id, metadata, None))
                   for log_id, metadata in requests]
        out: list[tuple[int, LogEpochState] | LogDeviceError] = []
        for r in self.update_many(changes):
            assert r is not None  # an activation always writes
            out.append(r if isinstance(r, LogDeviceError) else (r.epoch, r))
        return out

    def compare_and_set(self, log_id: int, expected_version: int,
                        new_state: LogEpochState) -> LogEpochState:
        """Store ``new_state`` if the log is still at ``expected_version`` (0: absent).

        Raises ``VersionMismatchError`` (AGAIN) otherwise.  Epoch and last clean epoch may
        not go backwards (INVALID_PARAM).  Returns the stored state (new version).
        """
        log_id = check_log_id(log_id)
        state = self.update(log_id, compare_and_set_to(log_id, expected_version, new_state))
        assert state is not None
        return state

    def set_last_clean_epoch(self, log_id: int, epoch: int,
                             tail: TailRecord | None = None,
                             outcomes: tuple[EpochOutcome, ...] = ()) -> LogEpochState:
        """Record that recovery finished up to ``epoch`` (and the tail record then), with
        what it made of each epoch it recovered (for storage nodes that missed it).

        Only moves forward: an ``epoch`` at or below the stored one changes nothing (the
        returned state says what is stored).  NOTFOUND for an unknown log; INVALID_PARAM
        for an epoch past the log's current epoch.
        """
        log_id = check_log_id(log_id)
        state = self.update(log_id, advance_clean_epoch(log_id, epoch, tail, outcomes))
        assert state is not None
        return state

    def metadata_for_epoch(self, log_id: int, epoch: int) -> EpochMetadata | None:
        """Which nodeset and replication wrote ``epoch`` of the log (None if before the
        first history entry); NOTFOUND for an unknown log."""
        state = self.get(log_id)
        if state is None:
            raise NotFoundError(message=f"log {log_id} is not in the epoch store")
        return state.metadata_for_epoch(epoch)

    def shard_status(self, node: int) -> AuthoritativeStatus:
        """The node's authoritative status as the event log says."""
        with self._fold_lock:
            return self._catch_up().status(node)

    def shard_statuses(self) -> dict[int, AuthoritativeStatus]:
        """Every node that is not FULLY_AUTHORITATIVE, with its status."""
        with self._fold_lock:
            return self._catch_up().statuses()

    def rebuilding_set(self) -> RebuildingSet:
        """The nodes being rebuilt now, as the event log says."""
        with self._fold_lock:
            return self._catch_up().rebuilding_set()

    def shard_view(self, node: int) -> ShardView:
        """The rebuilding set, ``node``'s status and whether it is drained."""
        with self._fold_lock:
            return self._catch_up().view(node)

    def _check_identity(self, stored: Mapping[str, Any], cluster: str) -> str:
        """``stored``'s id if it names ``cluster`` (for ``cluster_identity``)."""
        if stored.get("cluster") != cluster:
            raise LogDeviceError(E.INVALID_CONFIG, f"epoch store {self.uri} belongs to cluster "
                                                   f"{stored.get('cluster')!r}, not {cluster!r}")
        return str(stored["id"])

    def _catch_up(self) -> ShardStatusFold:
        # Events are append-only: fold only those not seen yet.
        return self._fold.apply_all(self.events(self._fold.version))

    def __enter__(self) -> EpochStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
