"""The cluster config: valid configs round-trip, every kind of bad config is refused with
an InvalidConfigError naming the file and the field."""

import copy
import json
from pathlib import Path

import pytest

from logdevice.config import (
    USER_LOGID_MAX,
    Config,
    Location,
    NodeLocationScope,
    ReplicationProperty,
    make_local_config,
)
from logdevice.config.local import id_ranges
from logdevice.errors import E, InvalidConfigError, NotFoundError

S = NodeLocationScope


def base_config() -> dict:
    return {
        "cluster": "test",
        "nodes": [
            {
                "index": i,
                "host": "127.0.0.1",
                "port": 4440 + i,
                "admin_port": 5440 + i,
                "location": f"rg1.dc1.cl1.row{i % 2}.rack{i}",
                "roles": ["sequencer", "storage"],
                "weights": {"sequencer": 1.0, "storage": 1.0},
            }
            for i in range(5)
        ],
        "logs": [
            {"name": "main", "id": [1, 100], "replication": {"rack": 2, "node": 3}},
            {"name": "one", "id": 200, "replication": 2, "sticky_copysets": True,
             "backlog_retention_ms": 86_400_000, "nodeset_size": 4},
        ],
        "epoch_store": "file:epochs.sqlite",
        "data_dir": "data",
        "settings": {"read_window_size": 256},
    }


def write(tmp_path: Path, d: dict) -> Path:
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(d))
    return path


# -- valid configs -------------------------------------------------------------------------
def test_load_round_trips(tmp_path):
    path = write(tmp_path, base_config())
    cfg = Config.load(path)
    assert cfg.cluster == "test" and len(cfg.nodes) == 5 and len(cfg.logs) == 2
    assert cfg.source == str(path) and cfg.base_dir == tmp_path.resolve()
    again = Config.from_dict(cfg.to_dict(), source=path)
    assert again == cfg
    out = cfg.dump(tmp_path / "copy.json")
    assert Config.load(out) == cfg
    assert json.loads(out.read_text()) == cfg.to_dict()
    assert cfg.settings.read_window_size == 256
    assert cfg.to_dict()["settings"] == {"read_window_size": 256}  # only what differs


def test_defaults_and_paths(tmp_path):
    d = {"cluster": "mini", "nodes": [{"index": 7, "host": "localhost", "port": 4000}],
         "logs": [{"id": 1, "replication": 1}]}
    cfg = Config.load(write(tmp_path, d))
    node = cfg.node(7)
    assert node.roles == {"sequencer", "storage"} and node.location.is_empty
    assert node.weights.sequencer == node.weights.storage == 1.0 and node.admin_port is None
    assert cfg.epoch_store_uri == f"file:{tmp_path.resolve() / 'epochs.sqlite'}"
    assert cfg.node_data_dir(7) == tmp_path.resolve() / "data" / "N7"
    g = cfg.log_group(1)
    assert g.name == "log_1" and (g.lo, g.hi) == (1, 1)
    assert g.scd is True and g.sticky_copysets is False and g.max_writes_in_flight == 1000
    assert g.store_timeout_ms == (100, 60_000) and g.nodeset_size is None
    assert cfg.settings.max_payload_size == 32 * 1024 * 1024
    assert cfg.settings.read_window_size == 512
    assert "settings" not in cfg.to_dict()


def test_node_data_dir_override_and_zookeeper_uri(tmp_path):
    d = base_config()
    d["nodes"][2]["data_dir"] = "/srv/ld/n2"
    d["nodes"][3]["data_dir"] = "elsewhere"
    d["epoch_store"] = "zookeeper:zk1:2181,zk2:2181/logdevice/test"
    cfg = Config.load(write(tmp_path, d))
    assert cfg.node_data_dir(2) == Path("/srv/ld/n2")
    assert cfg.node_data_dir(3) == tmp_path.resolve() / "elsewhere"
    assert cfg.node_data_dir(0) == tmp_path.resolve() / "data" / "N0"
    assert cfg.epoch_store_uri == "zookeeper:zk1:2181,zk2:2181/logdevice/test"


def test_lookups():
    cfg = Config.from_dict(base_config())
    assert cfg.log_group(1).name == cfg.log_group(100).name == "main"
    assert cfg.log_group(200).name == "one"
    for missing in (0, 101, 150, 201, 2**70, -1):
        with pytest.raises(NotFoundError) as ei:
            cfg.log_group(missing)
        assert ei.value.status == E.NOTFOUND
    assert cfg.has_log(50) and not cfg.has_log(150)
    assert list(cfg.log_ids()) == [*range(1, 101), 200]
    with pytest.raises(NotFoundError):
        cfg.node(9)
    assert cfg.nodeset_size(cfg.log_group(1)) == 5 and cfg.nodeset_size(cfg.log_group(200)) == 4


