"""What epoch recovery made of one epoch, kept in the epoch store for purging.

Recovery leaves an epoch's records up to its last known good ESN (``lng``) as they are.
From ``lng + 1`` on it writes every ESN again on a full copyset: a data record where some
node held one, a hole plug where none did, and finally a bridge record one past the last
ESN anyone held.  Nothing of the epoch exists past the bridge.

A storage node that missed the recovery (down, paused, partitioned) may still hold copies
that contradict this: a record the dead sequencer stored only there, where recovery wrote
a hole plug or the bridge; records past the bridge.  Before it serves the epoch it
compares its copies with the outcome (``EpochOutcome.contradicted``) and deletes the ones
that disagree, so every reader sees what recovery decided (purging).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ldcore.lsn import ESN_MAX
from logdevice.errors import InvalidParamError
from logdevice.protocol.flags import FLAG_BRIDGE, FLAG_HOLE

__all__ = ["EpochOutcome"]

_KIND = FLAG_HOLE | FLAG_BRIDGE


@dataclass(frozen=True, slots=True)
class EpochOutcome:
    """Recovery's decision for ``epoch``.

    Attributes
    ----------
    epoch : int
    lng : int
        ESNs up to here were released or known good: recovery left them alone.
    bridge : int
        ESN of the bridge record that ends the epoch; 0 when the epoch had no room for
        one (records up to ``ESN_MAX``, or everything released).
    holes : tuple of (lo, hi)
        Inclusive ESN runs, in order, where recovery wrote hole plugs.
    """

    epoch: int
    lng: int
    bridge: int = 0
    holes: tuple[tuple[int, int], ...] = ()

    def __post_init__(self) -> None:
        holes = tuple((int(lo), int(hi)) for lo, hi in self.holes)
        object.__setattr__(self, "holes", holes)
        end = self.bridge or ESN_MAX + 1
        prev = self.lng
        for lo, hi in holes:
            if not prev < lo <= hi < end:
                raise InvalidParamError(message=f"epoch {self.epoch}: hole run {lo}..{hi} "
                                                f"is out of order or outside {self.lng + 1}.."
                                                f"{end - 1}")
            prev = hi
        if self.bridge and not self.lng < self.bridge <= ESN_MAX:
            raise InvalidParamError(message=f"epoch {self.epoch}: bridge at {self.bridge} "
                                            f"is not past lng {self.lng}")

    @classmethod
    def from_plan(cls, epoch: int, lng: int, esns: Iterable[int],
                  flags: Iterable[int]) -> EpochOutcome:
        """From recovery's per-ESN decisions (ESNs in order with the flags of the copy
        written there; the bridge record last if there is one)."""
        holes: list[list[int]] = []
        bridge = 0
        for esn, f in zip(esns, flags, strict=True):
            if f & FLAG_BRIDGE:
                bridge = esn
                break
            if f & FLAG_HOLE:
                if holes and holes[-1][1] == esn - 1:
                    holes[-1][1] = esn
                else:
                    holes.append([esn, esn])
        return cls(epoch, lng, bridge, tuple((lo, hi) for lo, hi in holes))

    def contradicted(self, esns: Any, flags: Any) -> np.ndarray:
        """Which of a node's copies (ESNs of this epoch with their record flags) disagree
        with the outcome and must go: a copy of another kind than recovery wrote at its
        ESN, or any copy past the bridge."""
        esns = np.asarray(esns, dtype=np.int64)
        kind = np.asarray(flags, dtype=np.uint32) & _KIND
        want = np.zeros(len(esns), dtype=np.uint32)  # a data record
        for lo, hi in self.holes:
            want[(esns >= lo) & (esns <= hi)] = FLAG_HOLE
        bad = kind != want
        if self.bridge:
            bad = np.where(esns == self.bridge, kind != FLAG_BRIDGE, bad)
            bad |= esns > self.bridge
        bad &= esns > self.lng
        return bad

    def to_dict(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "lng": self.lng, "bridge": self.bridge,
                "holes": [list(h) for h in self.holes]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> EpochOutcome:
        return cls(int(d["epoch"]), int(d["lng"]), int(d.get("bridge", 0)),
                   tuple((int(lo), int(hi)) for lo, hi in d.get("holes", ())))
