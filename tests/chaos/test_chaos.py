"""Short seeded chaos runs (CI); ``make chaos`` runs long ones."""

from __future__ import annotations

import pytest

from tests.chaos.driver import PARTITIONS, Run, summary, violations
from tests.chaos.netns import netns_unavailable

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


@pytest.mark.parametrize(("replication", "seed"), [(3, 1), (2, 2)])
def test_short_chaos_run(tmp_path, replication, seed):
    log: list[str] = []
    run = Run(seconds=40.0, seed=seed, replication=replication, root=tmp_path / "cluster",
              log=log.append)
    report = run.run()
    print(summary(report))
    assert report["faults"] >= 4  # restarts take seconds on a busy machine
    assert report["acked"] > 1000
    assert violations(report) == 0, "\n".join(
        [summary(report), *report["problems"], *log])


def test_short_partition_run(tmp_path):
    """Nodes in network namespaces on ZooKeeper: a rolling restart first (this seed),
    then links cut and healed among kills and pauses; nothing acknowledged is lost, and
    every namespace is gone afterwards."""
    why = netns_unavailable()
    if why is not None:
        pytest.skip(why)
    log: list[str] = []
    run = Run(seconds=50.0, seed=52, replication=3, root=tmp_path / "cluster",
              log=log.append, partitions=True, check_every=15.0)
    report = run.run()
    print(summary(report))
    assert run.net is not None and run.net.namespaces_left() == []
    kinds = {f.kind for f in run.faults}
    assert "rolling_restart" in kinds
    assert kinds & set(PARTITIONS)
    assert report["acked"] > 1000
    assert report["checks"] >= 2  # during the run and at its end
    assert violations(report) == 0, "\n".join(
        [summary(report), *report["problems"], *log])


def test_short_never_return_run(tmp_path):
    """One node killed for good: the cluster notices, rebuilds it by itself, and every
    acknowledged record is still there."""
    log: list[str] = []
    run = Run(seconds=45.0, seed=5, replication=3, root=tmp_path / "cluster",
              log=log.append, never_return=True)
    report = run.run()
    print(summary(report))
    assert "kill_forever" in {f.kind for f in run.faults}
    assert report["acked"] > 1000
    assert violations(report) == 0, "\n".join(
        [summary(report), *report["problems"], *log])
