"""Attacks on a secured cluster, each as its attacker would try it, and the same operations
succeeding for a principal that holds the right.

- a read-only principal changing log groups or draining a node (clients used to write
  the epoch store themselves, so no ACL was ever asked);
- anyone with the config reading or writing the epoch store's znodes;
- a client sending a node-to-admin reply type with a huge list to balloon a node;
- a client speaking as a node.
"""

from __future__ import annotations

import struct

import pytest

import logdevice as ld
from logdevice.errors import E
from logdevice.protocol import Append, Error, GetMetadata, MessageType, Seal
from logdevice.protocol.probe import NodeConnection
from tests.cluster.conftest import ldshell
from tests.security.conftest import client_as, credentials, rss_kib, security_of, zk_root

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240)]


def test_a_read_only_principal_cannot_change_the_cluster(cluster):
    with client_as(cluster, "viewer") as viewer:
        for attempt in (lambda: viewer.create_log_group("evil", 500, 600, replication=1),
                        lambda: viewer.update_log_group("logs_1_10", replication=1),
                        lambda: viewer.remove_log_group("logs_1_10"),
                        lambda: viewer.context.metadata.request_rebuild(0, drain=True),
                        lambda: viewer.context.metadata.request_rebuild(1),
                        lambda: viewer.context.metadata.events()):
            with pytest.raises(ld.AccessError, match="viewer may not admin the cluster"):
                attempt()
        with pytest.raises(ld.AccessError):
            viewer.trim(1, 1)
        assert not viewer.config.has_log(500)
    # The tools the same way: ldshell with the viewer's certificate is refused ...
    refused = ldshell(cluster, *credentials(cluster, "viewer"), "logs", "create", "evil",
                      "--range", "500..600", "--replication", "1")
    assert refused.returncode == 2 and "ACCESS" in refused.stderr, refused.stderr
    refused = ldshell(cluster, *credentials(cluster, "viewer"), "drain", "1")
    assert refused.returncode == 2 and "ACCESS" in refused.stderr, refused.stderr
    # ... and the admin is not.
    with client_as(cluster, "admin") as admin:
        group = admin.create_log_group("ops_made", 700, 709, replication=2)
        assert (group.lo, group.hi) == (700, 709)
    with client_as(cluster, "writer") as writer:
        assert writer.append(705, b"in a group an admin made") > 0
    with client_as(cluster, "admin") as admin:
        admin.remove_log_group("ops_made")


def test_only_the_nodes_can_open_the_epoch_store(cluster):
    from kazoo.client import KazooClient
    from kazoo.exceptions import NoAuthError

    with client_as(cluster, "writer") as writer:
        writer.append(1, b"the store now has log 1")
    hosts, root = zk_root(cluster)
    for auth in (None, [("digest", "nodes:guessed-password")]):
        zk = KazooClient(hosts=hosts, auth_data=auth, timeout=10)
        zk.start(timeout=15)
        try:
            for op, args in ((zk.get, (f"{root}/logs/1",)),
                             (zk.get_children, (f"{root}/logs",)),
                             (zk.set, (f"{root}/logs/1", b"{}")),
                             (zk.create, (f"{root}/evil", b"x")),
                             (zk.delete, (f"{root}/identity",))):
                with pytest.raises(NoAuthError):
                    op(*args)
        finally:
            zk.stop()
            zk.close()
    # The nodes still read and write it: a new log's first append activates an epoch.
    with client_as(cluster, "writer") as writer:
        assert writer.append(2, b"still writable") > 0


