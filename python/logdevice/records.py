"""What a reader delivers: data records and gaps, in LSN order."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from ldcore.lsn import LSN_INVALID, LSN_MAX, LSN_OLDEST

__all__ = ["LSN_INVALID", "LSN_OLDEST", "LSN_MAX", "GapType", "DataRecord", "GapRecord"]


class GapType(IntEnum):
    UNKNOWN = 0
    BRIDGE = 1  # no records across an epoch boundary (recovery or a new sequencer)
    HOLE = 2  # a hole plug: recovery found no copy and none was acknowledged
    DATALOSS = 3  # copies existed but an f-majority says none is left
    TRIM = 4  # at or below the trim point
    ACCESS = 5
    NOTINCONFIG = 6
    FILTERED_OUT = 7


@dataclass(frozen=True, slots=True)
class DataRecord:
    log_id: int
    lsn: int
    timestamp: int  # milliseconds since the epoch, stamped by the sequencer
    payload: bytes | memoryview
    batch_offset: int = 0  # position inside a BufferedWriter blob; 0 for plain appends


@dataclass(frozen=True, slots=True)
class GapRecord:
    log_id: int
    type: GapType
    lo: int  # inclusive
    hi: int  # inclusive
