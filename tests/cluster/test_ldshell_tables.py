"""ldshell's node-answered tables on a real cluster.

- ``readers``: a tailing reader has one stream on every storage node of the log's
  nodeset, from the LSN it asked for; the records shipped grow with appends; the rows go
  away with the reader;
- ``recoveries``: after the sequencer node of a log is killed, the node that takes the
  log over lists the finished recovery of the old epoch (and counts it in its metrics),
  and the dead node is reported as not answering.
"""

from __future__ import annotations

import json
import time

import pytest

from ldcore import lsn as ldlsn
from logdevice.records import DataRecord
from tests.cluster.conftest import RawClient, ldshell, scrape
from tests.waiting import wait_until

pytestmark = pytest.mark.cluster

LOG = 1


def query(cluster, sql: str) -> tuple[list[dict], str]:
    """Rows of ``ldshell query SQL --json`` and its stderr (warnings)."""
    p = ldshell(cluster, "query", sql, "--json")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout), p.stderr


def until(fetch, ok, timeout: float, what: str):
    """``fetch()`` again until ``ok`` of it holds (bounded); the last value."""
    last: list = [None]

    def fetched_ok() -> bool:
        last[0] = fetch()
        return bool(ok(last[0]))

    wait_until(fetched_ok, timeout, 0.2, lambda: f"timed out waiting for {what}; "
                                                 f"last: {last[0]}")
    return last[0]


def read_up_to(reader, lsn: int, timeout: float = 30.0) -> list[DataRecord]:
    got: list[DataRecord] = []
    deadline = time.monotonic() + timeout
    while not got or got[-1].lsn < lsn:
        assert time.monotonic() < deadline, f"the reader stopped at {got[-1:] or 'nothing'}"
        got += [x for x in reader.read(500, timeout=0.5) if isinstance(x, DataRecord)]
    return got


def test_readers_table_follows_a_tailing_reader(local_cluster):
    cluster = local_cluster(nodes=4, replication=2, logs=[LOG, 2])
    client = cluster.client(timeout=30.0)
    try:
        first = client.append(LOG, b"first")
        (meta,), _ = query(cluster, f"SELECT nodeset FROM epoch_store WHERE log_id = {LOG}")
        reader = client.create_reader()
        reader.start_reading(LOG, first)  # no end: the streams stay open
        read_up_to(reader, first)
        sql = f"SELECT * FROM readers WHERE log_id = {LOG} ORDER BY node"
        # Each node's stream moves past FIRST once that node has taken its release.
        rows = until(lambda: query(cluster, sql)[0],
                     lambda rs: rs and all(r["next_lsn"] > first for r in rs), 20,
                     "every stream to pass the first record")
        assert [r["node"] for r in rows] == sorted(meta["nodeset"])
        for r in rows:
            assert (r["peer"], r["start_lsn"], r["until_lsn"]) == ("client", first, 2**64 - 1)
            assert r["mode"] == "scd" and r["filter_version"] == 1
            assert r["delivered_to"] >= first
            assert r["address"].startswith("127.0.0.1:") and r["age_ms"] >= 0
        assert sum(r["records_sent"] for r in rows) >= 1  # SCD: one node shipped it

        lsns = [client.append(LOG, b"r%d" % i) for i in range(200)]
        read_up_to(reader, lsns[-1])
        rows = until(lambda: query(cluster, sql)[0],
                     lambda rs: all(r["next_lsn"] > lsns[-1] for r in rs), 20,
                     "every stream to pass the last record")
        assert sum(r["records_sent"] for r in rows) >= 201
        assert all(r["state"] == "release" for r in rows)  # tailing: waits for releases
        assert sum(r["bytes_sent"] for r in rows) >= sum(len(b"r%d" % i) for i in range(200))

        reader.close()
        until(lambda: query(cluster, sql)[0], lambda rs: rs == [], 20,
              "the closed reader's streams to go")
    finally:
        client.close()


def test_recoveries_table_shows_the_failover_recovery(local_cluster):
    cluster = local_cluster(nodes=4, replication=2, logs=[LOG])
    client = cluster.client(timeout=30.0)
    try:
        old_epoch = ldlsn.epoch_of(client.append(LOG, b"before"))
        with RawClient(cluster) as raw:
            victim = raw.owner(LOG)
        cluster.kill(victim)
        new_epoch = ldlsn.epoch_of(client.append(LOG, b"after"))
        assert new_epoch > old_epoch
        with RawClient(cluster) as raw:  # once the node asked, too, sees the victim dead
            owner = until(lambda: raw.owner(LOG), lambda o: o != victim, 20,
                          "the log's new sequencer")

        sql = (f"SELECT * FROM recoveries WHERE log_id = {LOG} AND seal_epoch = "
               f"{new_epoch - 1} ORDER BY epoch")
        rows, warnings = until(lambda: query(cluster, sql),
                               lambda q: q[0] and all(r["state"] == "done" for r in q[0]),
                               30, "the recovery to finish")
        assert f"N{victim} did not answer GetRecoveries" in warnings
        assert {r["node"] for r in rows} == {owner}
        (old,) = [r for r in rows if r["epoch"] == old_epoch]
        assert (old["outcome"], old["attempt"], old["last_clean_epoch"]) == (
            "OK", 1, new_epoch - 1)
        assert old["pending"] == 0 and old["duration_ms"] >= 0
        # Enough of the nodeset sealed (an f-majority: R=2 of 4 needs 3) and sent digests.
        assert len(old["sealed"]) >= 3 and set(old["sealed"]) <= set(old["nodeset"])
        assert victim not in old["sealed"] and set(old["digested"]) <= set(old["sealed"])
        # The old epoch ends with a bridge record, past what was released in it.
        assert ldlsn.epoch_of(old["bridge"]) == old_epoch and old["bridge"] > old["lng"]
        metrics = scrape(cluster, owner)
        assert metrics["logdevice_recoveries_total"] >= 1
        assert metrics["logdevice_recoveries_running"] == 0
    finally:
        client.close()
