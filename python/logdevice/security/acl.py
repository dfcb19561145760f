"""Authorization: may this principal do this to this log?  Pure, no I/O.

A ``Principal`` is who a connection authenticated as: a named user (client certificate
subject or token), a node of the cluster, or nobody (``ANONYMOUS``).  ``Authorizer``
answers from the config's log group ACLs (``LogGroup.acl`` over ``security.acl``):
nodes may do everything, ``"*"`` admits every authenticated principal and
``"anonymous"`` everyone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from logdevice.config import ACL_ACTIONS, ANONYMOUS, ANY_AUTHENTICATED, Acl, Config
from logdevice.config.model import METADATA_LOG_BIT

__all__ = ["Principal", "ANONYMOUS_PRINCIPAL", "NODE_PRINCIPAL", "user", "Authorizer"]

Kind = Literal["anonymous", "user", "node"]


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a connection is: ``kind`` "user" (``name`` is the principal's), "node" or
    "anonymous"."""

    name: str
    kind: Kind

    @property
    def is_node(self) -> bool:
        return self.kind == "node"

    @property
    def is_authenticated(self) -> bool:
        return self.kind != "anonymous"

    def __str__(self) -> str:
        return self.name if self.kind == "user" else f"<{self.kind}>"


ANONYMOUS_PRINCIPAL = Principal(ANONYMOUS, "anonymous")
NODE_PRINCIPAL = Principal("node", "node")


def user(name: str) -> Principal:
    """The principal ``name`` (a client certificate's CN, or a token's owner)."""
    return Principal(name, "user")


def grants(names: tuple[str, ...], principal: Principal) -> bool:
    """Whether an ACL entry listing ``names`` admits ``principal``."""
    if principal.is_node or ANONYMOUS in names:
        return True
    if not principal.is_authenticated:
        return False
    return ANY_AUTHENTICATED in names or principal.name in names


class Authorizer:
    """The ACLs of ``config`` (which must have a ``security`` section).

    Parameters
    ----------
    config : Config
    """

    def __init__(self, config: Config) -> None:
        if config.security is None:
            raise ValueError("an Authorizer needs a config with a security section")
        self.config = config
        self.default: Acl = config.security.acl
        # Each group's effective ACL, resolved once: the check runs per request.
        self._by_group: dict[str, dict[str, tuple[str, ...]]] = {
            g.name: self._resolve(g.acl.over(self.default) if g.acl is not None
                                  else self.default)
            for g in config.logs}
        self._cluster = self._resolve(self.default)

    @staticmethod
    def _resolve(acl: Acl) -> dict[str, tuple[str, ...]]:
        return {a: acl.names(a) or () for a in ACL_ACTIONS}

    def allowed(self, principal: Principal, log_id: int, action: str) -> bool:
        """May ``principal`` do ``action`` (one of ``ACL_ACTIONS``) to ``log_id``?  A log
        that is not in the config is judged by the default ACL (the request then fails
        with NOTFOUND where it is handled); a metadata log by its data log's group."""
        if principal.is_node:
            return True
        try:
            acl = self._by_group[self.config.log_group(log_id & ~METADATA_LOG_BIT).name]
        except (LookupError, TypeError):
            acl = self._cluster
        return grants(acl[action], principal)

    def allowed_cluster(self, principal: Principal, action: str) -> bool:
        """May ``principal`` do ``action`` cluster-wide (requests about no log in
        particular, such as a node's partitions): the default ACL decides."""
        return grants(self._cluster[action], principal)
