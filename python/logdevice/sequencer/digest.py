"""The digest of one epoch in recovery: every copy storage nodes hold past the epoch's
last known good LSN, and what recovery makes of each ESN.

Storage nodes send their copies (DIGEST read streams: records with flags, waves and
copysets).  Per ESN the digest keeps the winning copy under the precedence rule:

1. a copy written by recovery (``FLAG_WRITTEN_BY_RECOVERY``) beats a sequencer's copy;
2. among recovery copies the higher seal epoch wins (recovery stores its seal epoch in
   the copy's wave field);
3. among sequencer copies the higher wave wins;
4. a tie (copies only an interrupted recovery of the same seal epoch can leave) goes to a
   data record over a hole plug, so a record that may have been acknowledged survives.

``plan()`` then turns the digest into the epoch's final content: from LNG + 1 up to the
highest ESN anyone holds, the winning copy where one exists and a hole plug where none
does, ending with a bridge record one past the last ESN.  A bridge record already in the
digest (an earlier, interrupted recovery) ends the epoch where it stands: readers skip
whatever follows a bridge.  Nodes whose copy differs from the winner are named so the
mutation overwrites them too.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ldcore import lsn as ldlsn
from ldcore.checksum import crc32c
from logdevice.protocol.flags import (
    FLAG_BRIDGE,
    FLAG_CHECKSUM,
    FLAG_HOLE,
    FLAG_WRITTEN_BY_RECOVERY,
)

__all__ = ["Digest", "Decision", "precedence", "HOLE_FLAGS", "BRIDGE_FLAGS"]

#: Flags of the pseudo-records recovery writes.
HOLE_FLAGS = FLAG_HOLE | FLAG_WRITTEN_BY_RECOVERY
BRIDGE_FLAGS = FLAG_BRIDGE | FLAG_WRITTEN_BY_RECOVERY
_KIND = FLAG_HOLE | FLAG_BRIDGE


def precedence(flags: int, wave: int) -> tuple[int, int, int]:
    """Sort key of a copy: higher wins (rules 1-4 of the module docstring)."""
    return (1 if flags & FLAG_WRITTEN_BY_RECOVERY else 0, wave,
            0 if flags & _KIND else 1)


class _Copy:
    """The winning copy of one ESN and who holds which version."""

    __slots__ = ("key", "flags", "timestamp", "payload", "checksum", "holders")

    def __init__(self, key: tuple[int, int, int], flags: int, timestamp: int,
                 payload: bytes, checksum: int) -> None:
        self.key = key
        self.flags = flags
        self.timestamp = timestamp
        self.payload = payload
        self.checksum = checksum
        self.holders: dict[int, tuple[int, int]] = {}  # node -> content signature


class Decision(NamedTuple):
    """What recovery stores at one LSN of the epoch."""

    lsn: int
    flags: int  # record flags to store (WRITTEN_BY_RECOVERY always set)
    timestamp: int
    payload: bytes
    checksum: int  # crc32c of the payload (0 for hole plugs and bridges)
    holders: frozenset[int]  # nodes already holding this content
    conflicts: frozenset[int]  # nodes holding something else here: overwrite them

    @property
    def is_hole(self) -> bool:
        return bool(self.flags & FLAG_HOLE) and not self.flags & FLAG_BRIDGE

    @property
    def is_bridge(self) -> bool:
        return bool(self.flags & FLAG_BRIDGE)


def _signature(flags: int, checksum: int) -> tuple[int, int]:
    kind = flags & _KIND
    return (kind, 0 if kind else checksum)


class Digest:
    """Copies of epoch ``epoch`` of ``log_id`` past ``lng`` (an LSN of the epoch or 0).

    Records at or below ``lng`` may be fed too (the digest starts at LNG to learn its
    timestamp); they only count for ``max_timestamp``.
    """

    def __init__(self, log_id: int, epoch: int, lng: int = 0) -> None:
        self.log_id = log_id
        self.epoch = epoch
        self.lng = lng if ldlsn.epoch_of(lng) == epoch else ldlsn.compose(epoch, 0)
        self.copies: dict[int, _Copy] = {}  # esn -> winner so far
        self.max_timestamp = 0

    def __len__(self) -> int:
        return len(self.copies)

    def add(self, node: int, lsn: int, flags: int, wave: int, timestamp: int,
            payload: Any = b"", checksum: int | None = None) -> None:
        """One copy from ``node``."""
        if ldlsn.epoch_of(lsn) != self.epoch:
            return
        if timestamp > self.max_timestamp:
            self.max_timestamp = timestamp
        if lsn <= self.lng:
            return
        flags = int(flags)
        if flags & _KIND:
            payload, checksum = b"", 0
        elif checksum is None or not flags & FLAG_CHECKSUM:
            checksum = crc32c(payload)
        sig = _signature(flags, int(checksum))
        key = precedence(flags, int(wave))
        esn = ldlsn.esn_of(lsn)
        cur = self.copies.get(esn)
        if cur is None or key > cur.key:
            new = _Copy(key, flags, int(timestamp), bytes(payload), int(checksum))
            if cur is not None:
                new.holders = cur.holders
            self.copies[esn] = cur = new
        cur.holders[node] = sig

    def add_batch(self, node: int, lsns: np.ndarray, timestamps: np.ndarray,
                  flags: np.ndarray, waves: np.ndarray, payloads: Any,
                  offsets: np.ndarray, checksums: np.ndarray | None = None) -> None:
        """Copies from one RECORDS frame of ``node`` (columns as on the wire; ``waves``
        may be empty: wave 1)."""
        n = len(lsns)
        if n == 0:
            return
        buf = memoryview(payloads).cast("B") if len(offsets) else memoryview(b"")
        offs = offsets.tolist() if len(offsets) else [0] * (n + 1)
        wv = waves.tolist() if len(waves) else [1] * n
        cks = checksums.tolist() if checksums is not None and len(checksums) else None
        for i, (lsn, ts, fl) in enumerate(zip(lsns.tolist(), timestamps.tolist(),
                                              flags.tolist(), strict=True)):
            self.add(node, lsn, fl, wv[i], ts, buf[offs[i]:offs[i + 1]],
                     None if cks is None else cks[i])

    @property
    def max_esn(self) -> int:
        """Highest ESN any node holds past LNG (LNG's ESN if none)."""
        return max(self.copies, default=ldlsn.esn_of(self.lng))

    def plan(self) -> list[Decision]:
        """The epoch's final content past LNG, in ESN order, bridge record last.

        Empty when the epoch has no room for a bridge (LNG at ``ESN_MAX``)."""
        out: list[Decision] = []
        epoch = self.epoch
        start = ldlsn.esn_of(self.lng) + 1
        last = self.max_esn
        ts = self.max_timestamp
        for esn in range(start, last + 1):
            c = self.copies.get(esn)
            lsn = ldlsn.compose(epoch, esn)
            if c is None:
                out.append(Decision(lsn, HOLE_FLAGS, ts, b"", 0, frozenset(), frozenset()))
                continue
            sig = _signature(c.flags, c.checksum)
            same = frozenset(n for n, s in c.holders.items() if s == sig)
            other = frozenset(c.holders) - same
            flags = c.flags | FLAG_WRITTEN_BY_RECOVERY
            if c.flags & FLAG_BRIDGE:
                out.append(Decision(lsn, flags, c.timestamp, b"", 0, same, other))
                return out
            out.append(Decision(lsn, flags, c.timestamp, c.payload, c.checksum, same, other))
        if last + 1 <= ldlsn.ESN_MAX:
            out.append(Decision(ldlsn.compose(epoch, last + 1), BRIDGE_FLAGS, ts, b"", 0,
                                frozenset(), frozenset()))
        return out
