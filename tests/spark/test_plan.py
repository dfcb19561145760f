"""The sans-I/O parts of logdevice.spark: options, the partition plan, offsets and
admission control (no cluster, no Spark)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ldcore import lsn as ldlsn
from logdevice.errors import E, InvalidParamError, LogDeviceError
from logdevice.spark.loss import LossCounter, LostRange, below_trim_point
from logdevice.spark.offsets import lsn_lag, parse_starting_offsets
from logdevice.spark.options import ReadOptions, parse_logs
from logdevice.spark.plan import (
    LSN_FIRST,
    LogExtent,
    Slice,
    cut_lsn_range,
    cuts_to_slices,
    pack,
    plan_extents,
)


def L(epoch: int, esn: int) -> int:
    return ldlsn.compose(epoch, esn)


def test_parse_logs():
    assert parse_logs("1,2,10-12, 2") == [1, 2, 10, 11, 12]
    for bad in ("", "x", "5-3", "0", "1,-"):
        with pytest.raises(InvalidParamError, match="logs"):
            parse_logs(bad)


def test_read_options_parse_and_validate():
    o = ReadOptions.parse({"config": "/c.json", "logs": "3", "from_lsn": "10",
                           "until_time": "2026-01-01T00:00:00", "fail_on_data_loss": "False"})
    assert (o.logs, o.from_lsn, o.fail_on_data_loss) == ((3,), 10, False)
    assert o.until_time == 1767225600000
    with pytest.raises(InvalidParamError, match="config"):
        ReadOptions.parse({"logs": "1"})
    with pytest.raises(InvalidParamError, match="from_lsn"):
        ReadOptions.parse({"config": "c", "logs": "1", "from_lsn": "9", "until_lsn": "3"})
    with pytest.raises(InvalidParamError, match="records_per_partition"):
        ReadOptions.parse({"config": "c", "logs": "1", "records_per_partition": "0"})


@given(st.integers(LSN_FIRST, 2**40), st.integers(0, 10**6), st.integers(1, 50))
def test_lsn_cuts_cover_the_range_exactly(lo, span, n):
    hi = lo + span
    slices = cuts_to_slices(1, lo, hi, cut_lsn_range(lo, hi, n), span + 1, None)
    assert slices[0].lo == lo and slices[-1].hi == hi
    assert all(a.hi + 1 == b.lo for a, b in zip(slices, slices[1:], strict=False))
    assert all(s.lo <= s.hi for s in slices)
    assert len(slices) == min(n, span + 1)


def test_time_cuts_outside_the_range_or_repeated_are_ignored():
    s = cuts_to_slices(1, 100, 200, [50, 100, 150, 150, 201, 300], 10, 1000)
    assert [(x.lo, x.hi) for x in s] == [(100, 149), (150, 200)]


def test_plan_cuts_one_epoch_by_lsn_and_several_epochs_by_time():
    one = LogExtent(1, L(3, 1), L(3, 1000))
    many = LogExtent(2, L(1, 1), L(4, 500), time_cuts=[L(2, 7), L(3, 9), L(4, 1)])
    parts = plan_extents([one, many], records_per_partition=250,
                         bytes_per_partition=1 << 40)
    by_log = {}
    for p in parts:
        for s in p.slices:
            by_log.setdefault(s.log_id, []).append((s.lo, s.hi))
    assert by_log[1] == [(L(3, 1), L(3, 250)), (L(3, 251), L(3, 500)),
                         (L(3, 501), L(3, 750)), (L(3, 751), L(3, 1000))]
    assert by_log[2] == [(L(1, 1), L(2, 6)), (L(2, 7), L(3, 8)), (L(3, 9), L(4, 0)),
                         (L(4, 1), L(4, 500))]


def test_bytes_target_cuts_too():
    ext = LogExtent(1, L(1, 1), L(1, 100), est_bytes=10_000)
    parts = plan_extents([ext], records_per_partition=10**6, bytes_per_partition=2_500)
    assert len(parts) == 4


def test_small_logs_are_packed_together():
    slices = [Slice(i, L(1, 1), L(1, 10), 10, 100) for i in range(1, 8)]
    parts = pack(slices, records_per_partition=30, bytes_per_partition=10**9)
    assert [len(p.slices) for p in parts] == [3, 3, 1]
    assert [s for p in parts for s in p.slices] == slices


def test_empty_extents_plan_nothing():
    assert plan_extents([LogExtent(1, 10, 9)], 10, 10) == []


def test_starting_offsets():
    assert parse_starting_offsets("earliest", [1, 2]) == {1: "earliest", 2: "earliest"}
    assert parse_starting_offsets('{"2": 77, "1": "latest"}', [1, 2]) == {1: "latest", 2: 77}
    with pytest.raises(InvalidParamError, match=r"no position for logs \[2\]"):
        parse_starting_offsets('{"1": 5}', [1, 2])
    with pytest.raises(InvalidParamError, match="starting_offsets"):
        parse_starting_offsets("newest", [1])


def test_filters_narrow_the_options():
    import datetime as dt

    from pyspark.sql.datasource import EqualTo, GreaterThan, In, LessThanOrEqual, StringContains

    from logdevice.spark.pushdown import narrow

    o = ReadOptions.parse({"config": "c", "logs": "1-5", "until_lsn": "1000"})
    t = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    keep = [GreaterThan(("timestamp",), t), StringContains(("payload",), "x")]
    n, rest = narrow(o, [GreaterThan(("lsn",), 10), LessThanOrEqual(("lsn",), 2000),
                         In(("log_id",), (2, 4, 9)), *keep])
    assert (n.from_lsn, n.until_lsn, n.logs) == (11, 1000, (2, 4))
    assert n.from_time == 1767225600000 and n.until_time is None
    assert rest == keep  # timestamps are re-checked by Spark; lsn and log_id are exact
    n, rest = narrow(o, [EqualTo(("lsn",), 77)])
    assert (n.from_lsn, n.until_lsn, rest) == (77, 77, [])


def test_lsn_lag_counts_possible_records():
    assert lsn_lag(L(2, 5), L(2, 15)) == 10
    assert lsn_lag(L(2, 15), L(2, 15)) == 0 and lsn_lag(L(2, 20), L(2, 15)) == 0
    assert lsn_lag(L(2, 5), L(4, 8)) == 7  # the tail epoch's ESNs below the end


def test_below_trim_point():
    assert below_trim_point(3, 10, 50, 20) == LostRange(3, 10, 20, "trimmed")
    assert below_trim_point(3, 10, 15, 20) == LostRange(3, 10, 15, "trimmed")
    assert below_trim_point(3, 21, 50, 20) is None


def test_loss_counter_raises_or_counts():
    c = LossCounter()
    with pytest.raises(LogDeviceError, match=r"log 3: LSN range \[10, 20\] was trimmed") as e:
        c.handle(LostRange(3, 10, 20, "trimmed"), fail_on_data_loss=True)
    assert e.value.status == E.DATALOSS
    c.handle(LostRange(3, 10, 20, "trimmed"), fail_on_data_loss=False)
    c.handle(LostRange(3, 30, 31, "lost"), fail_on_data_loss=False)
    assert (c.trimmed_ranges, c.trimmed_lsns, c.lost_ranges, c.lost_lsns) == (1, 11, 1, 2)


def test_stream_options_starting_timestamp():
    from logdevice.spark.stream import StreamOptions

    o = StreamOptions.parse({"config": "c", "logs": "1",
                             "starting_timestamp": "2026-01-01T00:00:00"})
    assert o.starting_timestamp == 1767225600000
    with pytest.raises(InvalidParamError, match="starting_offsets or starting_timestamp"):
        StreamOptions.parse({"config": "c", "logs": "1", "starting_timestamp": "5",
                             "starting_offsets": "latest"})
    with pytest.raises(InvalidParamError, match="starting_timestamp"):
        StreamOptions.parse({"config": "c", "logs": "1", "starting_timestamp": "soon"})


def test_cap_rows_takes_whole_records_within_the_cap_fairly():
    from logdevice.spark.offsets import KnownRows, cap_rows

    blobs = KnownRows(110, list(range(100, 110)), [1000] * 10)
    small = KnownRows(60, [50, 51, 52], [1, 1, 1])
    start, latest = {"1": 100, "2": 50}, {"1": 110, "2": 60}
    end = cap_rows(start, latest, 2500, {"1": blobs, "2": small})
    # log 2's three rows, then two blobs of log 1 (a third would pass 2500)
    assert end == {"1": 102, "2": 60}
    # An empty prefix or holes cost nothing: the end is the first record not taken.
    holes = KnownRows(10**12, [5000, 5001, 9000], [0, 1000, 1000])
    assert cap_rows({"1": 10}, {"1": 10**12}, 1500, {"1": holes}) == {"1": 9000}


def test_cap_rows_reads_a_record_over_the_cap_alone():
    from logdevice.spark.offsets import KnownRows, cap_rows

    big = KnownRows(30, [10, 20], [4000, 1000])
    assert cap_rows({"1": 10}, {"1": 30}, 2500, {"1": big}) == {"1": 20}
    assert cap_rows({"1": 20}, {"1": 30}, 2500, {"1": KnownRows(30, [20], [1000])}) == \
        {"1": 30}
    # Another log's record that fits comes first; the big one waits for its own turn.
    small = KnownRows(6, [5], [10])
    assert cap_rows({"1": 10, "2": 5}, {"1": 30, "2": 6}, 2500,
                    {"1": big, "2": small}) == {"1": 10, "2": 6}


@given(st.lists(st.integers(0, 3000), min_size=1, max_size=30), st.integers(1, 5000),
       st.integers(0, 30))
def test_cap_rows_depends_only_on_the_records(rows, cap, cut):
    """However much more of the log is known past what ``rows_known`` needs, the end is
    the same; at most the cap (or one record alone); progress whenever rows remain."""
    from logdevice.spark.offsets import KnownRows, cap_rows, rows_known

    lsns = [100 + 3 * i for i in range(len(rows))]
    top = lsns[-1] + 5
    full = KnownRows(top, lsns, rows)
    end = cap_rows({"1": 100}, {"1": top}, cap, {"1": full})["1"]
    k = next(n for n in range(1, len(rows) + 1)
             if rows_known(KnownRows(lsns[n] if n < len(rows) else top, lsns[:n],
                                     rows[:n]), top, cap))
    k = min(len(rows), max(k, cut))
    part = KnownRows(lsns[k] if k < len(rows) else top, lsns[:k], rows[:k])
    assert cap_rows({"1": 100}, {"1": top}, cap, {"1": part})["1"] == end
    taken = [r for x, r in zip(lsns, rows, strict=True) if x < end]
    assert sum(taken) <= cap or len(taken) == 1
    assert end > 100
