"""``LocalZooKeeper``: a real standalone ZooKeeper server on a loopback address, for tests,
benchmarks and ``ld-dev-cluster``.

    with LocalZooKeeper() as zk:
        store = open_epoch_store(zk.uri("/mycluster"))
        zk.stop(); zk.start()          # same port, same data directory

It runs Debian's ``zookeeper`` package (``/usr/share/java/zookeeper.jar`` and its
dependencies) with ``java``: a config file in ``root`` binds the client port to ``host``
only (never a wildcard address), turns the admin HTTP server off (it would want port 8080)
and allows the ``srvr`` and ``ruok`` four-letter words.  ``start`` waits, bounded, until
``srvr`` answers; ``close`` (also on ``__exit__`` and at interpreter exit) SIGTERMs the
JVM, waits a bounded time and SIGKILLs it.  The server's output goes to
``<root>/zookeeper.log``.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
import weakref
from pathlib import Path

__all__ = ["LocalZooKeeper", "ZooKeeperNotInstalledError", "zookeeper_classpath"]

JAVA_DIR = Path(os.environ.get("LD_ZOOKEEPER_JAVA_DIR", "/usr/share/java"))
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
_LIVE: weakref.WeakSet[LocalZooKeeper] = weakref.WeakSet()


class ZooKeeperNotInstalledError(RuntimeError):
    """``java`` or the ZooKeeper jars are missing (``apt-get install zookeeper``)."""


def zookeeper_classpath() -> str:
    """The class path of the packaged ZooKeeper server (raises when it is not installed)."""
    if shutil.which("java") is None:
        raise ZooKeeperNotInstalledError("java is not installed (apt-get install zookeeper "
                                         "brings a JRE)")
    if not any(JAVA_DIR.glob("zookeeper*.jar")):
        raise ZooKeeperNotInstalledError(f"no zookeeper jar in {JAVA_DIR} (apt-get install "
                                         "zookeeper)")
    return f"{JAVA_DIR}/*"


def four_letter_word(host: str, port: int, word: str = "srvr", timeout: float = 1.0) -> str:
    """Send a ZooKeeper four-letter word; the answer ('' when nothing answered)."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(word.encode())
        chunks = []
        while True:
            data = s.recv(4096)
            if not data:
                break
            chunks.append(data)
    return b"".join(chunks).decode(errors="replace")


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class LocalZooKeeper:
    """A standalone ZooKeeper server process, started on construction.

    Parameters
    ----------
    root : path, optional
        Directory for the config, data and log; a temporary one (removed on ``close``)
        when None.
    port : int, optional
        Client port; a free one when None.  Kept across ``stop``/``start``.
    host : str
        Loopback address the server binds (127.0.0.0/8).
    start_timeout : float
        Seconds ``start`` waits for the server to answer.
    durable : bool
        fsync ZooKeeper's transaction log on every write, as in production (benchmarks);
        off by default (tests: the data is thrown away, fsyncs only load the disk).
    """

    def __init__(self, root: str | os.PathLike[str] | None = None, port: int | None = None,
                 host: str = "127.0.0.1", start_timeout: float = 60.0,
                 durable: bool = False) -> None:
        self._classpath = zookeeper_classpath()
        self._own_root = root is None
        self.root = Path(tempfile.mkdtemp(prefix="ld-zk-") if root is None else root).resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self.host = host
        self.port = port if port is not None else _free_port(host)
        self.start_timeout = start_timeout
        self.data_dir = self.root / "data"
        self.config_path = self.root / "zoo.cfg"
        self.log_path = self.root / "zookeeper.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self._closed = False
        self.config_path.write_text(
            "tickTime=500\n"
            f"dataDir={self.data_dir}\n"
            f"clientPort={self.port}\n"
            f"clientPortAddress={self.host}\n"
            "maxClientCnxns=0\n"
            "minSessionTimeout=1000\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=srvr,ruok\n"
            f"forceSync={'yes' if durable else 'no'}\n")
        _LIVE.add(self)
        try:
            self.start()
        except BaseException:
            self.close()
            raise

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def uri(self, root: str = "/logdevice") -> str:
        """An epoch store URI on this server under znode ``root``."""
        return f"zookeeper:{self.address}{root}"

    @property
    def pid(self) -> int | None:
        """The server's process id while it runs (tests pause it to hold requests up)."""
        return self._proc.pid if self.is_running() and self._proc is not None else None

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> None:
        """Start the server (same port and data) and wait until ``srvr`` answers."""
        if self._closed:
            raise RuntimeError("LocalZooKeeper is closed")
        if self.is_running():
            return
        cmd = ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
               "-Dzookeeper.admin.enableServer=false", "-cp", self._classpath, MAIN_CLASS,
               str(self.config_path)]
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log,
                                          stderr=log, cwd=self.root, start_new_session=True)
        deadline = time.monotonic() + self.start_timeout
        last = ""
        while True:
            if self._proc.poll() is not None:
                raise RuntimeError(f"ZooKeeper exited with code {self._proc.returncode}; see "
                                   f"{self.log_path}:\n{self._tail()}")
            try:
                if "Mode:" in four_letter_word(self.host, self.port):
                    return
            except OSError as exc:
                last = str(exc)
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"ZooKeeper on {self.address} did not answer within "
                                   f"{self.start_timeout:g} s ({last}); see {self.log_path}")
            time.sleep(0.1)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server (SIGTERM, SIGKILL after ``timeout``) and reap it."""
        p, self._proc = self._proc, None
        if p is None:
            return
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)

    def kill(self) -> None:
        """SIGKILL the server (no clean shutdown) and reap it."""
        p, self._proc = self._proc, None
        if p is not None and p.poll() is None:
            p.kill()
            p.wait(10)

    def close(self) -> None:
        """Stop the server; remove the root if it was a temporary directory."""
        if self._closed:
            return
        self._closed = True
        try:
            self.stop()
        finally:
            _LIVE.discard(self)
            if self._own_root:
                shutil.rmtree(self.root, ignore_errors=True)

    def _tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def __enter__(self) -> LocalZooKeeper:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "running" if self.is_running() else "stopped"
        return f"<LocalZooKeeper {self.address} {state} in {self.root}>"


@atexit.register
def _close_all() -> None:
    for zk in list(_LIVE):
        with contextlib.suppress(Exception):
            zk.close()
