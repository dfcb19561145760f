"""Combining the storage nodes' many-log answers per log (``client.summaries``), and a
shard's side of them (``storage.summaries``), without a cluster."""

from __future__ import annotations

import numpy as np
import pytest

from ldcore import codec
from logdevice.client.combine import TailAttributes, storage_nodeset
from logdevice.client.summaries import (
    LogSummary,
    combine_record_rows,
    combine_summaries,
    with_tails,
)
from logdevice.errors import E, LogDeviceError, TimedOutError
from logdevice.protocol import LogSummaries, RecordRows
from logdevice.protocol.flags import FLAG_BUFFERED_WRITER_BLOB
from logdevice.records import LSN_MAX, LSN_OLDEST
from logdevice.storage.flags import FLAG_HOLE
from logdevice.storage.summaries import rows_of

U64 = np.uint64


def summaries(node, log_ids, *, statuses=None, trims, released, tails=None, t_min=None,
              t_max=None, nbytes, find_lo=(), find_hi=()):
    n = len(log_ids)
    return LogSummaries(
        request_id=1, status=E.OK, node_index=node, log_ids=np.array(log_ids, U64),
        statuses=np.array(statuses or [0] * n, np.uint16),
        trim_points=np.array(trims, U64), last_released=np.array(released, U64),
        local_tails=np.array(tails or released, U64),
        min_timestamps=np.array(t_min or [0] * n, np.int64),
        max_timestamps=np.array(t_max or [0] * n, np.int64),
        nbytes=np.array(nbytes, U64), find_lo=np.array(find_lo, U64),
        find_hi=np.array(find_hi, U64))


def test_each_log_combines_its_rows_as_the_one_log_calls_do():
    logs = [1, 2]
    nodeset = storage_nodeset([0, 1, 2], 2)
    answers = {
        0: summaries(0, logs, trims=[5, 0], released=[9, 0], t_min=[100, 0], t_max=[200, 0],
                     nbytes=[300, 0], find_lo=[4, LSN_MAX - 1, 0, 0],
                     find_hi=[LSN_MAX, LSN_MAX, LSN_MAX, LSN_MAX]),
        1: summaries(1, logs, trims=[7, 0], released=[8, 0], t_min=[90, 0], t_max=[210, 0],
                     nbytes=[300, 0], find_lo=[5, 6, 0, 0], find_hi=[6, 7, LSN_MAX, LSN_MAX]),
        2: TimedOutError(message="N2 did not answer"),
    }
    one, two = combine_summaries(logs, answers, [nodeset, nodeset], n_times=2)
    # trim: max; released: max; timestamps: min of the known / max; bytes: sum / R,
    # scaled by 3 effective / 2 answered; find_time: min(hi) or max(lo) + 1
    assert one == LogSummary(1, 7, 9, 90, 210, 450, (6, 7))
    assert two == LogSummary(2, 0, 0, 0, 0, 0, (LSN_OLDEST, LSN_OLDEST))


def test_a_log_without_an_f_majority_fails_alone():
    logs = [1, 2]
    nodeset = storage_nodeset([0, 1, 2], 2)
    answers = {
        0: summaries(0, logs, statuses=[0, int(E.NOTFOUND)], trims=[1, 0], released=[3, 0],
                     nbytes=[1, 0]),
        1: summaries(1, logs, statuses=[0, int(E.NOTFOUND)], trims=[1, 0], released=[3, 0],
                     nbytes=[1, 0]),
        2: LogSummaries(request_id=1, status=E.SHUTDOWN, node_index=2),
    }
    one, two = combine_summaries(logs, answers, [nodeset, nodeset])
    assert isinstance(one, LogSummary) and one.last_released == 3
    assert isinstance(two, LogDeviceError) and two.status == E.NOTFOUND
    assert "log 2" in two.message
    # Only one node answered OK: PARTIAL for both (R=2 of 3 needs two).
    answers[1] = TimedOutError(message="late")
    one, two = combine_summaries(logs, answers, [nodeset, nodeset])
    assert isinstance(one, LogDeviceError) and one.status == E.PARTIAL
    assert "log 1" in one.message


