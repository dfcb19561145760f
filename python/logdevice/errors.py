"""Status codes and the one exception type every layer raises.

``E`` carries LogDevice's own numbering so statuses read the same in logs, on the wire
and in this API.  ``LogDeviceError.status`` is always an ``E``; ``error_for`` maps a
status to the most specific subclass, several of which also derive a built-in so callers
can catch ``TimeoutError`` or ``ValueError`` without knowing about us.
"""

from __future__ import annotations

from enum import IntEnum


class E(IntEnum):
    OK = 0
    NOTFOUND = 1
    TIMEDOUT = 2
    NOSEQUENCER = 3
    CONNFAILED = 4
    TOOBIG = 6
    TOOMANY = 7
    PREEMPTED = 8
    NOBUFS = 9
    ACCESS = 15
    DISABLED = 21
    EXISTS = 22
    SHUTDOWN = 23
    PEER_CLOSED = 27
    SEQNOBUFS = 28
    CANCELLED = 32
    AGAIN = 34
    PARTIAL = 35
    GAP = 36
    NOSPC = 39
    OVERLOADED = 40
    FAILED = 43
    SEQSYSLIMIT = 44
    REBUILDING = 45
    BADPAYLOAD = 48
    NOTSUPPORTED = 53
    NOTINSERVERCONFIG = 54
    PEER_UNAVAILABLE = 59
    DATALOSS = 61
    INVALID_PARAM = 100
    CHECKSUM_MISMATCH = 116
    # Not in LogDevice's public table but needed here: a wire or config that does not parse.
    BADMSG = 117
    PROTONOSUPPORT = 118
    INVALID_CONFIG = 119


class LogDeviceError(Exception):
    """An operation failed; ``status`` says why."""

    status: E = E.FAILED

    def __init__(self, status: E | int | None = None, message: str = "") -> None:
        if status is not None:
            self.status = E(status)
        self.message = message
        super().__init__(f"{self.status.name}: {message}" if message else self.status.name)

    def __reduce__(self):  # keep status and message across pickling (process pools, Spark)
        return (error_for, (self.status, self.message))


class TimedOutError(LogDeviceError, TimeoutError):
    status = E.TIMEDOUT


class NotFoundError(LogDeviceError, LookupError):
    status = E.NOTFOUND


class InvalidParamError(LogDeviceError, ValueError):
    status = E.INVALID_PARAM


class TooBigError(LogDeviceError, ValueError):
    status = E.TOOBIG


class BadPayloadError(LogDeviceError, ValueError):
    status = E.BADPAYLOAD


class ChecksumMismatchError(LogDeviceError, ValueError):
    status = E.CHECKSUM_MISMATCH


class InvalidConfigError(LogDeviceError, ValueError):
    status = E.INVALID_CONFIG


class ConnectionFailedError(LogDeviceError, ConnectionError):
    status = E.CONNFAILED


class NoBufsError(LogDeviceError, BufferError):
    status = E.NOBUFS


class AccessError(LogDeviceError):
    """The principal may not do this (a log group's ACL, a refused token or node claim).
    Not a ``PermissionError``: that is an ``OSError``, which callers take for a failed
    connection."""

    status = E.ACCESS


_BY_STATUS: dict[E, type[LogDeviceError]] = {
    cls.status: cls
    for cls in (
        TimedOutError,
        NotFoundError,
        InvalidParamError,
        TooBigError,
        BadPayloadError,
        ChecksumMismatchError,
        InvalidConfigError,
        ConnectionFailedError,
        NoBufsError,
        AccessError,
    )
}
_BY_STATUS[E.PEER_CLOSED] = ConnectionFailedError
_BY_STATUS[E.BADMSG] = BadPayloadError


def error_for(status: E | int, message: str = "") -> LogDeviceError:
    """The exception to raise for ``status``: the most specific subclass we have."""
    status = E(status)
    cls = _BY_STATUS.get(status, LogDeviceError)
    return cls(status, message)
