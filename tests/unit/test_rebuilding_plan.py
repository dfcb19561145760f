"""The donor rule and the amended copysets of rebuilding (pure functions)."""

import numpy as np
import pytest

from logdevice.epochstore import (
    SHARD_ABORT_REBUILD,
    SHARD_ACK_REBUILT,
    SHARD_IS_REBUILT,
    SHARD_NEEDS_REBUILD,
    SHARD_UNRECOVERABLE,
    RebuildingSet,
    ShardStatusFold,
)
from logdevice.epochstore import (
    AuthoritativeStatus as A,
)
from logdevice.rebuilding.plan import EpochPlacement, amend_copysets, destinations, donor_mask
from logdevice.rebuilding.throttle import ByteRate
from logdevice.sequencer.copyset import satisfies
from logdevice.storage.flags import FLAG_DRAINED

CS = np.array([[0, 1, 2], [1, 0, 3], [2, 3, 4], [3, 1, 0], [1, 2, 3]], np.int16)
NOFLAGS = np.zeros(len(CS), np.uint32)


def rset(lost=(), draining=()):
    return RebuildingSet(version=7, lost=frozenset(lost), draining=frozenset(draining))


def test_lost_node_records_have_exactly_one_donor_the_first_live_member():
    s = rset(lost=[1])
    masks = {me: donor_mask(CS, NOFLAGS, me, s) for me in range(5)}
    # rows naming N1: 0 (0 donates), 1 (0: N1 is first but lost), 3 (3), 4 (2)
    assert np.flatnonzero(masks[0]).tolist() == [0, 1]
    assert np.flatnonzero(masks[3]).tolist() == [3]
    assert np.flatnonzero(masks[2]).tolist() == [4]
    assert not masks[1].any() and not masks[4].any()  # the lost node donates nothing
    total = sum(m.astype(int) for m in masks.values())
    assert total.tolist() == [1, 1, 0, 1, 1]


def test_drained_node_moves_its_own_records_and_others_leave_them():
    s = rset(draining=[1])
    assert np.flatnonzero(donor_mask(CS, NOFLAGS, 1, s)).tolist() == [0, 1, 3, 4]
    for me in (0, 2, 3, 4):
        assert not donor_mask(CS, NOFLAGS, me, s).any()
    flags = NOFLAGS.copy()
    flags[1] = FLAG_DRAINED  # moved already
    assert np.flatnonzero(donor_mask(CS, flags, 1, s)).tolist() == [0, 3, 4]


def test_drain_and_loss_together_the_drained_member_donates_the_shared_rows():
    s = rset(lost=[0], draining=[3])
    # row 1 [1,0,3] and row 3 [3,1,0] name the drained N3: N3 moves them; row 0
    # [0,1,2] only the lost N0: N1 (first live member) copies it.
    assert np.flatnonzero(donor_mask(CS, NOFLAGS, 3, s)).tolist() == [1, 2, 3, 4]
    assert np.flatnonzero(donor_mask(CS, NOFLAGS, 1, s)).tolist() == [0]


def test_amended_copysets_replace_only_rebuilding_members_and_keep_the_property():
    lsns = (np.uint64(3) << np.uint64(32)) + np.arange(1, 1001, dtype=np.uint64)
    cs = np.tile(np.array([[0, 1, 2]], np.int16), (1000, 1))
    where = EpochPlacement(nodeset=(0, 1, 2, 3, 4, 5), replication={"node": 3},
                           excluded=frozenset({5}))
    new, placed = amend_copysets(lsns, cs, rset(lost=[1]), lambda epoch: where)
    assert placed.all()
    assert (new[:, 0] == 0).all() and (new[:, 2] == 2).all()
    assert set(new[:, 1].tolist()) == {3, 4}  # not N5 (excluded); spread by LSN
    again, _ = amend_copysets(lsns, cs, rset(lost=[1]), lambda epoch: where)
    assert (again == new).all()  # a restarted donor sends to the same nodes


def test_amended_copysets_honour_failure_domains():
    locs = {0: "r.d.c.row.a", 1: "r.d.c.row.b", 2: "r.d.c.row.a", 3: "r.d.c.row.b",
            4: "r.d.c.row.c"}
    where = EpochPlacement(nodeset=(0, 1, 2, 3, 4), replication={"rack": 2, "node": 2},
                           locations=locs)
    lsns = np.arange(1, 201, dtype=np.uint64)
    cs = np.tile(np.array([[0, 1]], np.int16), (200, 1))
    new, placed = amend_copysets(lsns, cs, rset(lost=[1]), lambda e: where)
    assert placed.all()
    assert set(new[:, 1].tolist()) == {3, 4}  # never N2: same rack as N0
    assert all(satisfies(row, {"rack": 2, "node": 2}, locs) for row in new.tolist())


def test_no_eligible_node_is_reported_not_guessed():
    where = EpochPlacement(nodeset=(0, 1, 2), replication={"node": 3})
    lsns = np.arange(1, 4, dtype=np.uint64)
    cs = np.array([[0, 1, 2]] * 3, np.int16)
    new, placed = amend_copysets(lsns, cs, rset(lost=[2]), lambda e: where)
    assert not placed.any() and (new == cs).all()


