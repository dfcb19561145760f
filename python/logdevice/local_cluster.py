"""``LocalCluster``: a real cluster of ``logdeviced`` processes on loopback addresses.

    with ld.LocalCluster(nodes=5, replication=2, logs=range(1, 101)) as cluster:
        client = cluster.client()
        cluster.kill(2); cluster.start(2)

It writes a config into ``root`` (a temporary directory, removed on exit, when ``root`` is
None), picks free loopback ports, starts one node process per node (by default on
127.0.0.1 with the embedded SQLite epoch store) and waits until every node answers HELLO
and every node's cluster view shows all running nodes alive.  Each node's stderr goes to
``<root>/N<i>.log``; a node that does not come up in time raises ``TimeoutError`` naming it
and quoting the end of its log.

With ``hosts=[...]`` (one loopback address per node) and ``epoch_store="zookeeper:..."``
the cluster is laid out as it would be on separate machines: node ``i`` listens on
``hosts[i]``, runs in its own directory ``<root>/N<i>/`` with its own copy of the config
and its data under it, and shares no file with the other nodes (the epoch store is
ZooKeeper; clients use ``<root>/cluster.json``).

With ``tls=True`` the cluster runs with TLS on every connection: a CA, the nodes'
certificate (CN ``logdevice-node``, valid for every node address) and its key are made
under ``<root>/tls/`` (``security.dev_certs``, with ``trustme``, a test dependency);
``client_cert(name)`` issues a client certificate of that CA for principal ``name``.
``security={...}`` adds to the config's ``security`` section (principals, the default
ACL, ``tls.require_client_cert``); per-log-group ACLs are the ``acl`` log attribute.
Security without TLS gets a generated node secret unless one is given.  The cluster's own
probes act as a node.  ``security={"insecure": True}`` is the config's way of running
nodes beyond loopback without security, on purpose (nothing is generated then).

Nodes on addresses that are not this process's (each node in a network namespace of its
own, say) take ``ports=[(data, admin), ...]`` chosen by the caller and
``command_prefix=lambda i: ["ip", "netns", "exec", f"ns{i}"]``: node ``i``'s command line
starts with that prefix (which must exec the node, so that signals reach it).

Processes never outlive the cluster: ``close()`` (also on ``__exit__``, on interpreter
exit, and on any error while starting) resumes paused nodes, sends SIGTERM, waits a
bounded time and SIGKILLs what is left.  On Linux the nodes also get SIGKILL if the
thread that started them dies (``PR_SET_PDEATHSIG``), so even a crashed test runner
leaves no orphans.

``ld-dev-cluster`` (``tools.dev_cluster``) runs one from the shell.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import dataclasses
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from logdevice.client import Client
from logdevice.config import Config, LogGroup, Settings, make_local_config
from logdevice.node.roles.failure_detector_role import config_version
from logdevice.protocol.probe import cluster_view
from logdevice.rebuilding.requests import request_rebuild
from logdevice.security import PLAIN, ConnectSecurity
from logdevice.security.dev_certs import NODE_SUBJECT, DevCertificates
from logdevice.security.store import open_cluster_store, open_existing_cluster_store

if TYPE_CHECKING:
    from logdevice.client.settings import ClientSettingKwargs

__all__ = ["LocalCluster", "free_ports"]

#: Settings a local cluster uses unless told otherwise: notice a dead node in 1.5 s.
LOCAL_SETTINGS: dict[str, Any] = {"dead_timeout_ms": 1500, "suspect_timeout_ms": 1000}
_SETTING_NAMES = {f.name for f in dataclasses.fields(Settings)}
_LOG_ATTR_NAMES = {f.name for f in dataclasses.fields(LogGroup)} - {"name", "lo", "hi",
                                                                    "replication"}
_LIVE: weakref.WeakSet[LocalCluster] = weakref.WeakSet()
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # runs in the child between fork and exec
    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """``n`` distinct TCP ports that were free a moment ago."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _tail(path: Path, lines: int = 20) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:]) or "(empty log)"


