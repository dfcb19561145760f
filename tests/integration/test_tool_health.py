"""``logdevice.tools.health.probe_nodes`` against real ports: one that accepts connections,
one that refuses them."""

from __future__ import annotations

import socket

from logdevice.config import make_local_config
from logdevice.errors import E, error_for
from logdevice.local_cluster import free_ports
from logdevice.tools.health import cluster_line, probe_nodes


def test_probe_nodes_and_the_cluster_line(tmp_path):
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        closed = free_ports(3)  # nobody listens on them
        ports = [listening.getsockname()[1], closed[0]]
        config = make_local_config(2, 1, [1], root=tmp_path, ports=ports,
                                   admin_ports=closed[1:],
                                   cluster="probe")
        assert probe_nodes(config) == "N0: accepts connections, N1: connection refused"
        assert probe_nodes(config, limit=1) == "N0: accepts connections, ... (1 more)"
        assert cluster_line(config, error_for(E.CONNFAILED)) == (
            "waiting for the cluster 'probe': no node reachable "
            "(N0: accepts connections, N1: connection refused)")
        assert cluster_line(config, error_for(E.TIMEDOUT)).startswith(
            "waiting for the cluster 'probe': no answer in time (")
