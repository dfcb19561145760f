"""The epoch store's value types: what it keeps per log, and the runtime log groups.

Per log the store keeps a ``LogEpochState``: the current epoch (bumped by every sequencer
activation), the last clean epoch (recovery finished up to there), the tail record
(``TailRecord``), the metadata history (``EpochMetadata``: from which epoch on which
nodeset and replication property wrote) and the newest recovery outcomes.  ``version``
counts its changes: every change is a compare-and-set on it, and a lost one is
``VersionMismatchError``.  ``LogsConfigState`` is the runtime log groups' versioned
document.

All are immutable and check their fields on construction (INVALID_PARAM), so a state
read from a store, a node or a client is as valid as one made here.  How a state changes
is ``transitions``; where it is kept is ``base.EpochStore`` and its backends.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ldcore.lsn import EPOCH_INVALID, EPOCH_MAX, EPOCH_MIN
from logdevice import validate
from logdevice.epochstore.outcome import EpochOutcome
from logdevice.errors import E, InvalidParamError, LogDeviceError

__all__ = ["EPOCH_INVALID", "EPOCH_MIN", "EPOCH_MAX", "LOGID_MAX", "SCOPE_NAMES",
           "MAX_OUTCOMES", "VersionMismatchError", "check_log_id", "TailRecord",
           "EpochMetadata", "LogEpochState", "LogsConfigState"]

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


def check_log_id(log_id: Any) -> int:
    """``log_id`` if a backend can key on it, else INVALID_PARAM."""
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
        key = _interning_key(d)
        if key is not None:
            found = _INTERNED.get(key)
            if found is not None:
                return found
        m = cls(first_epoch=d.get("first_epoch", 0), nodeset=tuple(d["nodeset"]),
                replication=d["replication"],
                sticky_copysets=bool(d.get("sticky_copysets", False)))
        if key is not None:
            if len(_INTERNED) >= _INTERNED_MAX:
                _INTERNED.clear()
            _INTERNED[key] = m
        return m

    @classmethod
    def coerce(cls, value: EpochMetadata | Mapping[str, Any]) -> EpochMetadata:
        return value if isinstance(value, EpochMetadata) else cls.from_dict(value)


# Epoch metadata decoded lately, by its stored form: the logs of a cluster share a few
# placements, so each log's history is the same few immutable objects (decoded once,
# held once).  Only plain forms are looked up: exact ints and strs, so that True never
# stands for 1 and every form found here passed the checks when it was first built.
_INTERNED: dict[tuple[Any, ...], EpochMetadata] = {}
_INTERNED_MAX = 4096


def _interning_key(d: Mapping[str, Any]) -> tuple[Any, ...] | None:
    first, nodeset = d.get("first_epoch", 0), d.get("nodeset", ())
    replication, sticky = d.get("replication"), d.get("sticky_copysets", False)
    if type(first) is not int or type(sticky) is not bool \
            or type(nodeset) not in (list, tuple) or type(replication) is not dict:
        return None
    rep = tuple(replication.items())
    for n in nodeset:
        if type(n) is not int:
            return None
    for scope, copies in rep:
        if type(scope) is not str or type(copies) is not int:
            return None
    return first, tuple(nodeset), rep, sticky


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
        check_log_id(self.log_id)
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

