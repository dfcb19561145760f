"""Slots for a log's LSNs: each epoch's ESN range laid out end to end (sans-I/O).

Within an epoch, ESNs are dense up to where the epoch ends (every ESN is a record, a hole
plug or a bridge), so the verdict works on one slot per LSN of each epoch, from ESN 1 (or
the live range's start) to the epoch's end.  Where an epoch ends is known from outside
the holdings when the caller passes it (``ends``: recovery's bridge record, the release
pointer): then an epoch's lost tail, or an epoch nobody holds anything of, still gets
its slots.  Otherwise an epoch ends at the highest ESN any node holds.  Per-node
holdings then become boolean arrays over the slots, filled by index (no sort, no search
per record), and an empty slot is an LSN nobody holds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ldcore.lsn import LSN_MAX, compose, epoch_of

__all__ = ["Grid"]

_SHIFT = np.uint64(32)


def _epochs(lsns: np.ndarray) -> np.ndarray:
    """Distinct epochs of a sorted LSN array: one binary search per epoch (epochs are
    few, records many)."""
    out: list[int] = []
    at, n = 0, len(lsns)
    while at < n:
        e = epoch_of(int(lsns[at]))
        out.append(e)
        if e == epoch_of(LSN_MAX):
            break  # the last epoch has no next one
        at = int(np.searchsorted(lsns, np.uint64(compose(e + 1, 0))))
    return np.array(out, np.uint64)


@dataclass(frozen=True)
class Grid:
    """Segments (one per epoch present), each ``[start[i], start[i] + length[i])`` in LSNs
    and ``[base[i], base[i] + length[i])`` in slots."""

    epochs: np.ndarray  # uint64, ascending (few: one per sequencer activation)
    start: np.ndarray  # uint64: first LSN of each segment
    base: np.ndarray  # int64: first slot of each segment
    length: np.ndarray  # int64

    @property
    def size(self) -> int:
        return int(self.base[-1] + self.length[-1]) if len(self.base) else 0

    @classmethod
    def build(cls, lo: int, parts: Sequence[np.ndarray], ends: Mapping[int, int] | None = None,
              hi: int = LSN_MAX) -> Grid:
        """The grid of sorted uint64 LSN arrays ``parts`` (all in ``[lo, hi]``), with each
        epoch of ``ends`` (epoch -> its last ESN) laid out up to that ESN (within
        ``[lo, hi]``) even where nobody holds it."""
        parts = [p for p in parts if len(p)]
        expected = {}  # epoch -> its last LSN in [lo, hi]
        for e, esn in (ends or {}).items():
            end = min(compose(int(e), int(esn)), hi)
            if esn > 0 and max(compose(int(e), 1), lo) <= end:
                expected[int(e)] = end
        if not parts and not expected:
            z = np.empty(0, np.int64)
            return cls(np.empty(0, np.uint64), np.empty(0, np.uint64), z, z)
        epochs = np.unique(np.concatenate([_epochs(p) for p in parts]
                                          + [np.array(sorted(expected), np.uint64)]))
        top = np.array([expected.get(e, 0) for e in epochs.tolist()], np.uint64)
        past = (epochs + np.uint64(1)) << _SHIFT
        for p in parts:
            at = np.searchsorted(p, past) - 1  # last LSN of p in each epoch (or before)
            ok = at >= 0
            last = np.zeros(len(epochs), np.uint64)
            last[ok] = p[at[ok]]
            mine = (last >> _SHIFT) == epochs
            top = np.where(mine & (last > top), last, top)
        start = np.maximum((epochs << _SHIFT) | np.uint64(1), np.uint64(lo))
        length = (top - start + np.uint64(1)).astype(np.int64)
        base = np.zeros(len(epochs), np.int64)
        if len(epochs) > 1:
            base[1:] = np.cumsum(length)[:-1]
        return cls(epochs, start, base, length)

    def slots(self, lsns: np.ndarray) -> np.ndarray:
        """Slot of each LSN of a sorted array (every one must be in the grid)."""
        out = np.empty(len(lsns), np.int64)
        # Sorted: each segment's LSNs are one slice, shifted by one constant.
        cuts = np.searchsorted(lsns, self.epochs << _SHIFT).tolist() + [len(lsns)]
        for i in range(len(self.epochs)):
            a, b = cuts[i], cuts[i + 1]
            if a < b:
                np.subtract(lsns[a:b], self.start[i], out=out[a:b], casting="unsafe")
                out[a:b] += self.base[i]
        return out

    def segment_of(self, slots: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.base, slots, side="right") - 1

    def lsns(self, slots: np.ndarray) -> np.ndarray:
        """LSN of each slot."""
        seg = self.segment_of(slots)
        return self.start[seg] + (slots - self.base[seg]).astype(np.uint64)
