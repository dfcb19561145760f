"""ldcore.frames and ldcore.colcheck through logdevice.protocol: the hot messages encode to
exactly the bytes of the generic codec (goldens taken from it) and decode back; values
not yet in the wire's form convert as their specs say; sections stay zero-copy both ways;
errors keep their types and statuses; the column checks agree with the numpy reference."""

import hashlib

import numpy as np
import pytest

import logdevice.protocol as p
from ldcore import colcheck
from logdevice.errors import E, InvalidParamError, TooBigError
from tests.reference import framing as ref
from tests.reference.framing import hot_messages, record_columns
from tests.unit.test_protocol import assert_same

CHECKSUM = int(p.RecordFlag.CHECKSUM)


# Taken from the generic codec (framing before ldcore.frames), byte for byte.
GOLDEN_ONE_RECORD = {
    "Store": "700000000c000100180000009d024d05cf00000005000000090008080404920603100304000000000a"
             "000000050000000068e5cf8b0100000400000000000000010000000000000000000200ffff00000000"
             "000000000000030000000000000000070e0000000000efbeadde00000000",
    "Stored": "280000000d0001000800000097024d01000802ff000000000a000000050000000000000000000000",
    "Append": "280000000a0001000d00000096014d0304cd01f4cedeadbeef0000000000000000070e0000000000",
    "AppendBatch": "38000000100001000a00000097034d04cd038410030400000000000000000000030000000000"
                   "000000070e0000000000efbeadde00000000",
    "Appended": "230000000b00010017000000960100cf000000050000000acf0000018bcfe56800c0a0",
    "AppendedBatch": "300000001100010008000000970300020808c0a00000000000000000000000000a000000050"
                     "000000068e5cf8b010000",
    "Release": "180000000e0001000c000000934dcf000000050000000a05",
    "Records": "58000000160001000d0000009a070308080410030400920000000000000000000a0000000500000000"
               "68e5cf8b01000004000000000000000000000000000000030000000000000000070e0000000000ef"
               "beadde00000000",
}
GOLDEN_EIGHT_RECORDS_SHA256 = {
    "Store": "dc3951c93cf1869d37d454764d34f5d8170506a1ca946ba9a62129078b748e8a",
    "Stored": "b020b8db59b830461bf790a34bc03846d35d9ab92d467e72d5720bc0109fb5fd",
    "Append": "78331510df0b64df1cfc7abcd51e9dd2740eee6e9b7247aa08d66eb0d4c8c650",
    "AppendBatch": "c581a93d0d02686be1ec37e2243c68ff4197baf2027f8a35b9df0a96b7e12bed",
    "Appended": "aaf19d95a54aa0e0b25aa03f8408f22d069193d318ac66e5c5c4ad5bc1c3cc9b",
    "AppendedBatch": "1052737fbefebad1a1c6713553840b6b524bb056803fae6b0bbb1310657a449c",
    "Release": "7419eb64102f27a6244111c07d1580da83823f6da8aa06aaabab5de010f4bd4c",
    "Records": "3e931099660585fc3151d844e58839db5eb094f83e61deec7ab3529c8513e3aa",
}


@pytest.mark.parametrize("name", sorted(GOLDEN_ONE_RECORD))
def test_hot_messages_encode_to_the_golden_bytes(name):
    assert p.encode_frame(hot_messages(1)[name]).hex() == GOLDEN_ONE_RECORD[name]
    frame = p.encode_frame(hot_messages(8)[name])
    assert hashlib.sha256(frame).hexdigest() == GOLDEN_EIGHT_RECORDS_SHA256[name]
    assert frame == ref.encode_frame(hot_messages(8)[name])


@pytest.mark.parametrize("name", sorted(GOLDEN_ONE_RECORD))
def test_golden_frames_decode_to_equal_messages(name):
    golden = bytes.fromhex(GOLDEN_ONE_RECORD[name])
    expected = hot_messages(1)[name]
    assert_same(expected, p.decode_frame(golden))
    (got,) = p.FrameDecoder().feed(golden)
    assert_same(expected, got)
    eight = p.encode_frame(hot_messages(8)[name])
    assert_same(hot_messages(8)[name], p.FrameDecoder().feed(eight * 2)[1])


