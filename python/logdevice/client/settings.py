"""Client-side settings: the ``**settings`` of ``ld.Client(config_path, timeout, **settings)``.

Defaults come from the cluster config's ``settings`` where a matching one exists
(connect timeout, payload limit, the dead timeout for the keepalive), so a client and
the nodes agree without repeating themselves; anything passed to ``Client`` overrides
them.  Unknown names are an error (``InvalidParamError``), so a typo does not silently
keep a default.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, TypedDict

from logdevice.config import Config
from logdevice.errors import InvalidParamError

__all__ = ["ClientSettings", "ClientSettingKwargs", "EVENT_LOOPS"]

#: Settings that are strings (file paths, the token), None when unset.
_PATH_OR_SECRET = frozenset({"tls_cert", "tls_key", "tls_ca", "token"})
#: The values of the ``event_loop`` setting (and of ``LOGDEVICE_CLIENT_LOOP``).
EVENT_LOOPS = ("uvloop", "asyncio")


@dataclass(frozen=True, slots=True)
class ClientSettings:
    """Tunables of one client.  Durations are in seconds.

    Attributes
    ----------
    connect_timeout : float
        TCP connect plus HELLO round trip to one node.
    max_payload_size : int
        Appends with a larger payload fail with TOOBIG before anything is sent.
    initial_backoff, max_backoff : float
        Waits between routing retries (no sequencer, connection failed); doubles each
        time, with jitter, up to ``max_backoff``.
    view_refresh_interval : float
        The cluster view is fetched again at most this often unless routing fails.
    suspect_time : float
        A node the client could not reach is routed around for this long.
    append_checksum : bool
        Send a CRC32C of each APPEND payload (``AppendFlag.CHECKSUM``).
    max_redirects : int
        Redirects followed in a row before the client refreshes its view and backs off.
    unreachable_timeout : float
        When no node of the cluster could be reached for this long, calls fail with
        CONNFAILED instead of waiting out their whole timeout.
    keepalive_timeout : float
        A node that sends nothing for this long while requests wait on it is given up
        (hung or cut off): the connection is closed, the node routed around and the
        cluster view fetched again (``client.net.keepalive``).  Default: the cluster's
        ``dead_timeout_ms``; 0 turns it off.
    view_max_age : float
        While sequencer requests are out, the cluster view is fetched again in the
        background when it is older than this; 0 turns it off (views are then fetched
        only when routing fails).
    max_appends_in_flight : int
        Appends one client has outstanding per log; more wait in the client (back-pressure)
        instead of overflowing the sequencer's window.  Also capped by the log group's
        ``max_writes_in_flight``.
    append_batch_bytes : int
        Single-record appends to one log that queue in the client while earlier ones are
        on their way leave together in one APPEND_BATCH of at most this many payload
        bytes (one record always fits).  Records of a batch that the sequencer accepts
        together get consecutive LSNs.
    append_linger : float
        How long an append waits for others to join its batch (at most half its
        timeout; a batch that reaches ``append_batch_bytes`` leaves at once).  0 (the
        default): none; batches form only from appends that queued while earlier ones
        were in flight.
    tls_cert, tls_key : str or None
        The client certificate (and its key, unless in the same file) presented to nodes
        of a cluster with ``security.tls``: the client is the principal named by its CN.
    tls_ca : str or None
        The CA certificates (PEM) this client checks node certificates against, instead
        of the file the config's ``security.tls.ca`` names (for a client that has the
        config but not that file at that path).
    token : str or None
        The token of a principal of the cluster's ``security.principals``, sent in HELLO.
        Without a certificate or a token the client is the anonymous principal.
    event_loop : str or None
        The event loop of the client's thread: ``"uvloop"`` (needs uvloop installed; it
        comes with the ``server`` extra) or ``"asyncio"`` (the standard library's).
        None (the default): the environment variable ``LOGDEVICE_CLIENT_LOOP`` if set
        (same values), else uvloop when it is installed, else asyncio's.  uvloop costs
        the client less CPU per call.
    """

    connect_timeout: float = 2.0
    max_payload_size: int = 32 * 1024 * 1024
    initial_backoff: float = 0.01
    max_backoff: float = 0.5
    view_refresh_interval: float = 0.1
    suspect_time: float = 1.0
    append_checksum: bool = True
    max_redirects: int = 3
    max_appends_in_flight: int = 1000
    unreachable_timeout: float = 2.0
    keepalive_timeout: float = 3.0
    view_max_age: float = 1.0
    append_batch_bytes: int = 1024 * 1024
    append_linger: float = 0.0
    tls_cert: str | None = None  # client certificate (PEM) for mutual TLS
    tls_key: str | None = None  # its private key (PEM), unless in tls_cert's file
    tls_ca: str | None = None  # the CA file to trust instead of security.tls.ca's
    token: str | None = None  # a principal's token, sent in HELLO
    event_loop: str | None = None  # "uvloop", "asyncio"; None: see the docstring

    def __repr__(self) -> str:  # a token must not end up in logs
        shown = {f.name: ("<hidden>" if f.name == "token" and self.token is not None
                          else getattr(self, f.name)) for f in fields(self)}
        return f"ClientSettings({', '.join(f'{k}={v!r}' for k, v in shown.items())})"

    @classmethod
    def from_config(cls, config: Config, overrides: Mapping[str, Any]) -> ClientSettings:
        """Defaults from ``config.settings``, then ``overrides`` (checked by name and type)."""
        base = cls(
            connect_timeout=config.settings.connect_timeout_ms / 1000.0,
            max_payload_size=config.settings.max_payload_size,
            keepalive_timeout=config.settings.dead_timeout_ms / 1000.0,
        )
        known = {f.name: f for f in fields(cls)}
        clean: dict[str, Any] = {}
        for name, value in overrides.items():
            if name not in known:
                raise InvalidParamError(
                    message=f"unknown client setting {name!r} (known: {', '.join(sorted(known))})"
                )
            default = getattr(base, name)
            if name == "event_loop":
                if value is not None and value not in EVENT_LOOPS:
                    raise InvalidParamError(
                        message=f"client setting event_loop must be one of "
                                f"{', '.join(EVENT_LOOPS)} or None, got {value!r}")
            elif name in _PATH_OR_SECRET:
                if name != "token" and isinstance(value, os.PathLike):
                    value = os.fspath(value)
                if value is not None and (not isinstance(value, str) or not value):
                    raise InvalidParamError(
                        message=f"client setting {name} must be a non-empty string or None")
            elif isinstance(default, bool):
                if not isinstance(value, bool):
                    raise InvalidParamError(message=f"client setting {name} must be a bool")
            elif isinstance(default, int | float):
                if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                    raise InvalidParamError(
                        message=f"client setting {name} must be a non-negative number, "
                                f"got {value!r}")
                value = type(default)(value)
            clean[name] = value
        return replace(base, **clean)


class ClientSettingKwargs(TypedDict, total=False):
    """The keyword settings of ``ld.Client(config, timeout, **settings)`` (and of
    ``AsyncClient`` and ``LocalCluster.client``): the fields of ``ClientSettings``, by name
    and type (a unit test keeps the two the same; the certificate paths may also be
    ``os.PathLike``).  Their meaning and defaults are documented on ``ClientSettings``.
    Any other name is refused with ``InvalidParamError`` listing these."""

    connect_timeout: float
    max_payload_size: int
    initial_backoff: float
    max_backoff: float
    view_refresh_interval: float
    suspect_time: float
    append_checksum: bool
    max_redirects: int
    max_appends_in_flight: int
    unreachable_timeout: float
    keepalive_timeout: float
    view_max_age: float
    append_batch_bytes: int
    append_linger: float
    tls_cert: str | os.PathLike[str] | None
    tls_key: str | os.PathLike[str] | None
    tls_ca: str | os.PathLike[str] | None
    token: str | None
    event_loop: str | None
