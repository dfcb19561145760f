"""logdevice: durable, replicated, totally ordered logs for Python.

The public names live here; everything else is an implementation module.
"""

from logdevice.errors import E, LogDeviceError, error_for
from logdevice.records import LSN_INVALID, LSN_MAX, LSN_OLDEST, DataRecord, GapRecord, GapType

__all__ = [
    "E",
    "LogDeviceError",
    "error_for",
    "LSN_INVALID",
    "LSN_OLDEST",
    "LSN_MAX",
    "GapType",
    "DataRecord",
    "GapRecord",
    "LocalCluster",
    "Client",
]


def __getattr__(name: str):  # lazy: ``import logdevice`` stays light
    if name == "LocalCluster":
        from logdevice.local_cluster import LocalCluster

        return LocalCluster
    if name == "Client":
        from logdevice.client import Client

        return Client
    raise AttributeError(f"module 'logdevice' has no attribute {name!r}")
