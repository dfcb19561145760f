"""The reader's end-to-end checksum check: a RECORDS frame whose payload was damaged on
the way is caught (``read.core.bad_copies``), and the read stream then takes the good
copy from another node and never delivers the bad one."""

from __future__ import annotations

import numpy as np

from ldcore.checksum import crc32c
from logdevice.client.read.core import bad_copies
from logdevice.protocol import Records, decode_frame, encode_frame
from logdevice.protocol.flags import FLAG_CHECKSUM
from logdevice.readstream import ReadStream
from logdevice.records import DataRecord

LSNS = [11, 12, 13, 14]
PAYLOADS = [b"alpha", b"bravo", b"charlie", b"delta"]


def frame(payloads, *, corrupt=None, flags=FLAG_CHECKSUM, fv=1) -> Records:
    """A RECORDS frame as a node would send it, through the real codec; ``corrupt``: the
    index of a payload to damage on the wire (its checksum stays)."""
    offsets = np.zeros(len(payloads) + 1, dtype=np.uint64)
    np.cumsum([len(p) for p in payloads], out=offsets[1:])
    sums = np.array([crc32c(p) for p in payloads], dtype=np.uint32)
    buf = bytearray(b"".join(payloads))
    if corrupt is not None:
        buf[int(offsets[corrupt])] ^= 0xFF
    msg = Records(read_stream_id=7, filter_version=fv, lsns=np.array(LSNS, dtype=np.uint64),
                  timestamps=np.arange(len(payloads), dtype=np.int64),
                  flags=np.full(len(payloads), flags, dtype=np.uint32),
                  payload_offsets=offsets, payloads=bytes(buf), checksums=sums)
    return decode_frame(encode_frame(msg))


def test_bad_copies_finds_the_damaged_payload():
    assert bad_copies(frame(PAYLOADS)) is None
    assert bad_copies(frame(PAYLOADS, corrupt=2)).tolist() == [2]
    # Records not flagged CHECKSUM are not checked.
    assert bad_copies(frame(PAYLOADS, corrupt=2, flags=0)) is None


def test_bad_copies_of_a_frame_of_one_record():
    # A tailing reader's usual frame: checked without arrays, with the same answers.
    def one(payload: bytes, flags: int = FLAG_CHECKSUM, sent: bytes | None = None):
        msg = Records(read_stream_id=7, filter_version=1, lsns=np.array([11], np.uint64),
                      timestamps=np.zeros(1, np.int64), flags=np.array([flags], np.uint32),
                      payload_offsets=np.array([0, len(payload)], np.uint64),
                      payloads=sent or payload,
                      checksums=np.array([crc32c(payload)], np.uint32))
        return decode_frame(encode_frame(msg))

    assert bad_copies(one(b"alpha")) is None
    assert bad_copies(one(b"alpha", sent=b"alphA")).tolist() == [0]
    assert bad_copies(one(b"alpha", flags=0, sent=b"alphA")) is None


def test_bad_copy_is_replaced_by_another_nodes_copy():
    now = [0.0]
    rs = ReadStream(1, 11, 14, nodeset=[0, 1, 2], replication=2, clock=lambda: now[0],
                    grace_period=0)
    bad = frame(PAYLOADS, corrupt=1)
    rs.on_records(0, bad.lsns, bad.timestamps, bad.flags, bad.payloads,
                  bad.payload_offsets, bad.filter_version, bad=bad_copies(bad))
    out = rs.poll()
    assert [r.lsn for r in out] == [11]  # stops before the bad copy
    good = frame(PAYLOADS)
    rs.on_records(1, good.lsns, good.timestamps, good.flags, good.payloads,
                  good.payload_offsets, good.filter_version)
    out += rs.poll()
    assert out == [DataRecord(1, lsn, i, p, 0)
                   for i, (lsn, p) in enumerate(zip(LSNS, PAYLOADS, strict=True))]
