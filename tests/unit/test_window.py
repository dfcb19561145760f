"""ldcore.window.Window: the read stream's ring buffer of record handles."""

import numpy as np
import pytest

from ldcore.window import Window

LSN_MAX = 2**64 - 1
PAST_END = 2**64


def test_insert_codes_len_and_get():
    w = Window(10, 4)  # slots for 10..13
    assert (w.head, w.capacity, len(w)) == (10, 4, 0)
    assert w.insert(12, 7) == 1
    assert w.insert(12, 8) == 0  # duplicate keeps the first handle
    assert w.insert(9, 1) == -1  # stale
    assert w.insert(14, 1) == -2  # beyond
    assert w.insert(13, 0) == 1  # handle 0 is a handle
    assert len(w) == 2
    assert [w.get(x) for x in range(8, 16)] == [-1, -1, -1, -1, 7, 0, -1, -1]
    assert repr(w) == "Window(head=10, capacity=4, filled=2)"


def test_default_capacity_is_512():
    w = Window(1)
    assert w.capacity == 512
    assert w.insert(512, 1) == 1 and w.insert(513, 1) == -2


def test_pop_ready_takes_the_contiguous_run_from_head():
    w = Window(100, 8)
    for lsn in (101, 102, 104):
        w.insert(lsn, lsn * 10)
    lsns, handles = w.pop_ready()
    assert lsns.dtype == np.uint64 and handles.dtype == np.int64
    assert len(lsns) == 0 and w.head == 100
    w.insert(100, 1000)
    lsns, handles = w.pop_ready()
    assert lsns.tolist() == [100, 101, 102] and handles.tolist() == [1000, 1010, 1020]
    assert w.head == 103 and len(w) == 1
    assert w.first_filled() == 104
    # the window slid: 103..110 now fit
    assert w.insert(110, 1) == 1 and w.insert(111, 1) == -2


def test_ring_wraps_many_times():
    w = Window(1, 5)
    expected_head = 1
    for round_ in range(40):
        lsns = np.arange(expected_head, expected_head + 5, dtype=np.uint64)[::-1]
        assert w.insert_many(lsns, lsns.astype(np.int64) + round_).tolist() == [1] * 5
        got, handles = w.pop_ready()
        assert got.tolist() == sorted(lsns.tolist())
        assert handles.tolist() == [x + round_ for x in sorted(lsns.tolist())]
        expected_head += 5
        # a partial pop that leaves the base mid-ring
        w.insert(expected_head, 1)
        w.insert(expected_head + 2, 2)
        assert w.pop_ready()[0].tolist() == [expected_head]
        assert w.advance(expected_head + 3)[0].tolist() == [expected_head + 2]
        expected_head += 3
        assert w.head == expected_head and len(w) == 0


def test_full_window_pops_in_one_go():
    w = Window(7, 3)
    w.insert_many([8, 9, 7], [2, 3, 1])
    assert w.pop_ready()[1].tolist() == [1, 2, 3]
    assert w.head == 10 and len(w) == 0
    assert w.insert(12, 4) == 1 and w.insert(13, 4) == -2


def test_advance_drops_what_it_passes():
    w = Window(50, 10)
    w.insert_many([51, 53, 55, 58], [1, 3, 5, 8])
    lsns, handles = w.advance(54)
    assert lsns.tolist() == [51, 53] and handles.tolist() == [1, 3]
    assert w.head == 54 and len(w) == 2 and w.get(55) == 5
    assert w.advance(54)[0].tolist() == []  # no-op
    assert w.first_filled() == 55
    # the slots freed at the front are reusable at the back
    assert w.insert(63, 9) == 1 and w.insert(64, 9) == -2


