"""Rebuilding on real clusters: a wiped node, a node marked unrecoverable, two at once, a
donor killed mid-way, a drain; appends and a tailing reader run all the while.

After each, the nodes are stopped and every node's LogsDB is opened: every acknowledged
record must have R copies again on nodes that are not being rebuilt, with its payload,
and every copyset a copy carries must name only nodes that hold the record
(``check_rebuilt_on_disk``), not merely "the rebuild said it was done".

The cluster checker agrees: while a lost node waits for rebuilding its copies are counted
as ``rebuilding``, not as durability violations; once rebuilt, ``ldshell check`` finds
every record and nothing wrong.
"""

from __future__ import annotations

import json
import shutil
import time

import pytest

import logdevice as ld
from logdevice.epochstore import AuthoritativeStatus as A
from logdevice.epochstore import open_epoch_store
from tests.cluster.conftest import RawClient, ldshell, read_back, scrape
from tests.cluster.workload import Load, append_many
from tests.waiting import wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]

LOGS = (1, 2, 3)
LSN_MAX = 2**64 - 1


def read_all(client, log_id: int, until: int, scd: bool) -> tuple[dict, list]:
    with client.create_reader() as r:
        if not scd:
            r.force_no_single_copy_delivery()
        r.start_reading(log_id, 1, until)
        items: list = []
        deadline = time.monotonic() + 60
        while r.is_reading(log_id) and time.monotonic() < deadline:
            items += r.read(1000, timeout=0.5)
    recs = {x.lsn: bytes(x.payload) for x in items if isinstance(x, ld.DataRecord)}
    return recs, [g for g in items if isinstance(g, ld.GapRecord)]


def assert_complete(client, acked: dict) -> None:
    """Both read modes return every acknowledged record, and no DATALOSS."""
    for log_id in sorted({k[0] for k in acked}):
        want = {lsn: p for (lg, lsn), p in acked.items() if lg == log_id}
        for scd in (True, False):
            recs, gaps = read_all(client, log_id, max(want), scd)
            assert not [g for g in gaps if g.type == ld.GapType.DATALOSS], (log_id, scd, gaps)
            missing = sorted(lsn for lsn, p in want.items() if recs.get(lsn) != p)
            assert not missing, (log_id, scd, len(missing), missing[:3], gaps[:5])


def check_rebuilt_on_disk(cluster, acked: dict, replication: int, nodes: list[int]) -> int:
    """Assert every acknowledged record is on at least ``replication`` of ``nodes`` with
    its payload, and that each copy's copyset (of the newest wave) names only nodes that
    hold it.  Copies of one record may carry different copysets when a donor died
    mid-way and the set changed before it came back: each is valid, they are counted.
    Returns how many records have disagreeing copysets."""
    from logdevice.sequencer import Replication, satisfies

    rep = Replication(replication)
    stored = read_back(cluster, sorted({k[0] for k in acked}), nodes)
    disagree = 0
    for key, payload in acked.items():
        copies = stored.get(key, [])
        holders = {c.node for c in copies}
        assert len(holders) >= rep.r, f"{key}: only on {sorted(holders)}"
        assert all(c.payload == payload for c in copies), f"{key}: payload differs"
        wave = max(c.wave for c in copies)
        final = [c for c in copies if c.wave == wave]
        for c in final:
            assert set(c.copyset) <= holders, f"{key}: N{c.node} names {c.copyset}, " \
                                              f"held by {sorted(holders)}"
            assert satisfies(c.copyset, rep), f"{key}: {c.copyset} breaks R={rep.r}"
        disagree += len({c.copyset for c in final}) > 1
    return disagree


def sequencer_of(cluster, log_id: int = 1) -> int:
    with RawClient(cluster) as raw:
        return raw.owner(log_id)


def non_sequencer(cluster, log_id: int = 1) -> int:
    owner = sequencer_of(cluster, log_id)
    return next(n for n in range(cluster.n - 1, -1, -1) if n != owner)


def wait_status(cluster, node: int, status, timeout: float = 60.0) -> None:
    wait_until(lambda: cluster.shard_statuses().get(node, A.FULLY_AUTHORITATIVE) == status,
               timeout, 0.1, lambda: (node, cluster.shard_statuses()))


def wait_no_refusals(cluster, timeout: float = 30.0) -> None:
    """Until every node's sequencers place copies on every storage node again."""
    wait_until(lambda: not any(scrape(cluster, i)["logdevice_rebuilding_refusing_nodes"]
                               for i in cluster.running()),
               timeout, 0.1, "a node still refuses to place copies")


