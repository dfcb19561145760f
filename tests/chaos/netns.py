"""Network namespaces for chaos runs with partitions: a hub and one namespace per node,
joined by a bridge, with iptables inside the node namespaces to cut links.

    net = Network.create(nodes=5)      # needs root and ``ip netns``
    try:
        net.enter_hub()                # this thread (and what it starts) lives in the hub
        ... LocalCluster(hosts=net.node_hosts, command_prefix=net.node_command, ...)
        net.cut_peers(2, [0, 1, 3, 4]); ...; net.heal(2)
    finally:
        net.close()

Layout: the hub namespace holds the bridge (its address ``HUB``, where ZooKeeper and the
driver's clients live) and one end of a veth pair per node; node ``i``'s namespace holds
the other end (``eth0``) with its own address.  Every address lives only inside these
namespaces: nothing is added to the namespace the run was started from, so no packet of
the run ever leaves them, and deleting the namespaces removes every interface, address
and rule the run made.

Cuts are DROP rules in two chains of the node's own namespace (one jumped to from INPUT
for ``eth0``, one from OUTPUT), so a cut is silent as on a real network (connections
hang, they are not refused) and ``heal`` is flushing those chains.  A node always reaches
itself (its own address goes over loopback, not ``eth0``).

Names start with ``ldchaos<pid>-`` (the pid of the process that made them);
``remove_leftovers`` deletes those whose process is gone, after killing what still runs
inside them (a node or ZooKeeper left behind by a run that was itself killed).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterable, Sequence

__all__ = ["Network", "netns_unavailable"]

PREFIX = "ldchaos"
SUBNET = "10.213.0"  # exists only inside the run's namespaces
HUB = f"{SUBNET}.1"
_CLONE_NEWNET = 0x40000000
_CHAINS = {"INPUT": ("LDCHAOS-IN", "-i"), "OUTPUT": ("LDCHAOS-OUT", "-o")}


def netns_unavailable() -> str | None:
    """Why this process cannot build a ``Network`` (None: it can)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "iptables"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install iproute2 iptables)"
    probe = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                           timeout=10)
    if probe.returncode != 0:
        return f"ip netns does not work here: {probe.stderr.strip()}"
    return None


def _run(*argv: str) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {done.stderr.strip()}")


