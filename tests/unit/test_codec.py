"""ldcore.codec: byte-exact blobs, round trips, input forms and error messages."""

import numpy as np
import pytest

from ldcore import codec
from ldcore.checksum import crc32c
from tests.reference import codec as ref

X100_Y50 = [b"x" * 100, b"y" * 50]

# (payloads, compression, checksum, blob hex).  Compression "zstd" falls back to none
# when it does not shrink the blob (the empty and b"abc" cases).
VECTORS = [
    ([], "none", False, "b10000"),
    ([], "zstd", True, "b1086103f04200"),
    ([b"a", b"bc"], "none", False, "b100020161026263"),
    ([b"a", b"bc"], "none", True, "b1087fc135ee020161026263"),
    ([b"abc"], "zstd", True, "b1080d5349eb0103616263"),
    ([b"", b"\x00" * 130], "none", False, "b100020082" + "01" + "00" * 130),
    (X100_Y50, "zstd", False, "b10102980128b52ffd20986d000020647832790200820883146001"),
    (X100_Y50, "zstd", True, "b1095b57a3b302980128b52ffd20986d000020647832790200820883146001"),
]


def as_list(buf, offsets):
    return [bytes(buf[offsets[i] : offsets[i + 1]]) for i in range(len(offsets) - 1)]


@pytest.mark.parametrize(("payloads", "compression", "checksum", "hexblob"), VECTORS)
def test_decode_vectors(payloads, compression, checksum, hexblob):
    blob = bytes.fromhex(hexblob)
    buf, offsets = codec.decode(blob)
    assert buf.dtype == np.uint8
    assert offsets.dtype == np.uint64
    assert offsets[0] == 0
    assert as_list(buf, offsets) == payloads
    assert codec.decode_count(blob) == len(payloads)
    assert ref.decode(blob) == payloads


@pytest.mark.parametrize(("payloads", "compression", "checksum", "hexblob"), VECTORS)
def test_encode_vectors(payloads, compression, checksum, hexblob):
    if compression == "zstd" and len(bytes.fromhex(hexblob)) > 2 and hexblob[3] in "19":
        # a zstd frame is only promised to decode, not to be byte-identical across
        # libzstd versions; the header must still match exactly
        blob = codec.encode(payloads, compression=compression, checksum=checksum)
        assert as_list(*codec.decode(blob)) == payloads
        assert blob[1] == bytes.fromhex(hexblob)[1]
        return
    blob = codec.encode(payloads, compression=compression, checksum=checksum)
    assert blob.hex() == hexblob


def test_encode_vectors_zstd_exact_with_this_libzstd():
    # Holds with libzstd 1.5.4 and 1.5.7 (level 1); if a future libzstd changes its frame,
    # only this test needs new hex.
    blob = codec.encode(X100_Y50, checksum=True)
    assert blob.hex() == VECTORS[-1][3]


def test_checksum_covers_everything_but_itself():
    blob = codec.encode([b"hello", b"world"], compression="none")
    assert blob[1] & codec.FLAG_CHECKSUM_CRC32C
    stored = int.from_bytes(blob[2:6], "little")
    assert stored == crc32c(blob[6:], crc32c(blob[:2]))


@pytest.mark.parametrize("compression", ["zstd", "none", "ZSTD", None])
@pytest.mark.parametrize("checksum", [True, False])
def test_round_trip(compression, checksum):
    payloads = [b"", b"a", b"b" * 127, b"c" * 128, b"d" * 20000, bytes(range(256)) * 3]
    blob = codec.encode(payloads, compression=compression, checksum=checksum)
    assert bool(blob[1] & codec.FLAG_CHECKSUM_CRC32C) == checksum
    assert as_list(*codec.decode(blob)) == payloads
    assert codec.decode_count(blob) == len(payloads)


def test_zstd_only_when_smaller():
    rng = np.random.default_rng(3)
    noise = [rng.integers(0, 256, 300, dtype=np.uint8).tobytes() for _ in range(3)]
    blob = codec.encode(noise)
    assert blob[1] & 0x07 == codec.COMPRESSION_NONE
    text = [b"the same line again\n" * 20] * 5
    blob = codec.encode(text)
    assert blob[1] & 0x07 == codec.COMPRESSION_ZSTD
    assert len(blob) < sum(map(len, text))


