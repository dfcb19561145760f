"""One check per kind of argument a user hands the package: a timeout, a log id, an LSN, a
count.

Each returns the value it accepts (a timeout as float seconds) and raises
``InvalidParamError`` (E.INVALID_PARAM) naming the argument (``what``) otherwise, so every
entry point refuses the same things with the same words:

- a ``bool`` is never a number (``True`` is not one second, nor log 1);
- a timeout is a finite number of seconds >= 0 (``positive``: > 0); NaN and infinity are
  refused (``None``, where allowed, is the caller's default);
- a log id is an int, within ``1 .. maximum`` where a layer has a maximum (where it has
  none, an unknown log is the config's ``NotFoundError``, not a bad argument);
- an LSN is an int in ``[0, LSN_MAX]`` (``below_max``: ``LSN_MAX`` excluded);
- a count is an int >= ``minimum``.
"""

from __future__ import annotations

import math
from typing import Any

from ldcore.lsn import LSN_MAX
from logdevice.errors import InvalidParamError

__all__ = ["timeout", "optional_timeout", "log_id", "lsn", "count"]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_seconds(value: Any) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value) and value >= 0)


def timeout(value: Any, what: str = "timeout", *, positive: bool = False) -> float:
    """``value`` as float seconds: a finite number >= 0 (> 0 with ``positive``)."""
    if not _is_seconds(value) or (positive and value == 0):
        rule = "a positive number of seconds" if positive else "seconds >= 0"
        raise InvalidParamError(message=f"{what} must be {rule}, got {value!r}")
    return float(value)


def optional_timeout(value: Any, what: str = "timeout") -> float | None:
    """``None`` (the caller's default), or a timeout as ``timeout`` accepts it."""
    if value is None:
        return None
    if not _is_seconds(value):
        raise InvalidParamError(message=f"{what} must be None or seconds >= 0, got {value!r}")
    return float(value)


def log_id(value: Any, what: str = "log id", *, maximum: int | None = None) -> int:
    """``value``, an int (and in ``1 .. maximum`` when a maximum is given)."""
    if not _is_int(value):
        raise InvalidParamError(message=f"{what} must be an int, not {type(value).__name__}")
    if maximum is not None and not 0 < value <= maximum:
        raise InvalidParamError(message=f"bad {what} {value!r} (must be in 1 .. {maximum})")
    return int(value)


def lsn(value: Any, what: str = "lsn", *, below_max: bool = False) -> int:
    """``value``, an int in ``[0, LSN_MAX]`` (``[0, LSN_MAX)`` with ``below_max``)."""
    if not _is_int(value) or not 0 <= value <= LSN_MAX or (below_max and value == LSN_MAX):
        rule = "an int in [0, LSN_MAX)" if below_max else "an LSN"
        raise InvalidParamError(message=f"{what} must be {rule}, got {value!r}")
    return int(value)


def count(value: Any, what: str, *, minimum: int = 0) -> int:
    """``value``, an int >= ``minimum``."""
    if not _is_int(value) or value < minimum:
        raise InvalidParamError(message=f"{what} must be an int >= {minimum}, got {value!r}")
    return int(value)
