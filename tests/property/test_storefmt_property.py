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



@st.composite
def runs(draw):
    """A run ``encode_run`` takes: 1-6 records, LSNs strictly increasing (sometimes
    consecutive, with one copyset and flag word: a CSI block)."""
    n = draw(st.integers(1, 6))
    width = draw(st.integers(0, 3))
    if draw(st.booleans()):
        first = draw(st.integers(1, 2**64 - 2 - n))
        lsns = list(range(first, first + n))
        row = draw(st.lists(st.integers(-1, 300), min_size=width, max_size=width))
        copysets = [row] * n
        flags = [draw(st.integers(0, 3))] * n
    else:
        lsns = sorted(draw(st.sets(st.integers(1, 2**64 - 2), min_size=n, max_size=n)))
        copysets = draw(st.lists(st.lists(st.integers(-1, 300), min_size=width,
                                          max_size=width), min_size=n, max_size=n))
        flags = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    lengths = draw(st.lists(st.integers(0, 12), min_size=n, max_size=n))
    return {"log_id": draw(st.integers(1, 2**64 - 1)), "lsns": lsns,
            "timestamps": draw(st.lists(st.integers(-2**63, 2**63 - 1), min_size=n,
                                        max_size=n)),
            "flags": flags, "waves": draw(st.lists(st.integers(0, 9), min_size=n,
                                                   max_size=n)),
            "copysets": copysets, "width": width,
            "payloads": [draw(st.binary(min_size=k, max_size=k)) for k in lengths]}


def _columns(rs: list[dict]) -> dict:
    """Runs back to back as ``encode_runs`` takes them (copysets padded to the widest)."""
    width = max(r["width"] for r in rs)
    payloads = [p for r in rs for p in r["payloads"]]
    offsets = np.zeros(len(payloads) + 1, np.uint64)
    np.cumsum([len(p) for p in payloads], out=offsets[1:])
    return {
        "log_ids": np.array([r["log_id"] for r in rs], np.uint64),
        "ends": np.cumsum([len(r["lsns"]) for r in rs]).astype(np.uint64),
        "lsns": np.array([x for r in rs for x in r["lsns"]], np.uint64),
        "timestamps": np.array([x for r in rs for x in r["timestamps"]], np.int64),
        "flags": np.array([x for r in rs for x in r["flags"]], np.uint32),
        "waves": np.array([x for r in rs for x in r["waves"]], np.uint32),
        "copysets": np.array([row + [-1] * (width - r["width"]) for r in rs
                              for row in r["copysets"]], np.int16).reshape(
                                  sum(len(r["lsns"]) for r in rs), width),
        "payloads": b"".join(payloads), "offsets": offsets,
    }


@SETTINGS
@given(st.lists(runs(), min_size=1, max_size=5), st.booleans())
def test_encode_runs_is_each_run_encoded_alone(rs, grouped):
    """One plan for several logs' runs holds, in order, what ``encode_run`` writes for
    each run's rows of the same columns, and each run's figures."""
    cols = _columns(rs)
    plan, figures = storefmt.encode_runs(**cols, grouped=grouped, blob_flags=1)
    expected, lo = [], 0
    for j, hi in enumerate(cols["ends"].tolist()):
        run = storefmt.encode_run(
            int(cols["log_ids"][j]), cols["lsns"][lo:hi], cols["timestamps"][lo:hi],
            cols["flags"][lo:hi], cols["waves"][lo:hi], cols["copysets"][lo:hi],
            cols["payloads"], cols["offsets"][lo:hi + 1], grouped=grouped, blob_flags=1)
        expected += ref.plan_entries(run.plan, cols["payloads"])
        assert figures[j].view(np.uint64)[:2].tolist() == [run.first_lsn, run.last_lsn]
        assert figures[j, 2:].tolist() == [run.min_ts, run.max_ts,
                                           run.payload_bytes + run.head_bytes, run.blobs]
        lo = hi
    assert ref.plan_entries(plan, cols["payloads"]) == expected


def test_encode_runs_refuses_bad_runs():
    cols = {"log_ids": np.array([1, 2], np.uint64), "ends": np.array([2, 3], np.uint64),
            "lsns": np.array([5, 6, 1], np.uint64), "timestamps": np.zeros(3, np.int64),
            "flags": np.zeros(3, np.uint32), "waves": np.ones(3, np.uint32),
            "copysets": np.zeros((3, 1), np.int16),
            "payloads": b"abc", "offsets": np.array([0, 1, 2, 3], np.uint64)}
    plan, figures = storefmt.encode_runs(**cols)  # LSNs go down only between runs
    assert figures[:, :2].tolist() == [[5, 6], [1, 1]]
    for over, error in (({"lsns": np.array([5, 5, 1], np.uint64)}, "strictly increasing"),
                        ({"ends": np.array([2, 2], np.uint64)}, "run ends must increase"),
                        ({"ends": np.array([1, 2], np.uint64)}, "must end at 3"),
                        ({"ends": np.array([3], np.uint64)}, "ends must have 2"),
                        ({"lsns": np.array([5, 6, 0], np.uint64)}, "between 1 and")):
        with pytest.raises(storefmt.RecordFormatError, match=error):
            storefmt.encode_runs(**dict(cols, **over))
    with pytest.raises(storefmt.RecordTooBigError):
        storefmt.encode_runs(**cols, max_payload=0)
