"""Membership changes without restarts, with a writer and a tailing reader running: a
storage node added to the config file is adopted by the running nodes and clients (no
process restarts) and new epochs place copies on it; a drained node taken out of the
config is dropped from new nodesets and no longer part of anyone's view."""

from __future__ import annotations

import json
import time

from logdevice.epochstore import open_epoch_store
from tests.cluster.conftest import ldshell
from tests.cluster.test_rebuilding import non_sequencer
from tests.cluster.workload import Load, append_many

WAIT = 60.0  # every wait below is bounded by this


def nodes_holding(cluster, log_id: int) -> set[int]:
    p = ldshell(cluster, "query", "SELECT DISTINCT node FROM record_csi", "--logs",
                str(log_id), "--json")
    assert p.returncode == 0, p.stderr
    return {int(r["node"]) for r in json.loads(p.stdout)}


def test_added_node_takes_copies_in_new_epochs_without_restarts(local_cluster):
    cluster = local_cluster(nodes=3, replication=2, logs=[1, 2])
    pids = {i: cluster.pid(i) for i in range(3)}
    client = cluster.client(timeout=30.0)
    try:
        append_many(client, 2, 50, b"before")
        load = Load(client, 1, 1)
        new = cluster.add_node(roles=["storage"])  # a storage node: no log changes owner
        assert {i: cluster.pid(i) for i in range(3)} == pids  # nobody restarted
        deadline = time.monotonic() + WAIT
        while not client.config.has_node(new):  # the client adopted the file too
            assert time.monotonic() < deadline
            time.sleep(0.05)
        # The next epochs of log 2 place copies on the new node.
        while new not in nodes_holding(cluster, 2):
            assert time.monotonic() < deadline, "no copy on the new node"
            append_many(client, 2, 50, b"after")
        load.finish()  # log 1: nothing acknowledged was lost, no append failed
    finally:
        client.close()


def test_drained_node_leaves_without_restarts(local_cluster):
    cluster = local_cluster(nodes=4, replication=2, logs=[1])
    client = cluster.client(timeout=30.0)
    try:
        append_many(client, 1, 200, b"before")
        load = Load(client, 1, 1)
        leaving = non_sequencer(cluster, 1)  # stopping log 1's sequencer fails appends
        staying = [i for i in range(4) if i != leaving]
        cluster.drain(leaving)
        cluster.wait_rebuilt([leaving], timeout=120)
        cluster.stop(leaving)
        pids = {i: cluster.pid(i) for i in staying}
        cluster.remove_node(leaving)
        assert {i: cluster.pid(i) for i in staying} == pids  # nobody restarted
        deadline = time.monotonic() + WAIT
        with open_epoch_store(cluster.config.epoch_store_uri) as store:
            while leaving in store.get(1).metadata.nodeset:  # re-provisioned without it
                assert time.monotonic() < deadline
                client.append(1, b"x")
                time.sleep(0.05)
        members = "members now " + ", ".join(f"N{i}" for i in staying)
        for i in staying:
            assert members in cluster.log_path(i).read_text()
        load.finish()
    finally:
        client.close()