def test_a_reply_type_from_a_client_closes_the_connection_before_decoding(cluster):
    """8 MB of empty lists in a RECOVERY_LIST header took a node from 73 MB to 640 MB and
    stalled its loop for 3.5 s when the header was decoded before anyone asked who sent
    it.  Now the 12-byte prefix is enough to close the connection."""
    pid = cluster.pid(0)
    assert pid is not None
    before = rss_kib(pid)
    count = 8 << 20
    header = b"\xdd" + struct.pack(">I", count) + b"\x90" * count  # array32 of [] x 8M
    prefix = struct.pack("<IHBBI", 12 + len(header), int(MessageType.RECOVERY_LIST), 1, 0,
                         len(header))
    with NodeConnection(cluster.node_address(0), "local",
                        security=security_of(cluster, "viewer")) as conn:
        conn.send_raw(prefix)
        err = conn.recv(timeout=10)
        assert isinstance(err, Error) and err.status == E.ACCESS
        assert "clients may not send RECOVERY_LIST" in err.message
        with pytest.raises(ld.LogDeviceError):  # the rest is never read: closed
            conn.send_raw(header)
            conn.recv(timeout=10)
    # A request type with an oversized header is refused the same way.
    with NodeConnection(cluster.node_address(0), "local",
                        security=security_of(cluster, "writer")) as conn:
        conn.send_raw(struct.pack("<IHBBI", 12 + (1 << 20), int(MessageType.GET_METADATA),
                                  1, 0, 1 << 20))
        err = conn.recv(timeout=10)
        assert isinstance(err, Error) and err.status == E.ACCESS and "header" in err.message
    assert rss_kib(pid) - before < 32 * 1024  # KiB: nothing was built from the frames
    with client_as(cluster, "writer") as writer:  # the node serves on, nobody failed over
        assert writer.append(3, b"after the flood") > 0
    assert all(0 in view.alive for view in cluster.views().values())


def test_a_client_cannot_be_a_node(cluster):
    # The config every client reads names files only nodes have, never a secret.
    text = cluster.config_path.read_text()
    secrets = [p.read_text().strip() for p in (cluster.root / "secrets").iterdir()]
    assert secrets and not any(secret in text for secret in secrets)
    assert "node_secret\"" not in text
    viewer = security_of(cluster, "viewer")
    with pytest.raises(ld.AccessError, match="claims to be a node"):
        NodeConnection(cluster.node_address(1), "local", role="node", node_index=0,
                       security=viewer)
    # What only nodes send, what needs admin, what needs append: all refused.
    for msg in (Seal(request_id=5, log_id=1, seal_epoch=2**32),
                GetMetadata(request_id=6, kind="events"),
                Append(request_id=7, log_id=1, payload=b"x")):
        with NodeConnection(cluster.node_address(1), "local", security=viewer) as conn:
            conn.send(msg)
            reply = conn.recv(timeout=10)
            assert isinstance(reply, Error) and reply.status == E.ACCESS, reply


def test_consumers_belong_to_their_principal(cluster):
    with client_as(cluster, "viewer") as viewer, client_as(cluster, "writer") as writer:
        viewer.store_checkpoints("viewer-app", {1: (3, 0)})
        with pytest.raises(ld.AccessError, match="belongs to another principal"):
            writer.load_checkpoints("viewer-app")
        with pytest.raises(ld.AccessError, match="belongs to another principal"):
            writer.store_checkpoints("viewer-app", {1: (1, 0)})
        assert viewer.load_checkpoints("viewer-app") == {1: (3, 0)}
        viewer.group_heartbeat("viewer-group", "m1", [1, 2])
        with pytest.raises(ld.AccessError, match="belongs to another principal"):
            writer.group_heartbeat("viewer-group", "m2", [1, 2])


def test_a_trim_past_the_tail_is_refused_unless_an_admin_forces_it(cluster):
    with client_as(cluster, "writer") as writer:
        tail = writer.append(4, b"the tail")
    with client_as(cluster, "admin") as admin:
        with pytest.raises(ld.TooBigError):  # it would swallow records not written yet
            admin.trim(4, tail + 1000)
        admin.trim(4, tail)  # up to the tail is a trim like any other
        admin.trim(4, tail + 1000, force=True)  # the admin says so
    with client_as(cluster, "viewer") as viewer, pytest.raises(ld.AccessError):
        viewer.trim(4, tail + 2000, force=True)
    with client_as(cluster, "writer") as writer:
        assert writer.get_head_attributes(4).trim_point == tail + 1000
