"""Streaming offsets and admission control, sans-I/O.

An offset is ``{"<log>": next_lsn}``: per log, the first LSN the next micro-batch reads
(string keys, because Spark stores offsets as JSON).  A micro-batch from ``start`` to
``end`` reads, per log, LSNs ``start .. end - 1``.  An end offset never goes past a log's
tail + 1, and released records never change, so the same ``(start, end)`` always reads the
same records: that is what makes restarts from a checkpoint exact.

Admission control (``cap_rows``) caps a micro-batch at ``max_rows`` rows, counted
from the records themselves: a BufferedWriter blob is one LSN holding many rows, so the
driver asks the storage nodes which records each log holds past its start and how many
rows each (``Client.record_rows``: blob headers are read on the nodes, no payload
travels).  Whole records are taken, shared fairly between the logs, as long as they fit
in the cap; a micro-batch exceeds it only when its first record alone does (a blob
larger than the cap is read alone, so the stream never stalls).  A log's end is the LSN
of the first record not taken, so LSNs that hold no record (holes, the unused rest of an
epoch) cost nothing.  The result depends only on the records in the logs, which do not
change once released, and on ``start`` and ``latest``: Spark re-planning a micro-batch
gets the same offsets.  (``rows_known`` says when enough is known for that.)
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ldcore import lsn as ldlsn
from logdevice.errors import InvalidParamError
from logdevice.records import LSN_MAX

__all__ = ["Offsets", "parse_starting_offsets", "lsn_lag", "KnownRows", "rows_known",
           "cap_rows"]

Offsets = dict[str, int]


def parse_starting_offsets(text: str, logs: Sequence[int]) -> dict[int, int | str]:
    """``earliest`` / ``latest`` / JSON ``{"<log>": lsn | "earliest" | "latest"}`` ->
    per log an LSN or one of the two words (resolved against the cluster later)."""
    word = text.strip().lower()
    if word in ("earliest", "latest"):
        return dict.fromkeys(logs, word)
    try:
        raw = json.loads(text)
    except ValueError:
        raise InvalidParamError(message=f"option starting_offsets: {text!r} is not "
                                        "earliest, latest or a JSON object") from None
    if not isinstance(raw, dict):
        raise InvalidParamError(message="option starting_offsets: JSON must be an object "
                                        '{"<log>": lsn}')
    out: dict[int, int | str] = {}
    for key, value in raw.items():
        try:
            log_id = int(key)
        except ValueError:
            raise InvalidParamError(message=f"option starting_offsets: {key!r} is not a "
                                            "log id") from None
        if isinstance(value, str) and value.lower() in ("earliest", "latest"):
            out[log_id] = value.lower()
        elif isinstance(value, int) and not isinstance(value, bool) and \
                0 <= value <= LSN_MAX:
            out[log_id] = value
        else:
            raise InvalidParamError(message=f"option starting_offsets: log {key}: "
                                            f"{value!r} is not an LSN, earliest or latest")
    missing = sorted(set(logs) - set(out))
    if missing:
        raise InvalidParamError(message=f"option starting_offsets has no position for "
                                        f"logs {missing}")
    return {log_id: out[log_id] for log_id in logs}


def lsn_lag(pos: int, end: int) -> int:
    """LSNs from ``pos`` up to ``end`` (exclusive), as a count of possible records: the
    difference inside one epoch; across epochs the ESNs of ``end``'s epoch before it (a
    floor: what is left of earlier epochs is not known without reading)."""
    if pos >= end:
        return 0
    if ldlsn.epoch_of(pos) == ldlsn.epoch_of(end - 1):
        return end - pos
    return int(ldlsn.esn_of(end - 1))


@dataclass
class KnownRows:
    """The records of one log from the micro-batch's start up to ``next_lsn``
    (exclusive): their LSNs and rows, in LSN order."""

    next_lsn: int
    lsns: list[int] = field(default_factory=list)
    rows: list[int] = field(default_factory=list)

    def add(self, lsns: Sequence[int], rows: Sequence[int], next_lsn: int) -> None:
        """Records from ``self.next_lsn`` on (ascending), now known up to ``next_lsn``."""
        self.lsns += [int(x) for x in lsns]
        self.rows += [int(x) for x in rows]
        self.next_lsn = max(self.next_lsn, int(next_lsn))


def rows_known(known: KnownRows, latest: int, max_rows: int) -> bool:
    """Whether ``cap_rows`` can decide the log's end from ``known`` alone: the log is
    known up to ``latest``, or the records after its first hold more than ``max_rows``
    rows (so the first record not taken is known, whatever the log's share)."""
    return known.next_lsn >= latest or sum(known.rows[1:]) > max_rows


def cap_rows(start: Mapping[str, int], latest: Mapping[str, int], max_rows: int,
             known: Mapping[str, KnownRows]) -> Offsets:
    """``latest`` cut down to whole records of at most ``max_rows`` rows in all (a single
    record above the cap alone), shared fairly between the logs; ``known``: per log with
    something to read, its records from ``start`` (``rows_known`` for each)."""
    end: Offsets = {k: int(start.get(k, v)) for k, v in latest.items()}
    busy = [k for k in sorted(end, key=int) if end[k] < latest[k] and k in known]
    cum = {k: np.cumsum(np.asarray(known[k].rows, np.int64)) for k in busy}
    taken = dict.fromkeys(busy, 0)  # records taken per log

    def used(k: str) -> int:
        return int(cum[k][taken[k] - 1]) if taken[k] else 0

    budget = max_rows
    for _ in range(8):  # fair shares; what small logs leave goes to the others
        open_ = [k for k in busy if taken[k] < len(cum[k])]
        share = budget // len(open_) if open_ else 0
        if share <= 0:
            break
        moved = False
        for k in open_:
            j = int(np.searchsorted(cum[k], used(k) + min(share, budget), side="right"))
            if j > taken[k]:
                budget -= int(cum[k][j - 1]) - used(k)
                taken[k], moved = j, True
        if not moved:
            break
    moved = True
    while moved and budget > 0:  # shares smaller than a record: one record at a time
        moved = False
        for k in busy:
            rows = known[k].rows
            if taken[k] < len(rows) and rows[taken[k]] <= budget:
                budget -= rows[taken[k]]
                taken[k] += 1
                moved = True
    if not any(taken.values()):  # a first record above the cap: read it alone
        first = next((k for k in busy if known[k].lsns), None)
        if first is not None:
            taken[first] = 1
    for k in busy:
        lsns = known[k].lsns
        end[k] = lsns[taken[k]] if taken[k] < len(lsns) else \
            min(int(latest[k]), known[k].next_lsn)
    return end