def test_roles_and_weights():
    d = base_config()
    d["nodes"][0]["roles"] = ["sequencer"]
    d["nodes"][1]["roles"] = ["storage"]
    d["nodes"][2]["weights"] = {"storage": 0.0}
    d["logs"] = [{"id": [1, 10], "replication": 3}]
    cfg = Config.from_dict(d)
    assert [n.index for n in cfg.sequencer_nodes()] == [0, 2, 3, 4]
    assert [n.index for n in cfg.storage_nodes()] == [1, 2, 3, 4]
    assert [n.index for n in cfg.writable_storage_nodes()] == [1, 3, 4]
    assert cfg.node(0).storage_weight == 0.0 and cfg.node(1).sequencer_weight == 0.0
    assert cfg.sequencer_weights() == {0: 1.0, 2: 1.0, 3: 1.0, 4: 1.0}


def test_id_forms():
    d = base_config()
    d["logs"] = [{"id": "1..10", "replication": 2}, {"id": [11, 11], "replication": 2},
                 {"id": USER_LOGID_MAX, "replication": 2}]
    cfg = Config.from_dict(d)
    assert [(g.lo, g.hi) for g in cfg.logs] == [(1, 10), (11, 11), (USER_LOGID_MAX,) * 2]
    assert cfg.to_dict()["logs"][1]["id"] == 11
    assert Config.from_dict(cfg.to_dict()) == cfg


def test_location():
    loc = Location.parse("r1.dc1..row1.rack2")
    assert loc.label(S.CLUSTER) == "" and loc.label(S.RACK) == "rack2"
    assert loc.domain(S.REGION) == "r1" and loc.domain(S.CLUSTER) is None
    assert loc.domain(S.RACK) == "r1.dc1..row1.rack2" and loc.domain(S.ROOT) == ""
    assert str(loc) == "r1.dc1..row1.rack2" and Location.parse("").is_empty
    assert str(Location.parse("....")) == ""
    # Same rack name in different rows: different domains.
    other = Location.parse("r1.dc1..row2.rack2")
    assert other.domain(S.RACK) != loc.domain(S.RACK)
    assert loc.shared_scope(other) == S.DATA_CENTER
    assert loc.shared_scope(loc) == S.RACK
    assert loc.shared_scope(Location.parse("r9.dc1.c.row1.rack2")) == S.ROOT
    for bad in ("a.b.c", "a.b.c.d.e.f", "a b.c.d.e.f", "a.b/c.d.e.f"):
        with pytest.raises(ValueError):
            Location.parse(bad)


def test_replication_property():
    rp = ReplicationProperty.parse({"node": 3, "rack": 2})
    assert rp.replication_factor == 3
    assert rp.requirements == ((S.RACK, 2), (S.NODE, 3))  # biggest scope first
    assert rp.biggest_scope == S.RACK
    assert rp.copies(S.NODE) == 3 and rp.copies(S.RACK) == 2 and rp.copies(S.REGION) == 1
    assert rp.to_dict() == {"rack": 2, "node": 3} and rp.to_config() == {"rack": 2, "node": 3}
    implied = ReplicationProperty.parse({"rack": 3})
    assert implied.requirements == ((S.RACK, 3), (S.NODE, 3))
    plain = ReplicationProperty.parse(2)
    assert plain.requirements == ((S.NODE, 2),) and plain.to_config() == 2
    assert plain.to_dict() == {"node": 2}
    wide = ReplicationProperty.parse({"region": 2, "node": 4})
    assert wide.copies(S.RACK) == 2 and wide.copies(S.DATA_CENTER) == 2
    assert str(rp) == "{rack: 2, node: 3}"


