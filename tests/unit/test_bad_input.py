"""Bad input from users and peers gets a clear error and costs little: payload buffers that
are not plain bytes, timeouts that are not numbers, a BufferedWriter blob that inflates far
past anything a writer makes, a frame header claiming a huge frame."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
import zstandard

from ldcore import codec
from logdevice.client import Client
from logdevice.client.write.buffered_writer import BufferedWriter
from logdevice.config import make_local_config
from logdevice.errors import E, InvalidParamError
from logdevice.protocol import Append, FrameDecoder, Hello, ProtocolError, encode_frame
from logdevice.protocol.framing import INITIAL_FRAME_BUFFER, PREFIX_SIZE
from logdevice.protocol.messages import MessageType


@pytest.fixture
def client(tmp_path):
    cfg = make_local_config(3, 2, range(1, 5), root=tmp_path, ports=[1, 2, 3])
    with Client(cfg, timeout=1.0) as c:
        yield c


# -- payloads and timeouts -----------------------------------------------------------------
def test_object_arrays_are_refused(client):
    objs = np.array([b"a", object()], dtype=object)
    with pytest.raises(InvalidParamError, match="format 'O'.*pointers") as ei:
        client.append(1, objs)
    assert ei.value.status == E.INVALID_PARAM
    with pytest.raises(InvalidParamError, match="format 'O'"):
        client.append_async(1, objs)
    with pytest.raises(InvalidParamError, match="format 'T"):
        client.append(1, np.zeros(2, dtype=[("a", "i4"), ("b", "f8")]))


def test_non_contiguous_arrays_get_a_clear_message(client):
    with pytest.raises(InvalidParamError, match="non-contiguous ndarray.*ascontiguousarray"):
        client.append(1, np.arange(10, dtype=np.uint8)[::2])
    with pytest.raises(InvalidParamError, match="must be bytes-like or str, not int"):
        client.append(1, 5)


@pytest.mark.parametrize("bad", ["abc", -1, True, float("nan"), [1]])
def test_bad_timeouts_are_invalid_param(client, bad):
    with pytest.raises(InvalidParamError, match="timeout must be"):
        client.append(1, b"x", timeout=bad)
    with pytest.raises(InvalidParamError, match="timeout must be"):
        client.get_tail_lsn(1, timeout=bad)


@pytest.mark.parametrize("bad", [-1, True, float("nan"), float("inf")])
def test_readers_and_writers_refuse_the_timeouts_the_client_refuses(client, bad):
    reader = client.create_reader()
    try:
        with pytest.raises(InvalidParamError, match="timeout must be"):
            reader.read(1, timeout=bad)
    finally:
        reader.close()
    with pytest.raises(InvalidParamError, match="time_trigger must be"):
        BufferedWriter(client, time_trigger=bad)
    with pytest.raises(InvalidParamError, match="timeout must be"):
        client.get_tail_lsn(1, timeout=bad)

def test_buffered_writer_refuses_object_buffers(client):
    w = BufferedWriter(client)
    try:
        with pytest.raises(InvalidParamError, match="buffer is a buffer of format 'O'"):
            w.append_many(1, (np.array([object()] * 3, dtype=object),
                              np.array([0, 8, 16, 24], dtype=np.uint64)))
        with pytest.raises(InvalidParamError, match="non-contiguous"):
            w.append_many(1, (np.zeros(20, dtype=np.uint8)[::2],
                              np.array([0, 10], dtype=np.uint64)))
    finally:
        w.close()


# -- a blob that inflates ------------------------------------------------------------------
def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _zero_bomb(payload_size: int) -> bytes:
    """A valid zstd blob of one payload of ``payload_size`` zero bytes, built by streaming
    (the test never holds the payload)."""
    body_size = len(_varint(payload_size)) + payload_size
    cctx = zstandard.ZstdCompressor(level=1)
    chunks = []
    comp = cctx.compressobj(size=body_size)
    chunks.append(comp.compress(_varint(payload_size)))
    zeros = bytes(1 << 20)
    left = payload_size
    while left:
        n = min(left, len(zeros))
        chunks.append(comp.compress(zeros[:n]))
        left -= n
    chunks.append(comp.flush())
    header = bytes([codec.MAGIC, codec.COMPRESSION_ZSTD]) + _varint(1) + _varint(body_size)
    return header + b"".join(chunks)


def test_blob_decode_limit_is_the_largest_blob_a_writer_makes():
    from logdevice.config.model import MAX_PAYLOAD_SIZE

    assert codec.DEFAULT_MAX_SIZE == MAX_PAYLOAD_SIZE
    small = _zero_bomb(1000)
    buf, offs = codec.decode(small)
    assert len(offs) == 2 and bytes(buf) == bytes(1000)
    bomb = _zero_bomb(512 << 20)
    assert len(bomb) < 64 * 1024  # a small record...
    tracemalloc.start()
    try:
        with pytest.raises(codec.CodecError, match="exceeds max_size"):
            codec.decode(bomb)  # ...that must not cost the reader 512 MiB
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


# -- frames --------------------------------------------------------------------------------
def _prefix(total: int, type_id: int = int(MessageType.APPEND), hl: int = 10) -> bytes:
    return (total.to_bytes(4, "little") + type_id.to_bytes(2, "little") + b"\x01\x00"
            + hl.to_bytes(4, "little"))


def test_a_huge_frame_claim_allocates_only_what_arrives():
    d = FrameDecoder()
    d.feed(encode_frame(Hello(cluster="c")))  # past the first frame: the full cap applies
    tracemalloc.start()
    try:
        assert d.feed(_prefix(64 << 20) + bytes(4000)) == []
        for _ in range(10):
            d.feed(bytes(4096))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert d.pending == PREFIX_SIZE + 4000 + 10 * 4096
    assert peak < INITIAL_FRAME_BUFFER + (256 << 10), f"{peak} bytes for 45 KB received"


def test_a_large_frame_grows_with_its_bytes_and_decodes():
    payload = bytes(range(256)) * (12 << 10)  # 3 MiB: the buffer doubles twice
    frame = encode_frame(Append(request_id=1, log_id=1, payload=payload))
    d = FrameDecoder()
    got = []
    for i in range(0, len(frame), 100_000):
        got += d.feed(frame[i:i + 100_000])
    assert len(got) == 1 and bytes(got[0].payload) == payload and d.pending == 0


def test_the_first_frame_is_capped_small():
    d = FrameDecoder(first_frame_max_size=64 * 1024)
    with pytest.raises(ProtocolError, match="first frame of 1048576 bytes") as ei:
        d.feed(_prefix(1 << 20))
    assert ei.value.status == E.BADMSG
    d = FrameDecoder(first_frame_max_size=64 * 1024)
    hello = encode_frame(Hello(cluster="c"))
    big_second = _prefix(1 << 20)
    assert d.feed(hello + big_second) == [Hello(cluster="c")]  # the cap is for one frame
    assert d.pending == PREFIX_SIZE


def test_what_follows_the_first_frame_waits_for_the_receiver_to_judge_it():
    d = FrameDecoder(first_frame_max_size=64 * 1024)
    hello = encode_frame(Hello(cluster="c"))
    append = encode_frame(Append(request_id=7, log_id=1, payload=b"x"))
    assert d.feed(hello + append[:5]) == [Hello(cluster="c")]
    assert d.feed(append[5:]) == []  # held, not decoded
    d.admit = lambda type_id, hl: None  # the HELLO was accepted
    [got] = d.resume()
    assert (got.request_id, bytes(got.payload)) == (7, b"x")
    assert d.feed(append) != [] and d.pending == 0  # from now on, frames as they come


def test_a_refused_type_fails_on_its_prefix_before_anything_is_buffered():
    refused = int(MessageType.RECOVERY_LIST)
    d = FrameDecoder()
    d.admit = lambda type_id, hl: (ProtocolError(E.ACCESS, "not from you")
                                   if type_id == refused else None)
    tracemalloc.start()
    try:
        with pytest.raises(ProtocolError, match="not from you") as ei:
            d.feed(_prefix(60 << 20, refused, hl=8 << 20) + b"\x90" * 1000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert ei.value.status == E.ACCESS and peak < 256 * 1024
    with pytest.raises(ProtocolError):  # the decoder stays failed
        d.feed(encode_frame(Append(request_id=1, log_id=1, payload=b"")))
