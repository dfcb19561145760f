"""A node's side of security, built once from the config's ``security`` section.

``NodeAccess`` holds what the node's connections use: the TLS context its port serves
with (None: plain TCP), what its links to peers present (``link``: the node certificate
or secret), who the peer of a HELLO is (``authenticate``) and what a peer may ask
(``refusal``, see ``request_gate``).  A node without a security section has no
``NodeAccess`` at all: every peer may do everything, as on a loopback dev cluster.
"""

from __future__ import annotations

import ssl
from typing import Any

from logdevice.config import Config
from logdevice.errors import E
from logdevice.node.request_gate import RequestGate
from logdevice.security import Authenticator, Authorizer, ConnectSecurity, Principal, subject_cn
from logdevice.security.tls import server_context

__all__ = ["NodeAccess"]


class NodeAccess:
    """Security of one node.  Raises ``InvalidConfigError`` (naming the field) when a
    certificate, key or secret file cannot be loaded.

    Parameters
    ----------
    config : Config
        A config with a ``security`` section.
    """

    def __init__(self, config: Config) -> None:
        security = config.security
        if security is None:
            raise ValueError("NodeAccess needs a config with a security section")
        self.server_ssl: ssl.SSLContext | None = (
            server_context(config) if security.tls is not None else None)
        self.link = ConnectSecurity.for_node(config)
        self._node_subjects = frozenset(security.node_subjects)
        self._authenticator = Authenticator.from_config(config)
        self._gate = RequestGate(Authorizer(config))

    def set_config(self, config: Config) -> None:
        """Judge requests by ``config``'s ACLs from now on (runtime log groups changed;
        TLS and principals stay as loaded at start)."""
        self._gate = RequestGate(Authorizer(config))

    def dialed_a_node(self, peercert: Any) -> bool:
        """Whether the peer of one of our links (TLS already checked its certificate
        against the CA and its host name) shows a node certificate.  Without TLS or node
        certificates there is nothing to tell a node by: True."""
        if self.server_ssl is None or not self._node_subjects:
            return True
        return subject_cn(peercert) in self._node_subjects

    def authenticate(self, role: str, token: str, peercert: Any
                     ) -> tuple[E, Principal | None, str]:
        """Who the peer of a HELLO (``role``, ``token``) with TLS peer certificate
        ``peercert`` (``getpeercert()``'s dict, None without one) is: ``(E.OK, principal,
        "")`` or ``(E.ACCESS, None, why)``."""
        return self._authenticator.authenticate(role, token, subject_cn(peercert))

    def refusal(self, principal: Principal | None, msg: Any) -> Any | None:
        """None if ``principal`` may send ``msg``, else the reply refusing it."""
        return self._gate.refusal(principal, msg)
