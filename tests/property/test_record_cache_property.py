"""The record cache against a real LogsDB under random changes: tail writes, recovery's
rewrites and hole plugs, rebuilt copies below the tail, purges, amendments, trims and
eviction.  After every change each range read the cache answers is exactly LogsDB's, and
tailing read streams (all-send-all and single copy delivery) served through the cache
deliver exactly the records and gaps of streams served from LogsDB alone."""

from __future__ import annotations

import tempfile

import numpy as np
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from logdevice.protocol import StartFlag
from logdevice.protocol.messages import Gap, Records, Start
from logdevice.readstream.server import ServerReadStream
from logdevice.storage.logsdb import LogsDB

LOG = 3
T0 = 1_700_000_000_000
LSN_MAX = 2**64 - 1

_append = st.tuples(st.just("append"), st.integers(1, 4), st.integers(1, 3))  # n, LSN step
op = st.one_of(
    _append, _append, _append, _append,
    st.tuples(st.just("rewrite"), st.integers(0, 10**6)),
    st.tuples(st.just("plug"), st.integers(0, 10**6)),
    st.tuples(st.just("old"), st.integers(0, 10**6)),
    st.tuples(st.just("delete"), st.integers(0, 10**6)),
    st.tuples(st.just("amend"), st.integers(0, 10**6)),
    st.tuples(st.just("trim"), st.integers(0, 10**6)),
    st.tuples(st.just("epoch"), st.just(0)),
)


class _StoreOnly:
    """The same LogsDB, read without its cache (what a stream would see before)."""

    cache = None

    def __init__(self, db: LogsDB) -> None:
        self._db = db

    def __getattr__(self, name):
        return getattr(self._db, name)


def _rows(rb) -> list[tuple]:
    return [(int(rb.lsns[i]), int(rb.timestamps[i]), int(rb.flags[i]), int(rb.waves[i]),
             tuple(int(x) for x in rb.copysets[i] if x >= 0), int(rb.checksums[i]),
             bytes(rb.payload(i))) for i in range(len(rb))]


def _delivered(msgs, seen: dict[int, tuple], covered: list[tuple[int, int]]) -> None:
    for m in msgs:
        if isinstance(m, Records):
            offs = m.payload_offsets.tolist()
            pl = bytes(m.payloads)
            for i, lsn in enumerate(m.lsns.tolist()):
                seen[lsn] = (int(m.flags[i]), pl[offs[i]:offs[i + 1]],
                             int(m.checksums[i]) if len(m.checksums) else None)
                covered.append((lsn, lsn))
        else:
            assert isinstance(m, Gap)
            covered.append((m.lo, m.hi))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(op, min_size=3, max_size=40), capacity=st.sampled_from([3000, 1 << 20]),
       ranges=st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40),
                                 st.integers(1, 5), st.integers(1, 12)),
                       min_size=1, max_size=3),
       scd=st.booleans())
def test_cache_reads_are_logsdb_reads(ops, capacity, ranges, scd):
    with tempfile.TemporaryDirectory() as tmp, \
            LogsDB(tmp + "/db", record_cache_bytes=capacity) as db:
        plain = _StoreOnly(db)
        epoch, esn = 1, 0
        written: list[int] = []
        flags = StartFlag.SINGLE_COPY_DELIVERY if scd else StartFlag(0)
        start = Start(read_stream_id=1, log_id=LOG, start_lsn=1, until_lsn=LSN_MAX,
                      window_high=LSN_MAX, flags=flags, replication=2, filter_version=1)
        streams = [ServerReadStream(start, 0), ServerReadStream(start, 0)]
        results: list[tuple[dict, list]] = [({}, []), ({}, [])]
        for step, (kind, arg, *rest) in enumerate(ops):
            def put(lsns, fl=0, wave=1, tag=b"", step=step):
                n = len(lsns)
                pls = [b"" if fl & (1 << 6) else b"r%d%s" % (x, tag) for x in lsns]
                offs = np.zeros(n + 1, np.uint64)
                np.cumsum([len(p) for p in pls], out=offs[1:])
                cs = np.array([[(x + step) % 3, (x + step + 1) % 3] for x in lsns], np.int16)
                db.write_records(LOG, np.array(lsns, np.uint64),
                                 np.full(n, T0 + step, np.int64), np.full(n, fl, np.uint32),
                                 cs, b"".join(pls), offs, np.full(n, wave, np.uint32))
                written.extend(lsns)

            if kind == "append":
                lsns = []
                for _ in range(arg):
                    esn += rest[0]
                    lsns.append((epoch << 32) | esn)
                put(lsns)
            elif kind == "epoch":
                epoch, esn = epoch + 1, 0
            elif written and kind in ("rewrite", "plug", "old", "delete", "amend", "trim"):
                lsn = sorted(set(written))[arg % len(set(written))]
                if kind == "rewrite":
                    put([lsn], fl=1 << 13, wave=9, tag=b"!")
                elif kind == "plug":
                    put([lsn + 1] if lsn + 1 not in written else [lsn], fl=(1 << 6) | (1 << 13))
                elif kind == "old":
                    put([max(lsn - 1, 1)], tag=b"old")
                elif kind == "delete":
                    db.delete_records(LOG, [lsn])
                elif kind == "amend":
                    db.amend_records(LOG, [lsn], [1 << 13], [9], [[2, 1]])
                    db.amend_records(LOG, [lsn], [0], [1], [[2, 1]])
                else:
                    db.trim(LOG, lsn)
            tail = db.tail(LOG)
            base = db.cache.start(LOG) or 1
            for a, b, n, nb in ranges:
                lo, hi = base + a, base + a + b
                got = db.cache.read(LOG, lo, hi, max_records=n, max_bytes=nb)
                if got is not None:
                    want = db.read_records(LOG, lo, hi, max_records=n, max_bytes=nb)
                    assert _rows(got) == _rows(want)
                    if len(want) == n or len(got) < len(want):
                        assert got.next_lsn == want.next_lsn
            for s, src, res in zip(streams, (db, plain), results, strict=True):
                _delivered(s.step(src, tail, db.trim_point(LOG)), *res)
        (seen_c, cov_c), (seen_p, cov_p) = results
        event(f"cache reads: {min(streams[0].stats.cache_reads, 3)}")
        assert seen_c == seen_p
        for cov in (cov_c, cov_p):  # records and gaps in LSN order, none twice
            for (_, h), (lo2, _) in zip(cov, cov[1:], strict=False):
                assert lo2 > h
        # Both streams went as far: the cache changed what they read, not where they are.
        assert streams[0].next_lsn == streams[1].next_lsn
