"""Security: TLS, who a peer is (authentication) and what it may do (authorization).

``acl`` (principals and the per-log-group ACLs, pure), ``identity`` (who the peer of a
HELLO is, pure), ``tls`` (SSL contexts from the config), ``connect`` (what a connection
to a node presents).  Everything is off unless the config has a ``security`` section.
"""

from logdevice.security.acl import (
    ANONYMOUS_PRINCIPAL,
    NODE_PRINCIPAL,
    Authorizer,
    Principal,
    user,
)
from logdevice.security.connect import PLAIN, ConnectSecurity
from logdevice.security.identity import Authenticator, subject_cn

__all__ = ["Principal", "ANONYMOUS_PRINCIPAL", "NODE_PRINCIPAL", "user", "Authorizer",
           "Authenticator", "subject_cn", "ConnectSecurity", "PLAIN"]
