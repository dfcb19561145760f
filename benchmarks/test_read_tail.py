"""A read stream's one-record tail step, as a storage node serves a tailing reader.

Each round one 100-byte record is written to a real LogsDB (untimed), then the timed part:
``ServerReadStream.step`` up to it, as the read-streams role runs it when the record is
released: single copy delivery with R=2 over 3 nodes (the node ships half the records
and answers the rest with a gap) and all-send-all.  The reference reads LogsDB (no record
cache); the other answers from the store's record cache, in the same run.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from logdevice.protocol import StartFlag
from logdevice.protocol.messages import Start
from logdevice.readstream.server import ServerReadStream
from logdevice.storage.logsdb import LogsDB

LOG = 1
T0 = 1_700_000_000_000
ROUNDS = 3000
PAYLOAD = b"x" * 100
OFFSETS = np.array([0, len(PAYLOAD)], np.uint64)


@pytest.mark.benchmark(group="read stream tail step")
@pytest.mark.parametrize("mode", ["scd", "all"])
@pytest.mark.parametrize("cache", [False, True], ids=["logsdb", "cache"])
def test_tail_step(benchmark, tmp_path, mode, cache):
    flags = StartFlag.SINGLE_COPY_DELIVERY if mode == "scd" else StartFlag(0)
    start = Start(read_stream_id=1, log_id=LOG, start_lsn=1, until_lsn=2**64 - 1,
                  window_high=2**64 - 1, flags=flags, replication=2, filter_version=1)
    with LogsDB(tmp_path / "db", record_cache_bytes=(32 << 20) if cache else 0) as db:
        stream = ServerReadStream(start, 0)
        lsns = itertools.count(1)
        copysets = np.array([[0, 1], [1, 2]], np.int16)
        state = {"lsn": 0}

        def write_one():
            lsn = next(lsns)
            db.write_records(LOG, np.array([lsn], np.uint64), np.array([T0], np.int64),
                             np.zeros(1, np.uint32), copysets[lsn % 2:lsn % 2 + 1],
                             PAYLOAD, OFFSETS)
            state["lsn"] = lsn
            return (), {}

        def step():
            return stream.step(db, state["lsn"], 0)

        benchmark.extra_info.update(items=1, unit="records", reference=not cache)
        benchmark.pedantic(step, setup=write_one, rounds=ROUNDS, warmup_rounds=50)
        if cache:
            assert stream.stats.range_reads == 0
        else:
            assert stream.stats.cache_reads == 0
