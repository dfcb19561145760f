"""The cluster config: one JSON file describing nodes, logs, the epoch store and tunables.

``Config.load(path)`` validates the whole file before anything starts; a problem raises
``InvalidConfigError`` (status ``E.INVALID_CONFIG``) whose message names the file and the
field (``logs[2].replication.rack``), also available as ``err.source`` and ``err.field``.

Modules: ``location`` (scopes and ``region.dc.cluster.row.rack`` locations),
``replication`` (the replication property), ``model`` (the frozen value types of a
config's parts, the ``security`` section among them), ``cluster`` (``Config``, the whole
config), ``_parse`` (validation), ``local`` (configs for local clusters).
"""

from logdevice.config.cluster import Config
from logdevice.config.local import id_ranges, make_local_config
from logdevice.config.location import LOCATION_SCOPES, Location, NodeLocationScope
from logdevice.config.model import (
    ACL_ACTIONS,
    ANONYMOUS,
    ANY_AUTHENTICATED,
    LOGID_MIN,
    MAX_PAYLOAD_SIZE,
    ROLES,
    USER_LOGID_MAX,
    Acl,
    LogGroup,
    NodeConfig,
    PrincipalConfig,
    SecurityConfig,
    Settings,
    TlsConfig,
    Weights,
    ZooKeeperAuth,
)
from logdevice.config.replication import MAX_REPLICATION, ReplicationProperty

__all__ = [
    "Config",
    "NodeConfig",
    "LogGroup",
    "Settings",
    "Weights",
    "SecurityConfig",
    "TlsConfig",
    "ZooKeeperAuth",
    "PrincipalConfig",
    "Acl",
    "ACL_ACTIONS",
    "ANY_AUTHENTICATED",
    "ANONYMOUS",
    "Location",
    "NodeLocationScope",
    "LOCATION_SCOPES",
    "ReplicationProperty",
    "MAX_REPLICATION",
    "ROLES",
    "LOGID_MIN",
    "USER_LOGID_MAX",
    "MAX_PAYLOAD_SIZE",
    "make_local_config",
    "id_ranges",
]
