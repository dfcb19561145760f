"""Consumer groups with real member processes: they share the logs, one member is
killed, the others take its logs over from the group's checkpoints; every record is
processed, and only the dead member's uncommitted records twice."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from pathlib import Path

import pytest

import logdevice as ld
from logdevice.records import DataRecord

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

LOGS = [1, 2, 3, 4]
GROUP = "indexers"


def _member(config_path: str, name: str, out: str, stop: str) -> None:
    """A member process: reads its share, writes each payload to ``out``, commits."""
    with ld.Client(config_path, timeout=10.0) as client:
        # A session long enough that a survivor on a loaded machine (CI runs the suite on
        # two cores) never misses one: a member that did would rightly lose its logs to
        # another survivor, which re-reads what it had not committed.
        g = client.create_group_reader(GROUP, LOGS, member=name, session_timeout=6.0)
        with open(out, "ab", buffering=0) as f:
            while not os.path.exists(stop):
                items = g.read(50, timeout=0.2)
                data = [bytes(i.payload) for i in items if isinstance(i, DataRecord)]
                if data:
                    f.write(b"".join(d + b"\n" for d in data))  # processed ...
                    g.commit()  # ... then committed
        g.close()


def processed(paths) -> dict[str, list[bytes]]:
    return {p.name: p.read_bytes().split(b"\n")[:-1] if p.exists() else [] for p in paths}


def test_members_share_the_logs_and_survive_a_kill(local_cluster, tmp_path: Path):
    cluster = local_cluster(nodes=3, replication=2, logs=LOGS)
    expected = set()
    with cluster.client(timeout=20.0) as client:
        for log in LOGS:
            for i in range(150):
                p = b"%d:%d" % (log, i)
                client.append(log, p)
                expected.add(p)

        ctx = multiprocessing.get_context("spawn")
        stop = tmp_path / "stop"
        outs = [tmp_path / f"m{k}" for k in range(3)]
        procs = [ctx.Process(target=_member, args=(str(cluster.config_path), f"m{k}",
                                                   str(outs[k]), str(stop)))
                 for k in range(3)]
        for p in procs:
            p.start()
        try:
            deadline = time.monotonic() + 60
            while sum(map(len, processed(outs).values())) < 300:
                assert time.monotonic() < deadline, "members made no progress"
                time.sleep(0.1)
            os.kill(procs[0].pid, signal.SIGKILL)  # m0 dies without a word
            procs[0].join(10)
            for log in LOGS:  # more records, after the kill
                for i in range(150, 300):
                    p = b"%d:%d" % (log, i)
                    client.append(log, p)
                    expected.add(p)
            while set().union(*processed(outs).values()) < expected:
                assert time.monotonic() < deadline + 60, "records left unprocessed"
                time.sleep(0.2)
        finally:
            stop.touch()
            for p in procs[1:]:
                p.join(30)
            for p in procs:
                if p.is_alive():
                    p.kill()
    seen = processed(outs)
    assert set().union(*seen.values()) == expected
    # Twice only what the killed member had processed (it may have died before its
    # commit); the survivors never read the same record.
    survivors = seen["m1"] + seen["m2"]
    assert len(survivors) == len(set(survivors))
    again = [p for p in survivors if p in set(seen["m0"])]
    assert len(again) <= 50 * len(LOGS)  # at most one uncommitted batch per log
    assert all(p.exitcode == 0 for p in procs[1:])
