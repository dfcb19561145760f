"""Readers through failures, against real node processes: a node killed or paused
(SIGSTOP) in the middle of a read, a copy corrupted on disk, nodes wiped (data loss
reported for exactly the records that lost every copy, and not for records whose last
copy sits on a node that is merely down)."""

from __future__ import annotations

import shutil
import time

import numpy as np
import pytest

import logdevice as ld
from logdevice.epochstore import AuthoritativeStatus, open_epoch_store
from logdevice.storage import keys as K
from logdevice.storage.logsdb import LogsDB
from tests.cluster.conftest import RawClient, read_back

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240)]

N_RECORDS = 3000
#: The wipe tests look at readers while a node's data is gone: the other nodes look at
#: the event log once an hour, so rebuilding (test_rebuilding.py) does not start.
HOLD_OFF_REBUILDING = 3_600_000


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
        assert time.monotonic() < deadline, \
            f"stuck after {items[-1] if items else None}:\n{reader.describe()}"
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
        deadline = time.monotonic() + 60
        while len(items) < N_RECORDS // 3:
            assert time.monotonic() < deadline, f"stuck at {len(items)}:\n{r.describe()}"
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
            for pid, _ in db.parts.directory.ranges(log_id, lsn, lsn):
                key = K.data_key(log_id, lsn)
                value = db.parts.db.get(key, db.parts.cf(pid))
                if value is not None:
                    db.parts.db.put(key, value[:-1] + bytes([value[-1] ^ 0x5A]), db.parts.cf(pid),
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
#
# The nodes to wipe or stop are never the log's sequencer: it keeps running, so it re-sends
# its release pointer to a wiped node when that node comes back (the wiped node then
# answers "nothing here" for every released LSN), and no new epoch (with its recovery)
# gets in the way of what is being tested.


def placement(cluster, client, nodes) -> tuple[dict[int, set[int]], set[int]]:
    """Stop ``nodes`` and read their stores: per LSN of log 1, its final copyset; and the
    LSNs whose placement is uncertain (a store wave was retried: earlier waves may have
    left copies anywhere)."""
    for n in nodes:
        cluster.stop(n)
    copysets: dict[int, set[int]] = {}
    uncertain: set[int] = set()
    for (_, lsn), copies in read_back(cluster, [1], nodes).items():
        final = max(copies, key=lambda c: c.wave)
        copysets[lsn] = set(final.copyset)
        if final.wave > 1:
            uncertain.add(lsn)
    return copysets, uncertain


def non_sequencers(cluster, log_id: int) -> list[int]:
    with RawClient(cluster) as raw:
        owner = raw.owner(log_id)
    return [n for n in range(cluster.n) if n != owner]


def wipe_and_start(cluster, node: int) -> None:
    shutil.rmtree(cluster.node_data_dir(node))
    cluster.start(node)


def test_wiped_nodes_dataloss_exactly_for_lost_records(local_cluster):
    cluster = local_cluster(nodes=4, replication=2, logs=range(1, 4),
                            rebuilding_poll_ms=HOLD_OFF_REBUILDING)
    with ld.Client(cluster.config_path, timeout=20.0) as client:
        lsns = write(client, 1, 2000)
        wiped = non_sequencers(cluster, 1)[:2]
        copysets, uncertain = placement(cluster, client, wiped)
        lost = {lsn for lsn, cs in copysets.items() if cs <= set(wiped)} - uncertain
        assert 100 < len(lost) < 1000  # about 1/6 of the copysets
        for n in wiped:
            wipe_and_start(cluster, n)
        with open_epoch_store(cluster.config.epoch_store_uri) as store:
            assert store.shard_statuses() == dict.fromkeys(
                wiped, AuthoritativeStatus.UNDERREPLICATION)
        for scd in (True, False):
            with client.create_reader() as r:
                if not scd:
                    r.force_no_single_copy_delivery()
                r.start_reading(1, lsns[0], lsns[-1])
                items = drain(r, [], lsns[-1], timeout=60)
            recs, gaps = split(items)
            reported = {x for g in gaps for x in range(g.lo, g.hi + 1)}
            assert reported - uncertain == lost
            assert recs == [(lsn, p) for lsn, p in expected(lsns) if lsn not in reported]
            # Lost records at the very start of the epoch, before anything of it was
            # delivered, are typed BRIDGE (a new sequencer may leave the start of its
            # epoch empty); every other loss is DATALOSS.
            for g in gaps:
                assert g.type == ld.GapType.DATALOSS or (
                    g.type == ld.GapType.BRIDGE and g.lo == lsns[0] < recs[0][0]), g


def test_wiped_node_does_not_make_a_down_node_look_empty(local_cluster):
    """One node wiped and another down: records whose remaining copy is on the down node
    are not lost, so no DATALOSS may be reported for them: the reader waits, and gets
    them once that node is back (invariant 3)."""
    cluster = local_cluster(nodes=4, replication=2, logs=range(1, 4),
                            rebuilding_poll_ms=HOLD_OFF_REBUILDING)
    with ld.Client(cluster.config_path, timeout=20.0) as client:
        lsns = write(client, 1, 1000)
        wiped, down = non_sequencers(cluster, 1)[:2]
        copysets, uncertain = placement(cluster, client, [wiped, down])
        at_risk = {lsn for lsn, cs in copysets.items() if cs <= {wiped, down}}
        assert at_risk - uncertain
        first_at_risk = min(at_risk)
        wipe_and_start(cluster, wiped)  # the sequencer re-sends its releases to it
        with client.create_reader() as r:
            r.start_reading(1, lsns[0], lsns[-1])
            items: list = []
            deadline = time.monotonic() + 4.0
            while time.monotonic() < deadline:
                items += r.read(1000, timeout=0.5)
            recs, gaps = split(items)
            assert gaps == []  # nothing is declared lost
            assert [lsn for lsn, _ in recs] == [x for x in lsns if x < first_at_risk], \
                r.describe()
            cluster.start(down)
            drain(r, items, lsns[-1], timeout=60)
    recs, gaps = split(items)
    assert gaps == []
    assert recs == expected(lsns)


def test_is_log_empty_after_every_node_restarted(local_cluster):
    """After every node restarted, the new sequencer recovers before it answers the tail
    (the epoch store's tail record may be older than what was released)."""
    cluster = local_cluster(nodes=3, replication=2, logs=range(1, 4))
    with ld.Client(cluster.config_path, timeout=20.0) as client:
        lsns = write(client, 1, 50)
        assert not client.is_log_empty(1)
        assert client.is_log_empty(2)
    cluster.stop_all()
    for i in range(cluster.n):
        cluster.start(i)
    with ld.Client(cluster.config_path, timeout=20.0) as client:
        assert client.get_tail_lsn(1) >= lsns[-1]  # the tail never goes back
        assert not client.is_log_empty(1)
        assert client.is_log_empty(2)
        with client.create_reader() as r:
            r.start_reading(1, lsns[0], lsns[-1])
            assert split(list(r)) == (expected(lsns), [])
