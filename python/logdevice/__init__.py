"""logdevice: durable, replicated, totally ordered logs for Python.

The public names live here; everything else is an implementation module.  Importing the
package loads the client only: ``LocalCluster`` (which runs node processes) loads on
first use.
"""

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

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
from logdevice.records import LSN_INVALID, LSN_MAX, LSN_OLDEST, DataRecord, GapRecord, GapType

if TYPE_CHECKING:
    from logdevice.local_cluster import LocalCluster

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


def __getattr__(name: str) -> Any:
    """``LocalCluster``, imported on first use (PEP 562)."""
    if name != "LocalCluster":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = importlib.import_module("logdevice.local_cluster").LocalCluster
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
