"""``ClientContext``: the parts of a client that its readers and writers work with.

A ``Client`` is the user's facade over one cluster connection.  The objects it makes
(``Reader``, ``AsyncReader``, ``BufferedWriter``; ``CheckpointedReader`` and
``GroupReader`` through a ``Reader``) do their work with what stands behind it, which a
``ClientContext`` holds and names, so none of them reaches into the ``Client``:

========================  =============================================================
``loop``                  the client's ``LoopThread``: every network step runs there
``core``                  the ``ClientCore`` on that loop (connections, appends, routing)
``settings``, ``timeout`` the client settings and the timeout of every call
``config``                the current effective config (runtime log groups replace it)
``log_group(log_id)``     the log's group: ``InvalidParamError`` for a non-int id, the
                          runtime groups read once more for an unknown log, then
                          ``NotFoundError``
``check_open()``          ``LogDeviceError(E.SHUTDOWN)`` once the client is closed;
``closed``                whether it is
``placements()``          the ``PlacementSource`` (nodesets from the nodes) every
                          reader of the client shares, made on first use
``read_router()``         the ``StreamRouter`` (read stream ids, message routing) every
                          reader shares, made on first use
``on_close(method)``      call the bound ``method(exc)`` when the client closes (held
                          weakly: it does not keep its object alive)
``log_groups``            the runtime log groups (``ClientLogGroups``), for the client
``metadata``              the cluster's metadata, asked of the nodes (``ClusterMetadata``)
========================  =============================================================

Readers and writers take a context or anything that holds one (``HasContext``: a
``Client``), so none of them imports the client.  The client makes one context
(``Client.context``) and hands it to what it creates; the context owns the loop, the
core and the log-group poller and stops them on ``close()``, or when it is dropped
unclosed (the client and everything it made are gone).  A reader or writer holds the
context, not the client.  Thread-safe.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any, Protocol

from logdevice import validate
from logdevice.client.core import ClientCore
from logdevice.client.log_groups import ClientLogGroups
from logdevice.client.metadata import ClusterMetadata
from logdevice.client.net.loop import LoopThread
from logdevice.client.read.core import StreamRouter
from logdevice.client.read.placement import PlacementSource
from logdevice.client.settings import ClientSettings
from logdevice.config import Config, LogGroup
from logdevice.errors import E, LogDeviceError, NotFoundError

__all__ = ["ClientContext", "HasContext", "context_of"]


class ClientContext:
    """The loop, core, settings and shared reader state of one client.

    Parameters
    ----------
    config : Config
        The cluster config (the context follows runtime log-group changes from here on).
    settings : ClientSettings
    timeout : float
        Seconds any call may take.
    owner : object, optional
        The ``Client`` this context belongs to, held weakly (``client``).
    """

    def __init__(self, config: Config, settings: ClientSettings, timeout: float, *,
                 owner: object | None = None) -> None:
        self.config = config
        self.settings = settings
        self.timeout = timeout
        self.core = ClientCore(config, settings)
        self.loop = LoopThread(name=f"logdevice-client-{config.cluster}",
                               kind=settings.event_loop)
        self._owner = None if owner is None else weakref.ref(owner)
        self._lock = threading.Lock()
        self._closed = False
        self._router: StreamRouter | None = None
        self._placements: PlacementSource | None = None
        # on_close methods, weakly, in registration order; dead ones are pruned as it grows.
        self._on_close: list[weakref.WeakMethod[Any]] = []
        self._prune_at = 16
        # The poller holds the context weakly, so a dropped context is still collected.
        adopt_ref = weakref.WeakMethod(self.adopt_config)

        def adopt(new: Config) -> None:
            method = adopt_ref()
            if method is not None:
                method(new)

        self.metadata = ClusterMetadata(self.loop, self.core, timeout)
        try:
            self.log_groups = ClientLogGroups(config, self.loop, self.metadata, adopt,
                                              timeout=min(timeout, 2.0))
        except BaseException:
            self.loop.stop(self.core.close, timeout=2.0)
            raise
        # Dropped without close(): still stop the thread, connections and poller.
        self._finalizer = weakref.finalize(self, _release, self.loop, self.core,
                                           self.log_groups)

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<ClientContext cluster={self.config.cluster!r} {state}>"

    @property
    def client(self) -> Any:
        """The ``Client`` this context belongs to (None: none, or it was collected)."""
        return None if self._owner is None else self._owner()

    # ------------------------------------------------------------------ checks

    @property
    def closed(self) -> bool:
        """Whether the client was closed."""
        return self._closed

    def check_open(self) -> None:
        """``LogDeviceError(E.SHUTDOWN)`` once the client is closed."""
        if self._closed:
            raise LogDeviceError(E.SHUTDOWN, "the client is closed")

    def log_group(self, log_id: int) -> LogGroup:
        """The group of ``log_id``.

        Raises
        ------
        InvalidParamError
            ``log_id`` is not an int.
        NotFoundError
            No group has the log, also after reading the runtime groups once more (a
            log created by another process a moment ago is found).
        """
        validate.log_id(log_id)  # unknown ids are NotFoundError below, not bad arguments
        try:
            return self.config.log_group(log_id)
        except NotFoundError:
            self.log_groups.refresh()  # created at runtime a moment ago?
        return self.config.log_group(log_id)  # NotFoundError names the log and cluster

    def knows(self, log_id: Any) -> bool:
        """Whether ``log_id`` is in the config as it is (no reading of the runtime groups)."""
        try:
            self.config.log_group(log_id)
        except LogDeviceError:
            return False
        return True

    def adopt_config(self, config: Config) -> None:
        """Use ``config`` from now on (runtime log groups changed)."""
        self.config = config
        self.core.set_config(config)
        with self._lock:
            placements = self._placements
        if placements is not None:
            placements.config = config

    # ------------------------------------------------------------------ shared by readers

    def placements(self) -> PlacementSource:
        """Where readers read each log from (one for the client, made on first use)."""
        with self._lock:
            if self._placements is None:
                self._placements = PlacementSource(self.config, self.metadata)
            return self._placements

    def read_router(self) -> StreamRouter:
        """Read stream ids and routing of stream messages (one for the client)."""
        with self._lock:
            if self._router is None:
                self._router = StreamRouter(self.core)
            return self._router

    # ------------------------------------------------------------------ closing

    def on_close(self, method: Callable[[LogDeviceError], Any]) -> None:
        """Call the bound ``method`` with the shutdown error when the client closes,
        before the loop stops; held weakly (a collected object is not called)."""
        ref = weakref.WeakMethod(method)  # type: ignore[arg-type]
        with self._lock:
            if len(self._on_close) >= self._prune_at:
                self._on_close = [r for r in self._on_close if r() is not None]
                self._prune_at = max(16, 2 * len(self._on_close))
            self._on_close.append(ref)

    def close(self) -> bool:
        """Close: every ``on_close`` method is called (writers fail what they did not
        send, readers stop), then the poller, connections and loop thread stop.
        Idempotent; True the first time."""
        with self._lock:
            if self._closed:
                return False
            self._closed = True
            hooks, self._on_close = self._on_close, []
        exc = LogDeviceError(E.SHUTDOWN, "the client was closed")
        for ref in hooks:
            method = ref()
            if method is not None:
                method(exc)
        self._finalizer.detach()
        self.log_groups.close()
        self.loop.stop(self.core.close)
        return True


class HasContext(Protocol):
    """What holds a context: a ``Client`` (readers and writers made from one find its
    context there)."""

    @property
    def context(self) -> ClientContext: ...


def context_of(source: ClientContext | HasContext) -> ClientContext:
    """``source`` itself, or the context of the client ``source``."""
    return source if isinstance(source, ClientContext) else source.context


def _release(loop: LoopThread, core: ClientCore, log_groups: ClientLogGroups) -> None:
    """A context dropped without close(): stop its poller and loop."""
    log_groups.close()
    if not loop.in_loop_thread():
        loop.stop(core.close, timeout=2.0)
