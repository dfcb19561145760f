"""LogsDB's writer entries: the blobs of idempotent writers held, found without reading
payloads, and only while the record is still that blob."""

from __future__ import annotations

import numpy as np
import pytest

from ldcore import codec
from logdevice.protocol.flags import FLAG_BUFFERED_WRITER_BLOB, FLAG_HOLE
from logdevice.storage.logsdb import LogsDB

LOG = 7
WRITER = 2**64 - 3  # ids use all 64 bits


@pytest.fixture
def db(tmp_path):
    with LogsDB(tmp_path / "db") as store:
        blobs = [codec.encode([b"a%d" % i], producer=(WRITER, i + 1)) for i in range(3)]
        anonymous = codec.encode([b"no writer named"])
        plain = b"not a blob"
        parts = [*blobs, anonymous, plain]
        store.write_records(
            LOG, np.array([10, 11, 12, 13, 14], np.uint64),
            np.array([1000, 2000, 3000, 4000, 5000]),
            np.array([FLAG_BUFFERED_WRITER_BLOB] * 4 + [0], np.uint32),
            np.array([[0, 1]] * 5, np.int16), b"".join(parts),
            np.cumsum([0] + [len(p) for p in parts]).astype(np.uint64))
        yield store


def _rows(found):
    return list(zip(found.lsns.tolist(), found.producers.tolist(), found.seqs.tolist(),
                    found.timestamps.tolist(), strict=True))


def test_blobs_naming_a_writer_in_the_window(db):
    assert _rows(db.writer_blobs(LOG, 0)) == [(10, WRITER, 1, 1000), (11, WRITER, 2, 2000),
                                             (12, WRITER, 3, 3000)]
    assert _rows(db.writer_blobs(LOG, 2000)) == [(11, WRITER, 2, 2000),
                                                (12, WRITER, 3, 3000)]
    assert _rows(db.writer_blobs(LOG + 1, 0)) == []


def test_a_hole_plug_or_a_trim_takes_the_blob_out(db):
    db.write_records(LOG, np.array([11], np.uint64), np.array([2000]),
                     np.array([FLAG_HOLE], np.uint32), np.array([[0, 1]], np.int16), b"",
                     np.array([0, 0], np.uint64))
    assert [r[0] for r in _rows(db.writer_blobs(LOG, 0))] == [10, 12]
    db.trim(LOG, 10)
    assert [r[0] for r in _rows(db.writer_blobs(LOG, 0))] == [12]
