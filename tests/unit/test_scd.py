"""ldcore.scd: LogDevice's worked examples of single copy delivery, the shipping rules one
by one, argument handling, and golden vectors for the shuffle."""

import platform

import numpy as np
import pytest

from ldcore import scd
from ldcore.scd import (
    FLAG_BRIDGE,
    FLAG_DRAINED,
    FLAG_HOLE,
    FLAG_WRITTEN_BY_RECOVERY,
    first_eligible,
    ship_mask,
    shuffle_copysets,
)
from tests.reference import scd as ref

# The worked example's DB content of N0 (and, in the local-SCD section, of N1).
LSNS = np.arange(42, 49)
EXAMPLE_COPYSETS = np.array(
    [
        [1, 0, 2, 3],
        [3, 5, 0, 1],
        [0, 1, 2, 3],
        [4, 0, 5, 2],
        [0, 3, 2, 1],
        [4, 3, 2, 5],
        [1, 4, 0, 5],
    ],
    dtype=np.int16,
)


def shipped(me, known_down=(), **kw):
    return set(LSNS[ship_mask(EXAMPLE_COPYSETS, me, known_down, **kw)].tolist())


# --- the worked examples ----------------------------------------------------------------


def test_primary_recipient_is_first_in_copyset():
    assert shipped(0) == {44, 46}


@pytest.mark.parametrize(
    ("known_down", "expected"),
    [({1}, {42, 44, 46}), ({1, 4}, {42, 44, 45, 46, 48})],
)
def test_known_down_list(known_down, expected):
    assert shipped(0, known_down) == expected


def test_local_scd_senders():
    local = [0, 1, 2]
    senders = [1, 0, 0, 0, 0, 2, 1]  # "will be sent by" column of the worked example
    assert first_eligible(EXAMPLE_COPYSETS, local_nodes=local).tolist() == senders
    for node in range(6):
        mask = ship_mask(EXAMPLE_COPYSETS, node, local_nodes=local)
        assert mask.tolist() == [s == node for s in senders]


@pytest.mark.parametrize(
    ("known_down", "expected"),
    # The example's text names N0 as the second line's sender; by its own rules it is N1.
    [({0}, {42, 43, 44, 48}), ({0, 2}, {42, 43, 44, 46, 48})],
)
def test_local_scd_with_known_down(known_down, expected):
    assert shipped(1, known_down, local_nodes=[0, 1, 2]) == expected


def test_appender_leaders_take_over_in_order():
    cs = np.array([[3, 2, 1, 0, 4]])
    assert first_eligible(cs).tolist() == [3]
    assert first_eligible(cs, [3]).tolist() == [2]
    assert first_eligible(cs, [3, 2]).tolist() == [1]
    assert ship_mask(cs, 1, [3, 2]).tolist() == [True]
    assert ship_mask(cs, 1, [3]).tolist() == [False]


# --- the rules, one by one -----------------------------------------------------------

CS = np.array([[1, 0, 2]], dtype=np.int32)


@pytest.mark.parametrize("me", [0, 1, 2, None])
def test_rule1_drained_never_ships(me):
    for extra in (0, FLAG_HOLE, FLAG_BRIDGE, FLAG_HOLE | FLAG_BRIDGE):
        assert ship_mask(CS, me, flags=[FLAG_DRAINED | extra]).tolist() == [False]
    assert ship_mask(CS, me, [0, 1, 2], flags=[FLAG_DRAINED]).tolist() == [False]


def test_rule2_rebuilding_filter():
    cs = np.array([[1, 0, 2], [3, 4, 5]])
    # no member of row 1 is rebuilding: skipped even by its primary
    assert ship_mask(cs, 3, rebuilding={2}).tolist() == [False, False]
    assert ship_mask(cs, 1, rebuilding={2}).tolist() == [True, False]
    # checked before hole plugs, and with SCD off
    assert ship_mask(cs, None, rebuilding={2}, flags=[0, FLAG_HOLE]).tolist() == [True, False]
    # an empty filter filters nothing
    assert ship_mask(cs, 3, rebuilding=set()).tolist() == [False, True]


