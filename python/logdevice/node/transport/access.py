"""A node's side of security, built once from the config's ``security`` section.

``NodeAccess`` holds what the node's connections use: the TLS context its port serves
with (None: plain TCP), what its links to peers present (``link``: the node certificate
or secret), who the peer of a HELLO is (``authenticate``) and what a peer may ask
(``refusal``, see ``request_gate``).  A node without a security section has no
``NodeAccess`` at all: every peer may do everything, as on a loopback dev cluster.
"""

from __future__ import annotations

import ipaddress
import ssl
from typing import Any

from logdevice.config import Config
from logdevice.errors import E
from logdevice.node.transport.request_gate import RequestGate
from logdevice.security import Authenticator, Authorizer, ConnectSecurity, Principal, subject_cn
from logdevice.security.tls import server_context

__all__ = ["NodeAccess", "exposure_refusal"]


def certificate_names(peercert: Any, host: str) -> bool:
    """Whether a certificate (``getpeercert()``'s dict) names ``host``: a DNS or IP
    subject alternative name, or the subject CN, equal to it."""
    for kind, value in peercert.get("subjectAltName", ()):
        if kind in ("DNS", "IP Address") and value == host:
            return True
    return subject_cn(peercert) == host


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it resolves to who knows where
        return False


def exposure_refusal(config: Config) -> str | None:
    """Why a node of ``config`` must not start (None: it may).  Nodes that listen beyond
    loopback need a ``security`` section with TLS (without it the node secret and the
    clients' tokens would cross the network in the clear), or to say they want none."""
    exposed = sorted({n.host for n in config.nodes if not _loopback(n.host)})
    if not exposed or config.insecure:
        return None
    where = ", ".join(exposed[:4])
    if config.security is None:
        return (f"nodes listen on {where}, beyond loopback, and the config has no "
                f"'security' section: add one (TLS, node certificates, principals, ACLs; "
                f'see deploy/cluster.jsonc), or say "security": {{"insecure": true}} to '
                f"run without")
    if config.security.tls is None:
        return (f"nodes listen on {where}, beyond loopback, without 'security.tls': the "
                f"node secret and tokens would cross the network in the clear")
    return None


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
        self._hosts = {n.index: n.host for n in config.nodes}

    def set_config(self, config: Config) -> None:
        """Judge requests by ``config``'s ACLs from now on (runtime log groups changed;
        TLS and principals stay as loaded at start)."""
        self._gate = RequestGate(Authorizer(config))
        self._hosts = {n.index: n.host for n in config.nodes}

    def dialed_a_node(self, peercert: Any) -> bool:
        """Whether the peer of one of our links (TLS already checked its certificate
        against the CA and its host name) shows a node certificate.  Without TLS or node
        certificates there is nothing to tell a node by: True."""
        if self.server_ssl is None or not self._node_subjects:
            return True
        return subject_cn(peercert) in self._node_subjects

    def authenticate(self, role: str, token: str, peercert: Any, node_index: int | None = None
                     ) -> tuple[E, Principal | None, str]:
        """Who the peer of a HELLO (``role``, ``token``, ``node_index``) with TLS peer
        certificate ``peercert`` (``getpeercert()``'s dict, None without one) is:
        ``(E.OK, principal, "")`` or ``(E.ACCESS, None, why)``.  A node that shows a node
        certificate is the node whose host that certificate names: one machine's key
        cannot speak for another node."""
        status, principal, why = self._authenticator.authenticate(role, token,
                                                                  subject_cn(peercert))
        if status == E.OK and role == "node" and peercert and self._node_subjects:
            host = self._hosts.get(node_index if node_index is not None else -1)
            if host is None or not certificate_names(peercert, host):
                return E.ACCESS, None, (f"the peer's node certificate does not name the host "
                                        f"of N{node_index} ({host})")
        return status, principal, why

    def refusal(self, principal: Principal | None, msg: Any) -> Any | None:
        """None if ``principal`` may send ``msg``, else the reply refusing it."""
        return self._gate.refusal(principal, msg)

    def names_unknown_log(self, principal: Principal | None, msg: Any) -> bool:
        """Whether judging ``msg`` needs the runtime log groups read again first (see
        ``RequestGate.names_unknown_log``)."""
        return self._gate.names_unknown_log(principal, msg)
