"""What one peer can hold of a node is bounded: connections in all and per principal, and
idle client connections are closed (unless a read stream is open on them).  Refusals are
clean (TOOMANY in HELLO_REPLY, or the connection closed at once) and the node serves on."""

from __future__ import annotations

import struct

import pytest

import logdevice as ld
from logdevice.errors import E
from logdevice.protocol import Start
from logdevice.protocol.probe import NodeConnection
from tests.security.conftest import client_as, security_of

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def small(secured_factory):
    return secured_factory(nodes=1, replication=1, logs=range(1, 4), max_connections=4,
                           max_connections_per_principal=2, client_idle_timeout_ms=2_000,
                           max_buffered_input_bytes=1 << 20)


def connect(cluster, name: str) -> NodeConnection:
    return NodeConnection(cluster.node_address(0), "local", security=security_of(cluster, name))


def test_one_principal_holds_at_most_its_share(small):
    held = [connect(small, "viewer"), connect(small, "viewer")]
    try:
        with pytest.raises(ld.LogDeviceError) as ei:
            connect(small, "viewer")
        assert ei.value.status == E.TOOMANY and "max_connections_per_principal" in str(ei.value)
        with connect(small, "writer") as other:  # another principal is not held back
            assert other.hello_reply.status == E.OK
    finally:
        for c in held:
            c.close()


def test_the_node_holds_at_most_max_connections(small):
    held = [connect(small, name) for name in ("viewer", "viewer", "writer", "writer")]
    try:
        with pytest.raises(ld.LogDeviceError):  # closed before its HELLO is answered
            connect(small, "admin")
    finally:
        for c in held:
            c.close()
    with client_as(small, "writer") as writer:  # room again once they closed
        assert writer.append(1, b"served") > 0


def test_half_sent_frames_of_all_clients_share_one_budget(small):
    """Each client may start a frame of up to 64 MiB and send it slowly; together they may
    not make the node hold more than max_buffered_input_bytes of them."""
    from logdevice.protocol import Error, MessageType

    head = struct.pack("<IHBBI", 4 << 20, int(MessageType.APPEND), 1, 0, 32) + bytes(32)
    with connect(small, "viewer") as first, connect(small, "writer") as second:
        first.send_raw(head + bytes(600_000))
        second.send_raw(head + bytes(600_000))  # 1.2 MB held in all: over the budget
        err = second.recv(timeout=10)
        assert isinstance(err, Error) and err.status == E.OVERLOADED
        assert second.closed_by_peer(timeout=10)
    with client_as(small, "writer") as writer:  # the bytes held went with the connections
        assert writer.append(1, b"x" * 500_000) > 0


def test_idle_clients_are_closed_but_not_readers(small):
    with client_as(small, "writer") as writer:
        writer.append(2, b"one record")
    with connect(small, "viewer") as idle, connect(small, "viewer") as reader:
        reader.send(Start(read_stream_id=1, log_id=3, start_lsn=1, until_lsn=2**62,
                          window_high=2**62))
        assert idle.closed_by_peer(timeout=15)  # silent for 2 s: closed by the sweep
        assert not reader.closed_by_peer(timeout=6)  # a tailing stream is open on it