def test_destinations_split_new_copies_from_amended_ones():
    old = np.array([[0, 1], [1, 4], [0, 1]], np.int16)
    new = np.array([[0, 3], [3, 4], [0, 4]], np.int16)
    copies, amends = destinations(new, old, me=0)
    assert {k: v.tolist() for k, v in copies.items()} == {3: [0, 1], 4: [2]}
    assert {k: v.tolist() for k, v in amends.items()} == {4: [1]}


def test_a_record_keeps_its_new_node_when_the_set_grows():
    """Rendezvous choice: a donor restarted after a second loss sends each record to the
    node it chose before, unless that node is the one lost."""
    lsns = np.arange(1, 2001, dtype=np.uint64)
    cs = np.tile(np.array([[0, 1, 2]], np.int16), (2000, 1))
    where = EpochPlacement(nodeset=tuple(range(8)), replication={"node": 3})
    first, _ = amend_copysets(lsns, cs, rset(lost=[1]), lambda e: where)
    second, ok = amend_copysets(lsns, cs, rset(lost=[1, 2]), lambda e: where)
    assert ok.all()
    kept = first[:, 1] == second[:, 1]
    assert kept.all()  # N2's loss moved no record's replacement for N1
    assert not np.isin(second[:, 1:], [1, 2]).any()
    assert len(set(second[:, 2].tolist())) == 5  # spread over the 5 candidates


def test_byte_rate_paces_to_the_rate():
    r = ByteRate(1000, now=0.0)
    assert r.take(1000, 0.0) == 0.0  # one second's worth saved up
    assert r.take(500, 0.0) == pytest.approx(0.5)
    assert r.take(500, 1.0) == pytest.approx(0.0)
    assert ByteRate(0, 0.0).take(10**9, 0.0) == 0.0


def ev(kind, node=1, **kw):
    return {"type": kind, "node": node, **kw}


def test_set_restarts_when_a_second_node_fails_mid_way():
    f = ShardStatusFold().apply_all([ev(SHARD_NEEDS_REBUILD, 1, unrecoverable=True,
                                        donors=[0, 1, 2, 3])])
    s1 = f.rebuilding_set()
    assert s1.lost == {1} and s1.donors == {0, 2, 3}
    f.apply(ev(SHARD_IS_REBUILT, 1, donor=0, set_version=s1.version))
    f.apply(ev(SHARD_NEEDS_REBUILD, 2, unrecoverable=True, donors=[0, 1, 2, 3]))
    s2 = f.rebuilding_set()
    assert s2.version > s1.version and s2.lost == {1, 2} and s2.donors == {0, 3}
    assert s2.done == frozenset()  # N0 must go again: the set changed
    f.apply(ev(SHARD_IS_REBUILT, 1, donor=3, set_version=s1.version))  # stale: ignored
    f.apply(ev(SHARD_IS_REBUILT, 1, donor=0, set_version=s2.version))
    assert f.status(1) == A.UNDERREPLICATION
    f.apply(ev(SHARD_IS_REBUILT, 2, donor=3, set_version=s2.version))
    assert f.status(1) == f.status(2) == A.AUTHORITATIVE_EMPTY
    assert not f.rebuilding_set()
    f.apply(ev(SHARD_ACK_REBUILT, 1))
    assert f.status(1) == A.FULLY_AUTHORITATIVE and f.status(2) == A.AUTHORITATIVE_EMPTY


def test_drained_node_serves_until_done_then_is_empty():
    f = ShardStatusFold().apply_all([ev(SHARD_NEEDS_REBUILD, 2, drain=True, donors=[0, 1, 2])])
    v = f.view(2)
    assert v.status == A.FULLY_AUTHORITATIVE and v.drained
    assert v.rebuilding.draining == {2} and v.rebuilding.donors == {0, 1, 2}
    for d in (0, 1, 2):
        f.apply(ev(SHARD_IS_REBUILT, 2, donor=d, set_version=v.rebuilding.version))
    assert f.view(2).status == A.AUTHORITATIVE_EMPTY and f.view(2).drained
    # A drain turned into a loss (the node died): the others re-replicate its records.
    g = ShardStatusFold().apply_all([ev(SHARD_NEEDS_REBUILD, 2, drain=True, donors=[0, 1, 2]),
                                     ev(SHARD_UNRECOVERABLE, 2)])
    assert g.rebuilding_set().lost == {2} and g.status(2) == A.UNDERREPLICATION
    h = ShardStatusFold().apply_all([ev(SHARD_NEEDS_REBUILD, 2), ev(SHARD_ABORT_REBUILD, 2)])
    assert not h.rebuilding_set() and h.status(2) == A.FULLY_AUTHORITATIVE


def test_a_stale_copy_never_replaces_a_newer_one():
    from logdevice.rebuilding.plan import newer_or_equal
    from logdevice.storage.flags import FLAG_WRITTEN_BY_RECOVERY as REC

    flags = np.array([0, 0, 0, REC, 0], np.uint32)
    waves = np.array([1, 2, 3, 7, 9], np.uint32)
    held_flags = np.array([0, 0, 0, 0, REC], np.uint32)
    held_waves = np.array([2, 2, 1, 9, 7], np.uint32)
    assert newer_or_equal(flags, waves, held_flags, held_waves).tolist() == [
        False, True, True, True, False]