def test_make_local_config(tmp_path):
    cfg = make_local_config(5, 2, root=tmp_path, ports=range(6000, 6005),
                            admin_ports=range(7000, 7005), log_attrs={"sticky_copysets": True})
    assert [n.port for n in cfg.nodes] == list(range(6000, 6005))
    assert [n.admin_port for n in cfg.nodes] == list(range(7000, 7005))
    assert cfg.log_group(1) is cfg.log_group(100) and cfg.log_group(1).sticky_copysets
    assert cfg.epoch_store_uri == f"file:{tmp_path.resolve() / 'epochs.sqlite'}"
    assert cfg.node_data_dir(4) == tmp_path.resolve() / "data" / "N4"
    path = cfg.dump(tmp_path / "cluster.json")
    assert Config.load(path) == cfg
    import pickle

    back = pickle.loads(pickle.dumps(cfg))  # configs travel to worker processes
    assert back == cfg and hash(back) == hash(cfg) and back.log_group(7).name == "logs_1_100"
    racks = make_local_config(4, {"rack": 2, "node": 2}, logs=[1, 2, 3, 10], root=tmp_path,
                              ports=[1, 2, 3, 4], locations=[f"r.d.c.w.k{i % 2}" for i in range(4)])
    assert [(g.lo, g.hi) for g in racks.logs] == [(1, 3), (10, 10)]
    with pytest.raises(InvalidConfigError):
        make_local_config(2, 3, root=tmp_path, ports=[1, 2])
    with pytest.raises(ValueError):
        make_local_config(3, 2, root=tmp_path, ports=[1, 2])


def test_id_ranges():
    assert id_ranges(range(1, 101)) == [(1, 100)]
    assert id_ranges(range(5, 5)) == []
    assert id_ranges([7, 1, 2, 3, 3, 9, 8]) == [(1, 3), (7, 9)]


# -- bad configs ---------------------------------------------------------------------------
def _set(path, value):
    """A mutation setting d[path...] = value (a path of keys and indices)."""
    def mutate(d):
        obj = d
        for key in path[:-1]:
            obj = obj[key]
        obj[path[-1]] = value
    return mutate


def _two_racks(d):
    for i, n in enumerate(d["nodes"]):
        n["location"] = f"rg1.dc1.cl1.row1.rack{i % 2}"
    d["logs"][0]["replication"] = {"rack": 3, "node": 3}


def _all_roles(role):
    def mutate(d):
        for n in d["nodes"]:
            n["roles"] = [role]
    return mutate


def _zero_weights(d):
    for n in d["nodes"][:3]:
        n["weights"]["storage"] = 0


