"""``ld-dev-cluster`` (``tools.dev_cluster.main``): bad arguments are argparse usage errors (exit
2) before anything starts, every option has a help text, the node count it prints is the
cluster's, and its errors never send the user to a file under a temporary root that is
removed on exit (they quote the end of the node's log instead)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from logdevice.tools import dev_cluster
from logdevice.tools.dev_cluster import main

# main() installs SIGINT/SIGTERM handlers: pytest gets its own back after each test.
pytestmark = pytest.mark.usefixtures("keep_signal_handlers")


def usage_error(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit) as ei:
        main(list(argv))
    assert ei.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: ld-dev-cluster"), err
    return err


@pytest.mark.parametrize("argv, says", [
    (["--nodes", "0"], "'0' is not an integer >= 1"),
    (["--nodes", "two"], "'two' is not an integer >= 1"),
    (["--replication", "0"], "'0' is not an integer >= 1"),
    (["--nodes", "3", "--replication", "4"], "--replication 4 is more than the 3 nodes"),
    (["--replication", "6"], "--replication 6 is more than the 5 nodes"),
    (["--logs", "1-x"], "'1-x' is neither a log id nor a range"),
    (["--logs", "9-3"], "lo <= hi"),
    (["--logs", "0"], "log ids are >= 1"),
    (["--logs", "1,,2"], "'' is neither a log id"),
    (["--log-level", "chatty"], "invalid choice: 'CHATTY'"),
    (["--epoch-store", "redis:1"], "unknown scheme 'redis'"),
    (["--hosts", "127.0.0.2,10.0.0.1", "--epoch-store", "zookeeper:127.0.0.1:2181/x"],
     "'10.0.0.1' is not a loopback IPv4 address"),
    (["--hosts", "localhost"], "'localhost' is not a loopback IPv4 address"),
    (["--hosts", "127.0.0.2,127.0.0.3"], "--hosts needs --epoch-store zookeeper:"),
    (["--hosts", "127.0.0.2,127.0.0.3", "--nodes", "3",
      "--epoch-store", "zookeeper:127.0.0.1:2181/x"], "--nodes 3 but --hosts has 2 addresses"),
    (["--hosts", "127.0.0.2,127.0.0.3", "--replication", "3",
      "--epoch-store", "zookeeper:127.0.0.1:2181/x"], "--replication 3 is more than the 2"),
])
def test_bad_arguments_are_usage_errors(capsys, monkeypatch, argv, says):
    def no_cluster(*a, **kw):
        raise AssertionError("a cluster was started despite bad arguments")

    monkeypatch.setattr(dev_cluster, "LocalCluster", no_cluster)
    err = usage_error(capsys, *argv)
    assert "ld-dev-cluster: error: " in err and says in err, err


def test_every_option_has_help():
    options = [a for a in dev_cluster.build_parser()._actions
               if a.option_strings and not isinstance(a, argparse._HelpAction)]
    assert {o for a in options for o in a.option_strings} >= {
        "--nodes", "--replication", "--logs", "--root", "--log-level", "--epoch-store",
        "--hosts", "--version"}
    for a in options:
        assert a.help and a.help != argparse.SUPPRESS, a.option_strings


class FakeCluster:
    """Stands in for LocalCluster in main(): records its arguments; node 1 has died."""

    made: dict[str, object] = {}

    def __init__(self, *, nodes, replication, logs, root, log_level, epoch_store, hosts):
        FakeCluster.made = dict(nodes=nodes, replication=replication, logs=logs, hosts=hosts,
                                epoch_store=epoch_store, log_level=log_level)
        self.n = nodes
        self.root = Path("/nonexistent/ld-cluster-tmp")
        self.config_path = self.root / "cluster.json"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def is_running(self, i):
        return i != 1

    def returncode(self, i):
        return -9

    def log_excerpt(self, i):
        return "end of its log:\nN1 fell over"


def test_node_count_comes_from_the_hosts(capsys, monkeypatch):
    monkeypatch.setattr(dev_cluster, "LocalCluster", FakeCluster)
    hosts = "127.0.0.2,127.0.0.3,127.0.0.4"
    assert main(["--hosts", hosts, "--epoch-store", "zookeeper:127.0.0.1:2181/dev",
                 "--logs", "1-3,7", "--log-level", "debug"]) == 1
    assert FakeCluster.made == dict(nodes=3, replication=2, logs=[1, 2, 3, 7],
                                    hosts=hosts.split(","),
                                    epoch_store="zookeeper:127.0.0.1:2181/dev",
                                    log_level="DEBUG")
    out, err = capsys.readouterr()
    assert out == "/nonexistent/ld-cluster-tmp/cluster.json\n"
    lines = err.splitlines()
    assert lines[0].startswith("3 nodes running (") and "removed on exit" in lines[0]
    # a node that died: its log's end, not a path under the root about to be removed
    assert lines[1:] == ["ld-dev-cluster: N1 exited with code -9; end of its log:",
                         "N1 fell over"]
