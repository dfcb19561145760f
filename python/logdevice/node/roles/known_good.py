"""The highest last known good LSN (LNG) the STOREs of each log and epoch carried.

A storage node answers a SEAL with the LNG it saw for the epoch being recovered.  It hears
one with nearly every STORE, for every log it stores, so this is per-log state that stays
for as long as the node runs.  Almost always only the log's newest epoch is written to, and
an LNG is an LSN, which names its epoch: so ``KnownGood`` keeps one int per log (the newest
epoch's LNG) and moves an older epoch's LNG to a small side table only when a STORE of a
newer epoch arrives (recovery of the older one may still ask for it).  It reads and writes
by ``(log_id, epoch)`` keys, as the dict it replaces did.
"""

from __future__ import annotations

from ldcore.logtable import LogTable
from ldcore.lsn import epoch_of

__all__ = ["KnownGood"]


class KnownGood:
    """``(log_id, epoch) -> LNG``; see the module docstring."""

    __slots__ = ("_newest", "_older")

    def __init__(self) -> None:
        self._newest = LogTable(1)  # log -> LNG of its newest epoch (an LSN in it)
        self._older: dict[tuple[int, int], int] = {}  # (log, epoch) -> LNG, any other case

    def get(self, key: tuple[int, int], default: int = 0) -> int:
        log_id, epoch = key
        lng = self._newest.get(log_id)
        if lng is not None and epoch_of(lng) == epoch:
            return lng
        return self._older.get(key, default) if self._older else default

    def __setitem__(self, key: tuple[int, int], lng: int) -> None:
        log_id, epoch = key
        newest = self._newest.get(log_id)
        if epoch_of(lng) != epoch:  # not an LSN of its own epoch: kept as given
            if newest is not None and epoch_of(newest) == epoch:
                self._newest.discard(log_id)
            self._older[key] = lng
        elif newest is None or epoch_of(newest) == epoch:
            self._newest.set(log_id, 0, lng)
        elif epoch_of(newest) < epoch:
            self._older[(log_id, epoch_of(newest))] = newest
            self._newest.set(log_id, 0, lng)
        else:  # a STORE of an older epoch than the newest seen
            self._older[key] = lng

    def __len__(self) -> int:
        return len(self._newest) + len(self._older)
