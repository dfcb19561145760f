"""Runtime log groups through the client API and ldshell, through the nodes (clients never
open the epoch store): a group created by one client (or by ldshell) is known to another
client at once, updates and removals follow, bad input names what is wrong."""

import json

import pytest

import logdevice as ld
from logdevice.errors import E, InvalidParamError, LogDeviceError, NotFoundError
from logdevice.tools.ldshell.main import main as ldshell
from tests.waiting import wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def config_path(module_cluster):
    return str(module_cluster(nodes=3, replication=2, logs=[1, 2]).config_path)


def test_a_group_created_by_one_client_is_known_to_another_at_once(config_path):
    with ld.Client(config_path) as a, ld.Client(config_path) as b:
        assert not b.config.has_log(500)
        group = a.create_log_group("events", 500, 599, replication=3, scd=False,
                                   backlog_retention_ms=60_000)
        assert group.replication_factor == 3 and not group.scd
        assert b.context.log_group(550).name == "events"  # unknown log: read once more, found
        assert [g.name for g in b.log_groups()][-1] == "events"
        assert b.update_log_group("events", replication=2).replication_factor == 2
        assert a.log_groups()[-1].replication_factor == 2
        b.remove_log_group("events")
        # a's next poll (logs_config_poll_ms) forgets it
        wait_until(lambda: not a.config.has_log(550), 10, 0.02, "a still has log 550")
        with pytest.raises(NotFoundError):
            a.context.log_group(550)
        with pytest.raises(NotFoundError):
            a.append(550, b"x")  # refused before anything is sent


def test_client_api_errors_name_the_problem(config_path):
    with ld.Client(config_path) as c:
        c.create_log_group("g", 100, 199, replication=1)
        with pytest.raises(LogDeviceError, match=r"ids 150..250.*overlaps.*'g' \(ids 100..199"
                           ) as ei:
            c.create_log_group("h", 150, 250, replication=1)
        assert ei.value.status == E.EXISTS
        with pytest.raises(LogDeviceError, match="overlaps") as ei:
            c.create_log_group("h", 2, 2, replication=1)  # a log of the config file
        assert ei.value.status == E.EXISTS
        with pytest.raises(InvalidParamError, match="valid: replication, nodeset_size"):
            c.create_log_group("h", 300, 300, replication=1, retention=5)
        with pytest.raises(InvalidParamError, match="defined in the config file"):
            c.update_log_group("logs_1_2" if c.config.logs[0].name == "logs_1_2"
                               else c.config.logs[0].name, replication=1)
        with pytest.raises(NotFoundError):
            c.remove_log_group("nope")
        c.remove_log_group("g")  # the module's next test starts with the file's groups


def test_ldshell_creates_lists_updates_and_removes(config_path, capsys):
    assert ldshell(["--config", config_path, "logs", "create", "ev", "--range", "700..799",
                    "--replication", "2", "--no-scd", "--set", "sticky_copysets=true"]) == 0
    assert "log group 'ev' created: logs 700..799" in capsys.readouterr().out
    assert ldshell(["--config", config_path, "logs", "update", "ev", "--replication",
                    '{"node": 3}']) == 0
    capsys.readouterr()
    from logdevice.tools.ldshell.context import ShellContext
    from logdevice.tools.ldshell.tables import TableOptions, build

    ctx = ShellContext(config_path)
    rows = build("log_groups", ctx, TableOptions()).to_pylist()
    ctx.close()
    ev = next(r for r in rows if r["name"] == "ev")
    assert (ev["source"], ev["replication_factor"], ev["scd"], ev["sticky_copysets"]) == (
        "runtime", 3, False, True)
    assert {r["source"] for r in rows if r["name"] != "ev"} == {"file"}
    assert ldshell(["--config", config_path, "logs", "create", "x", "--range", "750..900",
                    "--replication", "1"]) == 2
    assert "EXISTS" in capsys.readouterr().err
    assert ldshell(["--config", config_path, "logs", "remove", "ev"]) == 0
    assert ldshell(["--config", config_path, "logs", "remove", "ev"]) == 2
    assert "NOTFOUND" in capsys.readouterr().err
    with open(config_path) as f:  # the config file is never written
        assert [g["name"] for g in json.load(f)["logs"]] != ["ev"]
