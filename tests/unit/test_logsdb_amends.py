"""Amending copies in LogsDB (real RocksDB): new flags and copyset, payload untouched,
seen by every read path (range reads, point reads, header-only reads, the copyset index),
across partitions and reopen; a copy written since (a later wave, recovery) is never
amended, and writing or deleting a record drops its amendment."""

import numpy as np
import pytest

from logdevice.errors import E, LogDeviceError
from logdevice.storage.flags import FLAG_DRAINED, FLAG_WRITTEN_BY_RECOVERY
from logdevice.storage.logsdb import LogsDB

MIN = 60_000
T0 = 1_700_000_000_000


def write(db, lsns, *, wave=1, flags=0, cs=(0, 1, 2), ts=T0, tag=b"p", sticky=False):
    lsns = np.asarray(lsns, np.uint64)
    n = len(lsns)
    payloads = [tag + b"-%d-" % int(x) + b"x" * (int(x) % 50) for x in lsns]
    offsets = np.zeros(n + 1, np.uint64)
    np.cumsum([len(p) for p in payloads], out=offsets[1:])
    db.write_records(1, lsns, np.full(n, ts, np.int64) if np.isscalar(ts) else ts,
                     np.full(n, flags, np.uint32), np.tile(np.array([cs], np.int16), (n, 1)),
                     b"".join(payloads), offsets, np.full(n, wave, np.uint32),
                     sticky_block=sticky)
    return dict(zip(lsns.tolist(), payloads, strict=True))


def amend(db, lsns, cs, *, wave=1, flags=0):
    n = len(lsns)
    return db.amend_records(1, np.asarray(lsns, np.uint64), np.full(n, flags, np.uint32),
                            np.full(n, wave, np.uint32),
                            np.tile(np.array([cs], np.int16), (n, 1)))


def copysets(rb):
    return {int(x): tuple(int(c) for c in row if c >= 0)
            for x, row in zip(rb.lsns, rb.copysets, strict=True)}


def csi_of(db, lo=1, hi=10_000):
    csi = db.read_csi(1, lo, hi)
    return {int(x): (int(f), tuple(int(c) for c in row if c >= 0))
            for x, f, row in zip(csi.lsns, csi.flags, csi.copysets, strict=True)}


@pytest.fixture(params=[True, False], ids=["csi_ranges", "csi_singles"])
def db(tmp_path, request):
    with LogsDB(tmp_path / "db", csi_ranges=request.param) as store:
        yield store


def test_amended_copies_keep_their_payload_and_every_read_path_sees_the_copyset(db):
    payloads = write(db, range(1, 201), sticky=True)
    got = amend(db, range(50, 151, 2), (0, 5, 2), flags=FLAG_DRAINED)
    assert got.all()
    amended = set(range(50, 151, 2))

    def want(lsn):
        return ((0, 5, 2), FLAG_DRAINED) if lsn in amended else ((0, 1, 2), 0)

    for rb in (db.read_records(1, 1, max_records=1000, max_bytes=0),
               db.read_records(1, 1, payloads=False, max_records=1000),
               db.read_records_at(1, np.arange(1, 201, 3, dtype=np.uint64)),
               db.read_records_at(1, np.array([60, 61, 150], np.uint64), payloads=False)):
        for i, lsn in enumerate(rb.lsns.tolist()):
            assert (copysets(rb)[lsn], int(rb.flags[i])) == want(lsn), lsn
            assert int(rb.waves[i]) == 1
        if len(rb.payloads):
            assert all(bytes(rb.payload(i)) == payloads[x]
                       for i, x in enumerate(rb.lsns.tolist()))
            assert rb.checksum_ok().all()
    csi = csi_of(db)
    assert len(csi) == 200
    assert all((csi[x][1], csi[x][0]) == want(x) for x in csi)
    # Small reads cut mid-way see the amendments of what they return, no more.
    rb = db.read_records(1, 49, max_records=3)
    assert copysets(rb) == {49: (0, 1, 2), 50: (0, 5, 2), 51: (0, 1, 2)}


