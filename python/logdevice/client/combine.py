"""Turning per-node answers into one answer (sans-I/O): head, trim, find_time, data_size.

The storage-side calls go to every storage node that may hold the log and each answers
for the copies it holds.  Answers from an **f-majority** cover at least one copy of every
record: fewer, and some record may be held only by nodes that did not answer.  The rule
is the read path's (``readstream.fmajority.FailureDomainNodeSet``): failure domains from
the log's replication property (``{"rack": 2, "node": 3}``: enough complete racks, or
enough nodes), and the nodes' authoritative status from the event log (an
AUTHORITATIVE_EMPTY node is out of the nodeset; an UNDERREPLICATION one lost data, so its
answer never counts).  Each rule below needs OK answers that form an f-majority, or
that come from every node that can count when too many lost data for one
(NON_AUTHORITATIVE: nobody else can say more); otherwise it raises ``E.PARTIAL`` (some
nodes answered OK) or the most common failure (none did: TIMEDOUT, CONNFAILED, ...).

Rules
-----
trim
    Succeeds with an f-majority of OK answers (the trim point is then persisted on at least
    one node of every possible copyset, enough for readers to establish the TRIM gap);
    returns the highest trim point reported.
get_head_attributes
    ``trim_point`` = the highest trim point reported (a node that missed a trim reports an
    older one); ``trim_point_timestamp`` = the smallest non-zero first-record timestamp
    among the nodes reporting that trim point (0 when none knows one).
find_time(ms)
    Each node reports ``hi`` = its first LSN with timestamp >= ms (LSN_MAX if none) and
    ``lo`` = its last LSN with timestamp < ms (LSN_INVALID if none).  The answer is
    ``min(hi)`` over the answers: the first record at or after ``ms`` anywhere.  If no
    node has such a record, it is ``max(lo) + 1`` (one past the last record before ``ms``,
    i.e. where the next record will go), and ``LSN_OLDEST`` for a log with no records.
    Timestamps are assigned by sequencers and are only roughly monotonic in LSN, so this
    is the first LSN *at or after* which all records are >= ms only approximately, as in
    LogDevice.
data_size
    Every byte is stored R times: the estimate is ``sum(sizes) / R``, scaled by
    ``n / answered`` when some nodes did not answer (``n``: the nodes in the nodeset
    that are not authoritative-empty; those do not count).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from logdevice.errors import E, LogDeviceError, error_for
from logdevice.readstream.fmajority import FailureDomainNodeSet, FMajorityResult
from logdevice.records import LSN_MAX, LSN_OLDEST

__all__ = [
    "TailAttributes",
    "HeadAttributes",
    "f_majority",
    "storage_nodeset",
    "split_answers",
    "combine_trim",
    "combine_head",
    "combine_find_time",
    "combine_data_size",
]


@dataclass(frozen=True, slots=True)
class TailAttributes:
    """The tail of a log (``client.get_tail_attributes``).

    Attributes
    ----------
    last_released_real_lsn : int
        The last released LSN (LSN_INVALID if nothing was ever released).
    last_timestamp : int
        Its record's timestamp (ms since the Unix epoch), 0 if unknown.
    byte_offset : int or None
        Bytes appended to the log before the tail, when the cluster tracks it (not yet:
        None).
    """

    last_released_real_lsn: int
    last_timestamp: int
    byte_offset: int | None = None


@dataclass(frozen=True, slots=True)
class HeadAttributes:
    """The head of a log (``client.get_head_attributes``).

    Attributes
    ----------
    trim_point : int
        Everything at or below it is trimmed (LSN_INVALID: nothing trimmed).
    trim_point_timestamp : int
        Timestamp (ms) of the first record after the trim point, 0 if unknown.
    """

    trim_point: int
    trim_point_timestamp: int


def f_majority(n: int, replication: int) -> int:
    """How many of ``n`` nodes make an f-majority by count alone (R copies, no failure
    domains, every node fully authoritative): when waiting for stragglers may stop."""
    return max(1, min(n, n - replication + 1))


def storage_nodeset(nodes: Iterable[int], replication: Any,
                    locations: Mapping[int, Any] | None = None,
                    statuses: Mapping[int, int] | None = None) -> FailureDomainNodeSet:
    """The nodes a storage-side call went to, as the read path judges them: with the
    log's replication property, the nodes' locations and their authoritative statuses
    (nodes not named are fully authoritative)."""
    nodeset = FailureDomainNodeSet(nodes, replication, locations)
    for node, status in (statuses or {}).items():
        if node in nodeset.status:
            nodeset.set_status(node, status)
    return nodeset


def split_answers(answers: Mapping[int, Any]) -> tuple[dict[int, Any], dict[int, E]]:
    """Separate OK replies from failures.  ``answers`` maps node -> reply (with a
    ``status``) or exception."""
    ok: dict[int, Any] = {}
    failed: dict[int, E] = {}
    for node, a in answers.items():
        if isinstance(a, LogDeviceError):
            failed[node] = a.status
        elif isinstance(a, BaseException):
            failed[node] = E.FAILED
        elif a.status == E.OK:
            ok[node] = a
        else:
            failed[node] = E(a.status)
    return ok, failed


def no_f_majority(what: str, ok: Collection[int], failed: Mapping[int, E], members: int,
                  said: Mapping[int, str]) -> LogDeviceError:
    """The error of a call that ``ok`` nodes (of ``members``) answered, too few: PARTIAL
    if some did, else the most common failure, with what a node said about it (an
    ACCESS names the principal and the right it lacks; ``said``: node -> message)."""
    detail = ", ".join(f"N{k}: {v.name}" for k, v in sorted(failed.items())) or "no answers"
    msg = (f"{what}: {len(ok)} of {members} nodes answered OK, not an "
           f"f-majority of those that count ({detail})")
    if ok:
        return LogDeviceError(E.PARTIAL, msg)
    status = Counter(failed.values()).most_common(1)[0][0] if failed else E.TIMEDOUT
    why = next((said[n] for n, st in sorted(failed.items()) if st == status and n in said), "")
    return error_for(status, f"{msg}: {why}" if why else msg)


def refusal_messages(answers: Mapping[int, Any]) -> dict[int, str]:
    """What the nodes that refused a whole request said."""
    return {node: a.message for node, a in answers.items()
            if isinstance(a, LogDeviceError) and a.message}


def _require(what: str, answers: Mapping[int, Any],
             nodeset: FailureDomainNodeSet) -> dict[int, Any]:
    ok, failed = split_answers(answers)
    if ok and nodeset.check(ok.keys()) != FMajorityResult.NONE:
        return ok
    raise no_f_majority(what, ok, failed, len(nodeset.nodes), refusal_messages(answers))


def combine_trim(answers: Mapping[int, Any], nodeset: FailureDomainNodeSet) -> int:
    """The trim point after a trim (see the module rules)."""
    ok = _require("trim", answers, nodeset)
    return max(int(a.trim_point) for a in ok.values())


def combine_head(answers: Mapping[int, Any], nodeset: FailureDomainNodeSet) -> HeadAttributes:
    ok = _require("get_head_attributes", answers, nodeset)
    trim_point = max(int(a.trim_point) for a in ok.values())
    stamps = [int(a.timestamp) for a in ok.values()
              if int(a.trim_point) == trim_point and int(a.timestamp) > 0]
    return HeadAttributes(trim_point, min(stamps) if stamps else 0)


def combine_find_time(answers: Mapping[int, Any], nodeset: FailureDomainNodeSet) -> int:
    ok = _require("find_time", answers, nodeset)
    hi = min(int(a.hi) for a in ok.values())
    if hi != LSN_MAX:
        return hi
    lo = max(int(a.lo) for a in ok.values())
    return lo + 1 if lo else LSN_OLDEST


def combine_data_size(answers: Mapping[int, Any], nodeset: FailureDomainNodeSet) -> int:
    ok = _require("data_size", answers, nodeset)
    # Authoritative-empty nodes hold nothing that counts (it was copied elsewhere).
    sizes = [int(a.size) for node, a in ok.items() if node in set(nodeset.effective)]
    scale = len(nodeset.effective) / max(1, len(sizes))
    return round(sum(sizes) / max(1, nodeset.replication_factor) * scale)
