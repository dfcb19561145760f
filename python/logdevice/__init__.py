"""logdevice: durable, replicated, totally ordered logs for Python.

The public names live here; everything else is an implementation module.
"""

from importlib.metadata import PackageNotFoundError, version

from logdevice.client import AsyncClient, Client
from logdevice.errors import (
    AccessError,
    BadPayloadError,
    ChecksumMismatchError,
    ConnectionFailedError,
    E,
    InvalidConfigError,
    InvalidParamError,
    LogDeviceError,
    NoBufsError,
    NotFoundError,
    TimedOutError,
    TooBigError,
    error_for,
)
from logdevice.local_cluster import LocalCluster
from logdevice.records import LSN_INVALID, LSN_MAX, LSN_OLDEST, DataRecord, GapRecord, GapType

try:
    __version__ = version("logdevice")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "__version__",
    "E",
    "LogDeviceError",
    "TimedOutError",
    "NotFoundError",
    "InvalidParamError",
    "InvalidConfigError",
    "TooBigError",
    "BadPayloadError",
    "ChecksumMismatchError",
    "ConnectionFailedError",
    "NoBufsError",
    "AccessError",
    "error_for",
    "LSN_INVALID",
    "LSN_OLDEST",
    "LSN_MAX",
    "GapType",
    "DataRecord",
    "GapRecord",
    "LocalCluster",
    "Client",
    "AsyncClient",
]
