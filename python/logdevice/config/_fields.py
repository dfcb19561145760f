"""Typed access to a JSON object with field paths, for config validation.

Every problem is a ``FieldError`` carrying the path of the field it is about
(``logs[2].replication.rack``); the loader turns it into ``InvalidConfigError`` naming the
file too.  JSON's types are checked strictly: ``true`` is not an integer, ``1`` is not a
boolean, a float that is not finite is refused.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable
from typing import Any


class FieldError(ValueError):
    """A config field is wrong: ``path`` names it, ``problem`` says how."""

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}" if path else problem)


def join(prefix: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{prefix}[{key}]"
    return f"{prefix}.{key}" if prefix else key


_MISSING: Any = object()


def type_name(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "array",
            dict: "object"}.get(type(value), type(value).__name__)


def check_int(value: Any, path: str, lo: int | None = None, hi: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise FieldError(path, f"expected an integer, got {type_name(value)} {value!r}")
    if lo is not None and value < lo:
        raise FieldError(path, f"must be >= {lo}, got {value}")
    if hi is not None and value > hi:
        raise FieldError(path, f"must be <= {hi}, got {value}")
    return value


def check_float(value: Any, path: str, lo: float | None = None, hi: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise FieldError(path, f"expected a number, got {type_name(value)} {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise FieldError(path, f"must be finite, got {value}")
    if lo is not None and value < lo:
        raise FieldError(path, f"must be >= {lo}, got {value}")
    if hi is not None and value > hi:
        raise FieldError(path, f"must be <= {hi}, got {value}")
    return value


def check_bool(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise FieldError(path, f"expected true or false, got {type_name(value)} {value!r}")
    return value


def check_str(value: Any, path: str, nonempty: bool = False) -> str:
    if not isinstance(value, str):
        raise FieldError(path, f"expected a string, got {type_name(value)} {value!r}")
    if nonempty and not value.strip():
        raise FieldError(path, "must not be empty")
    return value


def check_list(value: Any, path: str) -> list[Any]:
    if not isinstance(value, list | tuple):
        raise FieldError(path, f"expected an array, got {type_name(value)}")
    return list(value)


class Obj:
    """A JSON object being read: remembers which keys were used, refuses the rest."""

    def __init__(self, value: Any, path: str) -> None:
        if not isinstance(value, dict):
            raise FieldError(path, f"expected an object, got {type_name(value)}")
        for key in value:
            if not isinstance(key, str):
                raise FieldError(path, f"keys must be strings, got {key!r}")
        self.value: dict[str, Any] = value
        self.path = path
        self._used: set[str] = set()

    def path_of(self, key: str) -> str:
        return join(self.path, key)

    def raw(self, key: str, default: Any = _MISSING) -> Any:
        self._used.add(key)
        if key not in self.value or (self.value[key] is None and default is not _MISSING):
            if default is _MISSING:
                raise FieldError(self.path_of(key), "is required")
            return default
        return self.value[key]

    def get_int(self, key: str, default: Any = _MISSING, lo: int | None = None,
            hi: int | None = None) -> Any:
        v = self.raw(key, default)
        return v if v is default and default is not _MISSING else check_int(
            v, self.path_of(key), lo, hi)

    def get_float(self, key: str, default: Any = _MISSING, lo: float | None = None,
              hi: float | None = None) -> Any:
        v = self.raw(key, default)
        return v if v is default and default is not _MISSING else check_float(
            v, self.path_of(key), lo, hi)

    def get_bool(self, key: str, default: Any = _MISSING) -> Any:
        v = self.raw(key, default)
        return v if v is default and default is not _MISSING else check_bool(v, self.path_of(key))

    def get_str(self, key: str, default: Any = _MISSING, nonempty: bool = False) -> Any:
        v = self.raw(key, default)
        return v if v is default and default is not _MISSING else check_str(
            v, self.path_of(key), nonempty)

    def done(self, known: Iterable[str] | None = None) -> None:
        """Refuse keys nobody read (typos must not be silently ignored)."""
        allowed = set(known) if known is not None else self._used
        for key in self.value:
            if key not in allowed:
                close = difflib.get_close_matches(key, sorted(allowed), n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else (
                    f" (known: {', '.join(sorted(allowed))})" if allowed else "")
                raise FieldError(self.path_of(key), f"unknown key{hint}")