def test_rule3_holes_and_bridges_always_ship():
    flags = [FLAG_HOLE, FLAG_BRIDGE, FLAG_WRITTEN_BY_RECOVERY, 0]
    cs = np.repeat(CS, 4, axis=0)
    assert ship_mask(cs, 2, flags=flags).tolist() == [True, True, False, False]
    assert ship_mask(cs, 7, flags=flags).tolist() == [True, True, False, False]


def test_rule4_scd_off_ships_everything_not_filtered():
    cs = np.array([[1, 0, 2], [3, 4, 5], [6, -1, -1]])
    assert ship_mask(cs, None).tolist() == [True, True, True]
    assert ship_mask(cs, None, flags=[0, FLAG_DRAINED, 0]).tolist() == [True, False, True]


def test_rule5_shuffle_decides_the_order():
    rng = np.random.default_rng(5)
    cs = np.argsort(rng.random((200, 6)), axis=1)[:, :3]
    for seed in (0, 1, 2**63, -5):
        order = shuffle_copysets(cs, seed)
        assert (np.sort(order, axis=1) == np.sort(cs, axis=1)).all()
        assert first_eligible(cs, seed=seed).tolist() == order[:, 0].tolist()
        for me in range(6):
            assert (ship_mask(cs, me, seed=seed) == (order[:, 0] == me)).all()
    # different seeds give different orders; no seed keeps the stored order
    assert (shuffle_copysets(cs, 1) != shuffle_copysets(cs, 2)).any()
    assert first_eligible(cs).tolist() == cs[:, 0].tolist()


def test_rule5_shuffle_is_of_the_whole_copyset_before_known_down():
    # Skipping known-down nodes after shuffling the whole copyset: the shipper is the
    # first up node of the shuffled order, not a shuffle of the up nodes.
    cs = np.array([[0, 1, 2, 3, 4]] * 1)
    for seed in range(50):
        order = shuffle_copysets(cs, seed)[0].tolist()
        down = set(order[:2])
        assert first_eligible(cs, down, seed=seed).tolist() == [order[2]]


def test_rule6_local_scd_falls_through_when_no_local_node_qualifies():
    cs = np.array([[4, 0, 5, 2]])
    assert ship_mask(cs, 0, local_nodes=[0, 1, 2]).tolist() == [True]
    assert ship_mask(cs, 2, [0], local_nodes=[0, 1, 2]).tolist() == [True]
    # both local members down: the normal rule picks N4
    assert ship_mask(cs, 4, [0, 2], local_nodes=[0, 1, 2]).tolist() == [True]
    assert first_eligible(cs, [0, 2], local_nodes=[0, 1, 2]).tolist() == [4]
    # no local member at all
    assert first_eligible(cs, local_nodes=[9]).tolist() == [4]
    # an empty region is plain SCD
    assert first_eligible(cs, local_nodes=[]).tolist() == [4]


def test_rule7_a_node_in_known_down_acts_as_if_it_were_not():
    cs = np.array([[1, 0, 2]])
    assert ship_mask(cs, 1, [1]).tolist() == [True]  # down primary still ships
    assert ship_mask(cs, 0, [1]).tolist() == [True]  # and so does its successor
    assert ship_mask(cs, 0, [1, 0]).tolist() == [True]
    assert ship_mask(cs, 2, [1, 0]).tolist() == [True]
    assert ship_mask(cs, 0, [0]).tolist() == [False]  # N1 is up and first
    # local SCD too
    assert ship_mask(cs, 0, [0], local_nodes=[0, 2]).tolist() == [True]
    assert ship_mask(cs, 2, [0], local_nodes=[0, 2]).tolist() == [True]