def test_advance_far_clears_everything():
    # What a far move costs (no more than a near one) is measured in
    # benchmarks/test_kernels.py (window advance).
    w = Window(5, 512)
    w.insert_many(np.arange(5, 517, 2, dtype=np.uint64), np.arange(256))
    lsns, handles = w.advance((7 << 32) | 1)  # an epoch jump
    w.advance(1 << 63)
    w.advance(LSN_MAX)
    assert lsns.tolist() == list(range(5, 517, 2)) and handles.tolist() == list(range(256))
    assert w.head == LSN_MAX and len(w) == 0
    assert w.insert(LSN_MAX, 3) == 1 and w.first_filled() == LSN_MAX


def test_advance_cannot_go_back():
    w = Window(10, 4)
    with pytest.raises(ValueError, match="cannot move head back"):
        w.advance(9)


def test_clear_rewinds():
    w = Window(100, 4)
    w.insert_many([100, 101, 103], [1, 2, 3])
    w.clear(40)
    assert (w.head, len(w), w.first_filled(), w.get(100)) == (40, 0, 0, -1)
    assert w.insert(43, 5) == 1 and w.insert(44, 5) == -2
    w.clear(500)
    assert w.head == 500 and w.insert(503, 1) == 1


def test_first_filled():
    w = Window(20, 6)
    assert w.first_filled() == 0
    w.insert(24, 1)
    assert w.first_filled() == 24
    w.insert(21, 1)
    assert w.first_filled() == 21
    w.advance(22)
    assert w.first_filled() == 24


def test_near_lsn_max():
    w = Window(LSN_MAX - 3, 512)  # the window is cut short by LSN_MAX, nothing overflows
    assert w.insert(LSN_MAX, 4) == 1
    assert w.insert(LSN_MAX - 3, 1) == 1
    assert w.insert(LSN_MAX - 4, 1) == -1
    assert w.insert_many([LSN_MAX - 2, LSN_MAX - 1], [2, 3]).tolist() == [1, 1]
    assert w.first_filled() == LSN_MAX - 3
    lsns, handles = w.pop_ready()
    assert lsns.tolist() == [LSN_MAX - 3, LSN_MAX - 2, LSN_MAX - 1, LSN_MAX]
    assert handles.tolist() == [1, 2, 3, 4]
    # LSN_MAX delivered: nothing comes after it
    assert w.head == PAST_END and len(w) == 0
    assert w.insert(LSN_MAX, 1) == -1 and w.get(LSN_MAX) == -1
    assert w.first_filled() == 0
    assert w.pop_ready()[0].tolist() == []
    assert w.advance(PAST_END)[0].tolist() == []
    with pytest.raises(ValueError, match="cannot move head back"):
        w.advance(LSN_MAX)
    w.clear(1)
    assert w.head == 1 and w.insert(1, 1) == 1


@pytest.mark.parametrize("start", [LSN_MAX - 2, 1])
def test_advance_past_lsn_max(start):
    w = Window(start, 8)
    w.insert(start + 1, 1)
    lsns, _ = w.advance(PAST_END)
    assert lsns.tolist() == [start + 1]
    assert w.head == PAST_END and w.insert(LSN_MAX, 1) == -1
    assert Window(PAST_END, 4).insert(LSN_MAX, 1) == -1


def test_insert_many_codes_and_duplicates_within_a_batch():
    w = Window(10, 5)
    codes = w.insert_many(
        np.array([12, 9, 12, 15, 10, 14], dtype=np.uint64),
        np.array([1, 2, 3, 4, 5, 6], dtype=np.int64),
    )
    assert codes.dtype == np.int8
    assert codes.tolist() == [1, -1, 0, -2, 1, 1]
    assert [w.get(x) for x in (10, 12, 14)] == [5, 1, 6]
    assert w.insert_many(np.empty(0, np.uint64), np.empty(0, np.int64)).tolist() == []
    # other integer dtypes and lists
    assert w.insert_many(np.array([11], np.int32), np.array([7], np.uint8)).tolist() == [1]
    assert w.insert_many([13], [8]).tolist() == [1]
    assert w.insert_many([], []).tolist() == []


