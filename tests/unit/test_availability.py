"""ldcore.availability: BP-34's own examples byte for byte, queries, validation."""

import struct

import numpy as np
import pytest

from ldcore import availability as av
from tests.reference import availability as ref

HEADER0 = "00000000"  # version 0

EXAMPLE1 = [1, 2, 4, 5, 7, 8, 10, 11]
EXAMPLE1_HEX = (
    HEADER0 + "00000001" + "00" * 56
    + "0000000000000001" + "000000000000000a" + "00000002" + "00000003"
)  # fmt: skip
EXAMPLE2 = [1, 2, 3, 6, 7, 8, 11, 13, 16, 17, 18, 21, 22]
EXAMPLE2_GROUPS = [(1, 6, 3, 5), (11, 13, 1, 2), (16, 16, 3, 0), (21, 21, 2, 0)]
EXAMPLE2_HEX = (
    HEADER0 + "00000004" + "00" * 56
    + "0000000000000001" + "0000000000000006" + "00000003" + "00000005"
    + "000000000000000b" + "000000000000000d" + "00000001" + "00000002"
    + "0000000000000010" + "0000000000000010" + "00000003" + "00000000"
    + "0000000000000015" + "0000000000000015" + "00000002" + "00000000"
)  # fmt: skip


def pack(groups, version=0, count=None, reserved=b"\x00" * 56):
    count = len(groups) if count is None else count
    head = struct.pack(">ii", version, count) + reserved
    return head + b"".join(struct.pack(">qqii", *g) for g in groups)


def test_bp34_example_1_bytes():
    data = av.encode(np.array(EXAMPLE1, dtype=np.int64))
    assert data.hex() == EXAMPLE1_HEX
    a = av.decode(data)
    assert a.groups == [(1, 10, 2, 3)]
    assert a.count == 8
    assert a.to_array().tolist() == EXAMPLE1


def test_bp34_example_2_bytes():
    data = av.encode(np.array(EXAMPLE2, dtype=np.uint64))
    assert data.hex() == EXAMPLE2_HEX
    a = av.decode(bytes.fromhex(EXAMPLE2_HEX))
    assert a.groups == EXAMPLE2_GROUPS
    assert a.count == 13
    assert a.to_array().tolist() == EXAMPLE2
    assert a.missing(np.arange(1, 23)).tolist() == [4, 5, 9, 10, 12, 14, 15, 19, 20]


def test_empty():
    data = av.encode(np.array([], dtype=np.int64))
    assert data == bytes(64)
    a = av.decode(data)
    assert a.groups == [] and a.count == 0
    assert a.to_array().tolist() == []
    assert not a.contains(0)
    assert a.contains_many([1, 2]).tolist() == [False, False]
    assert a.missing([3, 1]).tolist() == [3, 1]


def test_accepts_lists_and_dtypes():
    for vals in (EXAMPLE1, np.array(EXAMPLE1, np.int32), np.array(EXAMPLE1, np.uint64),
                 tuple(EXAMPLE1)):
        assert av.encode(vals).hex() == EXAMPLE1_HEX


def test_contains_and_queries():
    a = av.decode(av.encode(EXAMPLE2))
    held = set(EXAMPLE2)
    probes = np.arange(-3, 30)
    assert a.contains_many(probes).tolist() == [int(p) in held for p in probes]
    assert [a.contains(int(p)) for p in probes] == [int(p) in held for p in probes]
    assert 7 in a and 9 not in a
    assert not a.contains(2**64 - 1) and not a.contains(-1)
    big = np.array([2**63, 2**64 - 1, 1], dtype=np.uint64)
    assert a.contains_many(big).tolist() == [False, False, True]
    two_d = a.contains_many(np.array([[1, 4], [6, 9]]))
    assert two_d.shape == (2, 2) and two_d.tolist() == [[True, False], [True, False]]
    missing = a.missing(np.array([22, 12, 1, 14], dtype=np.uint64))
    assert missing.dtype == np.uint64 and missing.tolist() == [12, 14]


def test_long_spacing_does_not_fit_a_period():
    # starts 2**40 apart cannot share an int32 period: separate groups, still exact
    vals = [0, 2**40, 2**41]
    a = av.decode(av.encode(vals))
    assert a.groups == [(0, 0, 1, 0), (2**40, 2**40, 1, 0), (2**41, 2**41, 1, 0)]
    assert a.to_array().tolist() == vals


def test_lsns_across_epochs():
    # LSNs e1n1..e1n4 and e2n1..e2n4 (epoch in the high 32 bits)
    lsns = np.array([(e << 32) | n for e in (1, 2) for n in range(1, 5)], dtype=np.uint64)
    a = av.decode(av.encode(lsns))
    assert a.groups == [(2**32 + 1, 2**32 + 1, 4, 0), (2**33 + 1, 2**33 + 1, 4, 0)]
    assert a.contains_many(lsns).all()
    assert a.to_array().astype(np.uint64).tolist() == lsns.tolist()


def test_groups_merge_unlike_bookkeeper():
    # BookKeeper's encoder makes one group per run; a healthy bookie needs at most 3
    for bookie in range(5):
        entries = ref.round_robin(bookie, 5, 2, 1000)
        a = av.decode(av.encode(entries))
        assert len(a.groups) <= 3
        assert a.count == len(entries)