def test_rule8_every_member_known_down_ships():
    cs = np.array([[1, 0, 2]])
    for me in (0, 1, 2, 9):
        assert ship_mask(cs, me, [0, 1, 2]).tolist() == [True]
    assert first_eligible(cs, [0, 1, 2]).tolist() == [-1]
    # an empty copyset: vacuously all down
    assert ship_mask(np.full((1, 3), -1), 4).tolist() == [True]
    assert first_eligible(np.full((1, 3), -1)).tolist() == [-1]


# --- determinism of the shuffle --------------------------------------------------------

GOLDEN_ROWS = np.array(
    [
        [0, 1, 2, -1, -1, -1],
        [1, 0, 2, 3, -1, -1],
        [3, 5, 0, 1, -1, -1],
        [4, 0, 5, 2, 7, -1],
        [9, 8, 7, 6, 5, 4],
        [65535, 0, -1, -1, -1, -1],
        [12, -1, -1, -1, -1, -1],
        [-1, -1, -1, -1, -1, -1],
    ],
    dtype=np.int32,
)

GOLDEN = {
    0: [
        [0, 2, 1],
        [3, 2, 0, 1],
        [1, 0, 5, 3],
        [5, 2, 0, 4, 7],
        [9, 8, 4, 6, 5, 7],
        [65535, 0],
        [12],
        [],
    ],
    42: [
        [1, 0, 2],
        [2, 1, 0, 3],
        [5, 1, 0, 3],
        [7, 4, 0, 5, 2],
        [7, 4, 8, 5, 6, 9],
        [0, 65535],
        [12],
        [],
    ],
    2**64 - 1: [
        [1, 2, 0],
        [2, 1, 0, 3],
        [1, 3, 0, 5],
        [0, 5, 2, 4, 7],
        [6, 8, 9, 5, 7, 4],
        [0, 65535],
        [12],
        [],
    ],
}


@pytest.mark.parametrize("seed", sorted(GOLDEN))
def test_shuffle_golden_vectors(seed):
    expected = [row + [-1] * (6 - len(row)) for row in GOLDEN[seed]]
    assert shuffle_copysets(GOLDEN_ROWS, seed).tolist() == expected
    assert ref.shuffle_copysets(GOLDEN_ROWS.tolist(), seed) == expected
    assert first_eligible(GOLDEN_ROWS, seed=seed).tolist() == [
        row[0] if row else -1 for row in GOLDEN[seed]
    ]


def test_negative_seed_is_taken_mod_2_64():
    assert (shuffle_copysets(GOLDEN_ROWS, -1) == shuffle_copysets(GOLDEN_ROWS, 2**64 - 1)).all()


def test_golden_first_eligible_over_many_rows():
    # A fixed arithmetic sequence of 1000 copysets (no RNG), 3 distinct nodes out of 16.
    i = np.arange(1000)
    cs = np.stack([i % 16, (i * 7 + 3) % 16, (i * 11 + 5) % 16], axis=1).astype(np.int16)
    fe = first_eligible(cs, seed=20240601)
    # Pinned: a change of algorithm or platform shows up here.
    assert int((fe.astype(np.int64) * np.arange(1, 1001)).sum() % 1_000_003) == 656351
    assert np.bincount(fe, minlength=16).tolist() == [
        63,
        0,
        188,
        0,
        62,
        63,
        63,
        63,
        62,
        124,
        125,
        0,
        0,
        0,
        124,
        63,
    ]
    assert fe.tolist() == ref.first_eligible(cs.tolist(), seed=20240601)


def test_every_node_agrees_exactly_one_member_ships():
    rng = np.random.default_rng(11)
    nodes = 12
    for width in (1, 2, 3, 5, 8, 10):
        cs = np.argsort(rng.random((500, nodes)), axis=1)[:, :width].astype(np.int16)
        for seed in (None, 0, 7, 2**40 + 3):
            total = sum(ship_mask(cs, me, seed=seed).astype(int) for me in range(nodes))
            assert (total == 1).all()


# --- the plain path (scd.h): SSE2 and portable classify steps -------------------------


