"""The client read stream (sans-I/O): see ``logdevice.readstream.stream.ReadStream``.

Modules: ``stream`` (events, buffering, connections, timers), ``gaps`` (moving the read
pointer, gap detection and typing), ``delivery`` (output, pseudo-records, blobs), ``scd``
(single copy delivery failover, rewinds, window slides),
``fmajority`` (f-majority with failure domains and authoritative status), ``batches``
(record storage by handle, columnar chunks), ``sender`` (per-node state), ``actions``
(outbound commands).
"""

from logdevice.readstream.actions import SendStart, SendStop, SendWindow
from logdevice.readstream.batches import ReadBatch
from logdevice.readstream.fmajority import (
    AuthoritativeStatus,
    FailureDomainNodeSet,
    FMajorityResult,
)
from logdevice.readstream.stream import ReadStream

__all__ = [
    "ReadStream",
    "ReadBatch",
    "SendStart",
    "SendWindow",
    "SendStop",
    "AuthoritativeStatus",
    "FailureDomainNodeSet",
    "FMajorityResult",
]
