"""``ldcat``, ``ldtail`` and ``ldwrite`` as subprocesses against a small cluster."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import logdevice as ld
from ldcore.lsn import to_string as lsn_str

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(120)]

BIN = os.path.dirname(sys.executable)


@pytest.fixture(scope="module")
def cluster(module_cluster):
    return module_cluster(nodes=3, replication=2, logs=range(1, 6))


@pytest.fixture(scope="module")
def client(cluster):
    with ld.Client(cluster.config_path, timeout=20.0) as c:
        yield c


@pytest.fixture(scope="module")
def log1(client):
    lsns = [client.append(1, b"line %d" % i) for i in range(40)]
    client.trim(1, lsns[4])
    return lsns


def run(tool: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([os.path.join(BIN, tool), *args], capture_output=True,
                          timeout=timeout, check=False)


class Lines:
    """The lines of a child's pipe, read by a thread as they come; ``next`` and ``until``
    wait for them with a bound (and say what came instead)."""

    def __init__(self, stream: Any) -> None:
        self.lines: list[str] = []
        self.eof = False
        self._at = 0
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, args=(stream,), daemon=True)
        self._thread.start()

    def _run(self, stream: Any) -> None:
        for raw in iter(stream.readline, b""):
            with self._cond:
                self.lines.append(raw.decode(errors="replace").rstrip("\n"))
                self._cond.notify_all()
        with self._cond:
            self.eof = True
            self._cond.notify_all()

    def next(self, timeout: float = 30.0) -> str:
        """The next line."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._at >= len(self.lines):
                left = deadline - time.monotonic()
                assert not self.eof and left > 0, f"no line within {timeout:g} s; got " \
                                                  f"{self.lines}"
                self._cond.wait(left)
            self._at += 1
            return self.lines[self._at - 1]

    def until(self, pattern: str, timeout: float = 30.0) -> str:
        """The next line matching the regular expression ``pattern`` (the lines before
        it are passed over)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                line = self.next(max(left, 0.001))
            except AssertionError:
                raise AssertionError(f"no line matching {pattern!r} within {timeout:g} s; "
                                     f"got {self.lines}") from None
            if re.search(pattern, line):
                return line

    def join(self) -> None:
        self._thread.join(10)


@contextlib.contextmanager
def spawn(tool: str, *args: str, stdin: bool = False
          ) -> Iterator[tuple[subprocess.Popen[bytes], Lines, Lines]]:
    """``tool ARGS`` running, with its stdout and stderr as ``Lines``; killed (if the test
    left it running) and reaped at the end."""
    proc = subprocess.Popen([os.path.join(BIN, tool), *args],
                            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = Lines(proc.stdout), Lines(proc.stderr)
    try:
        yield proc, out, err
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(20)
        out.join()
        err.join()
        for f in (proc.stdin, proc.stdout, proc.stderr):
            if f is not None:
                with contextlib.suppress(OSError):
                    f.close()


def interrupt(proc: subprocess.Popen[bytes], timeout: float = 20.0) -> int:
    """Ctrl-C ``proc``; its exit status."""
    proc.send_signal(signal.SIGINT)
    return proc.wait(timeout)


def start_all(cluster: ld.LocalCluster) -> None:
    for i in range(cluster.n):
        cluster.start(i)


#: The waiting line of a reader whose streams broke (after the tool's name).
AWAY_LOG1 = r": log 1: no working stream on enough of its nodes \(N0: .*\); waiting$"
#: The waiting line when no node answers a tool's request.
AWAY_CLUSTER = (r": waiting for the cluster 'local': no node reachable \(N0: connection refused, "
                r"N1: connection refused, N2: connection refused\)")


def test_ldcat_text_and_range(cluster, log1):
    cfg = str(cluster.config_path)
    p = run("ldcat", "--config", cfg, "--log", "1")
    assert p.returncode == 0, p.stderr.decode()
    assert p.stdout.decode().splitlines() == [f"line {i}" for i in range(5, 40)]
    assert f"gap TRIM e0n1..{lsn_str(log1[4])}" in p.stderr.decode()
    p = run("ldcat", "--config", cfg, "--log", "1", "--from", lsn_str(log1[10]),
            "--until", str(log1[12]), "--no-scd")
    assert p.returncode == 0, p.stderr.decode()
    assert p.stdout == b"line 10\nline 11\nline 12\n"
    assert p.stderr == b""


def test_ldcat_json(cluster, log1):
    p = run("ldcat", "--config", str(cluster.config_path), "--log", "1", "--format", "json",
            "--from", lsn_str(log1[20]), "--until", lsn_str(log1[21]))
    assert p.returncode == 0, p.stderr.decode()
    rows = [json.loads(x) for x in p.stdout.decode().splitlines()]
    assert [(r["lsn"], r["lsn_str"], r["payload"], r["batch_offset"]) for r in rows] == [
        (log1[20], lsn_str(log1[20]), "line 20", 0), (log1[21], lsn_str(log1[21]), "line 21", 0)]
    assert all(r["log_id"] == 1 and r["timestamp"] > 1.6e12 for r in rows)


def test_ldcat_bad_input(cluster):
    p = run("ldcat", "--config", str(cluster.config_path), "--log", "1", "--from", "bogus")
    assert p.returncode == 2 and b"not an LSN" in p.stderr
    p = run("ldcat", "--config", str(cluster.config_path), "--log", "999")
    assert p.returncode == 1 and b"not in the config" in p.stderr
    p = run("ldcat", "--config", str(cluster.config_path), "--log", "3")  # empty log
    assert p.returncode == 0 and p.stdout == b""


def test_ldtail_follows_and_stops_on_ctrl_c(cluster, client, log1):
    proc = subprocess.Popen([os.path.join(BIN, "ldtail"), "--config", str(cluster.config_path),
                             "--log", "1", "-n", "3"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        lines = [proc.stdout.readline() for _ in range(3)]  # the last 3 records first
        assert lines == [b"line 37\n", b"line 38\n", b"line 39\n"]
        for i in range(5):
            client.append(1, b"new %d" % i)
            assert proc.stdout.readline() == b"new %d\n" % i
        time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    assert proc.returncode == 130
    assert b"Traceback" not in err, err.decode()


def test_ldwrite_streams_lines_and_stops_cleanly_on_ctrl_c(cluster, client):
    """A line piped in is written within the time trigger (not held until 4 MiB or the
    end of input); Ctrl-C writes what was read and exits 130 without a traceback."""
    proc = subprocess.Popen([os.path.join(BIN, "ldwrite"), "--config", str(cluster.config_path),
                             "--log", "4", "--quiet"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        reader = client.create_reader()
        reader.start_reading(4)
        got: list[bytes] = []
        for i in range(3):
            proc.stdin.write(b"event %d\n" % i)
            proc.stdin.flush()  # the pipe stays open
            deadline = time.monotonic() + 20
            while len(got) <= i and time.monotonic() < deadline:
                got += [bytes(r.payload) for r in reader.read(10, timeout=0.2)
                        if isinstance(r, ld.DataRecord)]
        assert got == [b"event 0", b"event 1", b"event 2"]
        proc.stdin.write(b"last one\n")
        proc.stdin.flush()
        deadline = time.monotonic() + 20
        while len(got) < 4 and time.monotonic() < deadline:
            got += [bytes(r.payload) for r in reader.read(10, timeout=0.2)
                    if isinstance(r, ld.DataRecord)]
        assert got[-1] == b"last one"
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    assert proc.returncode == 130
    assert b"Traceback" not in err and err == b"", err.decode()  # --quiet is quiet


def test_ldwrite_missing_file_is_one_line(cluster):
    p = run("ldwrite", "--config", str(cluster.config_path), "--log", "4", "/no/such/file")
    assert p.returncode == 1
    assert p.stderr.decode().strip().count("\n") == 0
    assert "cannot read /no/such/file" in p.stderr.decode()


def test_ldcat_by_time_and_benign_gaps(cluster, client):
    import datetime

    first = [client.append(5, b"early %d" % i) for i in range(3)]
    t_mid = int(time.time() * 1000) + 5
    while int(time.time() * 1000) <= t_mid:  # the next records are strictly later
        time.sleep(0.005)
    late = [client.append(5, b"late %d" % i) for i in range(3)]
    cfg = str(cluster.config_path)
    p = run("ldcat", "--config", cfg, "--log", "5", "--since", str(t_mid))
    assert p.returncode == 0, p.stderr.decode()
    assert p.stdout == b"late 0\nlate 1\nlate 2\n"
    iso = datetime.datetime.fromtimestamp(t_mid / 1000, datetime.UTC).isoformat()
    p = run("ldcat", "--config", cfg, "--log", "5", "--before", iso)
    assert p.stdout == b"early 0\nearly 1\nearly 2\n"
    assert p.stderr == b""  # the BRIDGE gap before the first epoch is benign: hidden
    p = run("ldcat", "--config", cfg, "--log", "5", "--show-gaps")
    assert p.stdout.count(b"\n") == 6 and b"gap BRIDGE" in p.stderr
    p = run("ldcat", "--config", cfg, "--log", "5", "--since=-1d")
    assert p.stdout.count(b"\n") == 6
    p = run("ldcat", "--config", cfg, "--log", "5", "--since", "yesterday")
    assert p.returncode == 2 and b"not a time" in p.stderr
    assert first[-1] < late[0]


@pytest.mark.parametrize("tool", ["ldwrite", "ldcat", "ldtail", "ldbench", "logdeviced",
                                  "ldshell", "ld-dev-cluster"])
def test_every_tool_has_a_version(tool):
    p = run(tool, "--version", timeout=30)
    assert p.returncode == 0
    assert p.stdout.decode().strip() == f"{tool} (logdevice) {ld.__version__}"


# -- while the cluster is away -------------------------------------------------------------

def test_ldtail_says_what_it_waits_for_and_reads_on(local_cluster):
    """Unreachable at start: the cluster's waiting line, then (nodes started) its back
    line and the records appended after.  All nodes stopped mid-stream: the log's waiting
    line, once, then "reading again" and the records appended after that.  Ctrl-C while
    it waits: exit status 130."""
    cluster = local_cluster(nodes=3, replication=2, logs=[1])
    cfg = str(cluster.config_path)
    cluster.stop_all()
    with spawn("ldtail", "--config", cfg, "--log", "1") as (proc, out, err):
        assert re.search(AWAY_CLUSTER + "$", err.until("waiting"))
        start_all(cluster)
        assert err.until("reachable") == "ldtail: cluster 'local' reachable again"
        with ld.Client(cfg, timeout=20.0) as client:
            for i in range(3):
                client.append(1, b"first %d" % i)
                assert out.next() == f"first {i}"
            cluster.stop_all()
            assert re.search(AWAY_LOG1, err.until("waiting"))
            start_all(cluster)
            assert err.until("again") == "ldtail: log 1: reading again"
            for i in range(3):
                client.append(1, b"then %d" % i)
                assert out.next() == f"then {i}"
        cluster.stop_all()
        assert re.search(AWAY_LOG1, err.until("waiting"))
        assert interrupt(proc) == 130  # Ctrl-C while waiting
        err.join()
    waits = [x for x in err.lines if "waiting" in x]
    assert len(waits) == 3, err.lines  # one line for each wait, never repeated
    assert not any("Traceback" in x for x in err.lines), err.lines


def test_ldcat_waits_at_most_its_timeout_and_fails_fast_at_start(local_cluster):
    """The cluster going away while ldcat follows: its waiting line, then "reading
    again" and the records.  Away for longer than --timeout: exit 1 naming the LSN it
    stopped before.  Unreachable at start: one CONNFAILED line, exit 1."""
    cluster = local_cluster(nodes=3, replication=2, logs=[1])
    cfg = str(cluster.config_path)
    with ld.Client(cfg, timeout=20.0) as client:
        for i in range(3):
            client.append(1, b"line %d" % i)
        with spawn("ldcat", "--config", cfg, "--log", "1", "--until", "max") as (proc, out, err):
            assert [out.next() for _ in range(3)] == ["line 0", "line 1", "line 2"]
            cluster.stop_all()
            assert re.search(AWAY_LOG1, err.until("waiting"))
            start_all(cluster)
            assert err.until("again") == "ldcat: log 1: reading again"
            client.append(1, b"after")
            assert out.next() == "after"
            assert interrupt(proc) == 130
        with spawn("ldcat", "--config", cfg, "--log", "1", "--until", "max",
                   "--timeout", "3") as (proc, out, err):
            assert [out.next() for _ in range(4)] == ["line 0", "line 1", "line 2", "after"]
            cluster.stop_all()
            assert re.search(AWAY_LOG1, err.until("waiting"))
            assert proc.wait(30) == 1
            err.join()
            assert re.fullmatch(r"ldcat: TIMEDOUT: log 1: waited 3 s for the cluster; "
                                r"stopped before e\d+n\d+ \(\d+\)", err.lines[-1]), err.lines
    p = run("ldcat", "--config", cfg, "--log", "1", timeout=60)  # every node still stopped
    assert p.returncode == 1
    assert p.stdout == b""
    lines = p.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ldcat: CONNFAILED: "), lines


def test_ldwrite_holds_lines_while_the_cluster_is_away(local_cluster):
    """Lines piped in while every node is stopped: the waiting line (once), the back line
    once the nodes are started and the held lines written, then the lines after.  Every
    line is in the log, in the order written.  (ldwrite writes at least once; here no
    append reached a node while the cluster was away, so each line is there exactly
    once.)  Ctrl-C while lines are held: they count as not written, exit status 1."""
    cluster = local_cluster(nodes=3, replication=2, logs=[1])
    cfg = str(cluster.config_path)
    cluster.stop_all()
    with spawn("ldwrite", "--config", cfg, "--log", "1", stdin=True) as (proc, out, err):
        proc.stdin.write(b"held 0\nheld 1\nheld 2\n")
        proc.stdin.flush()
        assert re.search(AWAY_CLUSTER + r"; [1-3] lines held$", err.until("waiting"))
        start_all(cluster)
        assert err.until("reachable") == \
            "ldwrite: cluster 'local' reachable again; 3 held lines written"
        proc.stdin.write(b"then 0\nthen 1\n")
        proc.stdin.close()
        assert proc.wait(60) == 0
        err.join()
        assert sum("waiting" in x for x in err.lines) == 1, err.lines
        assert re.match(r"5 records in ", err.lines[-1]), err.lines
    with ld.Client(cfg, timeout=20.0) as client:
        with client.create_reader() as r:
            r.start_reading(1, ld.LSN_OLDEST, client.get_tail_lsn(1))
            got = [bytes(x.payload) for x in r if isinstance(x, ld.DataRecord)]
        assert got == [b"held 0", b"held 1", b"held 2", b"then 0", b"then 1"]
    cluster.stop_all()
    with spawn("ldwrite", "--config", cfg, "--log", "1", stdin=True) as (proc, out, err):
        proc.stdin.write(b"lost 0\nlost 1\n")
        proc.stdin.flush()
        assert re.search(AWAY_CLUSTER, err.until("waiting"))
        assert interrupt(proc) == 1
        err.join()
        assert re.match(r"ldwrite: 2 records failed: CONNFAILED: ", err.lines[-1]), err.lines
        assert not any("Traceback" in x for x in err.lines), err.lines


def test_ldbench_write_reports_cpu_per_append_for_each_node(tmp_path):
    # ldbench starts its own 3-node cluster: the in-flight run meters each node's CPU
    # (from /proc) next to the client's, and says what one append costs in each.
    out = tmp_path / "bench.json"
    done = run("ldbench", "write", "--records", "0", "--per-call-records", "0", "--rate", "0",
               "--inflight", "8", "--inflight-appends", "2000", "--json", str(out),
               timeout=110)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    q = json.loads(out.read_text())["results"]["inflight_latency"]
    assert q["errors"] == 0 and q["appends_per_s"] > 0
    assert sorted(q["node_cores"]) == ["0", "1", "2"]
    assert all(c >= 0 for c in q["node_cores"].values())
    # Every node took part (the sequencer, and stores on R=2 of 3 nodes).
    assert sum(q["node_cores"].values()) > 0
    assert re.fullmatch(r"client \d+ us, N0 \d+ us, N1 \d+ us, N2 \d+ us", q["cpu_per_append"])
    assert "CPU per append, 8 in flight" in done.stdout.decode(errors="replace")
