"""The client read stream (sans-I/O): see ``logdevice.readstream.stream.ReadStream``.

Modules: ``stream`` (``ReadStream``: events in, the read pointer, wiring the parts),
and its parts: ``sender`` (``Senders``: per-node state, filter version, reconnects,
outbound messages), ``window`` (``RecordWindow``: buffered records, de-duplication, flow
control), ``gaps`` (``GapDetector``: f-majority gap detection and typing, grace period),
``scd`` (``ScdController``: single copy delivery failover, known-down list, rewind
decisions), ``delivery`` (``Delivery``: output queue, pseudo-records, blobs).  Helpers:
``fmajority`` (f-majority with failure domains and authoritative status), ``batches``
(record storage by handle, columnar chunks), ``actions`` (outbound commands).
"""

from logdevice.protocol.messages import GapReason
from logdevice.readstream.actions import SendStart, SendStop, SendWindow
from logdevice.readstream.batches import ReadBatch
from logdevice.readstream.fmajority import (
    AuthoritativeStatus,
    FailureDomainNodeSet,
    FMajorityResult,
)
from logdevice.readstream.stream import ReadStream

__all__ = [
    "GapReason",
    "ReadStream",
    "ReadBatch",
    "SendStart",
    "SendWindow",
    "SendStop",
    "AuthoritativeStatus",
    "FailureDomainNodeSet",
    "FMajorityResult",
]