def test_sse2_is_built_in_on_x86_64():
    assert (platform.machine().lower() in ("x86_64", "amd64")) == scd.HAVE_SSE2


@pytest.fixture(params=[True, False], ids=["simd", "portable"])
def simd(request):
    previous = scd.use_simd(request.param)
    yield request.param
    scd.use_simd(previous)


@pytest.mark.parametrize("dtype", ["i1", "i2", "i4", "i8"])
@pytest.mark.parametrize("width", range(1, 9))
def test_plain_path_every_width_and_dtype(simd, dtype, width):
    # Row counts around the 16-row blocks, padding anywhere, 0-4 known down (me among
    # them sometimes), me beyond the dtype.
    rng = np.random.default_rng(width * 10 + np.dtype(dtype).itemsize)
    nodes = 6
    for nrows in (1, 15, 16, 17, 33, 200):
        cs = rng.integers(0, nodes, (nrows, width))
        cs[rng.random((nrows, width)) < 0.15] = -1
        cs = cs.astype(dtype)
        rows = cs.tolist()
        for me, kd in [
            (0, ()),
            (1, (0,)),
            (2, (2, 3)),
            (3, (0, 1, 3)),
            (4, (0, 1, 2, 5)),
            (300, (1,)),
        ]:
            assert ship_mask(cs, me, kd).tolist() == ref.ship_mask(rows, me, kd), (nrows, me, kd)


def test_plain_path_takes_any_spelling_of_the_arrays():
    """The same copysets as int64 spelled "q" or "l", big-endian, a strided view, flags as
    a list, and an empty known-down list of any kind: the same answer as the reference."""
    base = np.array([[0, 1, -1], [2, 0, 1], [1, 2, -1], [0, -1, -1]], np.int64)
    rows = base.tolist()
    flags = [0, FLAG_DRAINED, FLAG_HOLE, 0]
    wide = np.zeros((4, 6), np.int32)
    wide[:, ::2] = base
    forms = [base.astype("q"), base.astype("l"), base.astype(">i2"), wide[:, ::2],
             base.T.copy().T]
    for cs in forms:
        for me in (0, 1, 2):
            for kd in (frozenset(), [], (), set(), None, np.array([], np.int64)):
                want = ref.ship_mask(rows, me, () if kd is None else kd)
                assert ship_mask(cs, me, kd).tolist() == want, (cs.dtype, me, kd)
            assert ship_mask(cs, me, [1], flags=flags).tolist() == \
                ref.ship_mask(rows, me, [1], flags=flags), (cs.dtype, me)


def test_plain_path_indices_near_the_limits(simd):
    rng = np.random.default_rng(8)
    for dtype, big in (
        ("i1", [126, 127]),
        ("i2", [32766, 32767]),
        ("i4", [65534, 65535]),
        ("i8", [65534, 65535]),
    ):
        values = np.array([0, 1, -1, *big])
        for width in (1, 3, 4, 5, 8):
            cs = rng.choice(values, (100, width)).astype(dtype)
            rows = cs.tolist()
            for me, kd in [(big[1], (big[0],)), (big[0], (big[1], 0)), (0, big), (1, (1, *big))]:
                assert ship_mask(cs, me, kd).tolist() == ref.ship_mask(rows, me, kd)


def test_plain_path_reports_the_first_bad_index(simd):
    for dtype in ("i4", "i8"):
        cs = np.zeros((100, 3), dtype)
        cs[37, 2] = 65536
        cs[80, 0] = 2**20
        with pytest.raises(ValueError, match=r"copysets\[37\] holds node index 65536"):
            ship_mask(cs, 0, [1])