def test_wiped_node_is_rebuilt_while_appends_and_a_tail_reader_run(local_cluster):
    cluster = local_cluster(nodes=4, replication=2, logs=LOGS)
    with ld.Client(cluster.config_path, timeout=30.0) as client:
        acked = {}
        for log_id in LOGS:
            acked |= append_many(client, log_id, 3000, b"old")
        wiped = non_sequencer(cluster)
        load = Load(client, 1, start_lsn=1)
        cluster.stop(wiped)
        shutil.rmtree(cluster.node_data_dir(wiped))
        cluster.start(wiped)
        cluster.wait_rebuilt([wiped], timeout=120)
        wait_status(cluster, wiped, A.FULLY_AUTHORITATIVE)  # it acknowledged: takes records
        wait_no_refusals(cluster)
        load.finish()
        acked |= load.acked
        acked |= append_many(client, 2, 500, b"after")
        assert_complete(client, acked)
    cluster.stop_all()
    assert check_rebuilt_on_disk(cluster, acked, 2, list(range(4))) == 0
    # The rebuilt node holds none of the old records (they went elsewhere) and takes new
    # ones again since it acknowledged.
    on_wiped = read_back(cluster, LOGS, [wiped])
    assert not any(acked.get(k, b"").startswith(b"old") for k in on_wiped)
    assert any(acked.get(k, b"").startswith(b"after") for k in on_wiped)


def test_rebuilt_cluster_survives_losing_another_node(local_cluster):
    cluster = local_cluster(nodes=3, replication=2, logs=LOGS)
    with ld.Client(cluster.config_path, timeout=30.0) as client:
        acked = append_many(client, 1, 4000, b"x")
        first = non_sequencer(cluster)
        cluster.stop(first)  # for good: an operator says so with ldshell
        p = ldshell(cluster, "mark-unrecoverable", str(first))
        assert p.returncode == 0, p.stderr
        cluster.wait_rebuilt([first], timeout=120)
        assert cluster.shard_statuses() == {first: A.AUTHORITATIVE_EMPTY}
        p = ldshell(cluster, "rebuilding", "--json")
        assert p.returncode == 0, p.stderr
        report = json.loads(p.stdout)
        assert report["set_version"] == 0 and not report["lost"]
        donated = {r["node"]: r["records_total"] for r in report["nodes"] if r["answering"]}
        assert set(donated) == {0, 1, 2} - {first}
        # Copysets are 2 of the 3 nodes, so about 2/3 of the records named the lost node,
        # and each was donated once, by its one live holder.
        assert 0.55 * len(acked) < sum(donated.values()) < 0.8 * len(acked), donated
        # Every record now has two copies on the two others: losing one more loses none.
        second = next(n for n in range(3) if n != first and cluster.is_running(n))
        cluster.stop(second)
        shutil.rmtree(cluster.node_data_dir(second))
    cluster.stop_all()
    left = [n for n in range(3) if n not in (first, second)]
    stored = read_back(cluster, [1], left)
    assert set(stored) >= set(acked), "records lost with the second node"
    assert all(c.payload == acked[k] for k, cs in stored.items() if k in acked for c in cs)


def test_donor_killed_mid_way_and_a_second_node_lost_mid_way(local_cluster):
    cluster = local_cluster(nodes=5, replication=3, logs=LOGS,
                            rebuilding_rate_bytes_per_s=200_000)
    with ld.Client(cluster.config_path, timeout=30.0) as client:
        acked = {}
        for log_id in LOGS:  # ~1 MB per log: each donor needs seconds at 200 kB/s
            acked |= append_many(client, log_id, 3000, b"y", burst=500, pad=300)
        owner = sequencer_of(cluster)
        lost = [n for n in range(5) if n != owner][-2:]
        donor = next(n for n in range(5) if n not in lost and n != owner)
        load = Load(client, 1, start_lsn=1)
        version = cluster.mark_unrecoverable(lost[0])
        # Throttled, the donors take several seconds: kill one once it finished a log.
        saved = cluster.node_data_dir(donor) / "rebuilding.json"
        deadline = time.monotonic() + 30
        while not (saved.exists() and json.loads(saved.read_text())["finished_logs"]):
            assert time.monotonic() < deadline, "the donor never finished a log"
            time.sleep(0.05)
        cluster.kill(donor)
        before = json.loads(saved.read_text())
        with open_epoch_store(cluster.config.epoch_store_uri) as store:
            assert donor not in store.rebuilding_set().done  # killed mid-way
        cluster.start(donor)
        # It resumes from what it saved (same start time, counters from there), not anew.
        deadline = time.monotonic() + 30
        while not (m := scrape(cluster, donor))["logdevice_rebuilding_started_seconds"]:
            assert time.monotonic() < deadline, "the restarted donor never went on"
            time.sleep(0.05)
        assert m["logdevice_rebuilding_set_version"] == version
        started = m["logdevice_rebuilding_started_seconds"]
        assert started == pytest.approx(before["started"], abs=0.01)
        assert m["logdevice_rebuilding_records_total"] >= before["records"] > 0
        # A second node lost mid-way joins the same rebuilding (a new set version).
        cluster.mark_unrecoverable(lost[1])
        cluster.wait_rebuilt(lost, timeout=180)
        assert cluster.shard_statuses() == dict.fromkeys(lost, A.AUTHORITATIVE_EMPTY)
        load.finish()
        acked |= load.acked
        assert_complete(client, acked)
    cluster.stop_all()
    check_rebuilt_on_disk(cluster, acked, 3, [n for n in range(5) if n not in lost])