def test_payload_kinds():
    arr = np.frombuffer(b"numpy!", dtype=np.uint8)
    payloads = [b"bytes", bytearray(b"bytearray"), memoryview(b"view"), arr]
    for compression in ("none", "zstd"):
        blob = codec.encode(payloads, compression=compression)
        assert as_list(*codec.decode(blob)) == [b"bytes", b"bytearray", b"view", b"numpy!"]
    # a generator works too
    blob = codec.encode(p for p in (b"x", b"y"))
    assert as_list(*codec.decode(blob)) == [b"x", b"y"]


def test_buffer_and_offsets_form():
    buf = b"alphabetagamma"
    offsets = np.array([0, 5, 9, 9, 14], dtype=np.uint64)
    want = [b"alpha", b"beta", b"", b"gamma"]
    for compression in ("none", "zstd"):
        blob = codec.encode((buf, offsets), compression=compression)
        assert blob == codec.encode(want, compression=compression)
        assert as_list(*codec.decode(blob)) == want
    # int64 offsets and a numpy buffer; offsets need not start at 0
    blob = codec.encode((np.frombuffer(buf, np.uint8), np.array([5, 9], dtype=np.int64)))
    assert as_list(*codec.decode(blob)) == [b"beta"]


def test_two_tuple_of_payloads_is_not_offsets():
    arr = np.frombuffer(b"xy", dtype=np.uint8)
    blob = codec.encode((b"ab", arr))
    assert as_list(*codec.decode(blob)) == [b"ab", b"xy"]


@pytest.mark.parametrize(
    ("offsets", "match"),
    [
        ([], "at least one"),
        ([0, 5, 3], "decrease at index 1"),
        ([0, 99], "past the end"),
        ([-1, 2], "negative"),
    ],
)
def test_bad_offsets(offsets, match):
    with pytest.raises(ValueError, match=match):
        codec.encode((b"abcdef", np.array(offsets, dtype=np.int64)))


def test_bad_arguments():
    with pytest.raises(ValueError, match="compression"):
        codec.encode([b"x"], compression="lz4")
    with pytest.raises(ValueError, match="level"):
        codec.encode([b"x"], level=99)
    with pytest.raises(TypeError):
        codec.encode(["not bytes"])


def test_decode_accepts_bytes_like():
    blob = codec.encode([b"q", b"rs"])
    for form in (bytearray(blob), memoryview(blob), np.frombuffer(blob, np.uint8)):
        assert as_list(*codec.decode(form)) == [b"q", b"rs"]


def test_decode_returns_one_buffer():
    blob = codec.encode([b"a" * 10, b"b" * 10], compression="none")
    buf, offsets = codec.decode(blob)
    assert buf.shape == (20,)
    assert offsets.tolist() == [0, 10, 20]


ZSTD_GOOD = bytes.fromhex(VECTORS[-2][3])  # no checksum, so corruptions reach zstd


