"""Streaming offsets and admission control, sans-I/O.

An offset is ``{"<log>": next_lsn}``: per log, the first LSN the next micro-batch reads
(string keys, because Spark stores offsets as JSON).  A micro-batch from ``start`` to
``end`` reads, per log, LSNs ``start .. end - 1``.  An end offset never goes past a log's
tail + 1, and released records never change, so the same ``(start, end)`` always reads the
same records: that is what makes restarts from a checkpoint exact.

Admission control caps a micro-batch at about ``max_rows`` LSNs.  Inside one epoch the
LSN count is the record count (BufferedWriter blobs aside); a range that crosses an epoch
is advanced at most to the start of the next epoch, whose records the next trigger reads.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from logdevice.errors import InvalidParamError
from logdevice.records import LSN_MAX

__all__ = ["Offsets", "parse_starting_offsets", "cap_offsets", "advance", "lsn_lag"]

from ldcore import lsn as ldlsn

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


def advance(start: int, end: int, budget: int) -> int:
    """How far one log may go from ``start`` towards ``end`` on ``budget`` LSNs."""
    if start >= end or budget <= 0:
        return start
    epoch = ldlsn.epoch_of(start)
    if ldlsn.epoch_of(end - 1) == epoch:
        return min(end, start + budget)
    return min(start + budget, ldlsn.compose(epoch + 1, 0))


def cap_offsets(start: Mapping[str, int], latest: Mapping[str, int], max_rows: int
                ) -> Offsets:
    """``latest`` cut down so that the micro-batch reads about ``max_rows`` LSNs in all,
    shared fairly between the logs that have something to read."""
    end: Offsets = {k: int(start.get(k, v)) for k, v in latest.items()}
    budget = max_rows
    for _ in range(4):  # what small logs leave over goes to the others, a few rounds
        busy = [k for k in sorted(end, key=int) if end[k] < latest[k]]
        if not busy or budget <= 0:
            break
        share = max(1, budget // len(busy))
        for k in busy:
            new = advance(end[k], int(latest[k]), min(share, budget))
            budget -= new - end[k]
            end[k] = new
            if budget <= 0:
                break
    return end


def lsn_lag(pos: int, end: int) -> int:
    """LSNs from ``pos`` up to ``end`` (exclusive), as a count of possible records: the
    difference inside one epoch; across epochs the ESNs of ``end``'s epoch before it (a
    floor: what is left of earlier epochs is not known without reading)."""
    if pos >= end:
        return 0
    if ldlsn.epoch_of(pos) == ldlsn.epoch_of(end - 1):
        return end - pos
    return int(ldlsn.esn_of(end - 1))