def test_a_reply_of_another_length_does_not_count():
    nodeset = storage_nodeset([0, 1, 2], 2)
    answers = {0: summaries(0, [1], trims=[0], released=[4], nbytes=[0]),
               1: summaries(1, [1], trims=[0], released=[3], nbytes=[0]),
               2: summaries(2, [1, 2], trims=[0, 0], released=[9, 9], nbytes=[0, 0])}
    (one,) = combine_summaries([1], answers, [nodeset])
    assert isinstance(one, LogSummary) and one.last_released == 4
    answers[1] = TimedOutError(message="late")
    (one,) = combine_summaries([1], answers, [nodeset])
    assert isinstance(one, LogDeviceError) and "N2: PROTONOSUPPORT" in one.message


def test_sequencer_tails_raise_the_release_pointer_and_their_failures_count():
    base = [LogSummary(1, 0, 5, 1, 10, 0), LogSummary(2, 0, 9, 1, 10, 0),
            LogSummary(3, 0, 4, 1, 10, 0)]
    out = with_tails(base, {1: TailAttributes(7, 12), 2: TailAttributes(8, 11),
                            3: TimedOutError(message="no tail")})
    assert (out[0].last_released, out[0].last_timestamp) == (7, 12)
    assert out[1].last_released == 9  # a storage node heard of a later release
    assert isinstance(out[2], TimedOutError)


def rows_reply(node, log_ids, next_lsns, records, statuses=None):
    return RecordRows(request_id=1, status=E.OK, node_index=node,
                      log_ids=np.array(log_ids, U64),
                      statuses=np.array(statuses or [0] * len(log_ids), np.uint16),
                      next_lsns=np.array(next_lsns, U64),
                      record_logs=np.array([r[0] for r in records], np.uint32),
                      lsns=np.array([r[1] for r in records], U64),
                      rows=np.array([r[2] for r in records], np.uint32))


def test_record_rows_are_the_union_complete_below_the_lowest_next_lsn():
    nodeset = storage_nodeset([0, 1, 2], 2)
    answers = {
        0: rows_reply(0, [1, 2], [30, 101], [(0, 10, 1000), (0, 20, 1000), (1, 5, 1)]),
        1: rows_reply(1, [1, 2], [21, 101], [(0, 10, 1000), (0, 12, 3), (0, 20, 1000),
                                             (1, 6, 0)]),
        2: rows_reply(2, [1, 2], [40, 101], [(0, 12, 3), (0, 25, 7), (1, 5, 1)]),
    }
    one, two = combine_record_rows([1, 2], [100, 100], answers, [nodeset, nodeset])
    assert one.next_lsn == 21
    assert one.lsns.tolist() == [10, 12, 20] and one.rows.tolist() == [1000, 3, 1000]
    assert two.next_lsn == 101
    assert two.lsns.tolist() == [5, 6] and two.rows.tolist() == [1, 0]
    answers[2] = TimedOutError(message="late")
    one, _two = combine_record_rows([1, 2], [100, 100], answers, [nodeset, nodeset])
    assert one.next_lsn == 21  # two of three answered: still an f-majority for R=2
    answers[1] = TimedOutError(message="late")
    one, _two = combine_record_rows([1, 2], [100, 100], answers, [nodeset, nodeset])
    assert isinstance(one, LogDeviceError) and one.status == E.PARTIAL


def test_rows_of_records_blobs_holes():
    blob = codec.encode([b"a", b"bb", b"ccc"], compression="none")
    flags = np.array([0, FLAG_BUFFERED_WRITER_BLOB, FLAG_HOLE, FLAG_BUFFERED_WRITER_BLOB],
                     np.uint32)
    rows = rows_of(flags, [b"x", blob, b"", b"\x00not a blob"])
    assert rows.tolist() == [1, 3, 0, 1]


@pytest.mark.parametrize("n_times", [0, 3])
def test_many_logs_share_one_verdict_per_answer_pattern(n_times):
    logs = list(range(1, 1001))
    nodeset = storage_nodeset([0, 1, 2], 2)
    k = len(logs) * n_times
    answers = {i: summaries(i, logs, trims=[0] * 1000, released=list(range(1000)),
                            nbytes=[10] * 1000, find_lo=[0] * k, find_hi=[7] * k)
               for i in range(3)}
    out = combine_summaries(logs, answers, [nodeset] * len(logs), n_times)
    assert [s.last_released for s in out] == list(range(1000))
    assert all(s.est_bytes == 15 for s in out)
    assert all(s.find_time == (7,) * n_times for s in out)