def test_values_not_in_the_wire_form_convert_as_their_specs_say():
    """Lists, other integer dtypes, big-endian, Fortran order, strided views, any bytes-like
    payload: converted (copied where needed), the same bytes on the wire."""
    c = record_columns(4)
    store = hot_messages(4)["Store"]
    wide = np.zeros(8, np.uint64)
    wide[::2] = c["lsns"]
    variants = [
        dict(lsns=c["lsns"].tolist(), timestamps=c["timestamps"].astype(">i8")),
        dict(lsns=wide[::2], flags=c["flags"].astype(np.int64)),
        dict(copysets=np.asfortranarray(store.copysets), waves=[1, 1, 1, 1]),
        dict(payloads=bytearray(c["payloads"]), checksums=c["checksums"].astype(np.uint64)),
        dict(payloads=memoryview(c["payloads"]),
             payload_offsets=c["payload_offsets"].astype(np.int32)),
        dict(payloads=np.frombuffer(c["payloads"], np.uint8)),
        dict(payloads=memoryview(c["payloads"][:8]).cast("Q")
             if len(c["payloads"]) == 8 else c["payloads"]),
        dict(copysets=store.copysets.tolist()),
    ]
    expected = p.encode_frame(store)
    for changes in variants:
        fields = {f: getattr(store, f) for f in store.__struct_fields__} | changes
        assert p.encode_frame(p.Store(**fields)) == expected, changes
    payload = np.frombuffer(b"abcdefgh", np.uint64)  # a payload of another item size
    assert (p.encode_frame(p.Append(request_id=1, log_id=2, payload=payload))
            == p.encode_frame(p.Append(request_id=1, log_id=2, payload=b"abcdefgh")))


def test_empty_sections_and_empty_two_d_arrays():
    for msg in hot_messages(0).values():
        frame = p.encode_frame(msg) if not isinstance(msg, p.AppendBatch) else None
        if frame is not None:
            assert frame == ref.encode_frame(msg)
            assert_same(ref.decode_frame(frame), p.decode_frame(frame))
    # a 2-D column with no rows keeps its column count in the header
    store = p.Store(request_id=1, log_id=1, epoch=1, copysets=np.zeros((0, 3), np.int16))
    assert p.encode_frame(store) == ref.encode_frame(store)
    assert p.decode_frame(p.encode_frame(store)).copysets.shape == (0, 0)


