"""The node's failure detector (sans-I/O) and the group commit's STORE preparation."""

from __future__ import annotations

import numpy as np
import pytest

from ldcore.checksum import crc32c
from logdevice.errors import E
from logdevice.node.roles.failure_detector_role import FailureDetector
from logdevice.node.roles.group_commit import StoreJob, merge, prepare
from logdevice.protocol import RecordFlag, Store, pack_payloads

DEAD = 1.5


def fd(now: float = 0.0) -> FailureDetector:
    return FailureDetector(0, range(4), DEAD, now, fast_dead_after=0.3)


def ticks(d: FailureDetector, start: float, end: float) -> tuple[set[int], set[int]]:
    """Tick every 0.1 s from ``start`` to ``end`` (as the node does); all changes."""
    down: set[int] = set()
    up: set[int] = set()
    t = start
    while t <= end + 1e-9:
        dn, u = d.tick(t)
        down |= dn
        up |= u
        t += 0.1
    return down, up


def test_start_presumes_everyone_alive_for_one_grace_period():
    d = fd()
    assert d.live == {0, 1, 2, 3}
    assert d.heard(0.0) == {0}
    d.on_heartbeat(1, 7, 0.5)
    assert d.tick(1.0) == (set(), set())
    down, up = d.tick(1.6)  # 2 and 3 never spoke: dead when the grace period ends
    assert down == {2, 3} and up == set()
    assert d.live == {0, 1}


def test_silence_kills_and_a_heartbeat_revives():
    d = fd()
    for n in (1, 2, 3):
        d.on_heartbeat(n, 1, 0.1)
    d.tick(1.0)
    for t in (1.2, 1.4, 1.6, 1.8):
        d.on_heartbeat(1, 1, t)
        d.on_heartbeat(2, 1, t)
    assert d.tick(1.7) == ({3}, set())
    assert d.on_heartbeat(3, 1, 1.9) == (set(), {3})
    assert 3 in d.live and d.heard(1.9) == {0, 1, 2, 3}


def test_dead_for_counts_from_leaving_the_live_set():
    d = fd()
    for n in (1, 2, 3):
        d.on_heartbeat(n, 1, 0.1)
    for t in (0.5, 1.0, 1.5, 2.0, 2.5):
        d.on_heartbeat(1, 1, t)
        d.on_heartbeat(2, 1, t)
        d.tick(t)
    # dead from the tick at 2.0, the first after 1.5 s of silence
    assert d.dead_for(2.5) == {3: pytest.approx(0.5)}
    d.on_heartbeat(3, 1, 2.6)
    assert d.dead_for(2.6) == {}


def test_stale_generation_is_ignored():
    d = fd()
    d.on_heartbeat(1, 5, 0.1)
    ticks(d, 0.2, 2.0)
    assert 1 not in d.live
    assert d.on_heartbeat(1, 4, 2.1) == (set(), set())  # from before a restart
    assert d.on_heartbeat(1, 6, 2.2) == (set(), {1})


def test_a_broken_link_kills_faster():
    d = fd()
    for n in (1, 2, 3):
        d.on_heartbeat(n, 1, 0.9)
    d.tick(1.0)
    d.on_link_change(2, False)
    assert d.tick(1.1) == (set(), set())
    assert d.tick(1.25) == ({2}, set())  # 0.35 s of silence with the link down
    assert ticks(d, 1.3, 2.3) == (set(), set())
    assert ticks(d, 2.4, 2.5) == ({1, 3}, set())  # the others only after DEAD
    d.on_link_change(2, True)
    assert d.on_heartbeat(2, 2, 2.6) == (set(), {2})


def test_own_stall_does_not_blame_the_others():
    d = fd()
    for n in (1, 2, 3):
        d.on_heartbeat(n, 1, 0.5)
    d.tick(0.6)
    assert d.tick(10.0) == (set(), set())  # we were paused for 9 s
    d.on_heartbeat(1, 1, 10.1)
    d.on_heartbeat(1, 1, 11.0)
    assert ticks(d, 10.1, 11.4) == (set(), set())  # a new grace period
    assert ticks(d, 11.5, 11.7) == ({2, 3}, set())


def test_unknown_nodes_are_ignored():
    d = fd()
    assert d.on_heartbeat(42, 1, 0.1) == (set(), set())
    assert 42 not in d.live