def test_amendments_survive_reopen_and_a_second_amendment_replaces_the_first(tmp_path):
    with LogsDB(tmp_path / "db") as db:
        payloads = write(db, range(1, 11))
        assert amend(db, [3, 4], (0, 5, 2)).all()
        assert amend(db, [4], (6, 5, 2)).all()
    with LogsDB(tmp_path / "db") as db:
        rb = db.read_records(1, 1)
        assert copysets(rb) == {x: {3: (0, 5, 2), 4: (6, 5, 2)}.get(x, (0, 1, 2))
                                for x in range(1, 11)}
        assert [bytes(rb.payload(i)) for i in range(10)] == [payloads[x] for x in range(1, 11)]
        assert csi_of(db)[4] == (0, (6, 5, 2))


def test_a_newer_copy_is_never_amended_by_a_stale_amendment(db):
    write(db, range(1, 21), wave=1)
    write(db, [5, 6], wave=2, cs=(0, 1, 3), tag=b"w2")  # a later wave
    write(db, [7], wave=9, flags=FLAG_WRITTEN_BY_RECOVERY, cs=(0, 1, 4), tag=b"rec")
    # An amendment computed from the wave-1 copies: records 5, 6 and 7 are not those.
    got = amend(db, range(4, 9), (0, 5, 2), wave=1)
    assert got.tolist() == [True, False, False, False, True]
    rb = db.read_records(1, 4, 8)
    assert copysets(rb) == {4: (0, 5, 2), 5: (0, 1, 3), 6: (0, 1, 3), 7: (0, 1, 4),
                            8: (0, 5, 2)}
    assert bytes(rb.payload(1)).startswith(b"w2") and bytes(rb.payload(3)).startswith(b"rec")
    assert {x: v[1] for x, v in csi_of(db, 4, 8).items()} == copysets(rb)
    # The recovery bit is part of the version: wave 9 without it is another copy.
    assert not amend(db, [7], (0, 5, 2), wave=9).any()
    assert amend(db, [7], (0, 5, 2), wave=9, flags=FLAG_WRITTEN_BY_RECOVERY).all()
    # LSNs not held are not amended (and create nothing).
    assert not amend(db, [30, 31], (0, 5, 2)).any()
    assert db.read_records_at(1, np.array([30, 31], np.uint64)).lsns.tolist() == []


def test_writing_a_record_again_drops_its_amendment(db):
    write(db, range(1, 11), wave=1)
    assert amend(db, range(1, 11), (0, 5, 2)).all()
    # The same wave written again (a retried STORE): the copy written last wins.
    write(db, [2], wave=1, cs=(0, 1, 3), tag=b"again")
    # Rewritten with a later timestamp: it moves to a new partition.
    write(db, [3], wave=2, cs=(0, 1, 4), ts=T0 + 20 * MIN, tag=b"moved")
    assert len(db.partitions()) == 2
    rb = db.read_records(1, 1, 10)
    cs = copysets(rb)
    assert (cs[1], cs[2], cs[3], cs[4]) == ((0, 5, 2), (0, 1, 3), (0, 1, 4), (0, 5, 2))
    assert {x: v[1] for x, v in csi_of(db).items()} == cs
    # Amending the moved copy finds it in its new partition.
    assert amend(db, [3], (7, 1, 4), wave=2).all()
    assert copysets(db.read_records_at(1, np.array([3], np.uint64)))[3] == (7, 1, 4)
    # A deleted record takes its amendment along; written again, it has none.
    assert db.delete_records(1, [4]) == 1
    write(db, [4], wave=1, cs=(0, 1, 2), tag=b"back")
    assert copysets(db.read_records(1, 4, 4))[4] == (0, 1, 2)


def test_trimmed_records_are_not_amended_and_bad_input_is_invalid_param(db):
    write(db, range(1, 11))
    db.trim(1, 5)
    assert amend(db, [4, 5, 6], (0, 5, 2)).tolist() == [False, False, True]
    with pytest.raises(LogDeviceError) as info:
        amend(db, [6, 5], (0, 5, 2))
    assert info.value.status == E.INVALID_PARAM
    with pytest.raises(LogDeviceError) as info:
        db.amend_records(1, np.array([6], np.uint64), np.zeros(2, np.uint32),
                         np.ones(1, np.uint32), np.zeros((1, 3), np.int16))
    assert info.value.status == E.INVALID_PARAM
