"""What one node lets its peers hold: connections, in all and per principal, how long a
client may hold one while doing nothing, and how many bytes of half-received frames all
clients together may make it buffer.

``ConnectionLimits`` is the bookkeeping (no I/O): the node asks ``admit`` when a
connection is made (over ``max_connections``: closed at once), ``admit_principal`` when
a client's HELLO names who it is (over ``max_connections_per_principal``: refused with
TOOMANY in HELLO_REPLY), and ``idle`` for each client connection on every sweep (silent
for ``client_idle_timeout_ms`` with nothing open on it: closed).  Each connection reports
the bytes its decoder holds (``buffered``); a client whose frame would take the node past
``max_buffered_input_bytes`` is closed (OVERLOADED).  Nodes count toward the totals but
have no per-principal limit, are never idle and never closed for their input.
"""

from __future__ import annotations

from collections import Counter

from logdevice.config import Settings

__all__ = ["ConnectionLimits"]


class ConnectionLimits:
    """Connection bookkeeping of one node, from its settings (``update`` on a change)."""

    def __init__(self, settings: Settings) -> None:
        self.update(settings)
        self.open = 0
        self.input_bytes = 0  # half-received frames held, every connection
        self._per_principal: Counter[str] = Counter()

    def update(self, settings: Settings) -> None:
        self.max_connections = settings.max_connections
        self.max_per_principal = settings.max_connections_per_principal
        self.idle_timeout = settings.client_idle_timeout_ms / 1000  # 0: never
        self.max_buffered = settings.max_buffered_input_bytes

    def buffered(self, change: int) -> bool:
        """A connection's decoder holds ``change`` bytes more (or fewer); whether the
        node is now within its budget for half-received input."""
        self.input_bytes += change
        return self.input_bytes <= self.max_buffered

    def admit(self) -> bool:
        """A new inbound connection: True if it may stay (counted), False if over."""
        if self.open >= self.max_connections:
            return False
        self.open += 1
        return True

    def closed(self, principal: str | None) -> None:
        """An admitted connection closed (``principal``: the name it was admitted as)."""
        self.open -= 1
        if principal is not None:
            self._per_principal[principal] -= 1
            if self._per_principal[principal] <= 0:
                del self._per_principal[principal]

    def admit_principal(self, principal: str) -> str | None:
        """A client authenticated as ``principal``: None (counted) or why not."""
        if self._per_principal[principal] >= self.max_per_principal:
            return (f"{principal} already holds {self._per_principal[principal]} connections "
                    f"to this node (max_connections_per_principal)")
        self._per_principal[principal] += 1
        return None

    def idle(self, last_heard: float, now: float, busy: bool) -> bool:
        """Whether a client connection last heard from at ``last_heard`` should close."""
        return (self.idle_timeout > 0 and not busy
                and now - last_heard >= self.idle_timeout)
