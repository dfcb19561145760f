"""The epoch store interface and its value types.

Per log the store keeps a ``LogEpochState``: the current epoch (bumped by every sequencer
activation), the last clean epoch (recovery finished up to there), the tail record, and
the metadata history (from which epoch on which nodeset and replication property wrote).
Every change is a compare-and-set on the log's ``version``, so two sequencers activating
the same log get distinct epochs, and a sequencer acting on a stale read is refused.

Backends implement ``update`` (an atomic read-modify-write of one log), ``get``, ``logs``,
``remove``, the event log and the runtime log groups (``logs_config`` and
``update_logs_config``, a versioned document changed by compare-and-set); everything else
here is built on those.  ``update``'s
function may be called more than once (a backend may retry on conflicts), so it must only
compute from its argument.  ``update_many`` does several logs' updates at once; a backend
that can (one SQLite transaction, one ZooKeeper ``multi``) overrides it, so that a burst
of sequencer activations (``activate_many``) costs one store round trip, not one per log.
"""

from __future__ import annotations

import json
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ldcore.lsn import EPOCH_INVALID, EPOCH_MAX, EPOCH_MIN
from logdevice import validate
from logdevice.epochstore.events import RebuildingSet, ShardStatusFold, ShardView
from logdevice.epochstore.outcome import EpochOutcome
from logdevice.errors import E, InvalidParamError, LogDeviceError, NotFoundError
from logdevice.shards import AuthoritativeStatus

LOGID_MAX = 2**63 - 1  # what a backend can key on; the config limits user logs further
SCOPE_NAMES = ("region", "dc", "cluster", "row", "rack", "node")  # biggest first
#: Recovery outcomes kept per log (the newest epochs).  A storage node that missed more
#: recoveries than this in a row cannot purge the oldest of them from the store.
MAX_OUTCOMES = 1024


class VersionMismatchError(LogDeviceError):
    """A compare-and-set lost: the log changed since it was read.  ``current`` holds the
    state now in the store (None when the log is absent)."""

    status = E.AGAIN

    def __init__(self, status: E | int | None = None, message: str = "",
                 current: LogEpochState | None = None) -> None:
        super().__init__(status, message)
        self.current = current


def _check_log_id(log_id: Any) -> int:
    return validate.log_id(log_id, maximum=LOGID_MAX)


def _normalize_replication(value: Any) -> dict[str, int]:
    if hasattr(value, "to_dict"):  # a config.ReplicationProperty
        value = value.to_dict()
    if isinstance(value, int) and not isinstance(value, bool):
        value = {"node": value}
    if not isinstance(value, Mapping) or not value:
        raise InvalidParamError(message=f"replication must be a dict like {{'node': 2}}, "
                                        f"got {value!r}")
    out = {}
    for scope in SCOPE_NAMES:  # biggest scope first, like the config
        if scope in value:
            n = value[scope]
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise InvalidParamError(message=f"replication {scope} must be an int >= 1")
            out[scope] = n
    unknown = set(value) - set(SCOPE_NAMES)
    if unknown:
        raise InvalidParamError(message=f"unknown replication scopes {sorted(unknown)}")
    return out


@dataclass(frozen=True, slots=True)
class TailRecord:
    """The last record of the log as of the last clean epoch."""

    lsn: int
    timestamp: int  # ms

    def to_dict(self) -> dict[str, int]:
        return {"lsn": self.lsn, "timestamp": self.timestamp}


@dataclass(frozen=True, slots=True, eq=True)
class EpochMetadata:
    """From ``first_epoch`` on (until the next entry), the log's records were placed on
    ``nodeset`` with ``replication`` (scope name -> copies, e.g. ``{"node": 2}``).

    ``first_epoch`` 0 means "not yet known": ``activate`` fills it in.
    """

    first_epoch: int
    nodeset: tuple[int, ...]
    replication: Mapping[str, int]
    sticky_copysets: bool = False

    def __post_init__(self) -> None:
        nodes = tuple(sorted(set(self.nodeset)))
        if not nodes or any(isinstance(n, bool) or not isinstance(n, int) or n < 0
                            for n in nodes):
            raise InvalidParamError(message=f"a nodeset is a non-empty set of node indices, "
                                            f"got {self.nodeset!r}")
        object.__setattr__(self, "nodeset", nodes)
        rep = _normalize_replication(self.replication)
        object.__setattr__(self, "replication", rep)
        if len(nodes) < max(rep.values()):
            raise InvalidParamError(message=f"nodeset {nodes} is smaller than the replication "
                                            f"factor {max(rep.values())}")
        if not EPOCH_INVALID <= self.first_epoch <= EPOCH_MAX:
            raise InvalidParamError(message=f"bad first_epoch {self.first_epoch}")

    def __hash__(self) -> int:
        return hash((self.first_epoch, self.nodeset, tuple(self.replication.items()),
                     self.sticky_copysets))

    @property
    def replication_factor(self) -> int:
        return max(self.replication.values())

    def same_placement(self, other: EpochMetadata) -> bool:
        """Same nodeset, replication and flags (``first_epoch`` aside)."""
        return (self.nodeset == other.nodeset and dict(self.replication) == dict(
            other.replication) and self.sticky_copysets == other.sticky_copysets)

    def to_dict(self) -> dict[str, Any]:
        return {"first_epoch": self.first_epoch, "nodeset": list(self.nodeset),
                "replication": dict(self.replication), "sticky_copysets": self.sticky_copysets}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> EpochMetadata:
        unknown = set(d) - {"first_epoch", "nodeset", "replication", "sticky_copysets"}
        if unknown:
            raise InvalidParamError(message=f"unknown epoch metadata keys {sorted(unknown)}")
        return cls(first_epoch=d.get("first_epoch", 0), nodeset=tuple(d["nodeset"]),
                   replication=d["replication"],
                   sticky_copysets=bool(d.get("sticky_copysets", False)))

    @classmethod
    def coerce(cls, value: EpochMetadata | Mapping[str, Any]) -> EpochMetadata:
        return value if isinstance(value, EpochMetadata) else cls.from_dict(value)