def _namespaces() -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                         timeout=10).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _delete_namespace(name: str) -> None:
    """Kill what still runs in namespace ``name`` (by pid), then delete it."""
    pids = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True,
                          timeout=10).stdout.split()
    pids = [p for p in pids if p.isdigit() and int(p) != os.getpid()]
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), signal.SIGKILL)
    deadline = time.monotonic() + 10
    while any(_alive(int(p)) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    subprocess.run(["ip", "netns", "delete", name], capture_output=True, timeout=30)


def remove_leftovers() -> list[str]:
    """Delete the namespaces of earlier runs whose process is gone; their names."""
    gone = []
    for name in _namespaces():
        owner = name[len(PREFIX):].partition("-")[0]
        if name.startswith(PREFIX) and owner.isdigit() and not _alive(int(owner)):
            _delete_namespace(name)
            gone.append(name)
    return gone


def _setns(path: str) -> None:
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.setns(fd, _CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns into {path}: {os.strerror(err)}")
    finally:
        os.close(fd)


class Network:
    """A hub and ``nodes`` node namespaces (see the module docstring)."""

    def __init__(self, nodes: int) -> None:
        self.nodes = nodes
        self.tag = f"{PREFIX}{os.getpid()}"
        self.hub = f"{self.tag}-hub"
        self.node_hosts = [f"{SUBNET}.{10 + i}" for i in range(nodes)]
        self._made: list[str] = []
        self._cut: set[int] = set()
        self._home: int | None = None  # the entering thread's own namespace, while in the hub

    @classmethod
    def create(cls, nodes: int) -> Network:
        remove_leftovers()
        net = cls(nodes)
        try:
            net.build()
        except BaseException:
            net.close()
            raise
        return net

    def namespace(self, i: int) -> str:
        return f"{self.tag}-n{i}"

    def node_command(self, i: int) -> list[str]:
        """The argv prefix that runs a command in node ``i``'s namespace (it execs)."""
        return ["ip", "netns", "exec", self.namespace(i)]

    def _add_namespace(self, name: str) -> None:
        _run("ip", "netns", "add", name)
        self._made.append(name)
        _run("ip", "-n", name, "link", "set", "lo", "up")

    def build(self) -> None:
        """Make the hub and the node namespaces and wire them (``create`` calls it)."""
        self._add_namespace(self.hub)
        _run("ip", "-n", self.hub, "link", "add", "br0", "type", "bridge")
        _run("ip", "-n", self.hub, "addr", "add", f"{HUB}/24", "dev", "br0")
        _run("ip", "-n", self.hub, "link", "set", "br0", "up")
        for i in range(self.nodes):
            ns = self.namespace(i)
            self._add_namespace(ns)
            # Made in the hub with its peer end put straight into the node's namespace:
            # no interface ever appears where the run was started.
            _run("ip", "-n", self.hub, "link", "add", f"v{i}", "type", "veth", "peer",
                 "name", "eth0", "netns", ns)
            _run("ip", "-n", self.hub, "link", "set", f"v{i}", "master", "br0", "up")
            _run("ip", "-n", ns, "addr", "add", f"{self.node_hosts[i]}/24", "dev", "eth0")
            _run("ip", "-n", ns, "link", "set", "eth0", "up")
            for hook, (chain, iface) in _CHAINS.items():
                self._iptables(i, "-N", chain)
                self._iptables(i, "-A", hook, iface, "eth0", "-j", chain)

    def enter_hub(self) -> None:
        """Move the calling thread into the hub namespace: the threads and processes it
        starts from now on (clients, ZooKeeper, nodes before their own prefix) are
        there.  Call it before starting any thread that talks to the cluster."""
        home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        try:
            _setns(f"/run/netns/{self.hub}")
        except BaseException:
            os.close(home)
            raise
        self._home = home

    def leave_hub(self) -> None:
        """Move the thread that called ``enter_hub`` back where it was."""
        home, self._home = self._home, None
        if home is not None:
            try:
                _setns(f"/proc/self/fd/{home}")
            finally:
                os.close(home)

    # -- cuts -------------------------------------------------------------------------------
    def _iptables(self, i: int, *args: str) -> None:
        _run("ip", "netns", "exec", self.namespace(i), "iptables", "-w", "5", *args)

    def _drop(self, i: int, inbound: Sequence[str], outbound: Sequence[str]) -> None:
        self._iptables(i, "-A", _CHAINS["INPUT"][0], *inbound, "-j", "DROP")
        self._iptables(i, "-A", _CHAINS["OUTPUT"][0], *outbound, "-j", "DROP")
        self._cut.add(i)

    def isolate(self, i: int) -> None:
        """Node ``i`` reaches nobody and nobody reaches it (peers, clients, ZooKeeper)."""
        self._drop(i, [], [])

    def cut_peers(self, i: int, peers: Iterable[int]) -> None:
        """Node ``i`` and each of ``peers`` stop reaching each other (clients and
        ZooKeeper, in the hub, still reach all of them)."""
        for j in peers:
            if j != i:
                host = self.node_hosts[j]
                self._drop(i, ["-s", host], ["-d", host])

    def cut_port(self, i: int, port: int) -> None:
        """Node ``i`` and the hub's TCP ``port`` (ZooKeeper's) stop reaching each other."""
        self._drop(i, ["-s", HUB, "-p", "tcp", "--sport", str(port)],
                   ["-d", HUB, "-p", "tcp", "--dport", str(port)])

    def heal(self, i: int | None = None) -> None:
        """Undo every cut of node ``i`` (of every node when None)."""
        for j in sorted(self._cut if i is None else {i} & self._cut):
            for chain, _ in _CHAINS.values():
                self._iptables(j, "-F", chain)
            self._cut.discard(j)

    def namespaces_left(self) -> list[str]:
        """This network's namespaces that still exist (none once closed)."""
        return [name for name in _namespaces() if name.startswith(f"{self.tag}-")]

    def close(self) -> None:
        """Leave the hub, delete every namespace made (with its interfaces and rules);
        kills what still runs in them first."""
        self.leave_hub()
        for name in reversed(self._made):
            _delete_namespace(name)
        self._made.clear()
