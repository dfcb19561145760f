"""Authentication: who is the peer of a new connection?  Pure apart from ``from_config``.

A node decides once per connection, at its HELLO, from two things: the subject CN of the
client certificate the peer presented in the TLS handshake (already verified against the
CA by then), and the token the HELLO carries.

- A token must be the node secret (the peer is a node) or a principal's token (the peer
  is that principal); any other token is refused with ACCESS.
- Without a token: a certificate CN listed in ``node_subjects`` is a node, any other CN
  is the user of that name; no certificate at all is the anonymous principal.
- A HELLO that says ``role="node"`` must authenticate as a node, else ACCESS: claiming to
  be a node is what lets a peer send STORE, SEAL and RELEASE.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Mapping
from typing import Any

from logdevice.config import Config
from logdevice.errors import E, InvalidConfigError
from logdevice.security.acl import ANONYMOUS_PRINCIPAL, NODE_PRINCIPAL, Principal, user

__all__ = ["Authenticator", "subject_cn", "read_secret"]


def subject_cn(peercert: Mapping[str, Any] | None) -> str | None:
    """The subject's common name in ``ssl.SSLSocket.getpeercert()``'s form (None: no
    certificate, or none with a CN)."""
    if not peercert:
        return None
    for rdn in peercert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None


def read_secret(config: Config, path: str, field: str) -> str:
    """The first line of the secret file ``path`` (relative to the config's directory);
    ``InvalidConfigError`` naming ``field`` and the config file when it cannot be read."""
    where = config.resolve_path(path)
    try:
        secret = where.read_text(encoding="utf-8").splitlines()[0].strip()
    except (OSError, UnicodeDecodeError, IndexError) as exc:
        detail = "empty file" if isinstance(exc, IndexError) else str(exc)
        raise InvalidConfigError(message=f"{config.source or '<config dict>'}: {field}: "
                                         f"cannot read {where}: {detail}") from None
    if not secret:
        raise InvalidConfigError(message=f"{config.source or '<config dict>'}: {field}: "
                                         f"{where} holds an empty secret")
    return secret


def _digest(token: str) -> bytes:
    # Tokens are looked up by digest, so the lookup's timing says nothing about them.
    return hashlib.sha256(token.encode()).digest()


class Authenticator:
    """Decides who the peer of a HELLO is.

    Parameters
    ----------
    tokens : mapping
        Token -> principal name.
    node_secret : str or None
        The nodes' shared secret.
    node_subjects : iterable of str
        Client-certificate CNs that identify nodes.
    """

    def __init__(self, tokens: Mapping[str, str], node_secret: str | None,
                 node_subjects: Iterable[str]) -> None:
        self._tokens = {_digest(t): name for t, name in tokens.items()}
        self._node_secret = _digest(node_secret) if node_secret else None
        self._node_subjects = frozenset(node_subjects)

    @classmethod
    def from_config(cls, config: Config) -> Authenticator:
        """From the ``security`` section, reading token and secret files."""
        security = config.security
        if security is None:
            raise ValueError("an Authenticator needs a config with a security section")
        tokens = {}
        for p in security.principals:
            token = p.token if p.token_file is None else read_secret(
                config, p.token_file, f"security.principals.{p.name}.token_file")
            if token is not None:
                tokens[token] = p.name
        return cls(tokens, node_secret(config), security.node_subjects)

    def authenticate(self, role: str, token: str, subject: str | None
                     ) -> tuple[E, Principal | None, str]:
        """``(E.OK, principal, "")`` or ``(E.ACCESS, None, why)`` for a HELLO of ``role``
        with ``token`` ("" for none) from a peer whose certificate has CN ``subject``."""
        principal = self._principal(token, subject)
        if principal is None:
            return E.ACCESS, None, "the token matches no principal"
        if role == "node" and not principal.is_node:
            return E.ACCESS, None, (f"a peer authenticated as {principal} claims to be a node "
                                    "(nodes need a node certificate or the node secret)")
        return E.OK, principal, ""

    def _principal(self, token: str, subject: str | None) -> Principal | None:
        if token:
            d = _digest(token)
            if self._node_secret is not None and hmac.compare_digest(d, self._node_secret):
                return NODE_PRINCIPAL
            name = self._tokens.get(d)
            return user(name) if name is not None else None
        if subject is None:
            return ANONYMOUS_PRINCIPAL
        return NODE_PRINCIPAL if subject in self._node_subjects else user(subject)


def node_secret(config: Config) -> str | None:
    """The nodes' shared secret, from its file (None: the config names none)."""
    security = config.security
    if security is None or security.node_secret_file is None:
        return None
    return read_secret(config, security.node_secret_file, "security.node_secret_file")
