"""``ld-dev-cluster`` (``tools.dev_cluster.main``) with real node processes that fail to start:
its errors quote the end of the node's log and never point at a file under a temporary
root that is removed on exit."""

from __future__ import annotations

from pathlib import Path

import pytest

from logdevice import local_cluster
from logdevice.local_cluster import LocalCluster
from logdevice.tools.dev_cluster import main

# main() installs SIGINT/SIGTERM handlers: pytest gets its own back after each test.
pytestmark = pytest.mark.usefixtures("keep_signal_handlers")


def test_a_node_that_fails_to_start_is_quoted_not_pointed_at(tmp_path, monkeypatch):
    """A real node that exits at once (an unknown log level): the error quotes its log;
    with a temporary root (removed on the way out) it names no path under it, with a root
    of the caller's (kept) it names the log file, which is still there."""
    made: list[Path] = []
    real_mkdtemp = local_cluster.tempfile.mkdtemp

    def mkdtemp(**kw):
        made.append(Path(real_mkdtemp(dir=tmp_path, **kw)))
        return str(made[-1])

    monkeypatch.setattr(local_cluster.tempfile, "mkdtemp", mkdtemp)
    with pytest.raises(RuntimeError) as ei:
        LocalCluster(nodes=1, replication=1, logs=[1], log_level="CHATTY", ready_timeout=60)
    text = str(ei.value)
    assert "N0 exited with code 2 while starting; end of its log:" in text
    assert "invalid choice: 'CHATTY'" in text  # the node's own words, from its log
    assert str(made[0]) not in text and not made[0].exists()

    kept = tmp_path / "kept"
    with pytest.raises(RuntimeError) as ei:
        LocalCluster(nodes=1, replication=1, logs=[1], root=kept, log_level="CHATTY",
                     ready_timeout=60)
    assert f"end of {kept / 'N0.log'}:" in str(ei.value) and (kept / "N0.log").exists()


def test_main_reports_a_cluster_that_did_not_start(capsys, tmp_path):
    assert main(["--nodes", "1", "--replication", "1", "--logs", "1",
                 "--root", str(tmp_path / "r"), "--epoch-store", "file:/dev/null/epochs"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ld-dev-cluster: N0 "), err
    assert f"end of {tmp_path / 'r' / 'N0.log'}:" in err
