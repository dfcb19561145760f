"""The cluster heals itself: dead nodes rebuilt after a grace period (and not when too
many are down), a node that returns mid-way aborts its rebuilding, a node whose store is
damaged marks itself and is rebuilt, and the operator's undo commands."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

import logdevice as ld
from logdevice.epochstore import AuthoritativeStatus as A
from logdevice.security.store import open_cluster_store
from tests.cluster.conftest import ldshell, read_back
from tests.cluster.test_reader_failures import corrupt
from tests.cluster.test_rebuilding import (
    LOGS,
    assert_complete,
    non_sequencer,
    sequencer_of,
    wait_status,
)
from tests.cluster.workload import Load, append_many
from tests.waiting import wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]

GRACE_MS = 2_000


def events(cluster) -> list[dict]:
    with open_cluster_store(cluster.config) as store:
        return store.events()


def wait_event(cluster, match: Callable[[dict], bool], timeout: float = 60.0) -> dict:
    found = wait_until(lambda: [e for e in events(cluster) if match(e)], timeout, 0.2,
                       lambda: events(cluster)[-10:])
    return found[-1]


def self_initiated(node: int) -> Callable[[dict], bool]:
    return lambda e: (e["type"] == "SHARD_NEEDS_REBUILD" and e["node"] == node
                      and e.get("self_initiated") is True)


def healing_cluster(local_cluster, **kw):
    return local_cluster(nodes=5, replication=2, logs=LOGS,
                         self_rebuild_grace_period_ms=GRACE_MS, **kw)


def rebuilding_report(cluster) -> dict:
    p = ldshell(cluster, "rebuilding", "--json")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_a_dead_node_is_rebuilt_by_itself_and_a_second_loss_loses_nothing(local_cluster):
    cluster = healing_cluster(local_cluster)
    with ld.Client(cluster.config_path, timeout=30.0) as client:
        acked = {}
        for log_id in LOGS:
            acked |= append_many(client, log_id, 2000, b"old")
        load = Load(client, 1, start_lsn=1)
        first = non_sequencer(cluster)
        cluster.kill(first)  # and never restarted
        event = wait_event(cluster, self_initiated(first))
        assert "dead for" in event["reason"]
        cluster.wait_rebuilt([first], timeout=120)
        assert cluster.shard_statuses() == {first: A.AUTHORITATIVE_EMPTY}
        waits = rebuilding_report(cluster)["waits"]
        assert "rebuilt; down" in waits[str(first)]
        owner = sequencer_of(cluster, 1)
        second = next(n for n in range(5) if n not in (first, owner))
        cluster.kill(second)
        load.finish()
        acked |= load.acked
        assert_complete(client, acked)
        # The second is rebuilt too: the first, rebuilt already, neither counts against
        # the limit nor is waited for as a donor.
        wait_event(cluster, self_initiated(second))
        cluster.wait_rebuilt([second], timeout=120)
        assert_complete(client, acked)


def test_too_many_dead_nodes_wait_and_say_why(local_cluster):
    cluster = healing_cluster(local_cluster)
    with ld.Client(cluster.config_path, timeout=30.0) as client:
        acked = append_many(client, 1, 1000, b"x")
    # Three nodes die, none of them log 1's sequencer (whose records would otherwise
    # wait, unreleased, for the next append to recover its epoch).
    owner = sequencer_of(cluster, 1)
    dead = [n for n in range(5) if n != owner][-3:]
    for n in dead:
        cluster.kill(n)
    # Two nodes left, a minority: they wait, and the event log says why.
    deferred = wait_event(cluster, lambda e: e["type"] == "SHARD_REBUILD_DEFERRED")
    assert "majority" in deferred["reason"], deferred
    waits = rebuilding_report(cluster)["waits"]
    assert all("not rebuilt yet" in waits[str(n)] for n in dead), waits
    # Three hold the other two dead, a majority; but two are down, past the limit.
    cluster.start(dead[0])
    capped = wait_event(cluster, lambda e: e["type"] == "SHARD_REBUILD_DEFERRED"
                        and "storage nodes are down" in e["reason"])
    assert "at most 1" in capped["reason"], capped
    # Only one is down now: it is rebuilt, and nothing else ever was.
    cluster.start(dead[1])
    wait_event(cluster, self_initiated(dead[2]), timeout=90)
    cluster.wait_rebuilt([dead[2]], timeout=120)
    rebuilt = [e["node"] for e in events(cluster) if e["type"] == "SHARD_NEEDS_REBUILD"]
    assert rebuilt == [dead[2]]
    with ld.Client(cluster.config_path, timeout=30.0) as client:
        assert_complete(client, acked)


def test_a_node_returning_mid_rebuilding_aborts_it_and_loses_nothing(local_cluster):
    # Slow donors (20 kB/s each: tens of seconds) so the node is back before the end.
    cluster = healing_cluster(local_cluster, rebuilding_rate_bytes_per_s=20_000)
    with ld.Client(cluster.config_path, timeout=30.0) as client:
        acked = {}
        for log_id in LOGS:
            acked |= append_many(client, log_id, 3000, b"y", pad=200)
        back = non_sequencer(cluster)
        cluster.kill(back)
        wait_event(cluster, self_initiated(back))
        cluster.start(back)
        abort = wait_event(cluster, lambda e: e["type"] == "SHARD_ABORT_REBUILD"
                           and e["node"] == back)
        assert "came back with its data" in abort["reason"]
        wait_status(cluster, back, A.FULLY_AUTHORITATIVE)
        acked |= append_many(client, 2, 500, b"after")
        assert_complete(client, acked)
    p = ldshell(cluster, "check", "--json")
    assert p.returncode == 0, p.stdout + p.stderr


def test_operators_undo_a_drain_and_abort_a_rebuilding(local_cluster):
    cluster = healing_cluster(local_cluster, rebuilding_rate_bytes_per_s=10_000)
    with ld.Client(cluster.config_path, timeout=30.0) as client:
        acked = append_many(client, 1, 3000, b"z", pad=200)
    drained = non_sequencer(cluster)
    assert ldshell(cluster, "drain", str(drained)).returncode == 0
    p = ldshell(cluster, "undrain", str(drained))
    assert p.returncode == 0, p.stderr
    assert "undrained" in p.stdout
    assert cluster.shard_statuses() == {}
    p = ldshell(cluster, "undrain", str(drained))
    assert p.returncode != 0 and "not drained" in p.stderr
    # A dead node's self-initiated rebuilding, aborted: the node is counted on again and
    # left alone until it comes back and dies again.
    cluster.kill(drained)
    wait_event(cluster, self_initiated(drained))
    p = ldshell(cluster, "rebuilding", "abort", str(drained))
    assert p.returncode == 0, p.stderr
    assert drained not in cluster.shard_statuses()
    held = wait_event(cluster, lambda e: e["type"] == "SHARD_REBUILD_DEFERRED"
                      and e["node"] == drained)
    assert "operator aborted" in held["reason"]
    assert "operator aborted" in rebuilding_report(cluster)["waits"][str(drained)]
    p = ldshell(cluster, "rebuilding", "abort", str(drained))
    assert p.returncode != 0 and "not being rebuilt" in p.stderr
    cluster.start(drained)
    with ld.Client(cluster.config_path, timeout=30.0) as client:
        assert_complete(client, acked)


def test_a_node_whose_write_ahead_log_is_damaged_is_rebuilt(local_cluster):
    cluster = local_cluster(nodes=3, replication=2, logs=LOGS)
    with ld.Client(cluster.config_path, timeout=30.0) as client:
        acked = {}
        for log_id in LOGS:
            acked |= append_many(client, log_id, 5000, b"w", pad=100)
    victim = non_sequencer(cluster)
    cluster.kill(victim)  # the copies are in its write-ahead log, not in tables yet
    wal = max(cluster.logsdb_path(victim).glob("*.log"), key=lambda p: p.stat().st_size)
    data = bytearray(wal.read_bytes())
    assert len(data) > 100_000, len(data)
    at = len(data) // 2
    data[at:at + 20] = bytes(b ^ 0xFF for b in data[at:at + 20])
    wal.write_bytes(bytes(data))
    cluster.start(victim)
    marked = wait_event(cluster, lambda e: e["type"] == "SHARD_NEEDS_REBUILD"
                        and e["node"] == victim)
    assert marked.get("unrecoverable") and "write-ahead log" in marked["reason"], marked
    cluster.wait_rebuilt([victim], timeout=120)
    wait_status(cluster, victim, A.FULLY_AUTHORITATIVE)  # acknowledged: serves again
    with ld.Client(cluster.config_path, timeout=30.0) as client:
        assert_complete(client, acked)
    p = ldshell(cluster, "check", "--json")
    assert p.returncode == 0, p.stdout + p.stderr


def test_a_copy_failing_its_checksum_on_a_read_gets_its_node_rebuilt(local_cluster):
    cluster = local_cluster(nodes=3, replication=2, logs=LOGS)
    with ld.Client(cluster.config_path, timeout=30.0) as client:
        acked = append_many(client, 1, 1000, b"c")
    victim = non_sequencer(cluster)
    cluster.stop(victim)
    held = sorted(lsn for (_, lsn) in read_back(cluster, [1], [victim]))
    corrupt(cluster, victim, 1, held[10:20])
    cluster.start(victim)
    with ld.Client(cluster.config_path, timeout=30.0) as client:
        assert_complete(client, acked)  # all-send-all reads the damaged copies
        marked = wait_event(cluster, lambda e: e["type"] == "SHARD_NEEDS_REBUILD"
                            and e["node"] == victim)
        assert "failed their checksum" in marked["reason"], marked
        cluster.wait_rebuilt([victim], timeout=120)
        wait_status(cluster, victim, A.FULLY_AUTHORITATIVE)
        assert_complete(client, acked)
    p = ldshell(cluster, "check", "--json")
    assert p.returncode == 0, p.stdout + p.stderr