def test_plain_path_simd_and_portable_agree_on_many_rows():
    rng = np.random.default_rng(21)
    for dtype in ("i1", "i2", "i4", "i8"):
        for width in range(1, 9):
            cs = rng.integers(-1, 12, (5003, width)).astype(dtype)
            for me, kd in [(3, (1,)), (0, (0, 2, 4, 6)), (11, ())]:
                flags = rng.choice([0, FLAG_HOLE, FLAG_DRAINED], 5003).astype(np.uint32)
                got = []
                for enabled in (True, False):
                    previous = scd.use_simd(enabled)
                    try:
                        got.append(ship_mask(cs, me, kd, flags=flags))
                    finally:
                        scd.use_simd(previous)
                assert (got[0] == got[1]).all()
                # and the general kernel (5 known-down nodes) agrees where they overlap
                general = ship_mask(cs, me, (*kd, 100, 101, 102, 103, 104)[:5], flags=flags)
                assert (general == got[0]).all()


# --- the seeded path's cache (scd.h) ----------------------------------------------------


def _uncached(cs, me, known_down, **kw):
    # fewer than 4096 rows per call: decided row by row, no cache
    return np.concatenate(
        [ship_mask(cs[i : i + 4095], me, known_down, **kw) for i in range(0, len(cs), 4095)]
    )


@pytest.mark.parametrize(("nodes", "width"), [(10, 3), (40, 3), (12, 5), (9, 7), (300, 2)])
def test_cache_agrees_with_deciding_every_row(nodes, width):
    # From a few hundred to ~27,000 distinct rows: the table grows (and stops growing).
    rng = np.random.default_rng(nodes * 8 + width)
    cs = np.argsort(rng.random((60_000, nodes)), axis=1)[:, :width].astype(np.int16)
    cs[rng.random(cs.shape) < 0.02] = -1
    for seed, kd in [(42, (1,)), (2**64 - 1, (0, 1, 2)), (None, (0, 1, 2, 3, 4, 5))]:
        assert (ship_mask(cs, 3, kd, seed=seed) == _uncached(cs, 3, kd, seed=seed)).all()


def test_cache_gives_up_on_rows_that_do_not_repeat():
    # ~150,000 distinct rows: misses outnumber hits, the cache turns itself off mid-way.
    rng = np.random.default_rng(4)
    cs = rng.integers(0, 30_000, (150_000, 3)).astype(np.int16)
    cs[50_000:50_100] = cs[50_000]  # a run of equal rows after that
    mask = ship_mask(cs, 7, (1, 2), seed=9)
    assert (mask == _uncached(cs, 7, (1, 2), seed=9)).all()
    rows = cs[:2000].tolist()
    assert mask[:2000].tolist() == ref.ship_mask(rows, 7, (1, 2), seed=9)


@pytest.mark.parametrize(
    ("dtype", "head", "tails"),
    [
        ("i2", [1, 2, 3, 4], [(x, y) for x in range(45) for y in range(45)]),
        ("i2", [1, 2, 3, 4], [(x, 9, y) for x in range(45) for y in range(45)]),
        ("i4", [5, 6], [(x,) for x in range(2025)]),
    ],
)
def test_cache_keys_differing_only_past_the_first_word(dtype, head, tails):
    # Rows of 9-15 bytes whose first 8 bytes are all the same: only the second key word
    # tells them apart, in whichever slot they land.
    pool = np.array([head + list(t) for t in tails])
    cs = pool[np.random.default_rng(len(tails[0])).integers(0, len(pool), 20_000)].astype(dtype)
    for seed in (3, 4):
        assert (ship_mask(cs, 2, (1, 40), seed=seed) == _uncached(cs, 2, (1, 40), seed=seed)).all()


@pytest.mark.parametrize("dtype", ["i1", "i2", "i4", "i8"])
def test_cache_every_dtype_and_width(dtype):
    rng = np.random.default_rng(np.dtype(dtype).itemsize)
    for width in range(1, 9):
        pool = rng.integers(-1, 8, (25, width))
        cs = pool[rng.integers(0, 25, 5000)].astype(dtype)
        rows = cs.tolist()
        for seed, kd in [(5, ()), (6, (2,)), (None, (0, 1, 2, 3, 4))]:
            expected = ref.ship_mask(rows, 2, kd, seed=seed)
            assert ship_mask(cs, 2, kd, seed=seed).tolist() == expected


