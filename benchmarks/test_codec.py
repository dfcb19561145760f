"""Frame codec: encode + decode of the hot messages against the generic path.

Each group is one message type at 1 or 8 records (``tests.reference.framing.hot_messages``),
and one STORE of a 64 MB frame.  ``codec`` is what a node does per message: ``encode``
(the list of buffers for ``writelines``) plus ``FrameDecoder.feed`` of its frame.  The
references, measured in the same run:

- ``generic``: the generic codec of ``tests/reference/framing.py`` (the message as a
  list, each raw field through its spec, numpy consistency checks), encode + decode of
  one frame;
- ``msgspec floor``: msgspec alone encoding and decoding the frame's header (for types
  with raw fields, the header's list of values and lengths): what no codec can go under.

Run against another tree for an A/B (the benchmark only uses the public protocol API)::

    PYTHONPATH=<tree>/python:<tree>/src .venv/bin/python -m pytest -q -p no:cacheprovider \\
        benchmarks/test_codec.py --benchmark-timer time.process_time
"""

from __future__ import annotations

import msgspec
import numpy as np
import pytest

import logdevice.protocol as p
from tests.reference import framing as ref

SMALL = [(name, n) for n in (1, 8) for name in sorted(ref.hot_messages(n))]
LARGE_RECORDS = 60_000
LARGE_PAYLOAD = 1024  # a frame of 64 MB (61.5 MB of payloads), below the 64 MiB limit


def _info(benchmark, items, reference=False, unit="records"):
    benchmark.extra_info.update(items=items, unit=unit, reference=reference)


def _round_trip(msg):
    decoder = p.FrameDecoder()
    frame = p.encode_frame(msg)

    def run():
        p.encode(msg)
        return decoder.feed(frame)

    return run


def _generic_round_trip(msg):
    frame = ref.encode_frame(msg)

    def run():
        ref.encode(msg)
        return ref.decode_frame(frame)

    return run


def _header_floor(msg):
    frame = p.encode_frame(msg)
    header_length = int.from_bytes(frame[8:12], "little")
    values = msgspec.msgpack.decode(frame[12:12 + header_length])
    encoder, decoder = msgspec.msgpack.Encoder(), msgspec.msgpack.Decoder()

    def run():
        encoder.encode(values)
        return decoder.decode(frame[12:12 + header_length])

    return run


def _group(name, n):
    return f"codec {name} x{n}"


@pytest.mark.parametrize("name,n", SMALL, ids=[f"{m}-{n}" for m, n in SMALL])
def test_codec(benchmark, name, n):
    benchmark.group = _group(name, n)
    _info(benchmark, n)
    run = _round_trip(ref.hot_messages(n)[name])
    assert len(benchmark(run)) == 1


@pytest.mark.parametrize("name,n", SMALL, ids=[f"{m}-{n}" for m, n in SMALL])
def test_generic(benchmark, name, n):
    benchmark.group = _group(name, n)
    _info(benchmark, n, reference=True)
    benchmark(_generic_round_trip(ref.hot_messages(n)[name]))


@pytest.mark.parametrize("name,n", SMALL, ids=[f"{m}-{n}" for m, n in SMALL])
def test_msgspec_floor(benchmark, name, n):
    benchmark.group = _group(name, n)
    _info(benchmark, n, reference=True)
    benchmark(_header_floor(ref.hot_messages(n)[name]))


@pytest.fixture(scope="module")
def large_store():
    c = ref.record_columns(LARGE_RECORDS, payload_size=LARGE_PAYLOAD)
    return p.Store(request_id=1, log_id=1, epoch=5, waves=np.ones(LARGE_RECORDS, np.uint32),
                   copysets=np.zeros((LARGE_RECORDS, 3), np.int16), **c)


@pytest.mark.benchmark(group="codec Store 64 MB")
def test_codec_large_store(benchmark, large_store):
    _info(benchmark, len(large_store.payloads), unit="bytes")
    (got,) = benchmark.pedantic(_round_trip(large_store), rounds=5, warmup_rounds=1)
    assert len(got.lsns) == LARGE_RECORDS


@pytest.mark.benchmark(group="codec Store 64 MB")
def test_generic_large_store(benchmark, large_store):
    _info(benchmark, len(large_store.payloads), reference=True, unit="bytes")
    benchmark.pedantic(_generic_round_trip(large_store), rounds=5, warmup_rounds=1)
