"""A short seeded chaos run per replication factor (CI); ``make chaos`` runs long ones."""

from __future__ import annotations

import pytest

from tests.chaos.driver import Run, summary, violations

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
