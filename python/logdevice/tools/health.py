"""What the client tools (``ldwrite``, ``ldcat``, ``ldtail``) say while the cluster is away.

A tool that waits for the cluster instead of failing says so once, on stderr, and once
more when it is back::

    ldtail: waiting for the cluster 'prod': no node reachable (N0: connection refused, ...)
    ldtail: cluster 'prod' reachable again
    ldtail: log 1: no working stream on enough of its nodes (N0: connection refused, ...); waiting
    ldtail: log 1: reading again

- ``Waiting``: prints those lines: the waiting line once per wait (never again while the
  wait lasts), the back line only after a waiting line, nothing with ``quiet``; coloured
  on a terminal, plain text (no markup, no escape codes) to a file or a pipe.
- ``cluster_line``: the waiting line for a cluster no node of which answers, with what
  ``probe_nodes`` finds: how each node's data port answers a TCP connect.
- ``RetryDelay``: the pause between tries while waiting (0.5 s, doubling, at most 5 s).
- ``is_away``: whether an error means the cluster is away (CONNFAILED, PEER_CLOSED,
  TIMEDOUT), i.e. worth waiting for, rather than a refusal.
"""

from __future__ import annotations

import contextlib
import errno
import os
import selectors
import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any

from logdevice.backoff import ExponentialBackoff
from logdevice.cli import console as tool_console
from logdevice.errors import E, LogDeviceError

if TYPE_CHECKING:
    from logdevice.config import Config

__all__ = ["AWAY", "Waiting", "RetryDelay", "is_away", "probe_nodes", "cluster_line"]

#: Statuses that say the cluster is away (not reachable, or not answering).
AWAY = frozenset({E.CONNFAILED, E.PEER_CLOSED, E.TIMEDOUT})

#: Nodes named in a waiting line (the others are counted).
PROBE_LIMIT = 6


def is_away(exc: BaseException) -> bool:
    """Whether ``exc`` says the cluster is away (see ``AWAY``)."""
    return isinstance(exc, LogDeviceError) and exc.status in AWAY


def probe_nodes(config: Config, timeout: float = 0.5, limit: int = PROBE_LIMIT) -> str:
    """How the data port of each node of ``config`` answers a TCP connect, at most
    ``timeout`` seconds for all of them: ``"N0: connection refused, N1: no answer, N2:
    accepts connections"`` (the first ``limit`` nodes; ``", ... (5 more)"`` for the rest).
    Only the port is tried: no HELLO, nothing a node logs."""
    nodes = list(config.nodes)[:limit]
    result: dict[int, str] = {}
    sel = selectors.DefaultSelector()
    socks: list[socket.socket] = []
    try:
        for n in nodes:
            try:
                family = socket.AF_INET6 if ":" in n.host else socket.AF_INET
                s = socket.socket(family, socket.SOCK_STREAM)
            except OSError as exc:
                result[n.index] = _why(exc.errno)
                continue
            socks.append(s)
            s.setblocking(False)
            err = s.connect_ex((n.host, n.port))
            if err in (0, errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EALREADY):
                sel.register(s, selectors.EVENT_WRITE, n.index)
            else:
                result[n.index] = _why(err)
        deadline = time.monotonic() + timeout
        while len(sel.get_map()):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            for key, _ in sel.select(left):
                s = key.fileobj  # type: ignore[assignment]
                err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                result[key.data] = "accepts connections" if err == 0 else _why(err)
                sel.unregister(s)
    finally:
        sel.close()
        for s in socks:
            s.close()
    parts = [f"N{n.index}: {result.get(n.index, 'no answer')}" for n in nodes]
    more = len(config.nodes) - len(nodes)
    if more > 0:
        parts.append(f"... ({more} more)")
    return ", ".join(parts)


def cluster_line(config: Config, exc: BaseException | None = None) -> str:
    """``waiting for the cluster 'x': no node reachable (N0: connection refused, ...)``,
    or ``no answer in time`` instead of ``no node reachable`` when ``exc`` is TIMEDOUT;
    the nodes as ``probe_nodes`` finds them now."""
    reason = "no answer in time" if isinstance(exc, LogDeviceError) and \
        exc.status == E.TIMEDOUT else "no node reachable"
    return f"waiting for the cluster {config.cluster!r}: {reason} ({probe_nodes(config)})"


def _why(err: int | None) -> str:
    if err == errno.ECONNREFUSED:
        return "connection refused"
    return os.strerror(err).lower() if err else "cannot connect"


class RetryDelay(ExponentialBackoff):
    """Pauses between tries while waiting: ``first`` seconds, doubling, at most ``most``.
    ``reset`` after a success; ``sleep(until)`` does not sleep past ``until`` (monotonic
    time)."""

    __slots__ = ()

    def __init__(self, first: float = 0.5, most: float = 5.0) -> None:
        super().__init__(first, most)

    def sleep(self, until: float | None = None) -> None:
        d = self.next_delay()
        if until is not None:
            d = min(d, until - time.monotonic())
        if d > 0:
            time.sleep(d)


class Waiting:
    """The waiting and back lines of one tool, on stderr (thread-safe).

    Parameters
    ----------
    tool : str
        The prefix of every line (``"ldtail"``).
    quiet : bool
        Print nothing (the state is still kept).
    console : rich Console, optional
        Print through it (a tool with a progress bar passes the bar's console, so the
        lines go above the bar).  Without one: a rich console when ``file`` is a terminal
        and rich is installed, else plain lines to ``file``.
    file : text stream, optional
        Default ``sys.stderr``.
    """

    def __init__(self, tool: str, *, quiet: bool = False, console: Any = None,
                 file: IO[str] | None = None) -> None:
        self.tool = tool
        self.quiet = quiet
        self._file = file
        self._console = console
        if console is None and not quiet:
            stream = file if file is not None else sys.stderr
            if stream.isatty():
                with contextlib.suppress(ImportError):  # rich: optional for ldcat, ldtail
                    self._console = tool_console(file=stream)
        self._lock = threading.Lock()
        self._since: float | None = None

    @property
    def waiting(self) -> bool:
        """Whether a waiting line was the last line printed (or due, with ``quiet``)."""
        return self._since is not None

    @property
    def since(self) -> float | None:
        """When the current wait began (``time.monotonic``), None when not waiting."""
        return self._since

    def away(self, what: str | Callable[[], str]) -> bool:
        """Start waiting: print ``"<tool>: <what>"`` unless already waiting.  ``what``
        may be a function, called only when the line is printed.  True if it was."""
        with self._lock:
            if self._since is not None:
                return False
            self._since = time.monotonic()
        self._say(what() if callable(what) else what, "yellow")
        return True

    def cluster_away(self, config: Config, exc: BaseException | None = None) -> bool:
        """``away`` with ``cluster_line(config, exc)``, made (the nodes probed) only when
        the line is printed."""
        return self.away(lambda: cluster_line(config, exc))

    def back(self, what: str | Callable[[], str]) -> bool:
        """Stop waiting: print ``"<tool>: <what>"`` if a wait was on.  True if it was."""
        with self._lock:
            if self._since is None:
                return False
            self._since = None
        self._say(what() if callable(what) else what, "green")
        return True

    def _say(self, text: str, style: str) -> None:
        if self.quiet:
            return
        line = f"{self.tool}: {text}"
        if self._console is not None:
            tty = self._console.is_terminal
            self._console.print(line, markup=False, highlight=False,
                                style=style if tty else None)
            return
        f = self._file if self._file is not None else sys.stderr
        f.write(line + "\n")
        f.flush()