@dataclass(frozen=True, slots=True)
class LogEpochState:
    """What the epoch store knows about one log.  ``version`` counts its changes."""

    log_id: int
    epoch: int = EPOCH_INVALID  # the current epoch: the last one handed out by activate
    last_clean_epoch: int = EPOCH_INVALID
    tail: TailRecord | None = None
    history: tuple[EpochMetadata, ...] = ()
    version: int = 0  # 0: not in the store yet
    extra: Mapping[str, Any] = field(default_factory=dict)  # room for backends and tools
    recovered: tuple[EpochOutcome, ...] = ()  # newest MAX_OUTCOMES, by epoch

    def __post_init__(self) -> None:
        _check_log_id(self.log_id)
        if not EPOCH_INVALID <= self.epoch <= EPOCH_MAX:
            raise InvalidParamError(message=f"log {self.log_id}: bad epoch {self.epoch}")
        if not EPOCH_INVALID <= self.last_clean_epoch <= self.epoch:
            raise InvalidParamError(message=f"log {self.log_id}: last clean epoch "
                                            f"{self.last_clean_epoch} is not in 0..{self.epoch}")
        firsts = [m.first_epoch for m in self.history]
        if any(f < EPOCH_MIN for f in firsts) or firsts != sorted(set(firsts)):
            raise InvalidParamError(message=f"log {self.log_id}: metadata history must have "
                                            f"increasing first epochs >= 1, got {firsts}")
        if firsts and firsts[-1] > max(self.epoch, EPOCH_MIN):
            raise InvalidParamError(message=f"log {self.log_id}: metadata from epoch "
                                            f"{firsts[-1]} is past the epoch {self.epoch}")

    @property
    def next_epoch(self) -> int:
        """The epoch the next activation will get."""
        return self.epoch + 1

    @property
    def metadata(self) -> EpochMetadata | None:
        """The current metadata (the last history entry)."""
        return self.history[-1] if self.history else None

    def metadata_for_epoch(self, epoch: int) -> EpochMetadata | None:
        """The metadata that was in force in ``epoch`` (None before the first entry)."""
        found = None
        for m in self.history:
            if m.first_epoch > epoch:
                break
            found = m
        return found

    def outcome(self, epoch: int) -> EpochOutcome | None:
        """What recovery made of ``epoch`` (None: not recovered, or forgotten)."""
        for o in self.recovered:
            if o.epoch == epoch:
                return o
        return None

    def to_dict(self) -> dict[str, Any]:
        return {"log_id": self.log_id, "epoch": self.epoch,
                "last_clean_epoch": self.last_clean_epoch,
                "tail": None if self.tail is None else self.tail.to_dict(),
                "history": [m.to_dict() for m in self.history], "version": self.version,
                "extra": dict(self.extra),
                "recovered": [o.to_dict() for o in self.recovered]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LogEpochState:
        tail = d.get("tail")
        return cls(log_id=d["log_id"], epoch=d.get("epoch", 0),
                   last_clean_epoch=d.get("last_clean_epoch", 0),
                   tail=None if tail is None else TailRecord(tail["lsn"], tail["timestamp"]),
                   history=tuple(EpochMetadata.from_dict(m) for m in d.get("history", ())),
                   version=d.get("version", 0), extra=dict(d.get("extra", {})),
                   recovered=tuple(EpochOutcome.from_dict(o) for o in d.get("recovered", ())))


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


@dataclass(frozen=True, slots=True)
class LogsConfigState:
    """The runtime log groups (LogsConfig) as stored: ``version`` counts the changes (0:
    never written) and ``groups`` are the groups' JSON objects, in the form of the config
    file's ``logs`` entries.  The store checks only that they are JSON objects; what they
    mean is checked by ``config.log_groups``."""

    version: int = 0
    groups: tuple[Mapping[str, Any], ...] = ()

    def to_body(self) -> dict[str, Any]:
        """The stored JSON form (the version is kept by the backend)."""
        return {"groups": [dict(g) for g in self.groups]}

    @classmethod
    def from_body(cls, version: int, body: Mapping[str, Any]) -> LogsConfigState:
        return cls(version=version, groups=tuple(dict(g) for g in body.get("groups", ())))


LogsConfigFn = Callable[[tuple[Mapping[str, Any], ...]], Any]


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


MetadataArg = (EpochMetadata | Mapping[str, Any] | None
               | Callable[[LogEpochState | None], EpochMetadata | Mapping[str, Any] | None])


UpdateFn = Callable[[LogEpochState | None], LogEpochState | None]


def _bump(log_id: int, metadata: MetadataArg,
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
        log_id = _check_log_id(log_id)
        state = self.update(log_id, _bump(log_id, metadata, expected_version))
        assert state is not None
        return state.epoch, state

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
        changes = [(_check_log_id(log_id), _bump(log_id, metadata, None))
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
        log_id = _check_log_id(log_id)

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

        state = self.update(log_id, cas)
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
        log_id = _check_log_id(log_id)

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

        state = self.update(log_id, advance)
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
