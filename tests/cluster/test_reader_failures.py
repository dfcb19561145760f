"""Readers through failures, against real node processes: a node killed or paused
(SIGSTOP) in the middle of a read, a copy corrupted on disk, nodes wiped (data loss
reported for exactly the records that lost every copy, and not for records whose last
copy sits on a node that is merely down)."""

from __future__ import annotations

import shutil
import time

import logdevice as ld
import numpy as np
import pytest
from logdevice.epochstore import AuthoritativeStatus, open_epoch_store
from logdevice.storage import keys as K
from logdevice.storage.logsdb import LogsDB

from tests.cluster.conftest import read_back

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240)]

N_RECORDS = 3000


def write(client, log_id: int, n: int, burst: int = 200) -> list[int]:
    lsns = [client.append(log_id, b"p-0")]
    for a in range(1, n, burst):
        futs = [client.append_async(log_id, b"p-%d" % i) for i in range(a, min(n, a + burst))]
        lsns += [f.result(30) for f in futs]
    return lsns


def expected(lsns: list[int]) -> list[tuple[int, bytes]]:
    return [(lsn, b"p-%d" % i) for i, lsn in enumerate(lsns)]


def drain(reader, items: list, until: int, timeout: float = 90.0) -> list:
    """Read until the item covering ``until`` arrived."""
    deadline = time.monotonic() + timeout
    while not items or _end(items[-1]) < until:
        assert time.monotonic() < deadline, f"stuck after {items[-1] if items else None}"
        items += reader.read(1000, timeout=1.0)
    return items


def _end(item) -> int:
    return item.hi if isinstance(item, ld.GapRecord) else item.lsn


def split(items):
    recs = [(i.lsn, bytes(i.payload)) for i in items if isinstance(i, ld.DataRecord)]
    gaps = [i for i in items if isinstance(i, ld.GapRecord)]
    return recs, gaps


# ---------------------------------------------------------------------------- kill, pause


@pytest.fixture(scope="module")
def cluster(module_cluster):
    return module_cluster(nodes=4, replication=2, logs=range(1, 11))


@pytest.fixture(scope="module")
def client(cluster):
    with ld.Client(cluster.config_path, timeout=20.0) as c:
        yield c


@pytest.fixture(scope="module")
def written(client):
    return write(client, 1, N_RECORDS)


def read_with_failure(client, lsns, scd: bool, fail, options=None):
    """Read log 1 slowly (small window and queue); ``fail()`` after a third of it."""
    with client.create_reader(buffer_size=64, max_buffered_records=100,
                              **(options or {})) as r:
        if not scd:
            r.force_no_single_copy_delivery()
        r.start_reading(1, lsns[0], lsns[-1])
        items: list = []
        while len(items) < N_RECORDS // 3:
            items += r.read(100, timeout=10)
        fail()
        drain(r, items, lsns[-1])
        stats = r.stats
    return items, stats


@pytest.mark.parametrize("scd", [True, False], ids=["scd", "all-send-all"])
def test_node_killed_during_read(cluster, client, written, scd):
    victim = 1 if scd else 2
    try:
        items, _ = read_with_failure(client, written, scd, lambda: cluster.kill(victim))
    finally:
        cluster.start(victim)
    recs, gaps = split(items)
    assert gaps == []
    assert recs == expected(written)  # every record once, in order


@pytest.mark.parametrize("scd", [True, False], ids=["scd", "all-send-all"])
def test_node_paused_during_read(cluster, client, written, scd):
    victim = 3 if scd else 0
    try:
        items, _ = read_with_failure(client, written, scd, lambda: cluster.pause(victim),
                                     {"scd_timeout": 0.5})
    finally:
        cluster.resume(victim)
    recs, gaps = split(items)
    assert gaps == []
    assert recs == expected(written)


# ---------------------------------------------------------------------------- corruption


def corrupt(cluster, node: int, log_id: int, lsns: list[int]) -> None:
    """Flip the last payload byte of the stored copies of ``lsns`` on ``node`` (stopped)."""
    with LogsDB(cluster.logsdb_path(node)) as db:
        for lsn in lsns:
            done = False
            for pid, _ in db._dir.ranges(log_id, lsn, lsn):
                key = K.data_key(log_id, lsn)
                value = db._db.get(key, db._cf(pid))
                if value is not None:
                    db._db.put(key, value[:-1] + bytes([value[-1] ^ 0x5A]), db._cf(pid),
                               sync=True)
                    done = True
            assert done, f"N{node} holds no copy of {lsn}"
        rb = db.read_records_at(log_id, np.array(lsns, dtype=np.uint64))
        assert not rb.checksum_ok().any()  # the stored checksums no longer match


