"""ldcore.frames (through logdevice.protocol) against the generic reference codec of
tests/reference/framing.py: random hot messages of 0 to 8 records, consistent or not, in
the wire's form or not, encode to the same bytes or fail the same way; their frames, and
frames mutated past the prefix, decode to the same messages or fail with the same status.
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import logdevice.protocol as p
from logdevice.errors import E
from tests.reference import framing as ref
from tests.unit.test_protocol import assert_same
from tests.unit.test_wire_fuzz import frames_past_the_prefix

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
CHECKSUM = int(p.RecordFlag.CHECKSUM)

u64 = st.integers(0, 2**64 - 1)
i64 = st.integers(-2**63, 2**63 - 1)


def column(draw: st.DrawFn, n: int, dtype: str, values: st.SearchStrategy[int]) -> object:
    """``n`` values as an array of ``dtype``, or now and then in another form."""
    arr = np.array(draw(st.lists(values, min_size=n, max_size=n)), dtype)
    form = draw(st.sampled_from(["wire"] * 6 + ["list", "strided", "big-endian"]))
    if form == "list":
        return arr.tolist()
    if form == "strided":
        wide = np.zeros(2 * n, dtype)
        wide[::2] = arr
        return wide[::2]
    if form == "big-endian":
        return arr.astype(np.dtype(dtype).newbyteorder(">"))
    return arr


def miscount(draw: st.DrawFn, n: int) -> int:
    """Mostly ``n``; now and then another length (an inconsistent column)."""
    return draw(st.sampled_from([n] * 12 + [max(0, n - 1), n + 1, 0]))


@st.composite
def payload_columns(draw: st.DrawFn, n: int) -> dict:
    lengths = draw(st.lists(st.integers(0, 12), min_size=n, max_size=n))
    offsets = np.zeros(n + 1, np.uint64)
    np.cumsum(np.array(lengths, np.uint64), out=offsets[1:])
    size = int(offsets[-1]) + draw(st.sampled_from([0] * 10 + [-1, 1]))
    payloads = draw(st.binary(min_size=max(0, size), max_size=max(0, size)))
    if n > 1 and draw(st.integers(0, 15)) == 0:  # decreasing
        offsets[1], offsets[2] = offsets[2], offsets[1]
    if draw(st.integers(0, 15)) == 0:
        offsets = offsets[:draw(st.integers(0, n))]
    kind = draw(st.sampled_from(["bytes"] * 4 + ["bytearray", "memoryview", "u8 array"]))
    wrapped = {"bytes": payloads, "bytearray": bytearray(payloads),
               "memoryview": memoryview(payloads),
               "u8 array": np.frombuffer(payloads, np.uint8)}[kind]
    return {"payload_offsets": offsets, "payloads": wrapped}


@st.composite
def records_columns(draw: st.DrawFn, n: int) -> dict:
    flags = draw(st.sampled_from([0, CHECKSUM, CHECKSUM | 64]))
    return {
        "lsns": column(draw, n, "<u8", u64),
        "timestamps": column(draw, miscount(draw, n), "<i8", i64),
        "flags": column(draw, miscount(draw, n), "<u4", st.just(flags)),
        "checksums": column(draw, draw(st.sampled_from([n, n, 0, n + 1])), "<u4",
                            st.integers(0, 2**32 - 1)),
        **draw(payload_columns(n)),
    }


def copysets(draw: st.DrawFn, n: int) -> object:
    width = draw(st.integers(0, 4))
    rows = draw(st.lists(st.lists(st.integers(-1, 40), min_size=width, max_size=width),
                         min_size=n, max_size=n))
    arr = np.array(rows, np.int16).reshape(n, width)
    return np.asfortranarray(arr) if draw(st.booleans()) else arr


@st.composite
def hot_messages(draw: st.DrawFn) -> object:
    n = draw(st.integers(0, 8))
    kind = draw(st.sampled_from(["Store", "Stored", "Append", "AppendBatch", "Appended",
                                 "AppendedBatch", "Release", "Records"]))
    status = draw(st.sampled_from(list(E)))
    if kind == "Store":
        return p.Store(request_id=draw(u64), log_id=draw(u64), epoch=draw(st.integers(0, 2**32)),
                       last_known_good=draw(u64), recovery_epoch=draw(st.integers(0, 9)),
                       waves=column(draw, miscount(draw, n), "<u4", st.integers(0, 2**32 - 1)),
                       copysets=copysets(draw, miscount(draw, n)),
                       **draw(records_columns(n)))
    if kind == "Stored":
        return p.Stored(request_id=draw(u64), log_id=draw(u64), node_index=draw(st.integers(0, 99)),
                        status=status, lsns=column(draw, n, "<u8", u64),
                        statuses=column(draw, miscount(draw, n), "<u2", st.integers(0, 2**16 - 1)),
                        sealed_by=draw(st.integers(-1, 9)))
    if kind == "Append":
        return p.Append(request_id=draw(u64), log_id=draw(u64),
                        payload=draw(payload_columns(1))["payloads"],
                        flags=draw(st.integers(0, 2**32 - 1)),
                        timeout_ms=draw(st.integers(0, 10**6)),
                        checksum=draw(st.integers(0, 2**32 - 1)))
    if kind == "AppendBatch":
        return p.AppendBatch(request_id=draw(u64), log_id=draw(u64),
                             flags=draw(st.sampled_from([0, CHECKSUM, 1])),
                             timeout_ms=draw(st.integers(0, 10**6)),
                             checksums=column(draw, miscount(draw, n), "<u4",
                                              st.integers(0, 2**32 - 1)),
                             **draw(payload_columns(n)))
    if kind == "Appended":
        return p.Appended(request_id=draw(u64), status=status, lsn=draw(u64), timestamp=draw(i64),
                          redirect_to=draw(st.none() | st.integers(0, 99)),
                          message=draw(st.text(max_size=40)))
    if kind == "AppendedBatch":
        return p.AppendedBatch(request_id=draw(u64), status=status,
                               statuses=column(draw, n, "<u2", st.integers(0, 2**16 - 1)),
                               lsns=column(draw, miscount(draw, n), "<u8", u64),
                               timestamps=column(draw, miscount(draw, n), "<i8", i64),
                               redirect_to=draw(st.none() | st.integers(0, 99)),
                               message=draw(st.text(max_size=40)))
    if kind == "Release":
        return p.Release(log_id=draw(u64), lsn=draw(u64), epoch=draw(st.integers(0, 2**32)))
    cols = draw(records_columns(n))
    if draw(st.booleans()):
        cols["waves"] = column(draw, miscount(draw, n), "<u4", st.integers(0, 9))
        cols["copysets"] = copysets(draw, miscount(draw, n))
    return p.Records(read_stream_id=draw(u64), filter_version=draw(u64), **cols)


def encoded(encode, msg) -> tuple:
    try:
        return "ok", b"".join(encode(msg))
    except Exception as exc:  # the exception's type and status are what must agree
        return "error", type(exc).__name__, getattr(exc, "status", None)


def decoded(frame: bytes) -> tuple:
    try:
        (msg,) = p.FrameDecoder().feed(frame)
        return "ok", msg
    except p.ProtocolError as exc:
        return "error", exc.status


def decoded_whole(frame: bytes) -> tuple:
    try:
        return "ok", p.decode_frame(frame)
    except p.ProtocolError as exc:
        return "error", exc.status


def decoded_by_reference(frame: bytes) -> tuple:
    try:
        return "ok", ref.decode_frame(frame)
    except p.ProtocolError as exc:
        return "error", exc.status


def assert_same_outcome(got: tuple, want: tuple) -> None:
    assert got[0] == want[0], (got, want)
    if got[0] == "ok":
        assert_same(want[1], got[1])
    else:
        assert got == want


@SETTINGS
@given(hot_messages())
def test_hot_messages_encode_and_decode_as_the_reference_does(msg):
    got = encoded(p.encode, msg)
    want = encoded(ref.encode, msg)
    assert got == want
    if got[0] == "ok":
        frame = got[1]
        assert_same_outcome(decoded(frame), decoded_by_reference(frame))
        assert_same_outcome(decoded_whole(frame), decoded_by_reference(frame))


@SETTINGS
@given(frames_past_the_prefix())
def test_mutated_frames_decode_as_the_reference_does(frame):
    assert_same_outcome(decoded(frame), decoded_by_reference(frame))