def test_missing_is_exact_when_ensemble_minus_quorum_is_two_or_more():
    # BookKeeper's "unavailable entries" gives up once a probe passes a group's end by two.
    ensemble, quorum = 5, 2
    entries = ref.round_robin(1, ensemble, quorum, 100)
    held = [e for e in entries if e != 41]
    a = av.decode(av.encode(held))
    assert a.missing(np.array(entries)).tolist() == [41]
    assert a.missing(np.arange(100)).tolist() == sorted(set(range(100)) - set(held))


def test_size_and_period_at_int32_limits():
    a = av.decode(pack([(0, 2**31 - 1, 2**31 - 1, 2**31 - 1), (2**40, 2**40, 5, 0)]))
    assert a.count == 2 * (2**31 - 1) + 5
    assert a.contains(2**31 - 2) and a.contains(2**31 - 1) and a.contains(2**32 - 3)
    assert not a.contains(2**32 - 2)
    assert a.contains_many([2**40 + 4, 2**40 + 5]).tolist() == [True, False]


def test_group_reaching_int64_max():
    a = av.decode(pack([(2**63 - 3, 2**63 - 3, 3, 0)]))
    assert a.to_array().tolist() == [2**63 - 3, 2**63 - 2, 2**63 - 1]
    assert a.contains_many(np.array([2**63 - 1, 2**63], dtype=np.uint64)).tolist() == [
        True,
        False,
    ]


def test_equality_and_repr():
    assert av.decode(av.encode(EXAMPLE1)) == av.decode(bytes.fromhex(EXAMPLE1_HEX))
    assert "count=8" in repr(av.decode(av.encode(EXAMPLE1)))
    with pytest.raises(TypeError):
        av.Availability()


@pytest.mark.parametrize(
    ("values", "match"),
    [
        ([3, 2], "strictly increasing: index 1 holds 2 after 3"),
        ([1, 1], "strictly increasing"),
        ([-1, 2], "negative"),
        (np.array([2**63], dtype=np.uint64), "below 2\\*\\*63"),
        ([[1, 2]], "one-dimensional"),
        ([1.5], "integers"),
    ],
)
def test_encode_rejects(values, match):
    with pytest.raises(av.AvailabilityError, match=match):
        av.encode(values)


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"", "64-byte header, got 0 bytes"),
        (bytes(63), "64-byte header"),
        (pack([], version=1), "unknown availability version 1"),
        (bytes(64) + bytes(5), "not a whole number of 24-byte groups"),
        (pack([(1, 1, 1, 0)], count=2), "header says 2 groups, the data holds 1"),
        (pack([], count=-1), "header says -1 groups"),
        (pack([], reserved=b"\x00" * 55 + b"\x01"), "reserved header byte 63"),
        (pack([(-5, 0, 1, 1)]), "starts below 0"),
        (pack([(5, 4, 1, 0)]), "last sequence before its first"),
        (pack([(1, 1, 0, 0)]), "size that is not positive"),
        (pack([(1, 1, -3, 0)]), "size that is not positive"),
        (pack([(1, 1, 2, 7)]), "one sequence but a non-zero period"),
        (pack([(1, 10, 3, 2)]), "period smaller than its sequence size"),
        (pack([(1, 10, 3, -1)]), "period smaller"),
        (pack([(1, 10, 2, 4)]), "not a multiple of its period"),
        (pack([(2**63 - 2, 2**63 - 2, 3, 0)]), "runs past 2\\*\\*63 - 1"),
        (pack([(1, 10, 2, 3), (11, 11, 1, 0)]), "group 1 .* previous group's end 11"),
        (pack([(5, 5, 1, 0), (2, 2, 1, 0)]), "group 1 .*previous group's end 5"),
    ],
)
def test_decode_rejects(data, match):
    with pytest.raises(av.AvailabilityError, match=match):
        av.decode(data)
    with pytest.raises(ValueError):
        ref.decode(data)


def test_error_is_value_error():
    assert issubclass(av.AvailabilityError, ValueError)


def test_from_groups_equals_decode_and_checks_the_same():
    data = av.encode([1, 2, 3, 10, 11, 12, 20, 21, 22, 100])
    held = av.decode(data)
    again = av.from_groups(*(np.array(c) for c in zip(*held.groups, strict=True)))
    assert again == held and again.to_array().tolist() == [1, 2, 3, 10, 11, 12, 20, 21, 22,
                                                            100]
    with pytest.raises(av.AvailabilityError, match="previous group's end"):
        av.from_groups([1, 2], [1, 2], [3, 1], [0, 0])  # the second starts inside the first
    with pytest.raises(av.AvailabilityError, match="period"):
        av.from_groups([1], [11], [3], [2])  # period below the sequence size
    with pytest.raises(av.AvailabilityError, match="not positive"):
        av.from_groups([1], [1], [2**40], [0])  # a size no BP-34 group can hold
    with pytest.raises(av.AvailabilityError, match="one length"):
        av.from_groups([1, 2], [1], [1], [0])
