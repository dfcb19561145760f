"""Which roles a node runs: ``build_node`` wires a ``Node`` from the config.

Every node runs the runtime log groups' poller (first: the others start with them), the
failure detector, the sequencer role (a node without the sequencer
role never owns a log, so it only redirects), the storage role (disabled on a node
without the storage role: STOREs get DISABLED) and the read streams served from the
storage role's LogsDB (START / WINDOW / STOP), rebuilding (donating records of lost or
drained nodes, taking copies), the rebuilding supervisor (dead nodes rebuilt without an
operator), the checker's availability requests on the same LogsDB,
periodic checks (one node at a time), the consumers' checkpoints and groups, the
metadata gateway (clients read and change metadata through nodes), and the Prometheus
endpoint on the admin port.  A new role is one more
``add_role`` line here; the failure detector comes before the roles that read its view.
"""

from __future__ import annotations

import asyncio

from logdevice.config import Config
from logdevice.node.roles.availability_role import AvailabilityRole
from logdevice.node.roles.checker_role import CheckerRole
from logdevice.node.roles.consumers_role import ConsumersRole
from logdevice.node.roles.failure_detector_role import FailureDetectorRole
from logdevice.node.roles.logs_config_role import LogsConfigRole
from logdevice.node.roles.metadata_role import MetadataRole
from logdevice.node.roles.metrics_role import MetricsRole
from logdevice.node.roles.read_streams_role import ReadStreamsRole
from logdevice.node.roles.rebuilding_role import RebuildingRole
from logdevice.node.roles.rebuilding_supervisor_role import RebuildingSupervisorRole
from logdevice.node.roles.sequencer_role import SequencerRole
from logdevice.node.roles.storage_role import StorageRole
from logdevice.node.transport.server import Node


def build_node(config: Config, index: int,
               loop: asyncio.AbstractEventLoop | None = None) -> Node:
    """A node with its roles, not started yet (``await node.start()``)."""
    node = Node(config, index, loop)
    node.add_role(LogsConfigRole(node))  # first: the others start with the runtime groups
    node.add_role(FailureDetectorRole(node))
    node.add_role(StorageRole(node))
    node.add_role(RebuildingRole(node))  # after storage: donates from its db, gates STOREs
    node.add_role(RebuildingSupervisorRole(node))  # dead nodes rebuilt without an operator
    node.add_role(ReadStreamsRole(node))  # after storage: it reads the storage role's db
    node.add_role(SequencerRole(node))
    node.add_role(ConsumersRole(node))
    node.add_role(MetadataRole(node))  # the epoch store, read and changed for clients
    node.add_role(AvailabilityRole(node))  # the checker's questions, from storage's db
    node.add_role(CheckerRole(node))  # periodic checks (checker_interval_ms), one node
    node.add_role(MetricsRole(node))  # /metrics on the admin port: reads the others
    return node
