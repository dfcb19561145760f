"""Filter pushdown: ``lsn``, ``log_id`` and ``timestamp`` conditions narrow the plan.

PySpark offers a Python batch reader the query's filters only when the session has
``spark.sql.python.filterPushdown.enabled=true``, and refuses a reader that implements
``pushFilters`` when it does not.  So pushdown is opt-in: option
``filter_pushdown=true`` (with that setting) makes ``LogDeviceDataSource.reader`` return
the reader of this module.

- ``lsn`` comparisons and ``log_id`` equalities are exact: they become ``from_lsn`` /
  ``until_lsn`` / the log list, and Spark does not evaluate them again.
- ``timestamp`` comparisons become ``from_time`` / ``until_time`` (``find_time``), widened
  to whole milliseconds; record timestamps need not grow with LSNs, so Spark still applies
  these filters to the rows.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import math
from collections.abc import Iterable
from typing import Any

from pyspark.sql.datasource import (
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    LessThan,
    LessThanOrEqual,
)

from logdevice.spark.batch import LogDeviceBatchReader
from logdevice.spark.options import ReadOptions

__all__ = ["narrow", "LogDeviceFilteringReader"]

_LOWER = (GreaterThan, GreaterThanOrEqual)
_UPPER = (LessThan, LessThanOrEqual)


def _ms(value: Any) -> float | None:
    if not isinstance(value, _dt.datetime):
        return None
    if value.tzinfo is None:  # Spark hands timestamps as naive local times
        value = value.astimezone()
    return value.timestamp() * 1000.0


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def narrow(opts: ReadOptions, filters: Iterable[Filter]) -> tuple[ReadOptions, list[Filter]]:
    """``opts`` narrowed by what ``filters`` allow; the filters Spark must still apply."""
    lo, hi = opts.from_lsn, opts.until_lsn
    t_lo, t_hi = opts.from_time, opts.until_time
    logs = set(opts.logs)
    rest: list[Filter] = []
    for f in filters:
        col = getattr(f, "attribute", None)
        value: Any = getattr(f, "value", None)
        if col == ("lsn",) and isinstance(f, _LOWER + _UPPER + (EqualTo,)) \
                and _int(value) is not None:
            v = int(value)
            if isinstance(f, GreaterThan):
                lo = max(lo, v + 1)
            elif isinstance(f, GreaterThanOrEqual):
                lo = max(lo, v)
            elif isinstance(f, LessThan):
                hi = min(hi, v - 1)
            elif isinstance(f, LessThanOrEqual):
                hi = min(hi, v)
            else:
                lo, hi = max(lo, v), min(hi, v)
            continue
        if col == ("log_id",) and isinstance(f, EqualTo | In):
            values = (value,) if isinstance(f, EqualTo) else tuple(value)
            if all(_int(v) is not None for v in values):
                logs &= {int(v) for v in values}
                continue
        if col == ("timestamp",) and isinstance(f, _LOWER + _UPPER):
            ms = _ms(value)
            if ms is not None:
                if isinstance(f, _LOWER):  # from_time is inclusive
                    t = math.floor(ms)
                    t_lo = t if t_lo is None else max(t_lo, t)
                else:  # until_time is exclusive
                    t = math.floor(ms) + 1
                    t_hi = t if t_hi is None else min(t_hi, t)
        rest.append(f)
    hi = max(hi, -1)
    narrowed = dataclasses.replace(opts, from_lsn=max(lo, 0), until_lsn=hi,
                                   from_time=t_lo, until_time=t_hi,
                                   logs=tuple(sorted(logs)))
    return narrowed, rest


class LogDeviceFilteringReader(LogDeviceBatchReader):
    """The batch reader with ``pushFilters`` (option ``filter_pushdown=true``)."""

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        self.opts, rest = narrow(self.opts, filters)
        return rest