def test_drain_then_remove(local_cluster):
    cluster = local_cluster(nodes=4, replication=2, logs=LOGS)
    with ld.Client(cluster.config_path, timeout=30.0) as client:
        acked = {}
        for log_id in LOGS:
            acked |= append_many(client, log_id, 2000, b"d")
        drained = non_sequencer(cluster)
        load = Load(client, 3, start_lsn=1)
        cluster.drain(drained)
        cluster.wait_rebuilt([drained], timeout=120)
        assert cluster.shard_statuses() == {drained: A.AUTHORITATIVE_EMPTY}
        load.finish()
        acked |= load.acked
        # The drained node takes no new copies; after it leaves, nothing is missing.
        acked |= append_many(client, 1, 300, b"late")
    cluster.stop(drained)
    shutil.rmtree(cluster.node_data_dir(drained))
    cluster.remove_node(drained)  # out of the config; the others adopt it, no restart
    assert not any(n.index == drained for n in cluster.config.nodes)
    with ld.Client(cluster.config_path, timeout=30.0) as client:
        acked |= append_many(client, 2, 300, b"removed")
        assert_complete(client, acked)
    cluster.stop_all()
    others = [n for n in range(4) if n != drained]
    assert check_rebuilt_on_disk(cluster, acked, 2, others) == 0


# -- the checker's view of a rebuilding -----------------------------------------------------

CLEAN = {"placement": 0, "durability": 0, "progress": 0, "availability": 0}


def check_report(cluster) -> dict:
    """``ldshell check --json``: it must have run clean (exit 0) and checked every log."""
    p = ldshell(cluster, "check", "--json")
    assert p.returncode == 0, (p.stdout[-2000:], p.stderr[-2000:])
    report = json.loads(p.stdout)
    assert report["violations"] == CLEAN and not report["errors"], report
    return report


def copies_naming(cluster, node: int) -> int:
    """Records whose copyset names ``node``, as the storage nodes' copyset indexes say."""
    p = ldshell(cluster, "query", "SELECT count(*) AS n FROM (SELECT DISTINCT log_id, lsn "
                f"FROM record_csi WHERE list_contains(copyset, {node}))", "--json")
    assert p.returncode == 0, p.stderr
    return int(json.loads(p.stdout)[0]["n"])


def test_checker_counts_a_lost_nodes_copies_as_rebuilding_until_they_are_rebuilt(
        local_cluster):
    # The nodes never read the event log: the lost node stays in the rebuilding set.
    cluster = local_cluster(nodes=3, replication=2, logs=LOGS, rebuilding_poll_ms=600_000)
    with ld.Client(cluster.config_path, timeout=30.0) as client:
        acked = append_many(client, 1, 1000, b"r") | append_many(client, 2, 500, b"s")
    lost = non_sequencer(cluster)
    named = copies_naming(cluster, lost)
    assert 0.5 * len(acked) < named < 0.85 * len(acked)  # 2 of 3 nodes per copyset
    cluster.stop(lost)
    p = ldshell(cluster, "mark-unrecoverable", str(lost))
    assert p.returncode == 0, p.stderr
    assert cluster.shard_statuses()[lost] == A.UNDERREPLICATION
    report = check_report(cluster)
    assert report["summary"]["records"] == len(acked)
    assert report["summary"]["rebuilding"] == named  # its copies: missing, not lost


def test_checker_is_clean_after_rebuilding(local_cluster):
    cluster = local_cluster(nodes=4, replication=2, logs=LOGS)
    with ld.Client(cluster.config_path, timeout=30.0) as client:
        acked = append_many(client, 1, 3000, b"c") | append_many(client, 2, 3000, b"d")
        lost = non_sequencer(cluster)
        cluster.stop(lost)
        p = ldshell(cluster, "mark-unrecoverable", str(lost))
        assert p.returncode == 0, p.stderr
        cluster.wait_rebuilt([lost], timeout=120)
        assert cluster.shard_statuses() == {lost: A.AUTHORITATIVE_EMPTY}
        report = check_report(cluster)
        # It looked at every record, and no copyset names the lost node any more.
        assert report["summary"]["records"] == len(acked)
        assert report["summary"]["rebuilding"] == 0
        assert report["summary"]["under_replicated"] == 0
        assert copies_naming(cluster, lost) == 0


def test_checker_is_clean_after_a_wiped_node_is_rebuilt(local_cluster):
    cluster = local_cluster(nodes=4, replication=2, logs=LOGS)
    with ld.Client(cluster.config_path, timeout=30.0) as client:
        acked = append_many(client, 1, 2000, b"w") | append_many(client, 2, 2000, b"v")
        wiped = non_sequencer(cluster)
        cluster.stop(wiped)
        shutil.rmtree(cluster.node_data_dir(wiped))
        cluster.start(wiped)
        cluster.wait_rebuilt([wiped], timeout=120)
        wait_status(cluster, wiped, A.FULLY_AUTHORITATIVE)
        wait_no_refusals(cluster)
        # Back in copysets for log 1 only: of log 2 it holds nothing at all.
        acked |= append_many(client, 1, 300, b"after")
    report = check_report(cluster)
    assert report["summary"]["records"] == len(acked)
    assert report["summary"]["rebuilding"] == 0 and report["summary"]["under_replicated"] == 0
