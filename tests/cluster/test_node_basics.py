"""Node processes: start-up and cluster view, appends and redirects, bad input, queries.

One 4-node cluster (R=2, logs 1..20) is shared by the tests of this module.
"""

from __future__ import annotations

import struct
import subprocess
import sys
import time

import pytest

from ldcore import lsn as ldlsn
from ldcore.checksum import crc32c
from logdevice.errors import E
from logdevice.protocol import (
    PROTOCOL_VERSION,
    Append,
    AppendFlag,
    DataSize,
    DataSizeReply,
    Error,
    FindTime,
    FindTimeReply,
    GetHead,
    GetTail,
    Head,
    Tail,
    Trim,
    Trimmed,
    Window,
    encode_frame,
)
from logdevice.protocol.probe import NodeConnection
from tests.cluster.conftest import RawClient

pytestmark = pytest.mark.cluster

MAX_PAYLOAD = 1 << 20


@pytest.fixture(scope="module")
def cluster(module_cluster):
    return module_cluster(nodes=4, replication=2, logs=range(1, 21),
                          max_payload_size=MAX_PAYLOAD)


@pytest.fixture
def client(cluster):
    with RawClient(cluster) as c:
        yield c


def test_nodes_see_each_other(cluster):
    views = cluster.views()
    assert sorted(views) == [0, 1, 2, 3]
    versions = {v.config_version for v in views.values()}
    assert len(versions) == 1
    for i, v in views.items():
        assert v.node_index == i
        assert v.alive == [0, 1, 2, 3]
        assert [s.node_index for s in v.sequencers] == [0, 1, 2, 3]


def test_appends_get_increasing_lsns(client):
    lsns = [client.append(3, f"record {i}".encode()).lsn for i in range(20)]
    assert lsns == sorted(set(lsns))
    assert all(ldlsn.epoch_of(x) >= 1 and ldlsn.esn_of(x) >= 1 for x in lsns)
    owner = client.owner(3)
    tail = client.conn(owner).request(GetTail(request_id=7, log_id=3), Tail)
    assert tail.status == E.OK and tail.lsn == lsns[-1] and tail.timestamp > 0


def test_non_owner_redirects(client, cluster):
    owner = client.owner(5)
    other = next(i for i in range(cluster.n) if i != owner)
    reply = client.append_once(other, 5, b"x")
    assert reply.status == E.NOSEQUENCER
    assert reply.redirect_to == owner
    tail = client.conn(other).request(GetTail(request_id=1, log_id=5), Tail)
    assert tail.status == E.NOSEQUENCER and tail.redirect_to == owner
    assert client.append_once(owner, 5, b"x").status == E.OK


def test_unknown_log_and_too_big(client):
    assert client.append_once(0, 999, b"x").status == E.NOTFOUND
    owner = client.owner(1)
    reply = client.append_once(owner, 1, b"x" * (MAX_PAYLOAD + 1))
    assert reply.status == E.TOOBIG
    assert client.append_once(owner, 1, b"x" * MAX_PAYLOAD).status == E.OK


def test_checksum_checked(client):
    owner = client.owner(2)
    payload = b"checked payload"
    good = client.append_once(owner, 2, payload, flags=int(AppendFlag.CHECKSUM),
                              checksum=crc32c(payload))
    assert good.status == E.OK
    bad = client.append_once(owner, 2, payload, flags=int(AppendFlag.CHECKSUM),
                             checksum=crc32c(payload) ^ 1)
    assert bad.status == E.CHECKSUM_MISMATCH


def _check_still_serving(cluster, node: int) -> None:
    with RawClient(cluster) as c:
        assert c.view(node).alive == [0, 1, 2, 3]


@pytest.mark.parametrize("garbage", [
    b"\x00" * 64,  # frame length 0
    struct.pack("<IHBBI", 40, 65000, PROTOCOL_VERSION, 0, 4) + b"\x00" * 28,  # unknown type
    struct.pack("<IHBBI", 1 << 31, 10, PROTOCOL_VERSION, 0, 4),  # absurd length
], ids=["zeros", "unknown-type", "huge-length"])
def test_malformed_frame_closes_only_that_connection(cluster, garbage):
    addr = cluster.node_address(1)
    with NodeConnection(addr, "local") as bystander, NodeConnection(addr, "local") as bad:
        bad.send_raw(garbage)
        assert bad.closed_by_peer(5.0)
        errors = [m for m in bad.inbox if isinstance(m, Error)]
        assert errors and errors[0].status in (E.BADMSG, E.PROTONOSUPPORT)
        reply = bystander.request(GetTail(request_id=1, log_id=1))
        assert isinstance(reply, Tail)
    _check_still_serving(cluster, 1)


