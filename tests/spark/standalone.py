"""A Spark standalone cluster for tests: one master and one worker JVM on 127.0.0.1, started
from pyspark's own jars (``pyspark/bin/spark-class``), and driver programs run against it.

Why drivers are separate processes: the test process already holds the local-mode
``SparkSession`` every other Spark test shares, and one Python process can hold one
``SparkContext``; stopping and re-creating the shared one would cost each switch a JVM
start and break tests that rely on its settings.  So a standalone test runs a small driver
script (``tests/spark/drivers/``) with this interpreter; the script builds its session with
``standalone_app.session()`` and prints its result as one JSON line (``emit``).  That is
also how a user runs a job on a cluster, and a driver that dies cannot take the test
process with it.

Every process runs in its own process group and is killed with it (the worker's executor
JVMs and their Python workers too); every wait is bounded; logs (master, worker,
executors' stdout/stderr under the worker's work dir, each driver's output) stay under the
given directory and are quoted when something fails.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyspark

from logdevice.local_cluster import free_ports

__all__ = ["StandaloneSpark", "DriverProcess", "RESULT_MARKER", "EXECUTOR_CLASS",
           "descendants", "ppid"]

SPARK_CLASS = Path(pyspark.__file__).resolve().parent / "bin" / "spark-class"
REPO = Path(__file__).resolve().parents[2]
#: The line prefix of a driver's result on its stdout (``standalone_app.emit``).
RESULT_MARKER = "LD-DRIVER-RESULT "
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"


def _tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return f"(no {path})"
    return f"--- {path} (last {lines} lines)\n" + "\n".join(text[-lines:])


def _kill_group(proc: subprocess.Popen[Any], grace: float = 10.0) -> None:
    """SIGTERM the process group of ``proc``, SIGKILL it after ``grace`` s, reap ``proc``."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(grace)
    # Children (executors) may outlive a leader that exited on SIGTERM: kill the group.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(grace)


