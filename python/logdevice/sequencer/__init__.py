"""The sequencer side of the write path, as sans-I/O state machines.

``Sequencer`` (one per log and epoch) hands out LSNs, runs a sliding window of
``Appender``s (one per record or BufferedWriter blob) and advances LNG and the release
pointer; ``CopysetSelector`` / ``StickyCopysetSelector`` choose where copies go;
``NodeHealth`` tracks down, graylisted and blacklisted storage nodes.  They return the
actions of ``logdevice.sequencer.actions`` for the node's asyncio layer to carry out.
"""

from logdevice.sequencer.actions import (
    AckAppend,
    Reactivate,
    Reject,
    Release,
    SendStore,
    StoreWave,
)
from logdevice.sequencer.appender import Appender, AppenderContext, AppenderState
from logdevice.sequencer.copyset import (
    CopysetSelector,
    Replication,
    StickyCopysetSelector,
    satisfies,
)
from logdevice.sequencer.nodestate import NodeHealth
from logdevice.sequencer.sequencer import Sequencer, SequencerState

__all__ = [
    "AckAppend",
    "Appender",
    "AppenderContext",
    "AppenderState",
    "CopysetSelector",
    "NodeHealth",
    "Reactivate",
    "Reject",
    "Release",
    "Replication",
    "SendStore",
    "Sequencer",
    "SequencerState",
    "StickyCopysetSelector",
    "StoreWave",
    "satisfies",
]