@pytest.mark.parametrize(
    ("hexblob", "match"),
    [
        ("", "truncated: 0 bytes"),
        ("b1", "truncated: 1 bytes"),
        ("00", "bad magic byte 0x00"),
        ("b0000100", "bad magic byte 0xb0"),
        ("b100", "truncated varint \\(payload count\\)"),
        ("b12000", "unknown flag bits 0x20"),
        ("b10500", "unknown compression 5"),
        ("b108000000", "truncated: 5 bytes"),
        ("b1000280", "payload count 2 cannot fit in the 1 bytes"),
        ("b1000101", "payload 0 claims 1 bytes but only 0 remain"),
        ("b1087fc135ee020161026264", "checksum mismatch"),
        ("b1087fc135ee0201610262", "checksum mismatch"),
        ("b10001", "payload count 1 cannot fit in the 0 bytes"),
        ("b1000205616263", "payload 0 claims 5 bytes but only 3 remain"),
        ("b1000304616263640a", "payload 0 leaves 1 bytes for the 2 payloads after it"),
        ("b10002016102626364", "1 trailing bytes after the last of 2 payloads"),
        ("b1000180", "truncated varint \\(length of payload 0\\)"),
        ("b100ffffffffffffffffffff01", "does not fit in 64 bits"),
        ("b1010180", "truncated varint \\(uncompressed size\\)"),
        ("b10101050000", "zstd: "),
        ("b1010203" + ZSTD_GOOD[5:].hex(), "uncompressed size mismatch: header says 3"),
        ("b1010201" + ZSTD_GOOD[5:].hex(), "payload count 2 cannot fit in the 1 bytes"),
        (ZSTD_GOOD.hex() + "00", "trailing bytes after the zstd frame"),
        (ZSTD_GOOD[:-3].hex(), "zstd: "),
    ],
)
def test_errors(hexblob, match):
    with pytest.raises(codec.CodecError, match=match):
        codec.decode(bytes.fromhex(hexblob))


def test_bad_blob_midway_stays_in_bounds():
    # Found by fuzzing: early payloads that are long enough to overrun the output buffer
    # before a later payload turns out to be missing.  Must be a clean CodecError.
    body = bytes([0x1D]) + b"".join(bytes([100]) + b"p" * 100 for _ in range(3)) + b"\x00"
    with pytest.raises(codec.CodecError, match="payloads after it"):
        codec.decode(b"\xb1\x00" + body)


def test_codec_error_is_value_error():
    assert issubclass(codec.CodecError, ValueError)


def test_max_size():
    blob = codec.encode([b"z" * 5000])
    assert blob[1] & 0x07 == codec.COMPRESSION_ZSTD
    with pytest.raises(codec.CodecError, match="exceeds max_size 100"):
        codec.decode(blob, max_size=100)
    plain = codec.encode([b"z" * 5000], compression="none")
    with pytest.raises(codec.CodecError, match="exceeds max_size"):
        codec.decode(plain, max_size=100)
    assert codec.decode(blob, max_size=5002)[1][-1] == 5000


def test_huge_declared_size_is_refused_without_allocating():
    # count and size varints claiming ~2**63 bytes
    blob = bytes.fromhex("b10101" + "ffffffffffffffff7f") + ZSTD_GOOD[5:]
    with pytest.raises(codec.CodecError, match="exceeds max_size"):
        codec.decode(blob)


def test_decode_count_is_a_peek():
    blob = bytearray(codec.encode([b"a", b"b", b"c"]))
    blob[-1] ^= 0xFF  # corrupt the body: decode fails, the header peek does not
    assert codec.decode_count(blob) == 3
    with pytest.raises(codec.CodecError, match="checksum"):
        codec.decode(blob)
    with pytest.raises(codec.CodecError, match="magic"):
        codec.decode_count(b"\x00\x00\x00")


def test_producer_header_layout():
    """Flag bit 4: the writer's id and the blob's sequence number, u64 LE each, after
    the checksum (covered by it) and before the count."""
    blob = codec.encode([b"a"], compression="none", checksum=False, producer=(1, 2))
    assert blob == (b"\xb1\x10" + (1).to_bytes(8, "little") + (2).to_bytes(8, "little")
                    + b"\x01\x01a")
    assert codec.producer_of(blob) == (1, 2)
    assert codec.producer_of(codec.encode([b"a"])) is None
    sealed = codec.encode([b"a"], compression="none", producer=(2**64 - 1, 7))
    assert sealed[1] == 0x18 and codec.producer_of(sealed) == (2**64 - 1, 7)
    flipped = bytearray(sealed)
    flipped[10] ^= 1  # inside the producer id: the checksum catches it
    with pytest.raises(codec.CodecError, match="checksum"):
        codec.decode(bytes(flipped))
    with pytest.raises(codec.CodecError, match="truncated"):
        codec.producer_of(blob[:10])
    with pytest.raises(ValueError, match="uint64"):
        codec.encode([b"a"], producer=(-1, 0))