def test_garbage_header_of_known_type_closes(cluster):
    frame = bytearray(encode_frame(Window(read_stream_id=1, filter_version=1, window_high=5)))
    frame[12:] = b"\xc1" * (len(frame) - 12)  # 0xc1 is never valid msgpack
    with NodeConnection(cluster.node_address(2), "local") as conn:
        conn.send_raw(bytes(frame))
        assert conn.closed_by_peer(5.0)
    _check_still_serving(cluster, 2)


def test_wrong_cluster_is_refused(cluster):
    with pytest.raises(Exception) as info:
        NodeConnection(cluster.node_address(0), "someone-else")
    assert info.value.status == E.ACCESS
    assert "wrong cluster" in str(info.value)
    _check_still_serving(cluster, 0)


def test_wrong_protocol_version_is_refused(cluster):
    with pytest.raises(Exception) as info:
        NodeConnection(cluster.node_address(0), "local", protocol_version=PROTOCOL_VERSION + 7)
    # The frame carries an unsupported encoding version: refused before the HELLO is read.
    assert info.value.status in (E.PROTONOSUPPORT, E.PEER_CLOSED)
    _check_still_serving(cluster, 0)


def test_request_before_hello_closes(cluster):
    with NodeConnection(cluster.node_address(3), "local", hello=False) as conn:
        conn.send(Append(request_id=1, log_id=1, payload=b"x"))
        assert conn.closed_by_peer(5.0)
        assert any(isinstance(m, Error) and m.status == E.BADMSG for m in conn.inbox)
    _check_still_serving(cluster, 3)


def test_unhandled_message_gets_an_error(cluster):
    with NodeConnection(cluster.node_address(0), "local") as conn:
        # A reply type: no role of a node takes it.
        reply = conn.request(Tail(request_id=5, status=E.OK, log_id=1))
        assert isinstance(reply, Error) and reply.status == E.NOTSUPPORTED
        assert reply.request_id == 5
        assert isinstance(conn.request(GetTail(request_id=2, log_id=1)), Tail)


def test_storage_queries(client, cluster):
    before = int(time.time() * 1000) - 1
    lsns = [client.append(7, b"y" * 100).lsn for _ in range(10)]
    after = int(time.time() * 1000) + 1000
    sizes, finds, heads = [], [], []
    for node in range(cluster.n):
        conn = client.conn(node)
        sizes.append(conn.request(DataSize(request_id=1, log_id=7, start_ms=before,
                                           end_ms=after), DataSizeReply))
        finds.append(conn.request(FindTime(request_id=2, log_id=7, timestamp=before),
                                  FindTimeReply))
        heads.append(conn.request(GetHead(request_id=3, log_id=7), Head))
    assert all(r.status == E.OK for r in sizes + finds + heads)
    # Every record is on R=2 of the 4 nodes: 2 * 10 * 100 payload bytes in all, plus
    # LogsDB's per-record header (data_size is an estimate of what is stored).
    assert 2 * 10 * 100 <= sum(r.size for r in sizes) <= 2 * 10 * 200
    assert min(r.hi for r in finds) == lsns[0]
    assert all(r.trim_point == 0 for r in heads)
    trimmed = [client.conn(n).request(Trim(request_id=4, log_id=7, lsn=lsns[4]), Trimmed)
               for n in range(cluster.n)]
    assert all(r.status == E.OK and r.trim_point == lsns[4] for r in trimmed)
    heads = [client.conn(n).request(GetHead(request_id=5, log_id=7), Head)
             for n in range(cluster.n)]
    assert all(h.trim_point == lsns[4] for h in heads)
    assert client.conn(0).request(GetHead(request_id=6, log_id=999), Head).status == E.NOTFOUND


def test_bad_config_exits_nonzero_naming_the_field(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"cluster": "c", "nodes": [{"index": 0, "host": "127.0.0.1", '
                   '"port": 70000}], "logs": []}')
    proc = subprocess.run([sys.executable, "-m", "logdevice.node.main", "--config", str(bad),
                           "--node-index", "0"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "nodes[0].port" in proc.stderr and str(bad) in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "logdevice.node.main", "--config",
                           str(tmp_path / "missing.json"), "--node-index", "0"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "missing.json" in proc.stderr
