"""What ldshell knows about a cluster: its config, and small blocking calls to look inside.

Every call is bounded by ``timeout``; a node that does not answer is reported as such,
never waited on.  ldshell never opens the epoch store: what it holds (log states, the
event log, the runtime log groups) is asked of the nodes, and every change is a node
request that the ``admin`` ACL must allow.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import urllib.request
from collections.abc import Callable, Iterable
from typing import IO, Any

from logdevice.checker.client import AvailabilityClient, Fetched
from logdevice.cli import Credentials
from logdevice.client import Client
from logdevice.client.metadata import ClusterMetadata
from logdevice.client.net.connection import Connection
from logdevice.config import Config
from logdevice.errors import E, LogDeviceError
from logdevice.logs_config import LogsConfigSource
from logdevice.protocol import GetPartitions
from logdevice.protocol.probe import cluster_view
from logdevice.security import ConnectSecurity

__all__ = ["ShellContext"]


class ShellContext:
    """The cluster behind ``--config PATH``.

    Parameters
    ----------
    config_path : str
    timeout : float
        Seconds for each node call.
    err : file, optional
        Where warnings go (nodes that did not answer); default stderr.
    """

    def __init__(self, config_path: str, timeout: float = 5.0,
                 err: IO[str] | None = None) -> None:
        self.config_path = config_path
        self.timeout = timeout
        self.err = err if err is not None else sys.stderr
        #: The config file as loaded (``config`` adds the runtime log groups).
        self.base = Config.load(config_path)
        # Every node call presents these (see ``authenticate``); default: anonymous.
        self.security = ConnectSecurity.for_client(self.base)
        self.credentials: Credentials = {}
        self._views: dict[int, Any] | None = None
        self._config: Config | None = None
        self._client: Client | None = None

    @property
    def config(self) -> Config:
        """The config file plus the log groups created at runtime (the file's alone, with
        a warning, when no node can say what they are)."""
        if self._config is None:
            source = LogsConfigSource(self.base, self.metadata().logs_config)
            try:
                self._config = source.poll() or self.base
            except LogDeviceError as exc:
                self.warn(f"runtime log groups left out: {exc}")
                self._config = self.base
        return self._config

    def metadata(self) -> ClusterMetadata:
        """The cluster's metadata, through its nodes (one client for the session)."""
        if self._client is None:
            self._client = self.client()
        return self._client.context.metadata

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def forget(self) -> None:
        """Drop what was cached for the last command (the interactive prompt)."""
        self._views = None
        self._config = None

    # -- nodes ----------------------------------------------------------------------------
    def views(self) -> dict[int, Any]:
        """Each answering node's cluster view (cached for the command)."""
        if self._views is None:
            views = {}
            for n in self.config.nodes:
                with contextlib.suppress(LogDeviceError, OSError):
                    views[n.index] = cluster_view(n.address, self.config.cluster,
                                                  min(self.timeout, 2.0), self.security)
            self._views = views
        return self._views

    def alive(self) -> set[int]:
        """Nodes some answering node believes alive (the freshest view wins)."""
        views = self.views()
        if not views:
            return set()
        best = max(views.values(), key=lambda v: v.time_ms)
        return set(best.alive)

    def metrics_text(self, node: int) -> str | None:
        """Node ``node``'s /metrics page, or None (no admin port, not answering)."""
        n = self.config.node(node)
        if n.admin_port is None:
            return None
        try:
            with urllib.request.urlopen(f"http://{n.host}:{n.admin_port}/metrics",
                                        timeout=self.timeout) as resp:
                return str(resp.read().decode())
        except OSError:
            return None

    # -- the epoch store, through the nodes ------------------------------------------------
    def epoch_states(self) -> dict[int, Any]:
        """log id -> LogEpochState for every configured log the epoch store knows."""
        meta = self.metadata()
        logs = [x for x in meta.logs() if self.config.has_log(x)]
        return {log_id: st for log_id, st in meta.log_states(logs).items() if st is not None}

    def events(self) -> list[dict[str, Any]]:
        return self.metadata().events()

    # -- storage nodes --------------------------------------------------------------------
    def holdings(self, logs: Iterable[int], nodes: Iterable[int] | None = None
                 ) -> dict[int, dict[int, Fetched | None]]:
        """log -> node -> what the node holds of it (None: it did not answer)."""
        logs = list(logs)
        targets = [n.index for n in self.config.storage_nodes()] if nodes is None \
            else list(nodes)

        async def run() -> dict[int, dict[int, Fetched | None]]:
            client = AvailabilityClient(self.config, timeout=self.timeout,
                                        security=self.security)
            out: dict[int, dict[int, Fetched | None]] = {log_id: {} for log_id in logs}
            try:
                results = await asyncio.gather(
                    *(client.fetch_node(x, logs) for x in targets), return_exceptions=True)
                for x, res in zip(targets, results, strict=True):
                    for log_id in logs:
                        out[log_id][x] = None if isinstance(res, BaseException) \
                            else res[log_id]
            finally:
                await client.close()
            return out

        return asyncio.run(run())

    def ask_nodes(self, make: Callable[[], Any], nodes: Iterable[int] | None = None
                  ) -> dict[int, Any]:
        """Send ``make()`` to each of ``nodes`` (default: all) at once; node -> its reply.
        Nodes that do not answer in time, or answer with an error, are left out with a
        warning on stderr."""
        targets = [self.config.node(x) for x in nodes] if nodes is not None \
            else list(self.config.nodes)

        async def run() -> dict[int, Any]:
            loop = asyncio.get_running_loop()
            conns = {n.index: Connection(n.index, n.host, n.port, self.config.cluster,
                                         connect_timeout=self.timeout, security=self.security)
                     for n in targets}
            try:
                replies = await asyncio.gather(
                    *(c.request(make(), loop.time() + self.timeout) for c in conns.values()),
                    return_exceptions=True)
            finally:
                for c in conns.values():
                    await c.aclose()
            return dict(zip(conns, replies, strict=True))

        what = type(make()).__name__
        out = {}
        for x, r in asyncio.run(run()).items():
            if isinstance(r, BaseException):
                self.warn(f"N{x} did not answer {what}: {r}")
            elif r.status != E.OK:
                self.warn(f"N{x} refused {what}: {E(r.status).name}")
            else:
                out[x] = r
        return out

    def partitions(self) -> dict[int, Any]:
        """node -> its PARTITION_LIST (storage nodes that answered)."""
        return self.ask_nodes(lambda: GetPartitions(request_id=0),
                              [n.index for n in self.config.storage_nodes()])

    def warn(self, text: str) -> None:
        self.err.write(f"ldshell: {text}\n")
        self.err.flush()

    def client(self) -> Client:
        """A new client with the session's credentials (close it)."""
        return Client(self.config_path, timeout=self.timeout, **self.credentials)

    def authenticate(self, tls_cert: str | None = None, tls_key: str | None = None,
                     token: str | None = None) -> None:
        """Talk to the nodes as the principal of these credentials (a client certificate
        and its key, or a token; none: anonymous).  ``InvalidParamError`` for credentials
        the cluster does not use or files that cannot be loaded."""
        self.close()  # a client made before spoke as someone else
        self.security = ConnectSecurity.for_client(self.base, tls_cert=tls_cert,
                                                   tls_key=tls_key, token=token)
        creds: Credentials = {}
        if tls_cert is not None:
            creds["tls_cert"] = tls_cert
        if tls_key is not None:
            creds["tls_key"] = tls_key
        if token is not None:
            creds["token"] = token
        self.credentials = creds
