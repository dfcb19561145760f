"""The checker, ldshell and /metrics against real node processes.

- a clean cluster: ``ldshell check --json`` reports nothing and exits 0; ``status`` and
  ``query --json`` answer; every node's /metrics moves after appends;
- a node that silently lost records (deleted from its LogsDB while stopped, nobody told)
  and a copyset forged onto two nodes of one rack: durability violations for exactly the
  lost records, one placement violation, exit 1;
- a node paused during the check is re-checked after the delay, not reported as data
  loss; if it stays silent it is an availability violation, still not data loss.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from logdevice.checker.driver import CheckOptions, run_check
from logdevice.storage.flags import FLAG_DRAINED
from logdevice.storage.logsdb import LogsDB
from tests.cluster.conftest import RawClient, ldshell, scrape
from tests.waiting import wait_until

pytestmark = pytest.mark.cluster

LDSHELL = os.path.join(os.path.dirname(sys.executable), "ldshell")


def check_json(cluster, *args):
    p = ldshell(cluster, "check", "--json", *args)
    assert p.returncode in (0, 1), p.stderr
    return p.returncode, json.loads(p.stdout)


def total(samples, name):
    return sum(v for k, v in samples.items() if k == name)


def test_clean_cluster_status_query_and_metrics(local_cluster):
    cluster = local_cluster(nodes=3, replication=2, logs=range(1, 5))
    client = cluster.client()
    try:
        before = [scrape(cluster, i) for i in range(3)]
        for i in range(200):
            client.append(1, b"a%d" % i)
        for i in range(50):
            client.append(2, b"b%d" % i)

        code, report = check_json(cluster)
        assert code == 0
        assert report["violations"] == {"placement": 0, "durability": 0, "progress": 0,
                                        "availability": 0}
        assert report["details"] == []
        assert report["summary"]["records"] == 250
        p = ldshell(cluster, "check", "--json", "--logs", "999")  # not in the config
        assert p.returncode == 2, p.stdout
        assert json.loads(p.stdout)["errors"] and "999" in json.loads(p.stdout)["errors"][0]

        p = ldshell(cluster, "status", "--json")
        assert p.returncode == 0, p.stderr
        status = json.loads(p.stdout)
        assert [(n["node"], n["alive"], n["answering"]) for n in status["nodes"]] == [
            (0, True, True), (1, True, True), (2, True, True)]

        p = ldshell(cluster, "sequencers", "--json")
        assert p.returncode == 0, p.stderr
        assert {r["log_id"] for r in json.loads(p.stdout)} == {1, 2}
        assert all(r["node"] in (0, 1, 2) and r["epoch"] >= 1 for r in json.loads(p.stdout))

        p = ldshell(cluster, "query", "SELECT log_id, count(*) AS n, count(DISTINCT lsn) "
                    "AS d FROM records GROUP BY log_id ORDER BY log_id", "--json",
                    "--logs", "1,2")
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout) == [{"log_id": 1, "n": 200, "d": 200},
                                        {"log_id": 2, "n": 50, "d": 50}]
        # Two copies of each record (more if a store wave timed out and was retried).
        p = ldshell(cluster, "query", "SELECT count(DISTINCT lsn) AS records, count(*) AS "
                    "copies, min(len(copyset)) AS r FROM record_csi WHERE log_id = 1",
                    "--json", "--logs", "1")
        assert p.returncode == 0, p.stderr
        (row,) = json.loads(p.stdout)
        assert row["records"] == 200 and row["copies"] >= 400 and row["r"] == 2
        p = ldshell(cluster, "query", "SELECT node, sum(records) AS n FROM partitions "
                    "GROUP BY node ORDER BY node", "--json")
        assert p.returncode == 0, p.stderr
        rows = json.loads(p.stdout)
        assert [r["node"] for r in rows] == [0, 1, 2] and sum(r["n"] for r in rows) == 500
        p = ldshell(cluster, "query", "SELECT nope FROM nodes", "--json")
        assert p.returncode == 2 and "query failed" in p.stderr

        after = [scrape(cluster, i) for i in range(3)]
        def grew(name):
            return sum(total(s, name) for s in after) - sum(total(s, name) for s in before)

        assert grew("logdevice_appends_total") == 250
        assert grew("logdevice_store_records_total") >= 500  # retried waves store more
        assert sum(total(s, "logdevice_append_latency_seconds_count") for s in after) >= 250
        assert sum(total(s, "logdevice_releases_total") for s in after) > sum(
            total(s, "logdevice_releases_total") for s in before)
        assert sum(total(s, "logdevice_checker_records_served_total") for s in after) >= 500
        assert all(s[f'logdevice_node_up{{"node": "{i}"}}'] == 1 for i, s in enumerate(after))
        # The records query read the 250 records through read streams (SCD by default).
        shipped = sum(v for s in after for k, v in s.items()
                      if k.startswith("logdevice_read_records_shipped_total"))
        assert shipped >= 250
        assert sum(total(s, "logdevice_read_streams_started_total") for s in after) >= 3

        # The interactive prompt reads commands from stdin too.
        p = subprocess.run([LDSHELL, "--config", str(cluster.config_path)],
                           input='query "SELECT count(*) AS n FROM nodes" --json\nquit\n',
                           capture_output=True, text=True, timeout=60,
                           env={**os.environ, "HOME": str(cluster.root)})
        assert p.returncode == 0, p.stderr
        assert '[{"n": 3}]' in p.stdout
    finally:
        client.close()


def test_lost_records_and_forged_copyset_are_reported(local_cluster):
    racks = ["r.d.c.row.rack1", "r.d.c.row.rack1", "r.d.c.row.rack2", "r.d.c.row.rack2"]
    cluster = local_cluster(nodes=4, replication={"rack": 2, "node": 2}, logs=range(1, 3),
                            locations=racks)
    client = cluster.client()
    try:
        lsns = [client.append(1, b"r%d" % i) for i in range(300)]
    finally:
        client.close()
    cluster.stop_all()

    dbs = {i: LogsDB(cluster.logsdb_path(i)) for i in range(4)}
    try:
        csi = {i: db.read_csi(1, 1, max_entries=10_000) for i, db in dbs.items()}
        # Only records on exactly two nodes (a store wave that timed out and was retried
        # leaves a third, stale copy: losing that one is no violation).
        lsn_all, copies = np.unique(np.concatenate([c.lsns for c in csi.values()]),
                                    return_counts=True)
        two = lsn_all[copies == 2]
        on3 = np.intersect1d(csi[3].lsns, two)
        rng = np.random.default_rng(5)
        victims = sorted(set(on3[10:14].tolist()) | set(
            rng.choice(on3[20:], 8, replace=False).tolist()))
        assert dbs[3].delete_records(1, victims) == len(victims)
        # Forge: a record on {a in rack1, 2} moves to {a, a'}, both in rack1.
        cs0 = {int(x): [int(n) for n in row if n >= 0]
               for x, row in zip(csi[0].lsns, csi[0].copysets, strict=True)}
        forged = next(x for x, cs in sorted(cs0.items())
                      if sorted(cs) == [0, 2] and x not in victims and x in set(two.tolist()))
        rb = dbs[0].read_records_at(1, [forged])
        for node in (0, 1):
            dbs[node].write_records(1, rb.lsns, rb.timestamps, rb.flags,
                                    np.array([[0, 1]], np.int16), rb.payloads, rb.offsets,
                                    rb.waves, sync=True)
        assert dbs[2].delete_records(1, [forged]) == 1
    finally:
        for db in dbs.values():
            db.close()
    for i in range(4):
        cluster.start(i)

    code, report = check_json(cluster, "--logs", "1")
    assert code == 1
    v = report["violations"]
    assert v == {"placement": 1, "durability": len(victims), "progress": 0,
                 "availability": 0}
    dur = [d for d in report["details"] if d["category"] == "durability"]
    assert all(d["kind"] == "missing_copy" and d["nodes_missing"] == [3] for d in dur)
    found = sorted(x for d in dur for x in lsns if d["lsn_lo"] <= x <= d["lsn_hi"])
    assert found == victims  # exactly the lost records, nothing next to them
    (place,) = [d for d in report["details"] if d["category"] == "placement"]
    assert (place["lsn_lo"], place["lsn_hi"], place["copysets"]) == (forged, forged,
                                                                     [[0, 1]])

    # The same check in windows of a few records (pages of 7): the same verdict.
    small = run_check(cluster.config, CheckOptions(logs=[1], page_records=7,
                                                   window_records=16)).to_json()
    assert small["violations"] == v
    assert small["summary"] == report["summary"]
    assert sorted(x for d in small["details"] if d["category"] == "durability"
                  for x in lsns if d["lsn_lo"] <= x <= d["lsn_hi"]) == victims


def _stderr_lines(proc):
    lines = queue.Queue()

    def pump():
        for line in proc.stderr:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return lines


def test_paused_node_is_rechecked_not_reported_as_loss(local_cluster):
    cluster = local_cluster(nodes=3, replication=2, logs=range(1, 3))
    client = cluster.client()
    try:
        for i in range(100):
            client.append(1, b"p%d" % i)
    finally:
        client.close()
    cluster.pause(2)
    try:
        proc = subprocess.Popen(
            [LDSHELL, "--config", str(cluster.config_path),
             "--timeout", "1", "check", "--json", "--recheck-delay", "4"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            lines = _stderr_lines(proc)
            while True:  # the first round gave up on N2: let it answer the re-check
                line = lines.get(timeout=60)
                assert line is not None, "ldshell ended before re-checking"
                if "re-checking N2" in line:
                    break
            cluster.resume(2)
            out, _ = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        assert proc.returncode == 0, out
        report = json.loads(out)
        assert report["violations"] == {"placement": 0, "durability": 0, "progress": 0,
                                        "availability": 0}
        assert report["rechecked_nodes"] == [2]
        assert report["summary"]["records"] == 100

        # Silent through the re-check too, and no grace for nodes the cluster holds dead:
        # availability, never data loss.
        cluster.pause(2)
        p = subprocess.run(
            [LDSHELL, "--config", str(cluster.config_path),
             "--timeout", "1", "check", "--json", "--recheck-delay", "0.2",
             "--down-grace-ms", "0"],
            capture_output=True, text=True, timeout=120)
        assert p.returncode == 1, p.stderr
        report = json.loads(p.stdout)
        assert report["violations"] == {"placement": 0, "durability": 0, "progress": 0,
                                        "availability": 1}
        assert {d["nodes_missing"][0] for d in report["details"]} == {2}

        # Once the cluster holds it dead, within the grace period (the default: the
        # self-rebuild grace period), it is down: counted apart, not a violation.
        with RawClient(cluster) as raw:
            wait_until(lambda: 2 in raw.view(0).dead_for_ms, 30, 0.2,
                       "N0 never held the paused N2 dead")
        p = subprocess.run(
            [LDSHELL, "--config", str(cluster.config_path),
             "--timeout", "1", "check", "--json", "--recheck-delay", "0.2"],
            capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        report = json.loads(p.stdout)
        assert report["violations"] == {"placement": 0, "durability": 0, "progress": 0,
                                        "availability": 0}
        assert list(report["down_nodes"]) == ["2"]
        assert report["summary"]["unchecked"] > 0  # N2's copies: not checked, not lost
    finally:
        cluster.resume(2)


def test_periodic_checks_run_on_one_node_and_reach_metrics(local_cluster):
    cluster = local_cluster(nodes=3, replication=2, logs=range(1, 3),
                            checker_interval_ms=300)
    client = cluster.client()
    try:
        for i in range(50):
            client.append(1, b"c%d" % i)
    finally:
        client.close()
    def runs_now():
        return [total(scrape(cluster, i), "logdevice_checker_runs_total") for i in range(3)]

    # Wait for a check that started after the appends: two more runs than now.
    target = max(runs_now()) + 2
    deadline = time.monotonic() + 60
    while True:
        runs = runs_now()
        if max(runs) >= target:
            break
        assert time.monotonic() < deadline, f"no periodic check ran: {runs}"
        time.sleep(0.2)
    assert sorted(r > 0 for r in runs) == [False, False, True]  # the lease holder only
    holder = runs.index(max(runs))
    samples = scrape(cluster, holder)
    assert samples["logdevice_checker_records_checked"] == 50
    assert samples["logdevice_checker_records_missing_copies"] == 0
    assert samples["logdevice_checker_records_not_adhering_to_placement"] == 0


def test_node_budget_paces_the_check(local_cluster):
    # 2,000 records/s per node, a burst of 500: a node holding ~1,300 records needs
    # at least ~0.4 s to answer them all, however fast the reads are.
    cluster = local_cluster(nodes=3, replication=2, logs=range(1, 2),
                            checker_records_per_second=2000)
    client = cluster.client()
    try:
        client.append(1, b"first")  # activates the sequencer
        for chunk in range(0, 1999, 200):
            futs = [client.append_async(1, b"b%d" % i)
                    for i in range(chunk, min(chunk + 200, 1999))]
            for f in futs:
                f.result(timeout=60)
    finally:
        client.close()
    code, report = check_json(cluster, "--logs", "1")
    assert code == 0 and report["summary"]["records"] == 2000
    assert report["seconds"] >= 0.4, report["seconds"]  # timed inside the check
    served = [total(scrape(cluster, i), "logdevice_checker_records_served_total")
              for i in range(3)]
    assert sum(served) >= 4000  # every copy listed once: R=2 (more after a retried wave)


# -- what earlier checks missed or raised wrongly ---------------------------------------------


def _csi(db, log_id):
    return db.read_csi(log_id, 1, max_entries=1_000_000)


def _covered(details, kind):
    """The LSNs the details of ``kind`` cover, as a set of (lo, hi) expanded runs."""
    return [(d["lsn_lo"], d["lsn_hi"]) for d in details if d["kind"] == kind]


def test_a_copy_lost_on_the_node_a_drain_moved_it_to_is_reported(local_cluster):
    cluster = local_cluster(nodes=4, replication=2, logs=range(1, 2))
    client = cluster.client(timeout=30.0)
    try:
        for i in range(200):
            client.append(1, b"d%d" % i)
    finally:
        client.close()
    cluster.drain(3)
    cluster.wait_rebuilt([3], timeout=120)
    # The drained node keeps its old copies (flagged DRAINED, old copysets): they are not
    # holders, and nothing is wrong.
    code, report = check_json(cluster, "--logs", "1")
    assert code == 0, report
    assert report["summary"]["records"] == 200

    cluster.stop_all()
    dbs = {i: LogsDB(cluster.logsdb_path(i)) for i in range(4)}
    try:
        drained = _csi(dbs[3], 1)
        moved = drained.lsns[(drained.flags & np.uint32(FLAG_DRAINED)) != 0]
        assert len(moved) > 0
        # A moved record, and the node that took the new copy: one holding it now whose
        # copy was not there before (not in the drained copy's old copyset).
        lsn = int(moved[len(moved) // 2])
        old = {int(x) for x in drained.copysets[drained.lsns.tolist().index(lsn)] if x >= 0}
        takers = [i for i in range(3)
                  if i not in old and lsn in _csi(dbs[i], 1).lsns.tolist()]
        assert len(takers) == 1, (lsn, old, takers)
        assert dbs[takers[0]].delete_records(1, [lsn]) == 1
    finally:
        for db in dbs.values():
            db.close()
    for i in range(4):
        cluster.start(i)

    code, report = check_json(cluster, "--logs", "1")
    assert code == 1, report
    assert report["violations"] == {"placement": 0, "durability": 1, "progress": 0,
                                    "availability": 0}
    (d,) = report["details"]
    assert (d["kind"], d["lsn_lo"], d["lsn_hi"], d["nodes_missing"]) == (
        "missing_copy", lsn, lsn, takers)


def test_a_lost_tail_and_a_wholly_lost_epoch_are_reported(local_cluster):
    cluster = local_cluster(nodes=3, replication=2, logs=range(1, 2))
    client = cluster.client(timeout=30.0)
    try:
        first = [client.append(1, b"a%d" % i) for i in range(60)]
    finally:
        client.close()
    # A restart of every node: the next append activates a new epoch, whose recovery
    # ends the first one with a bridge record (the epoch store keeps where).
    cluster.stop_all()
    for i in range(3):
        cluster.start(i)
    client = cluster.client(timeout=30.0)
    try:
        later = [client.append(1, b"b%d" % i) for i in range(50)]
    finally:
        client.close()
    old_epoch, new_epoch = first[0] >> 32, later[0] >> 32
    assert {x >> 32 for x in first} == {old_epoch} and {x >> 32 for x in later} == {
        new_epoch} and new_epoch > old_epoch
    code, report = check_json(cluster, "--logs", "1")
    assert code == 0, report  # bridges and hole plugs are records like any other

    cluster.stop_all()
    dbs = {i: LogsDB(cluster.logsdb_path(i)) for i in range(3)}
    try:
        # Everything of the old epoch (its records and its bridge) and the new epoch's
        # last 10 records, on every node.
        lost = set(later[-10:])
        for db in dbs.values():
            held = _csi(db, 1).lsns.tolist()
            lost |= {x for x in held if x >> 32 == old_epoch}
        assert len(lost) > 10 + len(first)  # the bridge, at least
        for db in dbs.values():
            db.delete_records(1, sorted(lost))
    finally:
        for db in dbs.values():
            db.close()
    for i in range(3):
        cluster.start(i)

    code, report = check_json(cluster, "--logs", "1")
    assert code == 1, report
    assert report["violations"]["durability"] == len(lost)
    assert report["summary"]["no_replica"] == len(lost)
    runs = _covered(report["details"], "no_replica")
    assert sorted(x for lo, hi in runs for x in lost if lo <= x <= hi) == sorted(lost)
    assert sum(hi - lo + 1 for lo, hi in runs) == len(lost)  # nothing else


class CheckLoop:
    """Runs ``run_check`` again and again in a thread until ``finish``; keeps the reports."""

    def __init__(self, cluster) -> None:
        self.cluster = cluster
        self.reports: list = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.reports.append(run_check(self.cluster.config, CheckOptions(timeout=2.0)))

    def finish(self) -> list:
        self._stop.set()
        self._thread.join(120)
        assert not self._thread.is_alive(), "a check did not end"
        return self.reports


def _held_dead(cluster, node, by):
    with RawClient(cluster) as raw:
        return node in raw.view(by).dead_for_ms


def test_a_rolling_restart_raises_no_alarm_but_lost_copies_still_do(local_cluster):
    # Each node is down ~3.5 s, longer than the 2 s re-check, well within the grace
    # period; the checker runs all the while, from here and on the nodes.
    cluster = local_cluster(nodes=3, replication=2, logs=range(1, 3),
                            self_rebuild_grace_period_ms=120_000, checker_interval_ms=300)
    client = cluster.client(timeout=30.0)
    try:
        lsns = [client.append(1, b"r%d" % i) for i in range(100)]
        for i in range(30):
            client.append(2, b"s%d" % i)
        loop = CheckLoop(cluster)
        gauges = []  # the node-side checks' violation gauges, scraped along the way
        try:
            for node in range(3):
                t0 = time.monotonic()
                cluster.stop(node)
                other = (node + 1) % 3
                deadline = t0 + 30
                while not _held_dead(cluster, node, other):
                    assert time.monotonic() < deadline, f"N{other} never held N{node} dead"
                    time.sleep(0.1)
                if node == 1:  # ldshell too, while a node is down
                    code, report = check_json(cluster)
                    assert code == 0, report
                    assert report["down_nodes"], report
                while time.monotonic() < t0 + 3.5:  # stays down longer than the re-check
                    for i in set(range(3)) - {node}:
                        gauges.append(scrape(cluster, i))
                    time.sleep(0.3)
                cluster.start(node)
                for i in range(5):  # new epochs, recovered ones, while the checks go on
                    client.append(1, b"after-N%d-%d" % (node, i))
        finally:
            reports = loop.finish()
        assert reports and not any(r.errors for r in reports), [r.errors for r in reports]
        assert [r.violations for r in reports if any(r.violations.values())] == []
        assert any(r.down_nodes for r in reports), "no check ran while a node was down"
        for samples in gauges + [scrape(cluster, i) for i in range(3)]:
            assert sum(samples.get(name, 0) for name in (
                "logdevice_checker_records_not_adhering_to_placement",
                "logdevice_checker_records_missing_copies",
                "logdevice_checker_records_under_replicated_past_grace",
                "logdevice_checker_unavailable_nodes_not_in_event_log")) == 0
        runs = sum(total(scrape(cluster, i), "logdevice_checker_runs_total") for i in range(3))
        assert runs > 0
    finally:
        client.close()

    # Copies lost on N0 (deleted while it was stopped, nobody told) are found, also while
    # another node is down, and the down node is no violation.  (Records whose other
    # copy is on N1: with N2 down, one whose only other copy is there cannot be judged.)
    cluster.stop(0)
    with LogsDB(cluster.logsdb_path(0)) as db:
        csi = _csi(db, 1)
        with_n1 = [x for x, cs in zip(csi.lsns.tolist(), csi.copysets.tolist(), strict=True)
                   if x in set(lsns) and sorted(c for c in cs if c >= 0) == [0, 1]]
        victims = with_n1[5:10]
        assert len(victims) == 5 and db.delete_records(1, victims) == 5
    cluster.start(0)
    cluster.stop(2)
    wait_until(lambda: _held_dead(cluster, 2, 0), 30, 0.1, "N0 never held N2 dead")
    report = run_check(cluster.config, CheckOptions(logs=[1], timeout=2.0))
    assert report.violations == {"placement": 0, "durability": 5, "progress": 0,
                                 "availability": 0}, report.to_json()
    assert all(d["nodes_missing"] == [0] for d in report.details)
    assert sorted(x for d in report.details for x in victims
                  if d["lsn_lo"] <= x <= d["lsn_hi"]) == victims
    assert list(report.down_nodes) == [2]
