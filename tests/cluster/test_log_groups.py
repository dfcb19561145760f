"""Log groups created, changed and removed at runtime (LogsConfig in the epoch store),
picked up by nodes and clients without a restart, while a writer appends to another log
and a tailing reader follows it:

- a group created by one client works at once from a client started before it (and from
  the creating client), and a node restarted afterwards still knows it;
- overlapping ranges are refused with EXISTS;
- a changed replication applies to new epochs: records written after the change are on
  three nodes, earlier ones stay on two;
- a removed group's appends get NOTFOUND (once the nodes polled) and its tailing reader
  ends with a NOTINCONFIG gap; its records stay on disk;
- the same on a ZooKeeper epoch store.
"""

from __future__ import annotations

import json
import time

import pytest

import logdevice as ld
from logdevice.errors import E, LogDeviceError, NotFoundError
from tests.cluster.conftest import ldshell
from tests.cluster.test_rebuilding import sequencer_of
from tests.cluster.workload import Load

WAIT = 30.0  # every wait below is bounded by this


def epoch_of(lsn: int) -> int:
    return lsn >> 32


def holders(cluster, log_id: int) -> dict[int, int]:
    """LSN -> the size of its copyset (the storage nodes' copyset indexes)."""
    p = ldshell(cluster, "query", "SELECT lsn, max(len(copyset)) AS n FROM record_csi "
                "GROUP BY lsn", "--logs", str(log_id), "--json")
    assert p.returncode == 0, p.stderr
    return {int(r["lsn"]): int(r["n"]) for r in json.loads(p.stdout)}


def read_until_gap(reader, log_id: int, timeout: float = WAIT) -> list:
    items: list = []
    deadline = time.monotonic() + timeout
    while reader.is_reading(log_id):
        assert time.monotonic() < deadline, items[-5:]
        items += reader.read(100, timeout=0.2)
    return items


def test_log_group_created_changed_and_removed_at_runtime(local_cluster):
    cluster = local_cluster(nodes=4, replication=2, logs=[1])
    before = cluster.client()  # started before the group exists
    admin = cluster.client()
    load = Load(before, 1, 1)  # a writer and a tailing reader on log 1 throughout
    try:
        with pytest.raises(NotFoundError):
            before.append(500, b"too early")
        group = admin.create_log_group("runtime", 500, 509, replication=2)
        assert group.ids == range(500, 510)

        # At once, with no restart, from a client that knew nothing about it: storage
        # nodes and the sequencer that have not polled yet read the groups again.
        assert before.is_log_empty(501)
        first = before.append(500, b"r0")
        assert admin.append(505, b"from the creator") > 0
        tail = before.create_reader()
        tail.start_reading(500, first)

        with pytest.raises(LogDeviceError, match=r"overlaps log group 'runtime' "
                                                 r"\(ids 500..509") as ei:
            admin.create_log_group("other", 509, 600, replication=1)
        assert ei.value.status == E.EXISTS

        # A node restarted afterwards knows the group from the epoch store before it
        # serves anything (not log 1's sequencer: its writer must see no error).
        node = next(n for n in range(cluster.n - 1, -1, -1) if n != sequencer_of(cluster, 1))
        cluster.stop(node)
        cluster.start(node)
        cluster.wait_alive(range(cluster.n), timeout=WAIT)
        started = cluster.log_path(node).read_text().split("listening")[-2]
        assert "runtime log groups at version 1: runtime (500..509)" in started
        assert before.append(500, b"r1") > first

        # Replication 2 -> 3: the sequencer starts a new epoch; what it takes from then on
        # is on three nodes, what was written before stays on two.
        old_epoch = epoch_of(before.append(500, b"r2"))
        admin.update_log_group("runtime", replication=3)
        deadline = time.monotonic() + WAIT
        while True:
            lsn = before.append(500, b"after the change")
            if epoch_of(lsn) > old_epoch:
                break
            assert time.monotonic() < deadline, "no new epoch after the change"
            time.sleep(0.05)
        new_epoch = epoch_of(lsn)
        lsns = [lsn] + [before.append(500, b"r3-%d" % i) for i in range(20)]
        assert {epoch_of(x) for x in lsns} == {new_epoch}
        held = holders(cluster, 500)
        assert {held[x] for x in lsns} == {3}
        assert {n for x, n in held.items() if epoch_of(x) <= old_epoch} == {2}

        got = read_until_tail(tail, lsns[-1])
        assert {x.lsn for x in got if isinstance(x, ld.DataRecord)} >= set(lsns)

        # Removed: once the nodes polled (logs_config_poll_ms), appends get NOTFOUND and
        # the tailing reader ends with NOTINCONFIG.
        admin.remove_log_group("runtime")
        deadline = time.monotonic() + WAIT
        with pytest.raises(NotFoundError):
            while time.monotonic() < deadline:
                before.append(500, b"gone?")
                time.sleep(0.05)
        items = read_until_gap(tail, 500)
        gaps = [x for x in items if isinstance(x, ld.GapRecord)]
        assert gaps and gaps[-1].type == ld.GapType.NOTINCONFIG, gaps
        tail.close()
        # The records stay on disk until trimmed or expired.
        assert set(lsns) <= set(holders_after_removal(cluster, admin, lsns))
    finally:
        load.finish()  # log 1: every acknowledged record read in order, no append failed
        before.close()
        admin.close()


def read_until_tail(reader, last: int, timeout: float = WAIT) -> list:
    items: list = []
    deadline = time.monotonic() + timeout
    while not any(getattr(x, "lsn", 0) >= last for x in items[-25:]):
        assert time.monotonic() < deadline, items[-5:]
        items += reader.read(100, timeout=0.2)
    return items


def holders_after_removal(cluster, admin, lsns: list[int]) -> dict[int, int]:
    """Create the group again: the nodes serve what they kept of it (a node that has not
    polled the new group yet answers NOTFOUND and is left out: ask until all answered)."""
    admin.create_log_group("runtime_again", 500, 509, replication=2)
    deadline = time.monotonic() + WAIT
    while True:
        held = holders(cluster, 500)
        if set(lsns) <= set(held) or time.monotonic() > deadline:
            return held
        time.sleep(0.2)


def test_log_groups_on_zookeeper(local_cluster, zk_uri):
    """The same life cycle with the groups in ZooKeeper (each node polls one znode)."""
    cluster = local_cluster(nodes=3, replication=2, logs=[1], epoch_store=zk_uri)
    with cluster.client() as before, cluster.client() as admin:
        admin.create_log_group("zk", 700, 700, replication=2)
        first = before.append(700, b"at once")
        admin.update_log_group("zk", replication=3)
        deadline = time.monotonic() + WAIT
        while epoch_of(lsn := before.append(700, b"next")) == epoch_of(first):
            assert time.monotonic() < deadline, "no new epoch after the change"
            time.sleep(0.05)
        assert holders(cluster, 700)[lsn] == 3 and holders(cluster, 700)[first] == 2
        admin.remove_log_group("zk")
        with pytest.raises(NotFoundError):
            while time.monotonic() < deadline:
                before.append(700, b"gone?")
                time.sleep(0.05)