def test_insert_run_counts_what_went_in_and_marked_duplicates():
    w = Window(10, 6)
    w.insert(12, 99)
    u64, u32 = np.uint64, np.uint32
    # 9 stale, 11 in, 12 a duplicate (marked), 13 a duplicate-free, 16 beyond: stop there
    taken, inserted, marked = w.insert_run(
        np.array([9, 11, 12, 13, 16, 17], u64), 5 << 32, np.array([4, 0, 4, 4, 0, 0], u32), 4)
    assert (taken, inserted, marked) == (4, 2, [2])
    assert [w.get(x) for x in (11, 12, 13)] == [(5 << 32) + 1, 99, (5 << 32) + 3]
    assert w.get(16) == -1  # nothing past the first LSN beyond the window
    assert w.insert_run(np.array([11], u64), 7, np.array([0], u32), 4) == (1, 0, [])
    assert w.insert_run(np.empty(0, u64), 0, np.empty(0, u32), 4) == (0, 0, [])
    with pytest.raises(ValueError, match="differ in length"):
        w.insert_run(np.array([14], u64), 1, np.empty(0, u32), 4)
    with pytest.raises(ValueError, match="non-negative"):
        w.insert_run(np.array([14], u64), -1, np.array([0], u32), 4)


def test_scalar_arguments_accept_numpy_ints():
    w = Window(np.uint64(5), np.int32(4))
    assert w.insert(np.uint64(6), np.int64(1)) == 1
    assert w.get(np.int8(6)) == 1
    assert w.advance(np.uint64(6))[0].tolist() == []


def test_capacity_one():
    w = Window(3, 1)
    assert w.insert(4, 1) == -2 and w.insert(3, 1) == 1
    assert w.pop_ready()[0].tolist() == [3]
    assert w.insert(4, 2) == 1 and w.first_filled() == 4
    assert w.advance(5)[1].tolist() == [2]


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: Window(-1), "head -1"),
        (lambda: Window(2**64 + 1), "head"),
        (lambda: Window(1.0), "head must be an int"),
        (lambda: Window(1, 0), "capacity 0"),
        (lambda: Window(1, -4), "capacity"),
        (lambda: Window(1, 2**32 + 1), "capacity"),
        (lambda: Window(1, "8"), "capacity must be an int"),
        (lambda: Window(1, 4).insert(-1, 0), "lsn -1"),
        (lambda: Window(1, 4).insert(2**64, 0), "lsn"),
        (lambda: Window(1, 4).insert(1, -1), "handle -1"),
        (lambda: Window(1, 4).insert(1, 2**63), "handle"),
        (lambda: Window(1, 4).insert(1.5, 0), "lsn must be an int"),
        (lambda: Window(1, 4).get(-3), "lsn"),
        (lambda: Window(1, 4).advance(2**64 + 1), "new_head"),
        (lambda: Window(1, 4).clear(-1), "new_head"),
        (lambda: Window(1, 4).insert_many([1, 2], [1]), "differ in length"),
        (lambda: Window(1, 4).insert_many([-1], [1]), "negative"),
        (lambda: Window(1, 4).insert_many([1.0], [1]), "integer array"),
        (lambda: Window(1, 4).insert_many([[1]], [1]), "1-D"),
        (lambda: Window(1, 4).insert_many([1], [-1]), "non-negative"),
        (lambda: Window(1, 4).insert_many([1], np.array([2**63], np.uint64)), "non-negative"),
        (lambda: Window(1, 4).insert_many([1], [[1]]), "1-D"),
        (lambda: Window(1, 4).insert_many([1], [1.0]), "integer array"),
    ],
)
def test_bad_input_raises_value_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_a_bad_batch_changes_nothing():
    w = Window(1, 4)
    with pytest.raises(ValueError):
        w.insert_many([1, 2], [5, -1])
    assert len(w) == 0
