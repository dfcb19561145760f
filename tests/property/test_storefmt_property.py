"""ldcore.storefmt against the plain-Python reference."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ldcore import storefmt
from tests.reference import storefmt as ref

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def batches(draw):
    n = draw(st.integers(0, 12))
    width = draw(st.integers(0, 5))
    lsns = sorted(draw(st.sets(st.integers(0, 2**64 - 1), min_size=n, max_size=n)))
    if draw(st.booleans()) and n > 1:  # sometimes not strictly increasing
        i = draw(st.integers(1, n - 1))
        lsns[i] = lsns[i - 1]
    lengths = draw(st.lists(st.integers(0, 20), min_size=n, max_size=n))
    offsets = np.zeros(n + 1, np.uint64)
    np.cumsum(np.array(lengths, np.uint64), out=offsets[1:])
    slack = draw(st.integers(-1, 3)) if n else 0
    payloads = draw(st.binary(min_size=max(0, int(offsets[-1]) + slack),
                              max_size=max(0, int(offsets[-1]) + slack)))
    return {
        "log_id": draw(st.integers(1, 2**64 - 1)),
        "lsns": np.array(lsns, np.uint64),
        "timestamps": np.array(draw(st.lists(st.integers(-2**63, 2**63 - 1), min_size=n,
                                             max_size=n)), np.int64),
        "flags": np.array(draw(st.lists(st.integers(0, 2**32 - 1), min_size=n, max_size=n)),
                          np.uint32),
        "waves": np.array(draw(st.lists(st.integers(0, 2**32 - 1), min_size=n, max_size=n)),
                          np.uint32),
        "copysets": np.array(draw(st.lists(st.lists(st.integers(-1, 32767), min_size=width,
                                                    max_size=width), min_size=n, max_size=n)),
                             np.int16).reshape(n, width),
        "payloads": payloads,
        "offsets": offsets,
        "max_payload": draw(st.sampled_from([-1, 0, 5, 19])),
    }


@SETTINGS
@given(batches())
def test_encode_data_matches_reference(b):
    try:
        expected = ref.encode_data(**b)
    except OverflowError:
        with pytest.raises(storefmt.RecordTooBigError):
            storefmt.encode_data(**b)
        return
    except ValueError:
        with pytest.raises(storefmt.RecordFormatError):
            storefmt.encode_data(**b)
        return
    keys, heads, offs = storefmt.encode_data(**b)
    assert (keys.tobytes(), heads.tobytes(), offs.tolist()) == expected


@SETTINGS
@given(batches())
def test_encode_csi_matches_reference(b):
    keys, values, offs = storefmt.encode_csi(b["log_id"], b["lsns"], b["flags"], b["copysets"])
    assert (keys.tobytes(), values.tobytes(), offs.tolist()) == ref.encode_csi(
        b["log_id"], b["lsns"], b["flags"], b["copysets"])
