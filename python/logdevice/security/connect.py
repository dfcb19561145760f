"""``ConnectSecurity``: what a connection to a node presents, decided once per client.

The dialing side of the security section: a TLS client context (None: plain TCP, the
cluster has no ``security.tls``) and the token sent in HELLO ("" for none).  Clients build
it from their credentials (``for_client``), nodes and the tools running inside them from
the node certificate and secret (``for_node``).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from logdevice.config import Config
from logdevice.errors import InvalidParamError
from logdevice.security.identity import node_secret
from logdevice.security.tls import client_context

__all__ = ["ConnectSecurity", "PLAIN"]


@dataclass(frozen=True, slots=True)
class ConnectSecurity:
    """How to dial a node: ``ssl`` (a client context, None for plain TCP) and the HELLO
    ``token``.  ``server_hostname`` for a node is its config host."""

    ssl: ssl.SSLContext | None = None
    token: str = ""

    @classmethod
    def for_client(cls, config: Config, *, tls_cert: str | None = None,
                   tls_key: str | None = None, token: str | None = None,
                   tls_ca: str | None = None) -> ConnectSecurity:
        """A client of ``config``'s cluster, with its certificate and/or token (neither:
        the anonymous principal); ``tls_ca`` replaces the config's CA file.
        ``InvalidParamError`` for credentials the cluster does not use, or files that
        cannot be loaded."""
        security = config.security
        tls_files = tls_cert is not None or tls_key is not None or tls_ca is not None
        if security is None:
            if tls_files or token is not None:
                raise InvalidParamError(message=f"cluster {config.cluster!r} has no security "
                                                "section: tls_cert, tls_key, tls_ca and "
                                                "token are not used")
            return PLAIN
        if security.tls is None:
            if tls_files:
                raise InvalidParamError(message=f"cluster {config.cluster!r} does not use TLS:"
                                                " tls_cert, tls_key and tls_ca are not used")
            return cls(None, token or "")
        return cls(client_context(config, tls_cert, tls_key, ca=tls_ca), token or "")

    @classmethod
    def for_node(cls, config: Config) -> ConnectSecurity:
        """A node of ``config``'s cluster (its links, its start-up probes, its checker)."""
        security = config.security
        if security is None:
            return PLAIN
        ctx = client_context(config, as_node=True) if security.tls is not None else None
        # With a node certificate the handshake already says "node"; the secret is
        # only sent when there is no certificate to say it.
        secret = node_secret(config) if ctx is None or not security.node_subjects else None
        return cls(ctx, secret or "")


PLAIN = ConnectSecurity()
