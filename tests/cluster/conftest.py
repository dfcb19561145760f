"""Fixtures for cluster tests: real ``logdeviced`` processes on 127.0.0.1.

- ``local_cluster`` (per test) and ``module_cluster`` (per module, to share one cluster
  between the tests of a file) are factories: ``local_cluster(nodes=3, replication=2,
  **options)`` starts a ``LocalCluster`` under the test's temporary directory and it is
  stopped when the fixture's scope ends, also when the test fails.  The nodes' logs stay
  in the temporary directory; the end of each is printed when a test fails.
- ``RawClient``: a blocking protocol client that follows redirects, for tests that talk
  to nodes without the user-facing client.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from logdevice.errors import E, error_for
from logdevice.local_cluster import LocalCluster
from logdevice.placement import sequencer_for
from logdevice.protocol import Append, Appended, ClusterView, GetClusterView
from logdevice.protocol.probe import NodeConnection
from tests.cluster.workload import Load

Factory = Callable[..., LocalCluster]


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Iterator[None]:
    outcome = yield
    rep = outcome.get_result()
    setattr(item, f"rep_{rep.when}", rep)


def _tail(path: Path, n: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


def _make_factory(root: Path) -> tuple[Factory, list[LocalCluster]]:
    clusters: list[LocalCluster] = []
    counter = itertools.count()

    def make(**kw: Any) -> LocalCluster:
        kw.setdefault("root", root / f"cluster{next(counter)}")
        kw.setdefault("ready_timeout", 60.0)
        cluster = LocalCluster(**kw)
        clusters.append(cluster)
        return cluster

    return make, clusters


def _close(clusters: list[LocalCluster], failed: bool) -> None:
    for c in clusters:
        if failed:
            for i in range(c.n):
                print(f"---- {c.log_path(i)} ----\n{_tail(c.log_path(i))}")
        c.close()


@pytest.fixture
def local_cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Factory]:
    """Factory of clusters that live for one test."""
    make, clusters = _make_factory(tmp_path)
    yield make
    Load.stop_all()  # a test that failed mid-way left its load running
    rep = getattr(request.node, "rep_call", None)
    _close(clusters, rep is not None and rep.failed)


@pytest.fixture(scope="module")
def module_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Factory]:
    """Factory of clusters shared by the tests of a module."""
    make, clusters = _make_factory(tmp_path_factory.mktemp("cluster"))
    yield make
    _close(clusters, False)


class RawClient:
    """Appends over raw protocol connections, one per node, following redirects."""

    def __init__(self, cluster: LocalCluster, timeout: float = 10.0) -> None:
        self.cluster = cluster
        self.timeout = timeout
        self.conns: dict[int, NodeConnection] = {}
        self._ids = itertools.count(1)

    def conn(self, node: int) -> NodeConnection:
        c = self.conns.get(node)
        if c is None:
            c = self.conns[node] = NodeConnection(self.cluster.node_address(node),
                                                  self.cluster.config.cluster,
                                                  timeout=self.timeout)
        return c

    def drop(self, node: int) -> None:
        c = self.conns.pop(node, None)
        if c is not None:
            c.close()

    def close(self) -> None:
        for node in list(self.conns):
            self.drop(node)

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def view(self, node: int | None = None) -> ClusterView:
        if node is None:
            node = self._some_node(None)
        return self.conn(node).request(GetClusterView(request_id=next(self._ids)), ClusterView)

    def owner(self, log_id: int, node: int | None = None) -> int | None:
        view = self.view(node)
        return sequencer_for(log_id, {s.node_index: s.weight for s in view.sequencers})

    def append_once(self, node: int, log_id: int, payload: bytes, **kw: Any) -> Appended:
        return self.conn(node).request(
            Append(request_id=next(self._ids), log_id=log_id, payload=payload, **kw),
            Appended)

    def append(self, log_id: int, payload: bytes, *, retries: int = 50,
               node: int | None = None) -> Appended:
        """Append, following redirects and retrying transient errors; the OK reply."""
        target = self.owner(log_id) if node is None else node
        last = None
        for _ in range(retries):
            try:
                reply = self.append_once(target, log_id, payload)
            except (ConnectionError, OSError) as exc:
                last = exc
                self.drop(target)
                time.sleep(0.1)
                target = self.owner(log_id, self._some_node(target))
                continue
            if reply.status == E.OK:
                return reply
            last = reply
            if reply.redirect_to is not None:
                target = reply.redirect_to
            elif reply.status not in (E.NOSEQUENCER, E.PREEMPTED, E.AGAIN, E.SEQNOBUFS,
                                      E.DISABLED, E.SHUTDOWN):
                raise error_for(reply.status, reply.message)
            else:
                time.sleep(0.1)
                target = self.owner(log_id, self._some_node(target))
        raise AssertionError(f"append to log {log_id} kept failing: {last}")

    def _some_node(self, avoid: int | None) -> int:
        for i in self.cluster.running():
            if i != avoid:
                return i
        return self.cluster.running()[0]


# -- what the nodes stored ------------------------------------------------------------------

LSN_MAX = 2**64 - 1


class Copy:
    """One node's copy of a record, as read back from its LogsDB."""

    __slots__ = ("node", "copyset", "wave", "flags", "payload")

    def __init__(self, node: int, copyset: tuple[int, ...], wave: int, flags: int,
                 payload: bytes) -> None:
        self.node = node
        self.copyset = copyset
        self.wave = wave
        self.flags = flags
        self.payload = payload

    def __repr__(self) -> str:
        return f"Copy(N{self.node}, cs={self.copyset}, wave={self.wave})"


