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
with ``trustme`` (a test dependency) under ``<root>/tls/``; ``client_cert(name)`` issues a
client certificate of that CA for principal ``name``.  ``security={...}`` adds to the
config's ``security`` section (principals, the default ACL, ``tls.require_client_cert``);
per-log-group ACLs are the ``acl`` log attribute.  Security without TLS gets a generated
node secret unless one is given.  The cluster's own probes act as a node.
``security={"insecure": True}`` is the config's way of running nodes beyond loopback
without security, on purpose (nothing is generated then).

Nodes on addresses that are not this process's (each node in a network namespace of its
own, say) take ``ports=[(data, admin), ...]`` chosen by the caller and
``command_prefix=lambda i: ["ip", "netns", "exec", f"ns{i}"]``: node ``i``'s command line
starts with that prefix (which must exec the node, so that signals reach it).

Processes never outlive the cluster: ``close()`` (also on ``__exit__``, on interpreter
exit, and on any error while starting) resumes paused nodes, sends SIGTERM, waits a
bounded time and SIGKILLs what is left.  On Linux the nodes also get SIGKILL if the
thread that started them dies (``PR_SET_PDEATHSIG``), so even a crashed test runner
leaves no orphans.

``ld-dev-cluster`` (``main``) starts one, prints the config path and runs until Ctrl-C or
SIGTERM.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import ctypes
import dataclasses
import ipaddress
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

from logdevice.cli import add_version
from logdevice.client import Client
from logdevice.config import Config, LogGroup, Settings, make_local_config
from logdevice.epochstore.uri import parse_epoch_store_uri
from logdevice.errors import LogDeviceError
from logdevice.node.failure_detector import config_version
from logdevice.node.probe import cluster_view
from logdevice.rebuilding.requests import request_rebuild
from logdevice.security import PLAIN, ConnectSecurity
from logdevice.security.store import open_cluster_store, open_existing_cluster_store

if TYPE_CHECKING:
    from logdevice.client.settings import ClientSettingKwargs

__all__ = ["LocalCluster", "main"]

#: Settings a local cluster uses unless told otherwise: notice a dead node in 1.5 s.
LOCAL_SETTINGS: dict[str, Any] = {"dead_timeout_ms": 1500, "suspect_timeout_ms": 1000}
_SETTING_NAMES = {f.name for f in dataclasses.fields(Settings)}
_LOG_ATTR_NAMES = {f.name for f in dataclasses.fields(LogGroup)} - {"name", "lo", "hi",
                                                                    "replication"}
_LIVE: weakref.WeakSet[LocalCluster] = weakref.WeakSet()
_PR_SET_PDEATHSIG = 1
#: The CN of the node certificate of a cluster with ``tls=True``.
NODE_SUBJECT = "logdevice-node"


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
        self._ca: Any = None  # trustme.CA with tls=True
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
            try:
                import trustme  # optional (the "test" extra): only tls=True needs it
            except ImportError:
                raise RuntimeError("LocalCluster(tls=True) needs trustme (pip install "
                                   "trustme, or the package's test extra)") from None
            tls_dir = self.root / "tls"
            tls_dir.mkdir(exist_ok=True)
            self._ca = trustme.CA()
            self._ca.cert_pem.write_to_path(str(tls_dir / "ca.pem"))
            node = self._ca.issue_cert(*dict.fromkeys([*hosts, "localhost"]),
                                       common_name=NODE_SUBJECT)
            node.private_key_pem.write_to_path(str(tls_dir / "node.key"))
            with open(tls_dir / "node.pem", "wb") as f:
                for blob in node.cert_chain_pems:
                    f.write(blob.bytes())
            section["tls"] = {"cert": str(tls_dir / "node.pem"),
                              "key": str(tls_dir / "node.key"), "ca": str(tls_dir / "ca.pem")}
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
        if self._ca is None:
            raise RuntimeError("client_cert needs a cluster started with tls=True")
        cert = self.root / "tls" / f"client-{name}.pem"
        key = self.root / "tls" / f"client-{name}.key"
        if not cert.exists():
            leaf = self._ca.issue_cert(f"{name}.client.invalid", common_name=name)
            leaf.private_key_pem.write_to_path(str(key))
            leaf.cert_chain_pems[0].write_to_path(str(cert))
        return cert, key

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


def _parse_logs(text: str) -> list[int]:
    """``"1-100"`` or ``"1,5,7-9"`` -> log ids; ``ValueError`` saying what is wrong."""
    out: list[int] = []
    for part in text.split(","):
        lo, dash, hi = part.strip().partition("-")
        try:
            a, b = int(lo), int(hi if dash else lo)
        except ValueError:
            raise ValueError(f"{part.strip()!r} is neither a log id nor a range "
                             f"lo-hi") from None
        if a < 1 or b < a:
            raise ValueError(f"{part.strip()!r}: log ids are >= 1 and a range lo-hi has "
                             f"lo <= hi")
        out.extend(range(a, b + 1))
    return out