# --- input handling --------------------------------------------------------------------


@pytest.mark.parametrize(
    "dtype",
    ["i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", ">i4", ">i2", "<i8"],
)
def test_dtypes_agree(dtype):
    cs = EXAMPLE_COPYSETS.astype(np.int64)
    if np.dtype(dtype).kind == "i":
        cs = np.where(np.arange(4) == 3, -1, cs)  # some padding
    arr = cs.astype(dtype)
    rows = cs.tolist()
    for me, kd, seed in [(0, (), None), (0, {1}, None), (5, {3, 4}, 9), (2, {1, 4}, None)]:
        expected = ref.ship_mask(rows, me, kd, seed=seed)
        assert ship_mask(arr, me, kd, seed=seed).tolist() == expected
        assert ship_mask(arr, me, kd, seed=seed, local_nodes=[0, 5]).tolist() == ref.ship_mask(
            rows, me, kd, seed=seed, local_nodes=[0, 5]
        )


def test_lists_and_non_contiguous_arrays():
    wide = np.zeros((7, 8), dtype=np.int32)
    wide[:, ::2] = EXAMPLE_COPYSETS
    view = wide[:, ::2]
    assert not view.flags.c_contiguous
    assert ship_mask(view, 0).tolist() == ship_mask(EXAMPLE_COPYSETS, 0).tolist()
    assert (ship_mask(EXAMPLE_COPYSETS.tolist(), 0).tolist()
            == ship_mask(EXAMPLE_COPYSETS, 0).tolist())


def test_padding_anywhere_and_any_negative_value():
    cs = np.array([[-1, 1, -7, 0, 2, -1]], dtype=np.int32)
    assert ship_mask(cs, 1).tolist() == [True]
    assert ship_mask(cs, 0, [1]).tolist() == [True]
    assert first_eligible(cs, [1, 0]).tolist() == [2]
    assert shuffle_copysets(cs, 3).tolist()[0][3:] == [-1, -1, -1]


def test_node_and_me_beyond_the_dtype_range():
    cs = np.array([[1, 0, 2]], dtype=np.int8)
    assert ship_mask(cs, 300).tolist() == [False]
    assert ship_mask(cs, 300, [0, 1, 2]).tolist() == [True]
    assert ship_mask(cs, 0, [1, 300, 40000]).tolist() == [True]
    cs16 = np.array([[1, 0, 2]], dtype=np.int16)
    assert ship_mask(cs16, 65535, [1, 0, 2, 40000]).tolist() == [True]


def test_wide_copysets_and_many_known_down_nodes():
    rng = np.random.default_rng(3)
    cs = np.argsort(rng.random((300, 20)), axis=1)[:, :12].astype(np.int32)
    rows = cs.tolist()
    kd = list(range(0, 20, 3))  # 7 nodes: beyond the vectorised path's 4
    for me in (0, 1, 5):
        for seed in (None, 17):
            assert ship_mask(cs, me, kd, seed=seed).tolist() == ref.ship_mask(
                rows, me, kd, seed=seed
            )
            assert ship_mask(cs[:, :3], me, kd, seed=seed).tolist() == ref.ship_mask(
                cs[:, :3].tolist(), me, kd, seed=seed
            )


def test_empty_inputs():
    assert ship_mask(np.empty((0, 3), np.int16), 0).shape == (0,)
    assert ship_mask(np.empty((0, 3), np.int16), 0, flags=np.empty(0, np.uint32)).shape == (0,)
    assert ship_mask(np.empty((4, 0), np.int16), 0).tolist() == [True] * 4
    assert first_eligible(np.empty((0, 0))).shape == (0,)
    assert shuffle_copysets(np.empty((2, 0), np.int32), 1).shape == (2, 0)
    assert ship_mask([[]], 1).tolist() == [True]


