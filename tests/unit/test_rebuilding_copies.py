"""What a node does with rebuilt copies and amendments (real LogsDB), and how rebuilding
yields to appends (``AppendYield``, time passed in)."""

import numpy as np
import pytest

from logdevice.rebuilding.copies import AMEND_SLICE, amend_held, write_copies
from logdevice.rebuilding.throttle import AppendYield
from logdevice.storage.batch import RecordBatch
from logdevice.storage.flags import FLAG_WRITTEN_BY_RECOVERY
from logdevice.storage.logsdb import LogsDB

T0 = 1_700_000_000_000


def batch(lsns, *, wave=1, flags=0, cs=(0, 1, 2), tag=b"p"):
    lsns = np.asarray(lsns, np.uint64)
    n = len(lsns)
    payloads = [tag + b"-%d" % int(x) for x in lsns]
    offsets = np.zeros(n + 1, np.uint64)
    np.cumsum([len(p) for p in payloads], out=offsets[1:])
    return RecordBatch(1, lsns, np.full(n, T0, np.int64), np.full(n, flags, np.uint32),
                       np.full(n, wave, np.uint32), np.tile(np.array([cs], np.int16), (n, 1)),
                       np.zeros(n, np.uint32), np.frombuffer(b"".join(payloads), np.uint8),
                       offsets, 0)


def held(db, lsns):
    rb = db.read_records_at(1, np.asarray(lsns, np.uint64))
    return {int(x): (int(rb.waves[i]), tuple(int(c) for c in rb.copysets[i] if c >= 0),
                     bytes(rb.payload(i)))
            for i, x in enumerate(rb.lsns.tolist())}


@pytest.fixture
def db(tmp_path):
    with LogsDB(tmp_path / "db") as store:
        yield store


def test_amendments_touch_only_the_donors_version_and_ask_for_what_is_missing(db):
    write_copies(db, batch(range(1, 5), wave=2))      # 1-4: the donor's version
    write_copies(db, batch([5], wave=1, tag=b"old"))   # older than the donor's
    write_copies(db, batch([6], wave=3, tag=b"new"))   # newer: a later wave
    write_copies(db, batch([7], wave=9, flags=FLAG_WRITTEN_BY_RECOVERY, tag=b"rec"))
    donor = batch(range(1, 9), wave=2, cs=(0, 5, 2))   # 8: not held at all
    need = amend_held(db, 1, donor.lsns, donor.flags, donor.waves, donor.copysets)
    assert need.tolist() == [5, 8]
    got = held(db, range(1, 9))
    assert {x: got[x][1] for x in got} == {1: (0, 5, 2), 2: (0, 5, 2), 3: (0, 5, 2),
                                           4: (0, 5, 2), 5: (0, 1, 2), 6: (0, 1, 2),
                                           7: (0, 1, 2)}
    assert [got[x][2] for x in (1, 5, 6, 7)] == [b"p-1", b"old-5", b"new-6", b"rec-7"]
    # The full copies the donor then sends replace the older copy only.
    write_copies(db, donor.take(np.array([4, 5, 6, 7])))
    got = held(db, range(1, 9))
    assert (got[5], got[6][2], got[7][2], got[8]) == (
        (2, (0, 5, 2), b"p-5"), b"new-6", b"rec-7", (2, (0, 5, 2), b"p-8"))


def test_amendments_in_slices_cover_every_record(db):
    n = 2 * AMEND_SLICE + 7
    write_copies(db, batch(range(1, n + 1)))
    donor = batch(range(1, n + 1), cs=(3, 1, 2))
    assert not len(amend_held(db, 1, donor.lsns, donor.flags, donor.waves, donor.copysets))
    csi = db.read_csi(1, 1, max_entries=n + 1)
    assert len(csi) == n and bool((csi.copysets[:, 0] == 3).all())


def test_append_yield_slices_and_pauses_only_while_appends_come_in():
    y = AppendYield(0.25, now=0.0, quiet_s=0.25, slice_bytes=1000)
    y.saw(0, 0.0)  # the first reading is the starting point, not activity
    assert not y.active(0.0)
    assert y.slice_bytes(10**6, 0.0) == 10**6 and y.pause(0.1, 0.0) == 0.0
    y.saw(5, 1.0)  # STOREs were written
    assert y.active(1.0) and y.active(1.2)
    assert y.slice_bytes(10**6, 1.1) == 1000
    assert y.pause(0.01, 1.1) == pytest.approx(0.03)  # 25 % of the time: work 1, wait 3
    assert y.pause(10.0, 1.1) == y.max_pause_s
    assert not y.active(1.3)  # quiet again: full speed
    y.saw(5, 1.3)
    assert not y.active(1.3) and y.pause(0.01, 1.3) == 0.0
    off = AppendYield(1.0, now=0.0)
    off.saw(0, 0.0)
    off.saw(9, 0.1)
    assert not off.active(0.1) and off.slice_bytes(10**6, 0.1) == 10**6