def read_back(cluster: LocalCluster, logs: Any,
              nodes: Any = None) -> dict[tuple[int, int], list[Copy]]:
    """Every record of ``logs`` in the LogsDB of every node, by (log, lsn).  The nodes
    must be stopped (RocksDB allows one process per database)."""
    from logdevice.storage.logsdb import LogsDB

    out: dict[tuple[int, int], list[Copy]] = {}
    for node in range(cluster.n) if nodes is None else nodes:
        path = cluster.logsdb_path(node)
        if not path.exists():
            continue
        with LogsDB(path) as db:
            for log_id in logs:
                lo = 1
                while True:
                    rb = db.read_records(log_id, lo, max_records=50_000, max_bytes=0)
                    offs = rb.offsets.tolist()
                    buf = rb.payloads.tobytes()
                    for j, lsn in enumerate(rb.lsns.tolist()):
                        cs = tuple(int(x) for x in rb.copysets[j] if x >= 0)
                        out.setdefault((log_id, lsn), []).append(
                            Copy(node, cs, int(rb.waves[j]), int(rb.flags[j]),
                                 buf[offs[j]:offs[j + 1]]))
                    if not len(rb) or rb.next_lsn >= LSN_MAX:
                        break
                    lo = rb.next_lsn
    return out


def check_acked_on_disk(cluster: LocalCluster, acked: dict[tuple[int, int], bytes],
                        replication: Any, nodes: Any = None) -> dict[str, int]:
    """Assert every acknowledged record is stored, with its payload, on exactly the R
    nodes of its final copyset, and that the copyset honours the replication property.

    Copies from earlier waves that timed out may also exist (they name their own wave's
    copyset and are counted, not failed).  Copies re-replicated by epoch recovery
    (WRITTEN_BY_RECOVERY, the seal epoch in the wave field) supersede the sequencer's:
    when there are any, the final copyset is the newest recovery's, and it may name more
    than R nodes (recovery also overwrites nodes holding a different version).
    Returns counts for the report.
    """
    from logdevice.protocol.flags import FLAG_WRITTEN_BY_RECOVERY
    from logdevice.sequencer import Replication, satisfies

    rep = Replication(replication)
    locations = {n.index: n.location for n in cluster.config.nodes}
    logs = sorted({log_id for log_id, _ in acked})
    stored = read_back(cluster, logs, nodes)
    stale = 0
    for key, payload in acked.items():
        copies = stored.get(key)
        assert copies, f"acknowledged record {key} is on no node"
        recovered = [c for c in copies if c.flags & FLAG_WRITTEN_BY_RECOVERY]
        candidates = recovered or copies
        wave = max(c.wave for c in candidates)
        final = [c for c in candidates if c.wave == wave]
        cs = final[0].copyset
        assert all(c.copyset == cs for c in final), f"{key}: copies disagree: {final}"
        if recovered:
            assert len(cs) >= rep.r, f"{key}: recovery copyset {cs} is smaller than {rep.r}"
            assert satisfies(cs[:rep.r], rep, locations), \
                f"{key}: recovery copyset {cs} breaks {replication}"
        else:
            assert len(cs) == rep.r, f"{key}: copyset {cs} is not of size {rep.r}"
            assert satisfies(cs, rep, locations), f"{key}: copyset {cs} breaks {replication}"
        assert sorted(c.node for c in final) == sorted(cs), \
            f"{key}: copyset {cs} but wave-{wave} copies on {[c.node for c in final]}"
        assert all(c.payload == payload for c in copies), f"{key}: payload differs"
        stale += len(copies) - len(final)
    return {"records": len(acked), "stale_copies": stale,
            "stored_records": len(stored)}


def scrape(cluster: LocalCluster, i: int) -> dict[str, float]:
    """Node ``i``'s /metrics: sample name (with its labels as JSON) -> value."""
    with urllib.request.urlopen(cluster.metrics_url(i), timeout=10) as resp:
        assert resp.status == 200
        text = resp.read().decode()
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            key = s.name + (json.dumps(s.labels, sort_keys=True) if s.labels else "")
            out[key] = s.value
    return out


def ldshell(cluster: LocalCluster, *args: str, timeout: float = 120) -> Any:
    """Run ``ldshell --config <cluster> ARGS``; the CompletedProcess (text output)."""
    tool = os.path.join(os.path.dirname(sys.executable), "ldshell")
    return subprocess.run([tool, "--config", str(cluster.config_path), "--timeout", "2",
                           *args], capture_output=True, text=True, timeout=timeout)
