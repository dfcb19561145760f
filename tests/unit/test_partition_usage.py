"""``Usage`` (what one log has in one LogsDB partition), compiled: its persisted form is
``keys.DIR_VALUE`` and it merges, copies and compares as the dataclass it replaced."""

from __future__ import annotations

import pickle

import pytest

from logdevice.storage import keys as K
from logdevice.storage.partitions import TS_NONE_MAX, TS_NONE_MIN, Usage


def test_encodes_as_the_directory_value_and_back():
    fields = (5 << 32 | 7, 6 << 32 | 1, TS_NONE_MIN, TS_NONE_MAX, 3, 2**64 - 1)
    u = Usage(*fields)
    assert u.encode() == K.DIR_VALUE.pack(*fields)
    assert Usage.decode(K.DIR_VALUE.pack(*fields)) == u
    assert (u.min_lsn, u.max_lsn, u.min_ts, u.max_ts, u.records, u.nbytes) == fields
    with pytest.raises(ValueError):
        Usage.decode(b"\0" * 47)


def test_merges_copies_and_compares():
    a = Usage(10, 20, 1_000, 2_000, 2, 300)
    b = Usage(5, 15, 1_500, 2_500, 1, 100)
    assert a.merged(b) == Usage(5, 20, 1_000, 2_500, 3, 400)
    assert a.merged(None) == a and a.merged(None) is not a
    c = a.copy()
    c.records += 1
    assert c != a and a.records == 2
    assert pickle.loads(pickle.dumps(a)) == a
    assert repr(a) == ("Usage(min_lsn=10, max_lsn=20, min_ts=1000, max_ts=2000, records=2, "
                       "nbytes=300)")
    with pytest.raises(OverflowError):
        Usage(-1, 0, 0, 0, 0, 0)