def _log_ids(text: str) -> list[int]:
    try:
        return _parse_logs(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{exc} (e.g. 1-100 or 1,5,7-9)") from None


def _positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer >= 1")
    return n


def _loopback_hosts(text: str) -> list[str]:
    hosts = [h.strip() for h in text.split(",")]
    for h in hosts:
        try:
            ok = ipaddress.ip_address(h) in ipaddress.ip_network("127.0.0.0/8")
        except ValueError:
            ok = False
        if not ok:
            raise argparse.ArgumentTypeError(
                f"{h!r} is not a loopback IPv4 address (127.0.0.0/8): every node of a local "
                f"cluster runs on this machine")
    return hosts


#: ``ld-dev-cluster --tls``: TLS, two principals, trim and admin for one of them.
DEV_TLS: dict[str, Any] = {
    "tls": True,
    "security": {"principals": {"app": {}, "admin": {}},
                 "acl": {"trim": ["admin"], "admin": ["admin"]}},
}


def _epoch_store(text: str) -> str:
    try:
        parse_epoch_store_uri(text)
    except LogDeviceError as exc:
        raise argparse.ArgumentTypeError(exc.message) from None
    return text


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ld-dev-cluster",
                                description="Run a local logdevice cluster on loopback "
                                            "addresses: prints the config path on stdout, "
                                            "runs until Ctrl-C or SIGTERM.")
    add_version(p)
    p.add_argument("--nodes", type=_positive_int, default=None, metavar="N",
                   help="number of nodes, each sequencer and storage (default 5, or one per "
                        "--hosts address)")
    p.add_argument("--replication", type=_positive_int, default=2, metavar="R",
                   help="copies of every record, at most --nodes (default 2)")
    p.add_argument("--logs", type=_log_ids, default=_parse_logs("1-100"), metavar="IDS",
                   help="log ids, e.g. 1-100 or 1,5,7-9 (default 1-100)")
    p.add_argument("--root", default=None,
                   help="directory for config, data and node logs, kept on exit (default: a "
                        "temporary one, removed on exit)")
    p.add_argument("--log-level", default="INFO", type=str.upper,
                   choices=["DEBUG", "INFO", "WARNING", "ERROR"],
                   help="the nodes' log level (their logs: <root>/N<i>.log)")
    p.add_argument("--epoch-store", default=None, metavar="URI", type=_epoch_store,
                   help="epoch store, e.g. zookeeper:127.0.0.1:2181/dev (default: a SQLite "
                        "file in the root)")
    p.add_argument("--tls", action="store_true",
                   help="a secured cluster: TLS, node certificates, principals 'app' "
                        "(append, read) and 'admin' (also trim and admin), whose client "
                        "certificates are written to <root>/tls/")
    p.add_argument("--hosts", default=None, metavar="A,B,...", type=_loopback_hosts,
                   help="one loopback address per node, e.g. 127.0.0.2,127.0.0.3,127.0.0.4 "
                        "(each node then gets its own directory; needs a zookeeper: store)")
    return p


def main(argv: list[str] | None = None) -> int:
    """``ld-dev-cluster``: start a local cluster, print its config path, run until Ctrl-C.

    Bad arguments are usage errors (exit 2); a cluster that does not start or a node that
    dies exits 1 with the end of the node's log (its path only when ``--root`` keeps it)."""
    p = _parser()
    args = p.parse_args(argv)
    nodes: int = args.nodes if args.nodes is not None else 5
    if args.hosts is not None:
        if args.nodes is not None and args.nodes != len(args.hosts):
            p.error(f"--nodes {args.nodes} but --hosts has {len(args.hosts)} addresses "
                    f"(one per node)")
        nodes = len(args.hosts)
        if not (args.epoch_store or "").startswith("zookeeper:"):
            p.error("--hosts needs --epoch-store zookeeper:HOST:PORT/ROOT (nodes in their own "
                    "directories share no file)")
    if args.replication > nodes:
        p.error(f"--replication {args.replication} is more than the {nodes} nodes")
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        cluster = LocalCluster(nodes=nodes, replication=args.replication, logs=args.logs,
                               root=args.root, log_level=args.log_level,
                               epoch_store=args.epoch_store, hosts=args.hosts,
                               **(DEV_TLS if args.tls else {}))
    except (TimeoutError, RuntimeError, ValueError, OSError, LogDeviceError) as exc:
        print(f"ld-dev-cluster: {exc}", file=sys.stderr)
        return 1
    with cluster:
        print(cluster.config_path, flush=True)
        if args.tls:
            for name in DEV_TLS["security"]["principals"]:
                cert, key = cluster.client_cert(name)
                print(f"principal {name}: --tls-cert {cert} --tls-key {key}",
                      file=sys.stderr, flush=True)
        kept = "" if args.root is not None else ", removed on exit"
        print(f"{cluster.n} nodes running (config, data and logs in {cluster.root}{kept}); "
              f"Ctrl-C stops them", file=sys.stderr, flush=True)
        while not stop.wait(0.5):
            dead = [i for i in range(cluster.n) if not cluster.is_running(i)]
            if dead:
                i = dead[0]
                print(f"ld-dev-cluster: N{i} exited with code {cluster.returncode(i)}; "
                      f"{cluster.log_excerpt(i)}", file=sys.stderr)
                return 1
    print("stopped", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