class LocalCluster:
    """Node processes on free loopback ports, started on construction.

    Parameters
    ----------
    nodes : int
        Number of nodes (each sequencer and storage unless ``roles`` says otherwise).
    replication : int or dict
        Replication property of every log (``2``, ``{"rack": 2, "node": 3}``).
    logs : iterable of int
        Log ids to provision.
    root : path, optional
        Where config, data and node logs go; a temporary directory (removed on close)
        when None.  An explicit root is kept.
    roles, locations, weights : per-node sequences, optional
        As in ``config.make_local_config``.
    epoch_store : str, optional
        Epoch store URI (``zookeeper:127.0.0.1:2181/mycluster``); default a SQLite file
        in ``root``.
    hosts : sequence of str, optional
        One listen address per node (127.0.0.0/8 for a local cluster).  Each node then
        gets its own directory and config copy (no shared files).
    ready_timeout : float
        Seconds to wait for the nodes to come up.
    log_level : str
        The nodes' stderr log level.
    tls : bool
        TLS on every connection, with certificates generated into ``<root>/tls/``.
    security : dict, optional
        More of the config's ``security`` section (``principals``, ``acl``, ``tls``
        options...); with it or ``tls``, security is on.  Without TLS the nodes share a
        generated secret, and on a ZooKeeper store they authenticate with a generated
        credential; both are in files under ``<root>/secrets/``, never in the config.
        ``{"insecure": True}`` (without ``tls``) is written as it is: no security.
    ports : sequence of (int, int), optional
        Each node's data and admin port (default: ports free on its host a moment ago,
        which needs the host to be an address of this process's network namespace).
    command_prefix : callable, optional
        ``command_prefix(i)``: the argv node ``i``'s command line starts with (a command
        that execs the rest, e.g. ``ip netns exec NAME``).
    **options
        Log-group attributes (``max_writes_in_flight``, ``sticky_copysets``,
        ``store_timeout_ms``, ``nodeset_size``...) and settings (``heartbeat_interval_ms``,
        ``dead_timeout_ms``, ``max_payload_size``...), by name.  Unless given, a local
        cluster declares a silent node dead after 1.5 s (``LOCAL_SETTINGS``).
    """

    def __init__(self, nodes: int = 5, replication: int | Mapping[str, int] = 2,
                 logs: Iterable[int] = range(1, 101), root: str | os.PathLike[str] | None = None,
                 *, cluster: str = "local", roles: Any = None, locations: Any = None,
                 weights: Any = None, epoch_store: str | None = None,
                 hosts: Sequence[str] | None = None, ready_timeout: float = 30.0,
                 log_level: str = "INFO", tls: bool = False,
                 security: Mapping[str, Any] | None = None,
                 ports: Sequence[tuple[int, int]] | None = None,
                 command_prefix: Callable[[int], Sequence[str]] | None = None,
                 **options: Any) -> None:
        settings = dict(LOCAL_SETTINGS)
        log_attrs: dict[str, Any] = {}
        for key, value in options.items():
            if key in _SETTING_NAMES:
                settings[key] = value
            elif key in _LOG_ATTR_NAMES:
                log_attrs[key] = value
            else:
                raise TypeError(f"LocalCluster got an unknown option {key!r} (neither a "
                                f"setting nor a log attribute)")
        self._own_root = root is None
        self.root = Path(tempfile.mkdtemp(prefix="ld-cluster-") if root is None
                         else root).resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self.n = nodes
        self.ready_timeout = ready_timeout
        self.log_level = log_level
        self._command_prefix = command_prefix
        self._procs: dict[int, subprocess.Popen[bytes]] = {}
        self._paused: set[int] = set()
        self._closed = False
        self._lock = threading.RLock()
        if hosts is not None and len(hosts) != nodes:
            raise ValueError(f"hosts has {len(hosts)} entries for {nodes} nodes")
        if ports is not None and len(ports) != nodes:
            raise ValueError(f"ports has {len(ports)} entries for {nodes} nodes")
        self.separate_roots = hosts is not None
        host_list = list(hosts) if hosts is not None else ["127.0.0.1"] * nodes
        self._certs: DevCertificates | None = None  # with tls=True
        self.node_security = PLAIN  # what the cluster's probes present (set below)
        try:
            section = self._security_section(tls, security, host_list, epoch_store)
            if ports is not None:
                data_ports = [int(p[0]) for p in ports]
                admin_ports = [int(p[1]) for p in ports]
            else:
                # A data port and an admin (metrics) port for each node, free on its host.
                per_host = {h: iter(free_ports(2 * host_list.count(h), h))
                            for h in dict.fromkeys(host_list)}
                data_ports = [next(per_host[h]) for h in host_list]
                admin_ports = [next(per_host[h]) for h in host_list]
            self.config: Config = make_local_config(
                nodes, replication, logs, root=self.root, ports=data_ports,
                admin_ports=admin_ports, host=host_list,
                cluster=cluster, roles=roles, locations=locations, weights=weights,
                log_attrs=log_attrs, settings=settings, epoch_store=epoch_store,
                data_dir="data" if self.separate_roots else None, security=section)
            self.config_path = self.config.dump(self.root / "cluster.json")
            self.node_security = ConnectSecurity.for_node(self.config)
            if self.separate_roots:
                for i in range(nodes):
                    self.node_root(i).mkdir(parents=True, exist_ok=True)
                    self.config.dump(self.node_config_path(i))
            _LIVE.add(self)
            for i in range(nodes):
                self._spawn(i)
            self.wait_ready()
        except BaseException:
            self.close()
            raise

    def __repr__(self) -> str:
        return f"<LocalCluster {self.n} nodes in {self.root}>"

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- security ---------------------------------------------------------------------------
    def _security_section(self, tls: bool, extra: Mapping[str, Any] | None,
                          hosts: Sequence[str], epoch_store: str | None
                          ) -> dict[str, Any] | None:
        """The config's ``security`` section: generated TLS material and node identity,
        then ``extra`` on top (its ``tls`` keys merged into the generated ones)."""
        if not tls and extra is None:
            return None
        if not tls and extra is not None and "insecure" in extra:
            return dict(extra)  # the config's parser says what else may go with it
        section: dict[str, Any] = {}
        if tls:
            self._certs = DevCertificates(self.root / "tls")
            node_cert, node_key = self._certs.node_cert([*hosts, "localhost"])
            section["tls"] = {"cert": str(node_cert), "key": str(node_key),
                              "ca": str(self._certs.ca_path)}
            section["node_subjects"] = [NODE_SUBJECT]
        for key, value in (extra or {}).items():
            section[key] = {**section.get(key, {}), **value} if key == "tls" else value
        # Secrets live in files only the nodes (and this process, the operator) read:
        # never in the config file clients are given.
        if "tls" not in section and "node_secret_file" not in section:
            section["node_secret_file"] = str(self._secret_file("node_secret",
                                                                secrets.token_hex(16)))
        if "zookeeper" not in section and str(epoch_store or "").startswith("zookeeper:"):
            credential = f"nodes:{secrets.token_hex(16)}"
            section["zookeeper"] = {"auth_file": str(self._secret_file("zookeeper",
                                                                       credential))}
        return section

    def _secret_file(self, name: str, secret: str) -> Path:
        folder = self.root / "secrets"
        folder.mkdir(mode=0o700, exist_ok=True)
        path = folder / name
        path.touch(mode=0o600)
        path.write_text(secret + "\n")
        return path

    def client_cert(self, name: str) -> tuple[Path, Path]:
        """A client certificate for principal ``name`` (its CN), signed by the cluster's
        CA: ``(cert_path, key_path)`` under ``<root>/tls/``.  Needs ``tls=True``."""
        if self._certs is None:
            raise RuntimeError("client_cert needs a cluster started with tls=True")
        return self._certs.client_cert(name)

    # -- where things are -------------------------------------------------------------------
    def node_address(self, i: int) -> tuple[str, int]:
        return self.config.node(i).address

    def node_root(self, i: int) -> Path:
        """The directory node ``i`` runs in (its own one with ``hosts``, else ``root``)."""
        return self.root / f"N{i}" if self.separate_roots else self.root

    def node_config_path(self, i: int) -> Path:
        """The config file node ``i`` reads."""
        return self.node_root(i) / "cluster.json"

    def node_data_dir(self, i: int) -> Path:
        if self.separate_roots:
            return Config.load(self.node_config_path(i)).node_data_dir(i)
        return self.config.node_data_dir(i)

    def logsdb_path(self, i: int) -> Path:
        """Node ``i``'s LogsDB directory (open it with ``LogsDB`` once the node stopped)."""
        return self.node_data_dir(i) / "logsdb"

    def metrics_url(self, i: int) -> str:
        """Node ``i``'s Prometheus endpoint."""
        n = self.config.node(i)
        return f"http://{n.host}:{n.admin_port}/metrics"

    def log_path(self, i: int) -> Path:
        """Node ``i``'s stderr."""
        return self.root / f"N{i}.log"

    def log_excerpt(self, i: int, lines: int = 20) -> str:
        """The end of node ``i``'s log, for an error message: introduced by the log's path
        when ``root`` is kept, without it when ``root`` is a temporary directory (removed on
        close: a message must not send anyone to a file that is gone)."""
        where = "its log" if self._own_root else str(self.log_path(i))
        return f"end of {where}:\n{_tail(self.log_path(i), lines)}"

    def pid(self, i: int) -> int | None:
        p = self._procs.get(i)
        return p.pid if p is not None and p.poll() is None else None

    def is_running(self, i: int) -> bool:
        p = self._procs.get(i)
        return p is not None and p.poll() is None

    def running(self) -> list[int]:
        return [i for i in range(self.n) if self.is_running(i)]

    def returncode(self, i: int) -> int | None:
        p = self._procs.get(i)
        return None if p is None else p.poll()

    # -- processes --------------------------------------------------------------------------
    def _spawn(self, i: int) -> None:
        prefix = list(self._command_prefix(i)) if self._command_prefix is not None else []
        cmd = [*prefix, sys.executable, "-m", "logdevice.node.main", "--config",
               str(self.node_config_path(i)),
               "--node-index", str(i), "--log-level", self.log_level]
        with open(self.log_path(i), "ab") as err:
            err.write(f"==== starting N{i} at {time.strftime('%H:%M:%S')} ====\n".encode())
            err.flush()
            self._procs[i] = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=err, stderr=err, cwd=self.node_root(i),
                start_new_session=True,
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None)

    def start(self, i: int, timeout: float | None = None) -> None:
        """(Re)start node ``i`` (same data directory) and wait until the cluster sees it."""
        with self._lock:
            if self.is_running(i):
                raise RuntimeError(f"N{i} is already running")
            self._paused.discard(i)
            self._spawn(i)
        self.wait_ready(timeout=timeout)

    def kill(self, i: int) -> None:
        """SIGKILL node ``i`` and reap it."""
        p = self._procs.get(i)
        if p is not None and p.poll() is None:
            p.kill()
            p.wait(10)
        self._paused.discard(i)

    def pause(self, i: int) -> None:
        """SIGSTOP node ``i``: it keeps its sockets but answers nothing."""
        p = self._procs[i]
        p.send_signal(signal.SIGSTOP)
        self._paused.add(i)

    def resume(self, i: int) -> None:
        """SIGCONT node ``i``."""
        p = self._procs[i]
        p.send_signal(signal.SIGCONT)
        self._paused.discard(i)

    def stop(self, i: int, timeout: float = 15.0) -> int | None:
        """SIGTERM node ``i`` (clean shutdown), SIGKILL after ``timeout``; its exit code."""
        p = self._procs.get(i)
        if p is None:
            return None
        if p.poll() is None:
            if i in self._paused:
                p.send_signal(signal.SIGCONT)
                self._paused.discard(i)
            p.terminate()
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)
        return p.returncode

    def stop_all(self, timeout: float = 15.0) -> dict[int, int | None]:
        """Stop every node (in parallel); exit codes by node."""
        procs = {i: p for i, p in self._procs.items() if p.poll() is None}
        for i, p in procs.items():
            if i in self._paused:
                with contextlib.suppress(ProcessLookupError):
                    p.send_signal(signal.SIGCONT)
            with contextlib.suppress(ProcessLookupError):
                p.terminate()
        self._paused.clear()
        deadline = time.monotonic() + timeout
        for p in procs.values():
            try:
                p.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)
        return {i: p.returncode for i, p in self._procs.items()}

    def close(self) -> None:
        """Stop every node; remove the root if it was a temporary directory."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            self.stop_all()
        finally:
            _LIVE.discard(self)
            if self._own_root:
                shutil.rmtree(self.root, ignore_errors=True)

    # -- rebuilding -------------------------------------------------------------------------
    def drain(self, i: int) -> int:
        """Drain node ``i``: it stops taking new copies and moves the records it holds to
        other nodes (it must be running, or do so once started).  Returns the event-log
        version of the request; ``wait_rebuilt([i])`` waits for the end."""
        return self._request_rebuild(i, drain=True, unrecoverable=False)

    def mark_unrecoverable(self, i: int) -> int:
        """Node ``i``'s data is gone for good: stop it if it runs, and have the other
        nodes re-replicate its records.  Returns the event-log version of the request."""
        if self.is_running(i):
            self.stop(i)
        return self._request_rebuild(i, drain=False, unrecoverable=True)

    def _request_rebuild(self, i: int, *, drain: bool, unrecoverable: bool) -> int:
        with open_cluster_store(self.config) as store:
            return request_rebuild(store, self.config, i, drain=drain,
                                   unrecoverable=unrecoverable)

    def add_node(self, *, roles: Sequence[str] | None = None, location: str | None = None,
                 weights: Mapping[str, float] | None = None,
                 timeout: float | None = None) -> int:
        """Add a node to the running cluster, without restarting the others: the config
        file gets the new node, the running nodes and clients adopt it at their next poll
        (``logs_config_poll_ms``), the node starts, and new epochs place records on it.
        Returns its index once every running node sees it alive."""
        with self._lock:
            i = max(n.index for n in self.config.nodes) + 1
            host = self.config.node(i - 1).host
            port, admin_port = free_ports(2, host)
            entry: dict[str, Any] = {"index": i, "host": host, "port": port,
                                     "admin_port": admin_port}
            if roles is not None:
                entry["roles"] = list(roles)
            if location is not None:
                entry["location"] = location
            if weights is not None:
                entry["weights"] = dict(weights)
            d = self.config.to_dict()
            d["nodes"].append(entry)
            config = Config.from_dict(d, source=self.config_path)
            self.n = max(self.n, i + 1)
            if self.separate_roots:
                self.node_root(i).mkdir(parents=True, exist_ok=True)
            self._write_config(config)
            self._spawn(i)
        self.wait_config(config, timeout)
        self.wait_ready(timeout)
        return i

    def remove_node(self, i: int, timeout: float | None = None) -> None:
        """Take stopped node ``i`` out of the config (after ``drain`` and ``wait_rebuilt``:
        it holds nothing any log still needs), without restarting anyone: the running
        nodes and clients adopt the new config file at their next poll and no longer
        contact it.  Returns once every running node uses the new config."""
        if self.is_running(i):
            raise RuntimeError(f"N{i} is running: stop it before removing it")
        d = self.config.to_dict()
        d["nodes"] = [n for n in d["nodes"] if n["index"] != i]
        config = Config.from_dict(d, source=self.config_path)
        with self._lock:
            self._write_config(config)
            self._procs.pop(i, None)
        self.wait_config(config, timeout)
        self.wait_ready(timeout)

    def _write_config(self, config: Config) -> None:
        """The cluster's config file (and with ``hosts``, each node's own copy)."""
        self.config = config
        config.dump(self.config_path)
        if self.separate_roots:
            for n in config.nodes:
                config.dump(self.node_config_path(n.index))

    def wait_config(self, config: Config, timeout: float | None = None) -> None:
        """Wait until every running node has adopted ``config``'s nodes and log groups
        (its cluster view carries the config's fingerprint)."""
        want = config_version(config)
        timeout = self.ready_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        pending = set(self.running()) - self._paused - {n for n in self.running()
                                                        if not config.has_node(n)}
        while pending:
            for i in sorted(pending):
                try:
                    view = cluster_view(self.node_address(i), config.cluster, 1.0,
                                        self.node_security)
                except Exception:
                    continue
                if view.config_version == want:
                    pending.discard(i)
            if pending and time.monotonic() > deadline:
                raise TimeoutError(f"nodes {sorted(pending)} did not adopt the new config "
                                   f"within {timeout:g} s")
            if pending:
                time.sleep(0.05)

    def shard_statuses(self) -> dict[int, Any]:
        """Nodes the event log says are not fully authoritative, with their status."""
        store = open_existing_cluster_store(self.config)
        if store is None:
            return {}
        with store:
            return store.shard_statuses()

    def wait_rebuilt(self, nodes: Iterable[int], timeout: float = 120.0) -> None:
        """Wait until rebuilding of ``nodes`` is over: none is in the rebuilding set, and
        each is AUTHORITATIVE_EMPTY or (once acknowledged) FULLY_AUTHORITATIVE."""
        wanted = set(nodes)
        deadline = time.monotonic() + timeout
        with open_cluster_store(self.config) as store:
            while True:
                rset = store.rebuilding_set()
                if not wanted & rset.nodes:
                    return
                if time.monotonic() > deadline:
                    raise TimeoutError(f"rebuilding of {sorted(wanted)} not done after "
                                       f"{timeout} s: set v{rset.version} lost "
                                       f"{sorted(rset.lost)} draining {sorted(rset.draining)}"
                                       f", donors done {sorted(rset.done)} of "
                                       f"{sorted(rset.donors or ())}")
                time.sleep(0.1)

    # -- readiness --------------------------------------------------------------------------
    def views(self, timeout: float = 2.0) -> dict[int, Any]:
        """Each running, unpaused node's cluster view (nodes that do not answer omitted)."""
        out = {}
        for i in self.running():
            if i in self._paused:
                continue
            with contextlib.suppress(Exception):
                out[i] = cluster_view(self.node_address(i), self.config.cluster, timeout,
                                      self.node_security)
        return out

    def wait_ready(self, timeout: float | None = None) -> None:
        """Wait until every running node answers and sees all running nodes alive."""
        self.wait_alive(set(self.running()) - self._paused, timeout)

    def wait_alive(self, expected: Iterable[int], timeout: float | None = None) -> None:
        """Wait until every node in ``expected`` answers HELLO, its view's ``alive`` set
        is exactly ``expected`` and it places sequencers on none but them.  TimeoutError
        names the node that is not there and quotes the end of its log."""
        expected = set(expected)
        timeout = self.ready_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        pending = set(expected)
        last: dict[int, str] = {}
        while True:
            for i in sorted(pending):
                p = self._procs.get(i)
                if p is not None and p.poll() is not None:
                    raise RuntimeError(f"N{i} exited with code {p.returncode} while starting; "
                                       f"{self.log_excerpt(i)}")
                try:
                    view = cluster_view(self.node_address(i), self.config.cluster, 1.0,
                                        self.node_security)
                except Exception as exc:
                    last[i] = f"not answering: {exc}"
                    continue
                placed = {s.node_index for s in view.sequencers}
                if set(view.alive) == expected and placed <= expected:
                    pending.discard(i)
                else:
                    last[i] = (f"sees alive {sorted(view.alive)}, places sequencers on "
                               f"{sorted(placed)}, expected {sorted(expected)}")
            if not pending:
                return
            if time.monotonic() > deadline:
                i = min(pending)
                raise TimeoutError(f"N{i} not ready after {timeout:g} s ({last.get(i)}); "
                                   f"{self.log_excerpt(i)}")
            time.sleep(0.05)

    # -- clients ----------------------------------------------------------------------------
    def client(self, timeout: float = 10.0, **settings: Unpack[ClientSettingKwargs]
               ) -> Client:
        """``ld.Client(self.config_path, timeout, **settings)``: a client of this cluster
        (``timeout`` and ``settings`` as for ``Client``; an unknown setting is
        ``InvalidParamError`` listing the known ones)."""
        return Client(self.config_path, timeout, **settings)


@atexit.register
def _close_all() -> None:
    for cluster in list(_LIVE):
        with contextlib.suppress(Exception):
            cluster.close()

