"""The kernels that join record columns (``concat_columns``, ``take_columns``) against a
row-by-row reference, with hypothesis: parts of any size (empty ones too), payloads
at any offset in a larger buffer, int64 or uint64 offsets, with and without batch
offsets, rows taken in any order."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ldcore.columns import concat_columns, take_columns
from logdevice.record_columns import RecordColumns


@st.composite
def parts(draw):
    """A ``RecordColumns`` whose payloads sit after some lead bytes in their buffer."""
    payloads = draw(st.lists(st.binary(max_size=5), max_size=5))
    lead = draw(st.binary(max_size=3))
    n = len(payloads)
    offs = np.zeros(n + 1, np.uint64)
    np.cumsum([len(p) for p in payloads], out=offs[1:])
    offs += np.uint64(len(lead))
    if draw(st.booleans()):
        offs = offs.astype(np.int64)
    buf = np.frombuffer(lead + b"".join(payloads) + b"tail", np.uint8)
    lsns = np.array(draw(st.lists(st.integers(0, 2**64 - 1), min_size=n, max_size=n)),
                    np.uint64)
    bo = np.array(draw(st.lists(st.integers(0, 9), min_size=n, max_size=n)), np.uint32) \
        if draw(st.booleans()) else None
    return RecordColumns(lsns, np.arange(n, dtype=np.int64) - 3,
                         np.arange(n, dtype=np.uint32) * np.uint32(5), buf, offs, bo)


def row(c: RecordColumns, i: int) -> tuple:
    bo = 0 if c.batch_offsets is None else int(c.batch_offsets[i])
    return (int(c.lsns[i]), int(c.timestamps[i]), int(c.flags[i]), bo, bytes(c.payload(i)))


def joined(out) -> list[tuple]:
    c = RecordColumns(*out)
    assert c.offsets.dtype == np.uint64 and int(c.offsets[0]) == 0
    assert len(c.payloads) == int(c.offsets[-1])
    return [row(c, i) for i in range(len(c))]


@settings(max_examples=200, deadline=None)
@given(st.lists(parts(), max_size=6))
def test_concat_columns_is_every_part_row_by_row(ps):
    out = concat_columns(ps)
    assert joined(out) == [row(p, i) for p in ps for i in range(len(p))]
    assert (out[5] is None) == all(p.batch_offsets is None for p in ps)


@settings(max_examples=200, deadline=None)
@given(st.lists(parts(), min_size=1, max_size=4), st.data())
def test_take_columns_is_the_rows_asked_for(ps, data):
    cells = [(k, i) for k, p in enumerate(ps) for i in range(len(p))]
    picks = data.draw(st.lists(st.sampled_from(cells), max_size=12)) if cells else []
    if cells and data.draw(st.booleans()):  # a stretch of rows of one part, in order
        k = data.draw(st.integers(0, len(ps) - 1))
        picks += [(k, i) for i in range(len(ps[k]))]
    part = np.array([k for k, _ in picks], np.int64)
    rows = np.array([i for _, i in picks], np.int64)
    out = take_columns(ps, part, rows)
    assert joined(out) == [row(ps[k], i) for k, i in picks]
    assert (out[5] is None) == all(p.batch_offsets is None for p in ps)
