"""Fuzzing the frame decoder with frames that pass the prefix checks (a known message type,
a supported version, lengths that fit) and go wrong deeper: headers of random msgpack
values or random bytes, section tables that lie, sections of any length.  Whatever comes
in, the decoder returns messages or raises ``ProtocolError``; nothing else escapes, and
chunking the input differently changes nothing.

``make fuzz`` runs this longer (``LD_FUZZ_EXAMPLES``, default 20000).
"""

from __future__ import annotations

import os
import struct

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logdevice.protocol import PROTOCOL_VERSION, FrameDecoder, ProtocolError, encode_frame
from logdevice.protocol.framing import message_class
from logdevice.protocol.messages import MessageType

TYPES = sorted(int(t) for t in MessageType if message_class(int(t)) is not None)
EXAMPLES = int(os.environ.get("LD_FUZZ_EXAMPLES", "300"))

_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-2**63, 2**64 - 1), st.floats(),
    st.text(max_size=20), st.binary(max_size=40),
    st.integers(0, 1 << 40),  # plausible-looking lengths and ids
)
_values = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=4), max_leaves=12)


def _seeds() -> list[tuple[int, list, bytes]]:
    """(type, header values, sections) of a valid frame of every message type."""
    from tests.unit.test_protocol import sample_messages

    out = []
    for msg in sample_messages():
        frame = encode_frame(msg)
        _, type_id, _, _, hl = struct.unpack_from("<IHBBI", frame)
        header = msgspec.msgpack.decode(frame[12:12 + hl])
        out.append((type_id, list(header), frame[12 + hl:]))
    return out


SEEDS = _seeds()


@st.composite
def mutated_frames(draw: st.DrawFn) -> bytes:
    """A valid frame with one header field replaced and its sections cut or extended:
    these get past msgpack and into the section tables and the messages' own checks."""
    type_id, header, sections = draw(st.sampled_from(SEEDS))
    header = list(header)
    if header:
        i = draw(st.integers(0, len(header) - 1))
        old = header[i]
        if isinstance(old, int) and not isinstance(old, bool) and draw(st.booleans()):
            # an off-by-a-little length or id (kept within what msgpack can carry)
            header[i] = min(max(old + draw(st.integers(-9, 9)), -2**63), 2**64 - 1)
        else:
            header[i] = draw(_values)
    if draw(st.booleans()):
        header = header[:draw(st.integers(0, len(header)))]  # missing trailing fields
    raw_header = msgspec.msgpack.encode(header)
    hl = len(raw_header)
    body = raw_header
    if sections:
        cut = draw(st.integers(0, len(sections) + 16))
        body += b"\0" * ((-(12 + hl)) % 8) + (sections + bytes(16))[:cut]
    return struct.pack("<IHBBI", 12 + len(body), type_id, PROTOCOL_VERSION, 0, hl) + body


@st.composite
def random_frames(draw: st.DrawFn) -> bytes:
    type_id = draw(st.sampled_from(TYPES))
    if draw(st.booleans()):
        header = msgspec.msgpack.encode(draw(st.lists(_values, max_size=14)))
    else:
        header = draw(st.binary(min_size=1, max_size=200))
    hl = len(header)
    body = header
    if draw(st.booleans()):  # sections (only raw types accept them; others refuse)
        pad = (-(12 + hl)) % 8
        body += b"\0" * pad + draw(st.binary(max_size=300))
    total = 12 + len(body)
    return struct.pack("<IHBBI", total, type_id, PROTOCOL_VERSION, 0, hl) + body


def frames_past_the_prefix() -> st.SearchStrategy[bytes]:
    """Frames whose 12-byte prefix is valid and whose content mostly is not."""
    return st.one_of(mutated_frames(), random_frames())


def _decode_all(data: bytes, cuts: list[int]) -> tuple[str, list]:
    d = FrameDecoder()
    out: list = []
    pos = 0
    try:
        for cut in sorted(set(cuts)) + [len(data)]:
            out += d.feed(data[pos:cut])
            pos = cut
    except ProtocolError as exc:
        return f"error {exc.status.name}", out
    return "ok", out


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(frame=frames_past_the_prefix(), cuts=st.lists(st.integers(0, 600), max_size=4),
       tail=st.booleans())
def test_decoder_only_raises_protocol_errors(frame, cuts, tail):
    data = frame + (frame if tail else b"")  # a second frame after a good or bad one
    cuts = [c for c in cuts if c < len(data)]
    whole = _decode_all(data, [])
    split = _decode_all(data, cuts)
    assert whole[0] == split[0]
    assert [type(m) for m in whole[1]] == [type(m) for m in split[1]]