def ppid(pid: int) -> int | None:
    """The parent of ``pid`` (None if it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2:].split()[1])  # after "pid (comm) state"


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (children, their children, ...), from /proc."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            parent = ppid(int(entry.name))
            if parent is not None:
                parents.setdefault(parent, []).append(int(entry.name))
    out: list[int] = []
    todo = [pid]
    while todo:
        kids = parents.get(todo.pop(), [])
        out += kids
        todo += kids
    return sorted(out)


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


class StandaloneSpark:
    """A master on 127.0.0.1 and one worker per address of ``workers`` (each ``cores``
    cores, ``memory`` for executors).  Two workers on two loopback addresses look like
    two hosts to Spark, which launches a speculative copy of a task only on another host.

    ``start`` returns once every worker registered with the master (the master's
    ``/json/`` lists it ALIVE) or fails quoting the logs; ``close`` kills every process
    group.  ``master_url`` is what drivers connect to.
    """

    def __init__(self, root: Path, *, workers: Sequence[str] = ("127.0.0.1",),
                 cores: int = 2, memory: str = "1g") -> None:
        self.root = Path(root)
        self.workers = tuple(workers)
        self.cores = cores
        self.memory = memory
        self.port, self.web_port = free_ports(2)
        self.master_url = f"spark://127.0.0.1:{self.port}"
        self.work_dir = self.root / "work"  # executors' directories and logs
        self._procs: dict[str, subprocess.Popen[bytes]] = {}

    # -- the cluster ----------------------------------------------------------------------

    def env(self) -> dict[str, str]:
        """The environment of the JVMs and drivers: loopback only, scratch space under
        ``root``, this interpreter and this tree's ``logdevice`` for Python workers."""
        env = dict(os.environ)
        path = [str(REPO), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
        env.update({
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOCAL_DIRS": str(self.root / "local"),
            "SPARK_WORKER_DIR": str(self.work_dir),
            "SPARK_CONF_DIR": str(self.root / "conf"),  # empty: no site settings
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            "PYTHONPATH": os.pathsep.join(path),
            "LD_SPARK_MASTER": self.master_url,
        })
        return env

    def _spawn(self, name: str, args: Sequence[str], host: str = "127.0.0.1") -> None:
        # A worker's executors inherit its environment: they bind where it does.
        env = {**self.env(), "SPARK_LOCAL_IP": host}
        with open(self.root / f"{name}.log", "wb") as log:
            self._procs[name] = subprocess.Popen(
                [str(SPARK_CLASS), *args], stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, cwd=self.root, env=env, start_new_session=True)

    def start(self, timeout: float = 120.0) -> StandaloneSpark:
        for d in ("local", "conf", "work"):
            (self.root / d).mkdir(parents=True, exist_ok=True)
        try:
            self._spawn("master", ["org.apache.spark.deploy.master.Master",
                                   "--host", "127.0.0.1", "--port", str(self.port),
                                   "--webui-port", str(self.web_port)])
            for i, host in enumerate(self.workers):
                self._spawn(f"worker{i}", [
                    "org.apache.spark.deploy.worker.Worker", self.master_url,
                    "--cores", str(self.cores), "--memory", self.memory, "--host", host,
                    "--webui-port", str(free_ports(1)[0]),
                    "--work-dir", str(self.work_dir / f"worker{i}")], host)
            self._wait_for_worker(timeout)
        except BaseException:
            self.close()
            raise
        return self

    def _wait_for_worker(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            for name, proc in self._procs.items():
                if proc.poll() is not None:
                    raise AssertionError(f"the Spark {name} exited ({proc.returncode})\n"
                                         + self.logs())
            try:
                state = self.master_state()
                alive = [w for w in state.get("workers", []) if w.get("state") == "ALIVE"]
                if len(alive) >= len(self.workers):
                    return
                last = f"workers: {state.get('workers')}"
            except OSError as exc:  # the master's web UI is not up yet
                last = str(exc)
            time.sleep(0.5)
        raise AssertionError(f"no Spark worker registered within {timeout:g} s ({last})\n"
                             + self.logs())

    def master_state(self) -> dict[str, Any]:
        """The master's ``/json/`` (workers, active and completed applications)."""
        url = f"http://127.0.0.1:{self.web_port}/json/"
        with urllib.request.urlopen(url, timeout=5) as resp:
            return json.load(resp)  # type: ignore[no-any-return]

    @property
    def worker_pids(self) -> list[int]:
        return [p.pid for name, p in self._procs.items() if name.startswith("worker")]

    def executor_pids(self, app_id: str | None = None) -> list[int]:
        """PIDs of the executor JVMs the workers run (of application ``app_id``, if
        given): the workers' descendants running ``CoarseGrainedExecutorBackend``.  Found
        through these workers' process trees, so executors of other Spark clusters on the
        machine are never named."""
        out = []
        for pid in (p for w in self.worker_pids for p in descendants(w)):
            cmd = _cmdline(pid)
            if EXECUTOR_CLASS in cmd and (app_id is None or app_id in cmd):
                out.append(pid)
        return out

    def logs(self) -> str:
        """The tails of the master's, the worker's and every executor's logs."""
        parts = [_tail(self.root / "master.log")]
        parts += [_tail(self.root / f"worker{i}.log") for i in range(len(self.workers))]
        parts += [_tail(p, 30) for p in sorted(self.work_dir.glob("*/app-*/*/stderr"))[-4:]]
        return "\n".join(parts)

    def close(self) -> None:
        for name in sorted(self._procs, key=lambda n: n == "master"):  # workers first
            _kill_group(self._procs.pop(name))

    # -- drivers --------------------------------------------------------------------------

    def start_driver(self, script: str | Path, *args: str) -> DriverProcess:
        """Run ``script`` (a driver program using ``standalone_app``) with ``args``."""
        return DriverProcess(self, Path(script), [str(a) for a in args])

    def run_driver(self, script: str | Path, *args: str, timeout: float = 240.0) -> Any:
        """Run ``script`` to its end; the JSON it emitted.  ``AssertionError`` quoting the
        driver's output and the cluster's logs if it fails or takes over ``timeout`` s."""
        driver = self.start_driver(script, *args)
        try:
            result = driver.result(timeout)
            driver.finish(timeout)
            return result
        finally:
            driver.kill()


class DriverProcess:
    """A driver program running against a ``StandaloneSpark``: its result (the JSON line it
    emitted) and its end.  A script that ``hold``s after emitting keeps its application,
    and so its executors, alive until ``finish``."""

    def __init__(self, spark: StandaloneSpark, script: Path, args: list[str]) -> None:
        self.spark = spark
        self.log_path = spark.root / f"driver-{script.stem}-{time.monotonic_ns()}.log"
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, str(script), *args], stdin=subprocess.PIPE, stdout=log,
                stderr=subprocess.STDOUT, cwd=spark.root, env=spark.env(),
                start_new_session=True)

    def _failed(self, why: str) -> AssertionError:
        return AssertionError(f"driver {self.proc.args}: {why}\n"
                              f"{_tail(self.log_path, 80)}\n{self.spark.logs()}")

    def result(self, timeout: float = 240.0) -> Any:
        """The JSON the driver emitted, waiting at most ``timeout`` s for it."""
        deadline = time.monotonic() + timeout
        while True:
            for line in self.log_path.read_text(errors="replace").splitlines():
                if line.startswith(RESULT_MARKER):
                    return json.loads(line[len(RESULT_MARKER):])
            if self.proc.poll() is not None:
                raise self._failed(f"exited ({self.proc.returncode}) without a result")
            if time.monotonic() > deadline:
                raise self._failed(f"no result within {timeout:g} s")
            time.sleep(0.2)

    def finish(self, timeout: float = 60.0) -> None:
        """Let a holding driver go on (close its stdin) and wait for a clean exit."""
        assert self.proc.stdin is not None
        if not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise self._failed(f"did not exit within {timeout:g} s") from None
        if code != 0:
            raise self._failed(f"exited with {code}")

    def kill(self) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        _kill_group(self.proc)