BAD = [
    # (id, mutation, field, words in the message)
    ("file-store-many-hosts", _set(["nodes", 1, "host"], "db2.example"), "epoch_store",
     "is a file on one machine, but the nodes name 2 hosts (127.0.0.1, db2.example)"),
    ("unknown-top-key", _set(["nodez"], []), "nodez", "unknown key"),
    ("unknown-node-key", _set(["nodes", 1, "prot"], 1), "nodes[1].prot", "unknown key"),
    ("unknown-log-key", _set(["logs", 1, "stickycopysets"], True), "logs[1].stickycopysets",
     "did you mean 'sticky_copysets'"),
    ("cluster-type", _set(["cluster"], 5), "cluster", "expected a string"),
    ("cluster-name", _set(["cluster"], "a b"), "cluster", "letters"),
    ("nodes-missing", lambda d: d.pop("nodes"), "nodes", "required"),
    ("nodes-empty", _set(["nodes"], []), "nodes", "at least one node"),
    ("port-type", _set(["nodes", 2, "port"], "4442"), "nodes[2].port", "expected an integer"),
    ("port-range", _set(["nodes", 2, "port"], 70000), "nodes[2].port", "<= 65535"),
    ("index-bool", _set(["nodes", 0, "index"], True), "nodes[0].index", "expected an integer"),
    ("index-negative", _set(["nodes", 0, "index"], -1), "nodes[0].index", ">= 0"),
    ("index-dup", _set(["nodes", 3, "index"], 1), "nodes[3].index", "duplicate node index 1"),
    ("addr-dup", _set(["nodes", 4, "port"], 4441), "nodes[4].port", "127.0.0.1:4441"),
    ("admin-port-dup", _set(["nodes", 1, "admin_port"], 4443), "nodes[3].port",
     "already used by nodes[1].admin_port"),
    ("admin-port-own", _set(["nodes", 1, "admin_port"], 4441), "nodes[1].admin_port",
     "already used by nodes[1].port"),
    ("host-bad", _set(["nodes", 0, "host"], "bad host"), "nodes[0].host", "not a host"),
    ("role-unknown", _set(["nodes", 0, "roles"], ["storage", "writer"]), "nodes[0].roles[1]",
     "unknown role"),
    ("role-dup", _set(["nodes", 0, "roles"], ["storage", "storage"]), "nodes[0].roles[1]",
     "twice"),
    ("roles-empty", _set(["nodes", 0, "roles"], []), "nodes[0].roles", "at least one role"),
    ("no-storage", _all_roles("sequencer"), "nodes", "storage role"),
    ("no-sequencer", _all_roles("storage"), "nodes", "sequencer role"),
    ("weight-negative", _set(["nodes", 0, "weights", "storage"], -1), "nodes[0].weights.storage",
     ">= 0"),
    ("weight-key", _set(["nodes", 0, "weights", "storag"], 1), "nodes[0].weights.storag",
     "unknown key"),
    ("weight-nan", _set(["nodes", 0, "weights", "sequencer"], float("nan")),
     "nodes[0].weights.sequencer", "finite"),
    ("location-parts", _set(["nodes", 2, "location"], "a.b.c.d"), "nodes[2].location",
     "4 labels"),
    ("location-chars", _set(["nodes", 2, "location"], "a.b.c.d.e f"), "nodes[2].location",
     "label"),
    ("location-type", _set(["nodes", 2, "location"], 3), "nodes[2].location", "string"),
    ("logs-type", _set(["logs"], {"id": 1}), "logs", "expected an array"),
    ("log-overlap", _set(["logs", 1, "id"], [50, 300]), "logs[1].id", "overlap logs[0]"),
    ("log-overlap-earlier", lambda d: d["logs"].insert(0, {"id": 200, "replication": 2,
                                                           "name": "dup200"}),
     "logs[2].id", "overlap logs[0]"),
    ("log-id-zero", _set(["logs", 0, "id"], [0, 10]), "logs[0].id", "out of range"),
    ("log-id-big", _set(["logs", 1, "id"], USER_LOGID_MAX + 1), "logs[1].id", "out of range"),
    ("log-id-empty", _set(["logs", 0, "id"], [10, 1]), "logs[0].id", "lo > hi"),
    ("log-id-string", _set(["logs", 0, "id"], "1-10"), "logs[0].id", "lo..hi"),
    ("log-id-arity", _set(["logs", 0, "id"], [1, 2, 3]), "logs[0].id", "[lo, hi]"),
    ("log-id-missing", lambda d: d["logs"][0].pop("id"), "logs[0].id", "required"),
    ("log-name-dup", _set(["logs", 1, "name"], "main"), "logs[1].name", "duplicate"),
    ("rep-missing", lambda d: d["logs"][0].pop("replication"), "logs[0].replication",
     "required"),
    ("rep-type", _set(["logs", 0, "replication"], "3"), "logs[0].replication",
     "expected an integer or an object"),
    ("rep-zero", _set(["logs", 1, "replication"], 0), "logs[1].replication", ">= 1"),
    ("rep-too-many-nodes", _set(["logs", 1, "replication"], 6), "logs[1].replication",
     "6 copies need 6 storage nodes"),
    ("rep-scope-unknown", _set(["logs", 0, "replication"], {"shelf": 2}),
     "logs[0].replication.shelf", "unknown scope"),
    ("rep-scope-count", _set(["logs", 0, "replication"], {"rack": "2"}),
     "logs[0].replication.rack", "expected an integer"),
    ("rep-racks-available", _two_racks, "logs[0].replication.rack", "needs 3 racks"),
    ("rep-rack-over-node", _set(["logs", 0, "replication"], {"rack": 3, "node": 2}),
     "logs[0].replication.rack", "node is 2"),
    ("rep-region-over-rack", _set(["logs", 0, "replication"], {"region": 3, "rack": 2,
                                                               "node": 3}),
     "logs[0].replication.region", "cannot fit"),
    ("rep-implied-node", _set(["logs", 0, "replication"], {"rack": 6}),
     "logs[0].replication.rack", "6 copies need 6 storage nodes"),
    ("rep-no-rack-label", _set(["nodes", 3, "location"], ""), "logs[0].replication.rack",
     "node 3"),
    ("rep-weight-zero", _zero_weights, "logs[0].replication.node", "storage weight > 0"),
    ("nodeset-small", _set(["logs", 0, "nodeset_size"], 2), "logs[0].nodeset_size",
     "smaller than the replication factor 3"),
    ("scd-type", _set(["logs", 0, "scd"], "yes"), "logs[0].scd", "true or false"),
    ("mwif-zero", _set(["logs", 0, "max_writes_in_flight"], 0), "logs[0].max_writes_in_flight",
     ">= 1"),
    ("timeouts-order", _set(["logs", 0, "store_timeout_ms"], [100, 10]),
     "logs[0].store_timeout_ms", "initial 100 > max 10"),
    ("timeouts-type", _set(["logs", 0, "store_timeout_ms"], [10, "x"]),
     "logs[0].store_timeout_ms[1]", "integer"),
    ("retention-zero", _set(["logs", 1, "backlog_retention_ms"], 0),
     "logs[1].backlog_retention_ms", ">= 1"),
    ("uri-scheme", _set(["epoch_store"], "mysql://x"), "epoch_store", "unknown scheme"),
    ("uri-no-scheme", _set(["epoch_store"], "/tmp/epochs.sqlite"), "epoch_store", "no scheme"),
    ("uri-file-empty", _set(["epoch_store"], "file:"), "epoch_store", "file path"),
    ("uri-file-host", _set(["epoch_store"], "file://otherhost/x.sqlite"), "epoch_store",
     "file:///"),
    ("uri-zk-port", _set(["epoch_store"], "zookeeper:zk1/root"), "epoch_store", "host:port"),
    ("uri-zk-root", _set(["epoch_store"], "zookeeper:zk1:2181/a b"), "epoch_store", "znode"),
    ("data-dir-empty", _set(["data_dir"], ""), "data_dir", "empty"),
    ("setting-unknown", _set(["settings", "heartbeat_ms"], 5), "settings.heartbeat_ms",
     "did you mean 'heartbeat_interval_ms'"),
    ("setting-payload", _set(["settings", "max_payload_size"], 64 * 1024 * 1024),
     "settings.max_payload_size", "<= 33554432"),
    ("setting-type", _set(["settings", "read_window_size"], 1.5), "settings.read_window_size",
     "integer"),
    ("setting-threshold", _set(["settings", "read_flow_control_threshold"], 1.5),
     "settings.read_flow_control_threshold", "<= 1.0"),
    ("setting-fd-order", _set(["settings", "suspect_timeout_ms"], 10_000),
     "settings.suspect_timeout_ms", "dead_timeout_ms"),
    ("settings-type", _set(["settings"], [1]), "settings", "expected an object"),
    ("setting-durability", _set(["settings", "append_store_durability"], "fsync"),
     "settings.append_store_durability", "memory, async_write, sync_write"),
]


