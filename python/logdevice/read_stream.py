"""Client read stream as a sans-I/O state machine (DESIGN.md §4).

The implementation lives in the ``logdevice.readstream`` package; this module is the
public name.
"""

from logdevice.protocol.messages import GapReason
from logdevice.readstream import (
    AuthoritativeStatus,
    FailureDomainNodeSet,
    FMajorityResult,
    ReadBatch,
    ReadStream,
    SendStart,
    SendStop,
    SendWindow,
)

__all__ = [
    "ReadStream",
    "ReadBatch",
    "SendStart",
    "SendWindow",
    "SendStop",
    "AuthoritativeStatus",
    "FailureDomainNodeSet",
    "FMajorityResult",
    "GapReason",
]
