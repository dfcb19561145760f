"""Membership changes without restarts, the pure parts: a changed config file is noticed
(stat, then content hash), what of it a running process adopts (nodes and log groups;
other sections wait for a restart), and the failure detector's node list."""

import os

from logdevice.config import Config, make_local_config
from logdevice.config.watch import ConfigFileWatch, live_changes
from logdevice.node.roles.failure_detector_role import FailureDetector


def test_a_changed_file_is_noticed_once_and_an_invalid_one_ignored(tmp_path):
    cfg = make_local_config(3, 2, logs=[1], root=tmp_path, ports=[1, 2, 3])
    path = cfg.dump(tmp_path / "cluster.json")
    watch = ConfigFileWatch(path)
    assert watch.changed() is None
    cfg.dump(path)  # rewritten, same content: nothing to adopt
    assert watch.changed() is None
    d = cfg.to_dict()
    d["nodes"].append({"index": 3, "host": "127.0.0.1", "port": 4})
    Config.from_dict(d).dump(path)
    new = watch.changed()
    assert new is not None and new.has_node(3) and watch.changed() is None
    path.write_text("{ half written")
    os.utime(path, ns=(1, 1))
    assert watch.changed() is None  # logged, the old config stays in use


def test_only_nodes_and_log_groups_are_adopted_live(tmp_path):
    old = make_local_config(3, 2, logs=[1], root=tmp_path, ports=[1, 2, 3])
    d = old.to_dict()
    d["nodes"] = d["nodes"][:2]
    d["logs"][0]["replication"] = 1
    d.setdefault("settings", {})["heartbeat_interval_ms"] = 50
    merged, restart = live_changes(old, Config.from_dict(d))
    assert [n.index for n in merged.nodes] == [0, 1]
    assert merged.logs[0].replication_factor == 1
    assert restart == ["settings"] and merged.settings == old.settings


def test_failure_detector_follows_the_node_list():
    fd = FailureDetector(0, [0, 1, 2], dead_after=1.0, now=0.0)
    fd.on_heartbeat(1, 1, 0.1)
    fd.on_heartbeat(2, 1, 0.1)
    assert fd.tick(0.2) == (set(), set()) and fd.live == {0, 1, 2}
    assert fd.set_nodes([0, 1, 3]) == {2}  # N2 removed: reported down by the caller
    assert fd.tick(0.3) == (set(), set()) and fd.live == {0, 1}  # N3 not live yet
    assert fd.on_heartbeat(2, 1, 0.4) == (set(), set())  # a removed node is ignored
    assert fd.on_heartbeat(3, 1, 0.5) == (set(), {3}) and fd.live == {0, 1, 3}
