"""One check per kind of argument: what each accepts and how it refuses the rest."""

from __future__ import annotations

import math

import pytest

from logdevice import validate
from logdevice.errors import E, InvalidParamError
from logdevice.records import LSN_MAX


def _refused(fn, *args, match: str, **kwargs) -> None:
    with pytest.raises(InvalidParamError, match=match) as ei:
        fn(*args, **kwargs)
    assert ei.value.status == E.INVALID_PARAM


def test_a_timeout_is_finite_seconds_and_never_a_bool():
    assert validate.timeout(0) == 0.0 and isinstance(validate.timeout(2), float)
    assert validate.timeout(1.5, positive=True) == 1.5
    for bad in (-1, math.nan, math.inf, -math.inf, True, "1", None, [1]):
        _refused(validate.timeout, bad, match=r"timeout must be seconds >= 0, got ")
    _refused(validate.timeout, 0, "session_timeout", positive=True,
             match=r"session_timeout must be a positive number of seconds, got 0")
    assert validate.optional_timeout(None) is None and validate.optional_timeout(3) == 3.0
    for bad in (-0.5, math.nan, math.inf, False, "x"):
        _refused(validate.optional_timeout, bad, "time_trigger",
                 match=r"time_trigger must be None or seconds >= 0, got ")


def test_a_log_id_is_an_int_within_the_maximum_when_there_is_one():
    assert validate.log_id(7) == 7 and validate.log_id(0) == 0  # the config says unknown
    for bad in (True, 1.0, "1", None):
        _refused(validate.log_id, bad, match="log id must be an int, not ")
    assert validate.log_id(10, maximum=10) == 10
    for bad in (0, -1, 11):
        _refused(validate.log_id, bad, maximum=10,
                 match=rf"bad log id {bad} \(must be in 1 .. 10\)")


def test_an_lsn_is_an_int_up_to_lsn_max():
    assert validate.lsn(0) == 0 and validate.lsn(LSN_MAX) == LSN_MAX
    for bad in (-1, LSN_MAX + 1, True, 1.0, "1"):
        _refused(validate.lsn, bad, "from_lsn", match="from_lsn must be an LSN, got ")
    assert validate.lsn(LSN_MAX - 1, below_max=True) == LSN_MAX - 1
    _refused(validate.lsn, LSN_MAX, "trim lsn", below_max=True,
             match=r"trim lsn must be an int in \[0, LSN_MAX\), got ")


def test_a_count_is_an_int_at_least_its_minimum():
    assert validate.count(0, "count") == 0 and validate.count(3, "max_logs", minimum=1) == 3
    for bad in (-1, True, 2.0, "2", None):
        _refused(validate.count, bad, "count", match="count must be an int >= 0, got ")
    _refused(validate.count, 0, "max_rows", minimum=1, match="max_rows must be an int >= 1, got 0")