# -- group commit preparation --------------------------------------------------------------

def _store(lsns, payloads, checksums=None) -> Store:
    n = len(lsns)
    offsets, buf = pack_payloads(payloads)
    flags = np.zeros(n, np.uint32)
    if checksums is not None:
        flags[:] = int(RecordFlag.CHECKSUM)
    return Store(request_id=1, log_id=1, epoch=1, lsns=np.array(lsns, np.uint64),
                 timestamps=np.arange(n, dtype=np.int64), flags=flags,
                 waves=np.arange(1, n + 1, dtype=np.uint32),
                 copysets=np.tile(np.int16([0, 1]), (n, 1)), payload_offsets=offsets,
                 payloads=buf, checksums=np.array(checksums or [], np.uint32))


def _payloads(cols) -> list[bytes]:
    buf = bytes(memoryview(cols[4]).cast("B"))
    offs = np.asarray(cols[5]).tolist()
    return [buf[a:b] for a, b in zip(offs, offs[1:], strict=False)]


def test_prepare_passes_a_clean_store_through():
    msg = _store([1, 2, 3], [b"a", b"bb", b"ccc"])
    job = StoreJob(None, msg)
    cols = prepare(job)
    assert cols is not None and cols[0] is msg.lsns and job.statuses is None


def test_prepare_drops_bad_checksums_only():
    msg = _store([1, 2, 3], [b"a", b"bb", b"ccc"], [crc32c(b"a"), 0, crc32c(b"ccc")])
    job = StoreJob(None, msg)
    cols = prepare(job)
    assert job.statuses.tolist() == [E.OK, E.CHECKSUM_MISMATCH, E.OK]
    assert cols[0].tolist() == [1, 3] and _payloads(cols) == [b"a", b"ccc"]
    assert cols[6].tolist() == [1, 3]  # waves follow their records


def test_prepare_sorts_and_keeps_the_last_copy_of_an_lsn():
    msg = _store([5, 2, 5, 9], [b"old", b"two", b"new", b"nine"])
    cols = prepare(StoreJob(None, msg))
    assert cols[0].tolist() == [2, 5, 9]
    assert _payloads(cols) == [b"two", b"new", b"nine"]
    assert cols[6].tolist() == [2, 3, 4]


def test_prepare_empty_store():
    assert prepare(StoreJob(None, _store([], []))) is None
    msg = _store([1], [b"x"], [0])
    job = StoreJob(None, msg)
    assert prepare(job) is None and job.statuses.tolist() == [E.CHECKSUM_MISMATCH]


def test_merge_stores_of_one_log():
    a = prepare(StoreJob(None, _store([1, 4], [b"one", b"four-old"])))
    b = prepare(StoreJob(None, _store([2, 4, 7], [b"two", b"four-new", b"seven"])))
    cols = merge([a, b])
    assert cols[0].tolist() == [1, 2, 4, 7]
    assert _payloads(cols) == [b"one", b"two", b"four-new", b"seven"]
    assert cols[6].tolist() == [1, 1, 2, 3]
    c = prepare(StoreJob(None, _store([10], [b"ten"])))
    cols = merge([a, c])
    assert cols[0].tolist() == [1, 4, 10] and _payloads(cols) == [b"one", b"four-old", b"ten"]
    assert cols[3].shape == (3, 2)


def test_held_dead_by_counts_live_peers_whose_view_leaves_a_node_out():
    d = fd()
    d.on_heartbeat(1, 1, 0.1, alive=[0, 1, 2])
    d.on_heartbeat(2, 1, 0.1, alive=[1, 2])
    d.on_heartbeat(3, 1, 0.1, alive=[0, 1, 2, 3])
    # 0 is live here; peer 2 leaves it out
    assert d.held_dead_by(0) == 1
    for t in (0.5, 1.0, 1.5, 2.0):
        d.on_heartbeat(1, 1, t, alive=[0, 1, 2])
        d.on_heartbeat(2, 1, t, alive=[0, 1, 2])
        d.tick(t)
    # 3 is silent: dead here, and in the views of 1 and 2; its own stale view does not count
    assert 3 not in d.live and d.held_dead_by(3) == 3
    assert d.held_dead_by(1) == 0