def test_flags_dtypes():
    cs = np.repeat(CS, 3, axis=0)
    for flags in ([FLAG_HOLE, 0, FLAG_DRAINED], np.array([FLAG_HOLE, 0, FLAG_DRAINED], np.int64)):
        assert ship_mask(cs, 2, flags=flags).tolist() == [True, False, False]
        assert ship_mask(cs, 1, flags=flags).tolist() == [True, True, False]
        assert ship_mask(cs, 1, seed=1, flags=flags).tolist() == ref.ship_mask(
            cs.tolist(), 1, seed=1, flags=[FLAG_HOLE, 0, FLAG_DRAINED]
        )


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: ship_mask(np.array([[1, 70000]]), 0), r"copysets\[0\] holds node index 70000"),
        (lambda: ship_mask(np.array([[1, 2], [3, 2**40]]), 0, seed=1), r"copysets\[1\]"),
        (lambda: ship_mask(np.array([[1, 2], [3, 2**40]]), 0, rebuilding=[1]), r"copysets\[1\]"),
        (lambda: ship_mask(np.array([[1, 2], [3, 2**17]]), 0, local_nodes=[1]), r"copysets\[1\]"),
        (lambda: first_eligible(np.array([[1, 65536]])), r"holds node index 65536"),
        (lambda: shuffle_copysets(np.array([[1, 65536]]), 0), r"holds node index 65536"),
        (lambda: ship_mask(np.array([[1, 2]], np.uint64) * 2**63, 0), r"2\*\*63"),
        (lambda: ship_mask([1, 2, 3], 0), "2-D"),
        (lambda: ship_mask(np.zeros((2, 2, 2), int), 0), "2-D"),
        (lambda: ship_mask(np.array([[1.0, 2.0]]), 0), "integer array"),
        (lambda: ship_mask(np.array([[True]]), 0), "integer array"),
        (lambda: ship_mask(CS, -1), "me: node index -1"),
        (lambda: ship_mask(CS, 65536), "me: node index 65536"),
        (lambda: ship_mask(CS, 1.5), "me must hold integer"),
        (lambda: ship_mask(CS, 0, [-3]), "known_down: node index -3"),
        (lambda: ship_mask(CS, 0, ["a"]), "known_down must hold integer"),
        (lambda: ship_mask(CS, 0, np.array([0.5])), "known_down must hold integer"),
        (lambda: ship_mask(CS, 0, local_nodes=[70000]), "local_nodes"),
        (lambda: ship_mask(CS, 0, rebuilding=[-1]), "rebuilding"),
        (lambda: ship_mask(CS, 0, seed=2**64), "does not fit in 64 bits"),
        (lambda: ship_mask(CS, 0, seed=-(2**63) - 1), "does not fit in 64 bits"),
        (lambda: ship_mask(CS, 0, seed=1.0), "seed must be None or an int"),
        (lambda: ship_mask(CS, 0, flags=[0, 0]), "one entry per record"),
        (lambda: ship_mask(CS, 0, flags=[[0]]), "one entry per record"),
        (lambda: ship_mask(CS, 0, flags=[-1]), "32 unsigned bits"),
        (lambda: ship_mask(CS, 0, flags=[2**33]), "32 unsigned bits"),
        (lambda: ship_mask(CS, 0, flags=[0.5]), "unsigned 32-bit"),
    ],
)
def test_bad_input_raises_value_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_flag_constants_are_logdevice_bits():
    assert (FLAG_HOLE, FLAG_WRITTEN_BY_RECOVERY, FLAG_BRIDGE, FLAG_DRAINED) == (
        1 << 6,
        1 << 13,
        1 << 15,
        1 << 19,
    )
    assert scd.MAX_NODES == 65536
    assert (ref.FLAG_HOLE, ref.FLAG_BRIDGE, ref.FLAG_DRAINED) == (
        FLAG_HOLE,
        FLAG_BRIDGE,
        FLAG_DRAINED,
    )