def test_sections_are_read_only_views_of_the_callers_buffers():
    store = hot_messages(3)["Store"]
    bufs = p.encode(store)
    views = [b for b in bufs[1:] if isinstance(b, memoryview)]
    for arr in (store.lsns, store.timestamps, store.flags, store.copysets,
                store.payload_offsets, store.checksums):
        (view,) = [v for v in views if np.shares_memory(np.asarray(v), arr)]
        assert view.format == "B" and view.ndim == 1 and view.nbytes == arr.nbytes
        assert view.readonly
    assert sum(len(b) for b in bufs) == len(p.encode_frame(store)) == len(bufs[0]) + sum(
        -(-v.nbytes // 8) * 8 for v in views)


def test_decoded_columns_view_one_read_only_frame():
    frame = p.encode_frame(hot_messages(8)["Store"])
    (got,) = p.FrameDecoder().feed(frame)
    arrays = (got.lsns, got.timestamps, got.flags, got.waves, got.copysets,
              got.payload_offsets, got.checksums)
    assert len({id(a.base) for a in arrays}) == 1
    assert got.payloads.obj is got.lsns.base.obj
    for arr in arrays:
        assert isinstance(arr.base, memoryview) and arr.base.readonly
        assert not arr.flags.writeable and arr.flags.aligned and arr.flags.c_contiguous
        assert arr.dtype.byteorder in "<=|"
    assert got.copysets.shape == (8, 3) and got.copysets.dtype == np.int16


def test_encode_errors_keep_their_types():
    store = hot_messages(2)["Store"]
    with pytest.raises(InvalidParamError, match="Store.lsns"):
        p.encode(p.Store(request_id=1, log_id=1, epoch=1, lsns=np.zeros((2, 2), np.uint64)))
    with pytest.raises(InvalidParamError, match="Store.copysets"):
        p.encode(p.Store(request_id=1, log_id=1, epoch=1, copysets=np.zeros(3, np.int16)))
    with pytest.raises(InvalidParamError, match="Store.payloads"):
        p.encode(p.Store(request_id=1, log_id=1, epoch=1, payloads=12))
    with pytest.raises(InvalidParamError, match="payload_offsets decrease"):
        p.encode(p.AppendBatch(request_id=1, log_id=1,
                               payload_offsets=np.array([0, 3, 2, 5], np.uint64),
                               payloads=b"abcde"))
    with pytest.raises(InvalidParamError, match="flagged CHECKSUM"):
        fields = {f: getattr(store, f) for f in store.__struct_fields__}
        p.encode(p.Store(**(fields | {"checksums": np.zeros(0, np.uint32)})))
    frame_size = len(p.encode_frame(store))
    with pytest.raises(TooBigError, match=f"{frame_size} bytes"):
        p.encode(store, max_frame_size=frame_size - 1)
    assert len(p.encode_frame(store, max_frame_size=frame_size)) == frame_size


def test_bad_sections_fail_with_badmsg():
    good = bytearray(p.encode_frame(hot_messages(2)["AppendedBatch"]))
    for cut in (8, 16):  # sections shorter than the table says
        frame = good[:-cut]
        frame[0:4] = len(frame).to_bytes(4, "little")
        with pytest.raises(p.ProtocolError) as info:
            p.FrameDecoder().feed(bytes(frame))
        assert info.value.status == E.BADMSG


def test_a_large_store_round_trips():
    n = 100_000
    c = record_columns(n, payload_size=60)
    store = p.Store(request_id=1, log_id=1, epoch=5, waves=np.ones(n, np.uint32),
                    copysets=np.zeros((n, 3), np.int16), **c)
    frame = p.encode_frame(store)
    assert frame == ref.encode_frame(store)
    (got,) = p.FrameDecoder().feed(frame)
    assert_same(store, got)


# ---------------------------------------------------------------------------- colcheck


def test_offsets_problem_matches_the_reference():
    cases = [
        (np.zeros(0, np.uint64), 0, b""), (np.zeros(0, np.uint64), 1, b""),
        (np.zeros(0, np.uint64), 0, b"x"), (np.array([0, 3], np.uint64), 1, b"abc"),
        (np.array([0, 3], np.uint64), 2, b"abc"), (np.array([1, 3], np.uint64), 1, b"abc"),
        (np.array([0, 2], np.uint64), 1, b"abc"), (np.array([0, 4, 2, 5], np.uint64), 3, b"abcde"),
        (np.array([0, 2, 2, 5], np.uint64), 3, b"abcde"),
        (np.array([0, 9, 2, 9, 5, 9], np.uint64)[::2], 2, b"abcde"),  # strided
        ([0, 2, 5], 2, b"abcde"), (np.array([0, 2, 5], np.int64), 2, memoryview(b"abcde")),
        (np.array([0, 2, 1 << 63], np.uint64), 2, b"abcde"),
        (np.array([0, 8], np.uint64), 1, np.zeros(1, np.uint64)),  # payloads of 8-byte items
    ]
    for offsets, n, payloads in cases:
        got = colcheck.offsets_problem(offsets, n, payloads)
        assert got == ref.offsets_problem(np.asarray(offsets, np.uint64), n, payloads), (
            offsets, n)


def test_checksummed_and_columns_problems_match_the_reference():
    flags = [np.zeros(0, np.uint32), np.array([0, 0], np.uint32),
             np.array([0, CHECKSUM], np.uint32), np.array([CHECKSUM | 1, 0, 0], np.uint32)[::2],
             [0, CHECKSUM], np.array([CHECKSUM], np.int64)]
    for f in flags:
        for checksums in (np.zeros(0, np.uint32), np.ones(len(f), np.uint32)):
            assert (colcheck.checksummed_problem(f, checksums, CHECKSUM)
                    == ref.checksummed_problem(f, checksums)), f
    a2, a3, e = np.zeros(2), np.zeros(3), np.zeros(0)
    for n, required, optional in [(2, {"a": a2, "b": a2}, None), (2, {"a": a2, "b": a3}, None),
                                  (2, {"a": a2}, {"c": e, "d": a2}), (2, {}, {"c": a3}),
                                  (3, {"a": a3, "b": [1, 2, 3]}, {"x": e})]:
        assert (colcheck.columns_problem(n, required, optional)
                == ref.columns_problem(n, required, optional))


def test_coalesce_joins_runs_of_small_buffers_and_leaves_large_ones_in_place():
    from ldcore.frames import coalesce

    big = np.arange(5000, dtype=np.uint64)  # 40,000 bytes
    big_view = memoryview(big).cast("B")
    small = np.array([1, 2, 3], np.uint32)
    buffers = [bytearray(b"head"), memoryview(small).cast("B"), b"\0" * 4, big_view,
               b"tail", bytearray(b"x"), memoryview(big[:2]).cast("B"), big_view, b"lone"]
    out = coalesce(buffers, 16384)
    assert b"".join(bytes(b) for b in out) == b"".join(bytes(b) for b in buffers)
    assert len(out) == 5
    assert out[1] is big_view and out[3] is big_view  # written from where they are
    assert type(out[0]) is bytes and type(out[2]) is bytes  # each run one object
    assert out[4] == b"lone"  # a run of one stays as it was
    assert coalesce([], 16384) == []
    with pytest.raises(TypeError):
        coalesce([b"ok", 42], 16384)
