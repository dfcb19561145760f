"""ldcore.checksum: CRC32C check values, both implementations, and crc32c_many."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ldcore import checksum
from tests.reference import checksum as ref

# Published CRC32C vectors (RFC 3720 appendix B.4 and the standard check value).
VECTORS = [
    (b"", 0x00000000),
    (b"123456789", 0xE3069283),
    (b"\x00" * 32, 0x8A9136AA),
    (b"\xff" * 32, 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
    (bytes(range(31, -1, -1)), 0x113FDB5C),
    (b"a", 0xC1D04330),
    (b"The quick brown fox jumps over the lazy dog", 0x22620404),
]


@pytest.mark.parametrize(("data", "expected"), VECTORS)
def test_vectors(data, expected):
    assert checksum.crc32c(data) == expected
    assert checksum.crc32c_portable(data) == expected
    assert ref.crc32c(data) == expected


@pytest.mark.parametrize(
    "kind", [bytes, bytearray, memoryview, lambda b: np.frombuffer(b, dtype=np.uint8)]
)
def test_accepts_bytes_like(kind):
    assert checksum.crc32c(kind(b"123456789")) == 0xE3069283


def test_accepts_readonly_numpy():
    arr = np.frombuffer(b"123456789", dtype=np.uint8)
    assert not arr.flags.writeable
    assert checksum.crc32c(arr) == 0xE3069283


def test_continuation():
    data = b"hello, castagnoli" * 7
    for cut in (0, 1, 5, 8, 50, len(data)):
        head = checksum.crc32c(data[:cut])
        assert checksum.crc32c(data[cut:], head) == checksum.crc32c(data)
        assert checksum.crc32c_portable(data[cut:], head) == checksum.crc32c(data)


def test_bad_value():
    with pytest.raises(ValueError, match="32 bits"):
        checksum.crc32c(b"x", 1 << 32)
    with pytest.raises(ValueError, match="32 bits"):
        checksum.crc32c(b"x", -1)


def test_unaligned_and_lengths_agree():
    # every alignment and tail length of both paths, against the bitwise reference
    rng = np.random.default_rng(7)
    raw = rng.integers(0, 256, 200, dtype=np.uint8).tobytes()
    for start in range(9):
        for length in (0, 1, 7, 8, 9, 31, 32, 33, 64, 100, 150):
            chunk = raw[start : start + length]
            want = ref.crc32c(chunk)
            assert checksum.crc32c(chunk) == want
            assert checksum.crc32c_portable(chunk) == want


def test_large_buffer_paths_agree():
    data = np.random.default_rng(1).integers(0, 256, 1 << 20, dtype=np.uint8)
    assert checksum.crc32c(data) == checksum.crc32c_portable(data)
    assert checksum.crc32c(data[3:]) == checksum.crc32c_portable(data[3:])


def test_many():
    buf = b"123456789abcdefghij"
    offsets = np.array([0, 9, 9, 12, 19], dtype=np.uint64)
    got = checksum.crc32c_many(buf, offsets)
    assert got.dtype == np.uint32
    assert got.tolist() == ref.crc32c_many(buf, offsets)
    assert got[0] == 0xE3069283
    assert got[1] == 0


def test_many_offsets_need_not_start_at_zero():
    buf = b"xx123456789"
    assert checksum.crc32c_many(buf, [2, 11]).tolist() == [0xE3069283]


def test_many_empty():
    assert checksum.crc32c_many(b"", np.array([0], dtype=np.uint64)).shape == (0,)
    assert checksum.crc32c_many(b"abc", [1]).tolist() == []


@pytest.mark.parametrize(
    ("offsets", "match"),
    [([], "at least one"), ([0, 5, 3], "decrease at index 1"), ([0, 4], "past the end")],
)
def test_many_bad_offsets(offsets, match):
    with pytest.raises(ValueError, match=match):
        checksum.crc32c_many(b"abc", np.array(offsets, dtype=np.uint64))


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300), st.integers(0, 0xFFFFFFFF))
def test_matches_reference(data, value):
    want = ref.crc32c(data, value)
    assert checksum.crc32c(data, value) == want
    assert checksum.crc32c_portable(data, value) == want


@settings(max_examples=100, deadline=None)
@given(st.lists(st.binary(max_size=40), max_size=20))
def test_many_matches_reference(payloads):
    buf = b"".join(payloads)
    offsets = np.cumsum([0] + [len(p) for p in payloads], dtype=np.uint64)
    assert checksum.crc32c_many(buf, offsets).tolist() == [ref.crc32c(p) for p in payloads]