def test_corrupted_copy_is_never_delivered(local_cluster):
    cluster = local_cluster(nodes=3, replication=2, logs=range(1, 4))
    with ld.Client(cluster.config_path, timeout=20.0) as client:
        lsns = write(client, 1, 1000)
    bad_node = 0
    cluster.stop(bad_node)
    copies = read_back(cluster, [1], [bad_node])
    # Copies this node would ship under single copy delivery (first in the copyset).
    primary = sorted(lsn for (_, lsn), cs in copies.items() if cs[0].copyset[0] == bad_node)
    assert len(primary) > 20
    victims = primary[5:25:4]
    corrupt(cluster, bad_node, 1, victims)
    cluster.start(bad_node)
    with ld.Client(cluster.config_path, timeout=20.0) as client:
        for scd in (True, False):
            with client.create_reader(buffer_size=128) as r:
                if not scd:
                    r.force_no_single_copy_delivery()
                r.start_reading(1, lsns[0], lsns[-1])
                items = list(r)
                stats = r.stats
            recs, gaps = split(items)
            assert gaps == []
            assert recs == expected(lsns)  # the good copies, from the other node
            assert stats.checksum_fail_gaps >= len(victims)


# ---------------------------------------------------------------------------- wiped nodes


def survivors(cluster, log_id: int, nodes) -> set[int]:
    return {lsn for (_, lsn) in read_back(cluster, [log_id], nodes)}


def restart_all(cluster, wiped=(), skip=()) -> None:
    for i in wiped:
        shutil.rmtree(cluster.node_data_dir(i))
    for i in range(cluster.n):
        if i not in skip:
            cluster.start(i)


def test_wiped_nodes_dataloss_exactly_for_lost_records(local_cluster):
    cluster = local_cluster(nodes=4, replication=2, logs=range(1, 4))
    with ld.Client(cluster.config_path, timeout=20.0) as client:
        lsns = write(client, 1, 2000)
    cluster.stop_all()
    wiped = (2, 3)
    kept = survivors(cluster, 1, [0, 1])
    lost = set(lsns) - kept
    assert 100 < len(lost) < 1000  # about 1/6 of the copysets are {N2, N3}
    restart_all(cluster, wiped)
    with open_epoch_store(cluster.config.epoch_store_uri) as store:
        statuses = store.shard_statuses()
    assert statuses == {2: AuthoritativeStatus.UNDERREPLICATION,
                        3: AuthoritativeStatus.UNDERREPLICATION}
    with ld.Client(cluster.config_path, timeout=20.0) as client:
        client.append(1, b"after the restart")  # releases on every node, wiped ones too
        for scd in (True, False):
            with client.create_reader() as r:
                if not scd:
                    r.force_no_single_copy_delivery()
                r.start_reading(1, lsns[0], lsns[-1])
                items = drain(r, [], lsns[-1], timeout=60)
            recs, gaps = split(items)
            assert recs == [(lsn, p) for lsn, p in expected(lsns) if lsn not in lost]
            assert all(g.type == ld.GapType.DATALOSS for g in gaps)
            reported = {x for g in gaps for x in range(g.lo, g.hi + 1)}
            assert reported == lost


def test_wiped_node_does_not_make_a_down_node_look_empty(local_cluster):
    """One node wiped and another down: records whose remaining copy is on the down node
    are not lost, so no DATALOSS may be reported for them: the reader waits, and gets
    them once that node is back (invariant 3)."""
    cluster = local_cluster(nodes=4, replication=2, logs=range(1, 4))
    with ld.Client(cluster.config_path, timeout=20.0) as client:
        lsns = write(client, 1, 1000)
    cluster.stop_all()
    wiped, down = 2, 3
    only_on_down = set(lsns) - survivors(cluster, 1, [0, 1])  # copies on {wiped, down} only
    assert only_on_down
    first_at_risk = min(only_on_down)
    restart_all(cluster, [wiped], skip=[down])
    with ld.Client(cluster.config_path, timeout=20.0) as client, \
            client.create_reader() as r:
        # A new append releases past every old record on every live node, the wiped one
        # included: from then on it answers "nothing here" for all of them.
        client.append(1, b"after the restart")
        r.start_reading(1, lsns[0], lsns[-1])
        items: list = []
        deadline = time.monotonic() + 4.0
        while time.monotonic() < deadline:
            items += r.read(1000, timeout=0.5)
        recs, gaps = split(items)
        assert gaps == []  # nothing is declared lost
        assert [lsn for lsn, _ in recs] == [x for x in lsns if x < first_at_risk]
        cluster.start(down)
        drain(r, items, lsns[-1], timeout=60)
    recs, gaps = split(items)
    assert gaps == []
    assert recs == expected(lsns)


def test_is_log_empty_after_every_node_restarted(local_cluster):
    """After a restart the sequencer's tail starts from the epoch store's tail record
    (no recovery yet), which may be older than what was released: is_log_empty reads."""
    cluster = local_cluster(nodes=3, replication=2, logs=range(1, 4))
    with ld.Client(cluster.config_path, timeout=20.0) as client:
        lsns = write(client, 1, 50)
        assert not client.is_log_empty(1)
        assert client.is_log_empty(2)
    cluster.stop_all()
    for i in range(cluster.n):
        cluster.start(i)
    with ld.Client(cluster.config_path, timeout=20.0) as client:
        assert client.get_tail_lsn(1) < lsns[-1]  # the stale tail this test is about
        assert not client.is_log_empty(1)
        assert client.is_log_empty(2)
        with client.create_reader() as r:
            r.start_reading(1, lsns[0], lsns[-1])
            assert split(list(r)) == (expected(lsns), [])
