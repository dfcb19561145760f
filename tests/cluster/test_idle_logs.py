"""Idle logs against real node processes: a sequencer that took no append for
``sequencer_idle_ms`` gives its window back, and the log's next append goes on in the
same epoch at the next LSN (no new activation), with every record readable in order."""

from __future__ import annotations

import time

import pytest

import logdevice as ld
from ldcore import lsn as ldlsn
from tests.cluster.conftest import scrape
from tests.waiting import wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]

LOGS = range(1, 7)
IDLE_MS = 3_000


def sequencers(cluster) -> tuple[int, int]:
    """(sequencers, of which awake) over the cluster's nodes."""
    total = awake = 0
    for i in cluster.running():
        m = scrape(cluster, i)
        total += int(m["logdevice_sequencers"])
        awake += int(m["logdevice_sequencers_awake"])
    return total, awake


def all_awake_unless_slow(cluster, since: float) -> None:
    """Every log's sequencer holds its window, as long as nothing took the idle time
    since ``since`` (a loaded machine may take longer to append and ask)."""
    counts = sequencers(cluster)
    if time.monotonic() - since < IDLE_MS / 1000:
        assert counts == (len(LOGS), len(LOGS))


def test_an_idle_logs_sequencer_gives_its_window_back_and_resumes(local_cluster):
    # A slow failure detector: a log moved by a spurious failover would start a new epoch.
    cluster = local_cluster(nodes=3, replication=2, logs=LOGS, sequencer_idle_ms=IDLE_MS,
                            suspect_timeout_ms=5_000, dead_timeout_ms=10_000)
    with ld.Client(cluster.config_path, timeout=30.0) as client:
        t0 = time.monotonic()
        first = {log: client.append(log, b"first-%d" % log) for log in LOGS}
        all_awake_unless_slow(cluster, t0)
        wait_until(lambda: sequencers(cluster) == (len(LOGS), 0), 60, 0.2,
                   lambda: f"still awake: {sequencers(cluster)}")
        t0 = time.monotonic()
        second = {log: client.append(log, b"second-%d" % log) for log in LOGS}
        for log in LOGS:
            # Same epoch, next ESN: the sleeping sequencer resumed, nothing re-activated.
            assert ldlsn.epoch_of(second[log]) == ldlsn.epoch_of(first[log])
            assert second[log] == first[log] + 1
        all_awake_unless_slow(cluster, t0)
        for log in LOGS:
            with client.create_reader() as reader:
                reader.start_reading(log, ld.LSN_OLDEST, second[log])
                got = [(r.lsn, bytes(r.payload)) for r in reader
                       if isinstance(r, ld.DataRecord)]
            assert got == [(first[log], b"first-%d" % log), (second[log], b"second-%d" % log)]
