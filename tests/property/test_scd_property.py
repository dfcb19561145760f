"""ldcore.scd against the plain-Python reference (tests/reference/scd.py), and the
invariants that make single copy delivery work (every node agrees on the shipper)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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

DTYPES = {"i1": 127, "i2": 32767, "i4": 65535, "i8": 65535}
# Mostly a small cluster, so rows collide with known-down and local sets; a few large
# indices to cross the int8/int16 limits of the vectorised path.
NODES = st.one_of(st.integers(0, 9), st.sampled_from([100, 127, 128, 200, 32767, 40000, 65535]))
NODE_SETS = st.lists(NODES, max_size=7)
SEEDS = st.one_of(st.none(), st.integers(-(2**63), 2**64 - 1))
FLAG_VALUES = st.sampled_from(
    [
        0,
        0,
        0,
        FLAG_HOLE,
        FLAG_BRIDGE,
        FLAG_DRAINED,
        FLAG_WRITTEN_BY_RECOVERY,
        FLAG_HOLE | FLAG_DRAINED,
        FLAG_HOLE | FLAG_WRITTEN_BY_RECOVERY,
        1 << 2,
        0xFFFFFFFF,
    ]
)


@st.composite
def copysets(draw, max_width=10):
    dtype = draw(st.sampled_from(sorted(DTYPES)))
    width = draw(st.integers(0, max_width))
    nrows = draw(st.integers(0, 12))
    entry = st.one_of(NODES.filter(lambda x: x <= DTYPES[dtype]), st.just(-1), st.just(-5))
    rows = draw(
        st.lists(st.lists(entry, min_size=width, max_size=width), min_size=nrows, max_size=nrows)
    )
    # Sticky copysets: runs of identical rows.
    if rows and draw(st.booleans()):
        rows = [rows[0]] * draw(st.integers(1, 4)) + rows
    return np.array(rows, dtype=dtype).reshape(len(rows), width)


@settings(max_examples=400, deadline=None)
@given(
    cs=copysets(),
    me=st.one_of(st.none(), NODES),
    known_down=NODE_SETS,
    seed=SEEDS,
    local=st.one_of(st.none(), NODE_SETS),
    rebuilding=st.one_of(st.none(), NODE_SETS),
    data=st.data(),
)
def test_ship_mask_matches_reference(cs, me, known_down, seed, local, rebuilding, data):
    flags = None
    if data.draw(st.booleans()):
        flags = np.array(
            data.draw(st.lists(FLAG_VALUES, min_size=len(cs), max_size=len(cs))), dtype=np.uint32
        )
    got = ship_mask(
        cs, me, known_down, seed=seed, local_nodes=local, flags=flags, rebuilding=rebuilding
    )
    expected = ref.ship_mask(
        cs.tolist(),
        me,
        known_down,
        seed=seed,
        local_nodes=local,
        flags=flags,
        rebuilding=rebuilding,
    )
    assert got.dtype == np.bool_
    assert got.tolist() == expected


# The plain path of scd.h (no seed, no local SCD, no rebuilding, <= 4 known down, width
# 1..8): 16-row blocks plus a padded tail, so row counts around multiples of 16; values at
# the edges of each dtype and of the node range; me in known_down; both classify steps.
EDGE_NODES = st.one_of(
    st.integers(0, 7), st.sampled_from([126, 127, 128, 255, 32766, 32767, 32768, 65534, 65535])
)


@st.composite
def plain_cases(draw):
    dtype = draw(st.sampled_from(sorted(DTYPES)))
    width = draw(st.integers(1, 8))
    nrows = draw(st.one_of(st.integers(0, 40), st.sampled_from([47, 48, 49, 63, 64, 65, 130])))
    hi = DTYPES[dtype]
    lo = -(2 ** (8 * np.dtype(dtype).itemsize - 1))
    entry = st.one_of(
        EDGE_NODES.filter(lambda x: x <= hi), st.sampled_from([-1, -2, lo]), st.integers(0, 7)
    )
    flat = draw(st.lists(entry, min_size=nrows * width, max_size=nrows * width))
    cs = np.array(flat, dtype=dtype).reshape(nrows, width)
    if nrows > 1 and draw(st.booleans()):  # sticky copysets
        cs[1 : draw(st.integers(1, nrows))] = cs[0]
    me = draw(EDGE_NODES)
    known_down = draw(st.lists(EDGE_NODES, max_size=4))
    if draw(st.booleans()):
        known_down = [*known_down[:3], me]
    return cs, me, known_down


@settings(max_examples=400, deadline=None)
@given(case=plain_cases(), simd=st.booleans(), with_flags=st.booleans(), data=st.data())
def test_plain_path_matches_reference(case, simd, with_flags, data):
    cs, me, known_down = case
    flags = None
    if with_flags:
        flags = np.array(
            data.draw(st.lists(FLAG_VALUES, min_size=len(cs), max_size=len(cs))), dtype=np.uint32
        )
    previous = scd.use_simd(simd)
    try:
        got = ship_mask(cs, me, known_down, flags=flags)
    finally:
        scd.use_simd(previous)
    assert got.dtype == np.bool_
    assert got.tolist() == ref.ship_mask(cs.tolist(), me, known_down, flags=flags)


@settings(max_examples=100, deadline=None)
@given(
    case=plain_cases(),
    bad=st.sampled_from([65536, 65537, 2**20, 2**31 - 1]),
    simd=st.booleans(),
    data=st.data(),
)
def test_plain_path_bad_index_names_the_first_bad_row(case, bad, simd, data):
    cs, me, known_down = case
    if cs.size == 0:
        return
    cs = cs.astype(data.draw(st.sampled_from(["i4", "i8"])))
    spots = data.draw(
        st.lists(
            st.tuples(st.integers(0, len(cs) - 1), st.integers(0, cs.shape[1] - 1)),
            min_size=1,
            max_size=3,
        )
    )
    for r, c in spots:
        cs[r, c] = bad
    first = min(r for r, _ in spots)
    previous = scd.use_simd(simd)
    try:
        with pytest.raises(ValueError, match=rf"copysets\[{first}\] holds node index {bad}"):
            ship_mask(cs, me, known_down)
    finally:
        scd.use_simd(previous)


# The cache of _ship_small (seeded shuffle, or > 4 known down: scd.h) is set up for 4096
# rows or more of at most 15 bytes; rows repeat (runs, and a small pool of distinct rows),
# so lookups hit, miss, and the table grows; the last rows are decided without it.
@st.composite
def repeating_copysets(draw):
    dtype = draw(st.sampled_from(sorted(DTYPES)))
    width = draw(st.integers(1, 8))
    hi = DTYPES[dtype]
    entry = st.one_of(NODES.filter(lambda x: x <= hi), st.just(-1), st.just(-3))
    pool = draw(st.lists(st.lists(entry, min_size=width, max_size=width), min_size=1, max_size=30))
    picks = draw(st.lists(st.integers(0, len(pool) - 1), min_size=1, max_size=200))
    runs = draw(
        st.lists(st.sampled_from([1, 1, 1, 2, 5, 40]), min_size=len(picks), max_size=len(picks))
    )
    order = np.repeat(picks, runs)
    order = np.tile(order, -(-4096 // len(order)))[: 4096 + draw(st.integers(0, 40))]
    return np.array(pool, dtype=dtype).reshape(len(pool), width)[order]


@settings(max_examples=60, deadline=None)
@given(
    cs=repeating_copysets(),
    me=NODES,
    known_down=st.lists(NODES, max_size=7),
    seed=SEEDS,
    with_flags=st.booleans(),
    data=st.data(),
)
def test_cached_rows_match_reference(cs, me, known_down, seed, with_flags, data):
    flags = None
    if with_flags:
        flags = np.array(
            data.draw(st.lists(FLAG_VALUES, min_size=len(cs), max_size=len(cs))), dtype=np.uint32
        )
    got = ship_mask(cs, me, known_down, seed=seed, flags=flags)
    expected = ref.ship_mask(cs.tolist(), me, known_down, seed=seed, flags=flags)
    assert got.tolist() == expected


@settings(max_examples=30, deadline=None)
@given(
    cs=repeating_copysets(),
    bad=st.sampled_from([65536, 2**20, 2**31 - 1]),
    seed=st.integers(0, 2**64 - 1),
    data=st.data(),
)
def test_cached_rows_bad_index_names_the_first_bad_row(cs, bad, seed, data):
    cs = cs.astype(data.draw(st.sampled_from(["i4", "i8"])))
    # a bad row repeated (after it is first met, the cache must not answer for it)
    r = data.draw(st.integers(0, len(cs) - 1))
    cs[r, data.draw(st.integers(0, cs.shape[1] - 1))] = bad
    cs[r:] = np.where(data.draw(st.booleans()), cs[r], cs[r:])
    with pytest.raises(ValueError, match=rf"copysets\[{r}\] holds node index {bad}"):
        ship_mask(cs, 0, [1], seed=seed)


@settings(max_examples=300, deadline=None)
@given(cs=copysets(), known_down=NODE_SETS, seed=SEEDS, local=st.one_of(st.none(), NODE_SETS))
def test_first_eligible_matches_reference(cs, known_down, seed, local):
    got = first_eligible(cs, known_down, seed=seed, local_nodes=local)
    assert got.dtype == np.int32
    assert got.tolist() == ref.first_eligible(cs.tolist(), known_down, seed=seed, local_nodes=local)


@settings(max_examples=300, deadline=None)
@given(cs=copysets(max_width=20), seed=st.integers(-(2**63), 2**64 - 1))
def test_shuffle_matches_reference(cs, seed):
    got = shuffle_copysets(cs, seed)
    assert got.dtype == cs.dtype
    assert got.tolist() == ref.shuffle_copysets(cs.tolist(), seed)


@st.composite
def distinct_copysets(draw):
    nodes = draw(st.integers(1, 16))
    width = draw(st.integers(1, min(nodes, 10)))
    nrows = draw(st.integers(1, 20))
    rows = [draw(st.permutations(range(nodes)))[:width] for _ in range(nrows)]
    return nodes, np.array(rows, dtype=np.int16)


@settings(max_examples=200, deadline=None)
@given(case=distinct_copysets(), seed=SEEDS, local=st.one_of(st.none(), NODE_SETS))
def test_exactly_one_member_ships_when_nobody_is_down(case, seed, local):
    nodes, cs = case
    total = np.zeros(len(cs), dtype=int)
    for me in range(nodes):
        mask = ship_mask(cs, me, seed=seed, local_nodes=local)
        total += mask
        assert (mask == (first_eligible(cs, seed=seed, local_nodes=local) == me)).all()
    assert (total == 1).all()


@settings(max_examples=200, deadline=None)
@given(
    case=distinct_copysets(),
    known_down=NODE_SETS,
    seed=SEEDS,
    local=st.one_of(st.none(), NODE_SETS),
)
def test_every_record_ships_somewhere_and_the_reader_knows_who(case, known_down, seed, local):
    nodes, cs = case
    fe = first_eligible(cs, known_down, seed=seed, local_nodes=local)
    masks = np.array(
        [ship_mask(cs, me, known_down, seed=seed, local_nodes=local) for me in range(nodes)]
    )
    assert masks.any(axis=0).all()  # nothing is lost
    for me in range(nodes):
        if me in known_down:
            continue
        # A node that is not known down ships exactly what the reader expects of it
        # (fe == -1: every member is down, and whoever holds a copy ships it).
        assert (masks[me] == ((fe == me) | (fe == -1))).all()
