"""ldcore.availability against a plain set and the Python reference."""

import struct

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ldcore import availability as av
from tests.reference import availability as ref

SETTINGS = settings(max_examples=200, deadline=None)

small_sets = st.sets(st.integers(0, 300), max_size=120).map(sorted)
# runs with repeating gaps, the shape availability is built for, plus some far values
patterned = st.builds(
    lambda start, size, gap, reps, extra: sorted(
        {start + k * (size + gap) + j for k in range(reps) for j in range(size)} | set(extra)
    ),
    st.integers(0, 2**62),
    st.integers(1, 5),
    st.integers(1, 6),
    st.integers(0, 40),
    st.sets(st.integers(0, 2**63 - 1), max_size=5),
)
value_sets = st.one_of(small_sets, patterned)


@st.composite
def round_robin(draw):
    """Entries a bookie holds under BookKeeper's round-robin schedule with E - Q >= 2,
    minus random holes; returns (held, expected)."""
    quorum = draw(st.integers(1, 4))
    ensemble = draw(st.integers(quorum + 2, quorum + 6))
    bookie = draw(st.integers(0, ensemble - 1))
    entries = draw(st.integers(0, 400))
    expected = ref.round_robin(bookie, ensemble, quorum, entries)
    holes = draw(st.sets(st.sampled_from(expected), max_size=6)) if expected else set()
    return [e for e in expected if e not in holes], expected


def check_against_set(values, probes):
    data = av.encode(np.array(values, dtype=np.int64))
    assert data == ref.encode(values)
    a = av.decode(data)
    assert a.groups == ref.decode(data) == ref.groups_of(values)
    assert a.count == len(values)
    assert a.to_array().tolist() == values
    held = set(values)
    probes = np.array(sorted(probes), dtype=np.int64)
    assert a.contains_many(probes).tolist() == [int(p) in held for p in probes]
    assert a.missing(probes).tolist() == [int(p) for p in probes if int(p) not in held]
    # canonical: re-encoding the decoded set gives the same bytes
    assert av.encode(a.to_array()) == data
    return a


@SETTINGS
@given(value_sets, st.sets(st.integers(-5, 320), max_size=60))
def test_matches_a_set(values, probes):
    near = {v + d for v in values[:20] + values[-5:] for d in (-1, 0, 1) if v + d < 2**63}
    check_against_set(values, probes | near)


@SETTINGS
@given(round_robin())
def test_round_robin_with_holes(case):
    held, expected = case
    a = check_against_set(held, expected)
    assert a.missing(np.array(expected)).tolist() == sorted(set(expected) - set(held))
    # with no holes a bookie's entries make at most 3 groups: a cut first run, the
    # periodic body and a cut last run
    if held == expected:
        assert len(a.groups) <= 3


@SETTINGS
@given(st.lists(st.integers(0, 2**64 - 1), max_size=30), value_sets)
def test_uint64_probes(probes, values):
    a = av.decode(av.encode(values))
    held = set(values)
    arr = np.array(probes, dtype=np.uint64)
    assert a.contains_many(arr).tolist() == [p in held for p in probes]
    assert [a.contains(p) for p in probes] == [p in held for p in probes]


def decode_or_none(data):
    try:
        a = av.decode(data)
    except av.AvailabilityError:
        return None
    return a.groups


def ref_or_none(data):
    try:
        return ref.decode(data)
    except ValueError:
        return None


group = st.tuples(
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**31), 2**31 - 1),
)
small_group = st.tuples(
    st.integers(0, 200), st.integers(0, 200), st.integers(-1, 6), st.integers(-1, 9)
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(group, small_group), max_size=4))
def test_decode_validates_like_reference(groups):
    data = struct.pack(">ii", 0, len(groups)) + bytes(56)
    data += b"".join(struct.pack(">qqii", *g) for g in groups)
    got = decode_or_none(data)
    assert got == ref_or_none(data)
    if got is not None:
        a = av.decode(data)
        want = ref.expand(got) if ref.count(got) <= 5000 else None
        if want is not None:
            assert a.to_array().tolist() == want
            probes = sorted({w + d for w in want[:50] for d in (-1, 0, 1)})
            assert a.contains_many(probes).tolist() == [p in set(want) for p in probes]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=140))
def test_random_bytes_never_crash(data):
    assert decode_or_none(data) == ref_or_none(data)


@settings(max_examples=300, deadline=None)
@given(small_sets, st.integers(0, 10**6), st.integers(0, 255))
def test_mutated_bytes(values, pos, val):
    data = bytearray(av.encode(values))
    data[pos % len(data)] = val
    assert decode_or_none(bytes(data)) == ref_or_none(bytes(data))
