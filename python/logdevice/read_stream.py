"""Client read stream as a sans-I/O state machine.

The implementation lives in the ``logdevice.readstream`` package; this module is the
public name.
"""

from logdevice.protocol.messages import GapReason
from logdevice.readstream import *  # noqa: F403
from logdevice.readstream import __all__ as _names

__all__ = [*_names, "GapReason"]
