"""``ldcore.logtable.LogTable``: log id -> a row of uint64 columns, checked against a dict
through random sets, discards and growth, and its edges (log id 0, the largest ids)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from ldcore.logtable import LogTable


@pytest.mark.parametrize("seed", range(10))
def test_behaves_as_a_dict_of_rows(seed):
    rng = random.Random(seed)
    cols = 1 + seed % 3
    table, model = LogTable(cols), {}
    # Few distinct ids (long probe runs, many discards) or many (growth).
    ids = [rng.choice([0, 1, 2**63, 2**64 - 2, 2**64 - 1]) if rng.random() < 0.05
           else rng.randrange(1, 40 if seed % 2 else 5000) for _ in range(3000)]
    for log_id in ids:
        op = rng.random()
        if op < 0.6:
            col, value = rng.randrange(cols), rng.randrange(2**64)
            table.set(log_id, col, value)
            model.setdefault(log_id, [0] * cols)[col] = value
        elif op < 0.8:
            table.discard(log_id)
            model.pop(log_id, None)
        probe = log_id if rng.random() < 0.7 else rng.randrange(0, 6000)
        assert (probe in table) == (probe in model)
        want = model.get(probe)
        assert table.get(probe, 0, "absent") == (want[0] if want else "absent")
        assert table.row(probe) == tuple(want or [0] * cols)
    assert len(table) == len(model)
    assert sorted(table.logs()) == sorted(model)
    for log_id, row in model.items():
        assert table.row(log_id) == tuple(row)


def test_rows_and_columns():
    table = LogTable(3)
    assert table.get(7) is None and table.get(7, 2, 0) == 0 and 7 not in table
    table.set(7, 2, 42)
    assert table.get(7) == 0 and table.get(7, 2) == 42 and table.row(7) == (0, 0, 42)
    table.discard(7)
    table.set(7, 0, 1)
    assert table.row(7) == (1, 0, 0)  # nothing left over from before the discard
    with pytest.raises(IndexError):
        table.get(7, 3)
    with pytest.raises(OverflowError):
        table.set(7, 0, -1)
    table.set(2**64 - 1, 1, 9)  # every uint64 log id can be kept
    assert table.row(2**64 - 1) == (0, 9, 0) and 2**64 - 1 in table and len(table) == 2
    with pytest.raises(OverflowError):
        table.set(2**64, 0, 1)
    with pytest.raises(ValueError):
        LogTable(0)


def test_grows_to_hold_many_logs_in_little_memory():
    table = LogTable(1)
    for log_id in range(1, 100_001):
        table.set(log_id, 0, log_id << 32 | 5)
    assert len(table) == 100_000
    assert all(table.get(log_id) == log_id << 32 | 5 for log_id in range(1, 100_001, 997))
    assert table.nbytes() / len(table) <= 16 / 0.35  # one key and one value, >= 35 % full


def test_set_many_is_set_of_each_pair():
    ids = np.array([5, 2**64 - 1, 0, 5, 9], dtype=np.uint64)
    values = np.array([1, 2, 3, 4, 2**64 - 1], dtype=np.uint64)
    bulk, one_by_one = LogTable(2), LogTable(2)
    bulk.set_many(ids, 1, values)
    for log_id, value in zip(ids.tolist(), values.tolist(), strict=True):
        one_by_one.set(log_id, 1, value)
    assert sorted(bulk.logs()) == sorted(one_by_one.logs()) == [0, 5, 9, 2**64 - 1]
    assert all(bulk.row(i) == one_by_one.row(i) for i in (0, 5, 9, 2**64 - 1))
    assert bulk.row(5) == (0, 4)  # the later pair wins, as with set
    with pytest.raises(ValueError):
        bulk.set_many(ids, 0, values[:2])
    with pytest.raises(IndexError):
        bulk.set_many(ids, 2, values)


def test_get_many_is_get_of_each_log_zero_when_never_set():
    table = LogTable(2)
    table.set_many(np.array([5, 2**64 - 1, 0], np.uint64), 1, np.array([7, 8, 9], np.uint64))
    asked = np.array([5, 6, 2**64 - 1, 0, 5], np.uint64)
    assert table.get_many(asked, 1).tolist() == [7, 0, 8, 9, 7]
    assert table.get_many(asked, 0).tolist() == [0] * 5
    with pytest.raises(IndexError):
        table.get_many(asked, 2)
