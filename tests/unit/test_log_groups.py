"""Runtime log groups (LogsConfig), the pure part: a group is validated like a config file
entry, names and id ranges must not be taken (EXISTS names both groups), updates and
removals touch only runtime groups, and the merged config finds the new logs."""

import pytest

from logdevice.config import Config, ReplicationProperty
from logdevice.config.log_groups import (
    ATTRIBUTES,
    add_group,
    affects_sequencer,
    change_group,
    drop_group,
    group_entry,
    parse_groups,
)
from logdevice.errors import E, InvalidParamError, LogDeviceError, NotFoundError


@pytest.fixture
def base() -> Config:
    return Config.from_dict({
        "cluster": "t",
        "nodes": [{"index": i, "host": "127.0.0.1", "port": 4440 + i} for i in range(3)],
        "logs": [{"name": "file", "id": [1, 100], "replication": 2}],
    })


def test_create_validates_like_the_config_file_and_merges(base):
    entries, group = add_group([], base, group_entry("new", 200, 299, {
        "replication": {"node": 3}, "backlog_retention_ms": 60_000, "scd": False}))
    assert group.replication == ReplicationProperty.parse(3) and not group.scd
    groups, problems = parse_groups(entries, base)
    assert problems == [] and groups == (group,)
    merged = base.with_log_groups(groups)
    assert merged.log_group(250) == group and merged.log_group(5).name == "file"
    assert merged.runtime_logs == (group,) and merged.file_logs == base.logs
    assert [g["name"] for g in merged.to_dict()["logs"]] == ["file"]  # the file stays the file
    assert not base.has_log(250)  # configs are values: the base is unchanged


@pytest.mark.parametrize("lo, hi, other", [(50, 150, "file"), (100, 100, "file"),
                                            (299, 400, "new"), (150, 250, "new")])
def test_overlapping_ranges_are_refused_naming_both(base, lo, hi, other):
    entries, _ = add_group([], base, group_entry("new", 200, 299, {"replication": 1}))
    with pytest.raises(LogDeviceError) as ei:
        add_group(entries, base, group_entry("x", lo, hi, {"replication": 1}))
    assert ei.value.status == E.EXISTS
    assert f"ids {lo}..{hi}" in ei.value.message and f"{other!r}" in ei.value.message


def test_taken_names_and_bad_attributes(base):
    with pytest.raises(LogDeviceError, match="name 'file' is taken") as ei:
        add_group([], base, group_entry("file", 500, 500, {"replication": 1}))
    assert ei.value.status == E.EXISTS
    with pytest.raises(InvalidParamError, match="unknown log group attribute.*replicaton.*"
                                                "valid: replication, nodeset_size"):
        group_entry("g", 500, 500, {"replicaton": 1})
    with pytest.raises(InvalidParamError, match="4 copies need 4 storage nodes"):
        add_group([], base, group_entry("g", 500, 500, {"replication": 4}))
    with pytest.raises(InvalidParamError, match="id.*out of range"):
        add_group([], base, group_entry("g", 0, 5, {"replication": 1}))
    with pytest.raises(InvalidParamError, match="replication"):
        add_group([], base, group_entry("g", 500, 500, {}))
    assert "name" not in ATTRIBUTES and "replication" in ATTRIBUTES


def test_update_and_remove_touch_runtime_groups_only(base):
    entries, old = add_group([], base, group_entry("g", 200, 200, {"replication": 2,
                                                                    "scd": False}))
    entries, new = change_group(entries, base, "g", {"replication": 3, "scd": None})
    assert new.replication_factor == 3 and new.scd  # None: back to the default
    assert affects_sequencer(old, new)
    _, renamed_acl = change_group(entries, base, "g", {"backlog_retention_ms": 5})
    assert not affects_sequencer(new, renamed_acl)  # retention: no new epoch
    with pytest.raises(InvalidParamError, match="defined in the config file"):
        change_group(entries, base, "file", {"replication": 1})
    with pytest.raises(NotFoundError):
        drop_group(entries, base, "nope")
    with pytest.raises(InvalidParamError, match="unknown log group attribute"):
        change_group(entries, base, "g", {"id": 7})
    assert drop_group(entries, base, "g") == []


def test_stored_groups_that_no_longer_fit_are_left_out_leniently(base):
    entries = [{"name": "ok", "id": 300, "replication": 1},
               {"name": "too_wide", "id": 301, "replication": 9},
               {"name": "clash", "id": [50, 60], "replication": 1},
               "garbage"]
    groups, problems = parse_groups(entries, base, strict=False)
    assert [g.name for g in groups] == ["ok"] and len(problems) == 3
    with pytest.raises(InvalidParamError):
        parse_groups(entries, base)
