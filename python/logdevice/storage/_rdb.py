"""Shared plumbing of the RocksDB layer: the one error helper and buffer helpers.

Errors from the C API's ``char** errptr`` are read, freed and raised in one place,
:func:`raise_error`, as :class:`~logdevice.errors.LogDeviceError` with a status chosen
from RocksDB's message.
"""

from __future__ import annotations

import numpy as np

from logdevice._rocksdb import ffi, lib
from logdevice.errors import E, LogDeviceError, error_for

DEFAULT_CF = "default"
_U64 = np.uint64


def status_for(message: str) -> E:
    low = message.lower()
    if "no space" in low or "nospc" in low:
        return E.NOSPC
    if message.startswith("Corruption"):
        return E.CHECKSUM_MISMATCH
    if message.startswith("Invalid argument"):
        return E.INVALID_PARAM
    if message.startswith("NotFound"):
        return E.NOTFOUND
    return E.FAILED


def raise_error(err) -> None:
    """Raise the RocksDB error in ``err`` (a ``char**``) if there is one, freeing it."""
    if err[0] == ffi.NULL:
        return
    message = ffi.string(err[0]).decode("utf-8", "replace")
    lib.rocksdb_free(err[0])
    err[0] = ffi.NULL
    raise error_for(status_for(message), f"rocksdb: {message}")


def closed_error(what: str = "database") -> LogDeviceError:
    return error_for(E.SHUTDOWN, f"rocksdb {what} is closed")


def as_buf(data):
    """A ``char*``-compatible view of bytes-like ``data`` without copying."""
    if isinstance(data, bytes):
        return data
    return ffi.from_buffer(data)


def u64p(arr: np.ndarray):
    return ffi.from_buffer("uint64_t[]", arr)


def as_u64(offsets) -> np.ndarray:
    return np.ascontiguousarray(offsets, dtype=_U64)



def cbuf(data):
    if len(data) == 0:
        return ffi.new("char[1]")  # from_buffer of an empty buffer may be NULL
    return ffi.from_buffer(data)


def check_offsets(offsets: np.ndarray, size: int, what: str) -> None:
    if len(offsets) == 0:
        raise error_for(E.INVALID_PARAM, f"{what} offsets are empty (need n + 1)")
    if offsets[-1] > size or np.any(offsets[1:] < offsets[:-1]):
        raise error_for(E.INVALID_PARAM, f"{what} offsets are decreasing or past the buffer")
