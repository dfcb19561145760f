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


@st.composite
def sticky_batches(draw):
    """Batches whose records may form a CSI block: consecutive LSNs, one flag word and
    the same nodes in every copyset (padding anywhere), sometimes spoilt by one record."""
    b = draw(batches())
    n = len(b["lsns"])
    if n == 0:
        return b
    first = draw(st.integers(1, 2**64 - 1 - n))
    b["lsns"] = np.arange(n, dtype=np.uint64) + np.uint64(first)
    b["flags"] = np.full(n, b["flags"][0], np.uint32)
    width = b["copysets"].shape[1]
    nodes = [int(v) for v in b["copysets"][0] if v >= 0]
    rows = []
    for _ in range(n):
        slots = sorted(draw(st.permutations(range(width)))[:len(nodes)])
        row = [-1] * width
        for slot, node in zip(slots, nodes, strict=True):
            row[slot] = node
        rows.append(row)
    b["copysets"] = np.array(rows, np.int16).reshape(n, width)
    spoil = draw(st.sampled_from(["none", "flags", "gap", "copyset"]))
    if n > 1 and spoil == "flags":
        b["flags"][-1] ^= 1
    elif n > 1 and spoil == "gap" and b["lsns"][-1] < 2**64 - 2:
        b["lsns"][-1] += 1
    elif n > 1 and spoil == "copyset" and width:
        b["copysets"][-1, -1] = 7 if b["copysets"][-1, -1] != 7 else 8
    return b


@SETTINGS
@given(st.one_of(batches(), sticky_batches()), st.booleans(), st.booleans())
def test_encode_run_matches_reference(b, grouped, default_waves):
    """Every entry of a run (data, then single, block or run CSI entries) as the reference
    writes it, and the same errors as ``encode_data``."""
    args = dict(b, waves=None if default_waves else b["waves"])
    limit = args.pop("max_payload")
    log_id = args.pop("log_id")
    try:
        ref.encode_data(log_id, **dict(args, waves=b["waves"]), max_payload=limit)
    except OverflowError:
        with pytest.raises(storefmt.RecordTooBigError):
            storefmt.encode_run(log_id, **args, max_payload=limit, grouped=grouped)
        with pytest.raises(storefmt.RecordTooBigError):
            storefmt.check_records(**args, max_payload=limit)
        return
    except ValueError:
        with pytest.raises(storefmt.RecordFormatError):
            storefmt.encode_run(log_id, **args, max_payload=limit, grouped=grouped)
        with pytest.raises(storefmt.RecordFormatError):
            storefmt.check_records(**args, max_payload=limit)
        return
    storefmt.check_records(**args, max_payload=limit)
    run = storefmt.encode_run(log_id, **args, max_payload=limit, grouped=grouped,
                              blob_flags=1)
    expected = ref.encode_run(log_id, **args, grouped=grouped)
    assert ref.plan_entries(run.plan, b["payloads"]) == expected
    n = len(b["lsns"])
    assert run.records == n
    assert run.blobs == int(np.count_nonzero(b["flags"] & 1))
    if n:
        offs = b["offsets"]
        assert (run.first_lsn, run.last_lsn) == (int(b["lsns"][0]), int(b["lsns"][-1]))
        assert (run.min_ts, run.max_ts) == (int(b["timestamps"].min()),
                                            int(b["timestamps"].max()))
        assert (run.min_ts, run.max_ts) == storefmt.time_range(b["timestamps"])
        assert run.payload_bytes == int(offs[-1] - offs[0])
        assert run.head_bytes == sum(len(v) - int(offs[i + 1] - offs[i])
                                     for i, (_, v) in enumerate(expected[:n]))