@pytest.mark.parametrize(("mutate", "field", "words"), [b[1:] for b in BAD],
                         ids=[b[0] for b in BAD])
def test_bad_config_names_field_and_file(tmp_path, mutate, field, words):
    d = copy.deepcopy(base_config())
    mutate(d)
    path = write(tmp_path, d)
    with pytest.raises(InvalidConfigError) as ei:
        Config.load(path)
    err = ei.value
    assert err.status == E.INVALID_CONFIG
    assert err.field == field, str(err)
    assert err.source == str(path)
    assert str(path) in str(err) and f": {field}: " in str(err)
    assert words in str(err)
    # from_dict reports the same field, naming the given source.
    with pytest.raises(InvalidConfigError) as ei2:
        Config.from_dict(d, source="inline.json")
    assert ei2.value.field == field and "inline.json" in str(ei2.value)


def test_unreadable_and_malformed_files(tmp_path):
    with pytest.raises(InvalidConfigError, match="cannot read"):
        Config.load(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"cluster": "x",\n "nodes": [}')
    with pytest.raises(InvalidConfigError, match=r"bad\.json: not valid JSON at line 2"):
        Config.load(bad)
    top = tmp_path / "top.json"
    top.write_text("[1, 2]")
    with pytest.raises(InvalidConfigError, match="expected an object"):
        Config.load(top)


def test_zookeeper_store_serves_many_hosts(tmp_path):
    d = base_config()
    for i, n in enumerate(d["nodes"]):
        n["host"] = f"127.0.0.{i + 2}"
    d["epoch_store"] = "zookeeper:127.0.0.1:2181/test"
    cfg = Config.load(write(tmp_path, d))
    assert [n.address[0] for n in cfg.nodes] == [f"127.0.0.{i + 2}" for i in range(5)]


@pytest.mark.parametrize("depth", [100_000, 5_000])
def test_deeply_nested_config_is_a_config_error(tmp_path, depth):
    path = tmp_path / "deep.json"
    path.write_text('{"cluster": "x", "settings": ' + "[" * depth + "]" * depth + "}")
    with pytest.raises(InvalidConfigError, match="nested") as ei:
        Config.load(path)
    assert str(path) in str(ei.value)
    nested: list = []
    for _ in range(depth):
        nested = [nested]
    with pytest.raises(InvalidConfigError, match="nested"):
        Config.from_dict({**base_config(), "settings": {"read_window_size": nested}})


def test_error_is_a_value_error_and_pickles():
    import pickle

    with pytest.raises(ValueError) as ei:
        Config.from_dict({"cluster": "x"})
    back = pickle.loads(pickle.dumps(ei.value))
    assert isinstance(back, InvalidConfigError) and back.status == E.INVALID_CONFIG
