"""Security end to end: TLS clusters with principals and ACLs (real node processes,
certificates made in the test with trustme).

A principal without rights cannot append, read, trim or ask admin questions, one with
rights can; certificates the cluster does not trust are refused at the TLS handshake;
tokens it does not know are refused with ACCESS in HELLO_REPLY; a peer claiming to be a
node must prove it.
"""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys

import pytest
import trustme

import logdevice as ld
from logdevice.errors import E
from logdevice.protocol import (
    Error,
    GetPartitions,
    GetRecordAvailability,
    PartitionList,
    RecordAvailability,
    Seal,
)
from logdevice.protocol.probe import NodeConnection
from logdevice.records import GapType
from logdevice.security import ConnectSecurity
from logdevice.security.tls import client_context

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]

READER_TOKEN = "reader-token-0123456789"
OUTSIDER_TOKEN = "outsider-token-0123456789"
LOGS = range(1, 6)
SECURITY = {
    "principals": {"writer": {}, "admin": {}, "reader": {"token": READER_TOKEN},
                   "outsider": {"token": OUTSIDER_TOKEN}},
    # The default for every log group: admin trims and asks admin questions...
    "acl": {"append": ["writer"], "trim": ["admin"], "admin": ["admin"]},
}
# ... and the log groups' own ACL: who reads.
GROUP_ACL = {"read": ["writer", "reader"]}


@pytest.fixture(scope="module")
def cluster(module_cluster):
    return module_cluster(nodes=3, replication=2, logs=LOGS, tls=True, security=SECURITY,
                          acl=GROUP_ACL)


def client_as(cluster, name: str | None = None, token: str | None = None, **kw) -> ld.Client:
    """A client of ``cluster`` holding a certificate for ``name`` and/or ``token``."""
    creds = {}
    if name is not None:
        cert, key = cluster.client_cert(name)
        creds = {"tls_cert": str(cert), "tls_key": str(key)}
    if token is not None:
        creds["token"] = token
    kw.setdefault("timeout", 10.0)
    return cluster.client(**creds, **kw)


def read_all(client: ld.Client, log_id: int, until: int) -> list:
    reader = client.create_reader()
    reader.start_reading(log_id, 1, until)
    out: list = []
    while reader.is_reading(log_id):
        got = reader.read(100, timeout=5)
        if not got:
            break
        out += got
    return out


def test_rights_decide_append_read_and_trim(cluster):
    with client_as(cluster, "writer") as writer:
        lsns = [writer.append(1, b"r%d" % i) for i in range(5)]
        # The writer may read too (the group's ACL), but not trim (the default's).
        data = [r for r in read_all(writer, 1, lsns[-1]) if isinstance(r, ld.DataRecord)]
        assert [bytes(r.payload) for r in data] == [b"r%d" % i for i in range(5)]
        with pytest.raises(ld.AccessError, match="N0: ACCESS"):
            writer.trim(1, lsns[0])
        bw = writer.create_buffered_writer()
        assert bw.append(2, b"batched").result(timeout=10) > 0
        bw.close()
    with client_as(cluster, token=READER_TOKEN) as reader:
        with pytest.raises(ld.AccessError, match="reader may not append log 1"):
            reader.append(1, b"nope")
        bw = reader.create_buffered_writer()
        with pytest.raises(ld.AccessError):
            bw.append(2, b"batched").result(timeout=10)
        bw.close()
        data = [r for r in read_all(reader, 1, lsns[-1]) if isinstance(r, ld.DataRecord)]
        assert len(data) == 5
        assert reader.get_tail_lsn(1) == lsns[-1]
    for outsider in (client_as(cluster, token=OUTSIDER_TOKEN), client_as(cluster)):
        with outsider:  # a principal without rights, and the anonymous one
            with pytest.raises(ld.AccessError):
                outsider.append(1, b"nope")
            with pytest.raises(ld.AccessError):
                outsider.get_tail_lsn(1)
            with pytest.raises(ld.AccessError):
                outsider.trim(1, lsns[0])
            got = read_all(outsider, 1, lsns[-1])
            assert [(g.type, g.lo, g.hi) for g in got] == [(GapType.ACCESS, 1, lsns[-1])]
    with client_as(cluster, "admin") as admin:
        admin.trim(1, lsns[1])
        with pytest.raises(ld.AccessError):  # admin may not read log 1
            admin.get_head_attributes(1)
    with client_as(cluster, token=READER_TOKEN) as reader:
        assert reader.get_head_attributes(1).trim_point == lsns[1]


def test_a_frame_of_many_logs_refused_for_some_still_appends_to_the_others(cluster):
    with client_as(cluster, "admin") as admin:
        admin.create_log_group("admins-only", 100, 199, replication=2,
                               acl={"append": ["admin"], "read": ["admin"]})
    with client_as(cluster, "writer") as writer:
        for log in LOGS:
            writer.append(log, b"warm-up")
        frames = writer.stats["append_logs_frames"]
        # One burst: each node's frame carries logs the writer may append to and logs it
        # may not (every node sequences some of the hundred refused logs).
        futures = [(log, writer.append_async(log, b"to %d" % log))
                   for log in [*LOGS, *range(100, 200)]]
        for log, f in futures:
            if log < 100:
                assert f.result(20) > 0
            else:
                with pytest.raises(ld.AccessError, match=f"may not append log {log}"):
                    f.result(20)
        assert writer.stats["append_logs_frames"] > frames


def test_admin_requests_need_admin(cluster):
    cert, key = cluster.client_cert("admin")
    admin = ConnectSecurity.for_client(cluster.config, tls_cert=str(cert), tls_key=str(key))
    reader = ConnectSecurity.for_client(cluster.config, token=READER_TOKEN)
    asks = [(GetPartitions(request_id=1), PartitionList),
            (GetRecordAvailability(request_id=2, log_id=1, lo=1, hi=2**63), RecordAvailability)]
    for msg, reply_type in asks:
        with NodeConnection(cluster.node_address(0), "local", security=reader) as conn:
            refused = conn.request(msg)
            assert isinstance(refused, Error) and refused.status == E.ACCESS
        with NodeConnection(cluster.node_address(0), "local", security=admin) as conn:
            assert isinstance(conn.request(msg), reply_type)
    # ldshell, with the principal's certificate or token.
    tool = os.path.join(os.path.dirname(sys.executable), "ldshell")
    base = [tool, "--config", str(cluster.config_path), "--timeout", "3"]
    query = ["query", "SELECT DISTINCT node FROM partitions ORDER BY node", "--json"]
    ok = subprocess.run([*base, "--tls-cert", str(cert), "--tls-key", str(key), *query],
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and json.loads(ok.stdout) == [{"node": i} for i in range(3)], \
        ok.stderr
    refused = subprocess.run([*base, "--token", READER_TOKEN, *query],
                             capture_output=True, text=True, timeout=120)
    assert json.loads(refused.stdout) == []
    assert "GetPartitions: ACCESS: N0: reader may not admin the cluster" in refused.stderr
    check = subprocess.run([*base, "--tls-cert", str(cert), "--tls-key", str(key), "check",
                            "--recheck-delay", "0.2", "--json"],
                           capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stderr
    refused = subprocess.run([*base, "--token", READER_TOKEN, "trim", "2", "1"],
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "N0: ACCESS" in refused.stderr


def test_untrusted_certificates_are_refused_at_the_handshake(cluster, tmp_path):
    addr = cluster.node_address(1)
    # A client certificate from another CA (the node verifies any certificate shown).
    other = trustme.CA()
    rogue = other.issue_cert("rogue.invalid", common_name="writer")
    ctx = client_context(cluster.config)
    rogue.configure_cert(ctx)
    with pytest.raises(ld.ConnectionFailedError):
        NodeConnection(addr, "local", security=ConnectSecurity(ctx))
    cert, key = tmp_path / "rogue.pem", tmp_path / "rogue.key"
    rogue.cert_chain_pems[0].write_to_path(str(cert))
    rogue.private_key_pem.write_to_path(str(key))
    with cluster.client(tls_cert=str(cert), tls_key=str(key), timeout=5,
                        unreachable_timeout=1.0) as c, pytest.raises(ld.ConnectionFailedError):
        c.append(1, b"forged writer")
    # A node whose certificate the client does not trust.
    stranger = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    other.configure_trust(stranger)
    with pytest.raises(ld.ConnectionFailedError, match="TLS handshake"):
        NodeConnection(addr, "local", security=ConnectSecurity(stranger))
    # Plain TCP to a TLS port.
    with pytest.raises(ld.ConnectionFailedError):
        NodeConnection(addr, "local", timeout=3)
    # Tokens the cluster does not know: ACCESS in HELLO_REPLY.
    guess = ConnectSecurity.for_client(cluster.config, token="guess-0123456789abcdef")
    with pytest.raises(ld.AccessError, match="matches no principal"):
        NodeConnection(addr, "local", security=guess)
    with client_as(cluster, token="guess-0123456789abcdef") as c, \
            pytest.raises(ld.AccessError):
        c.append(1, b"x")


def test_only_nodes_are_nodes(cluster):
    addr = cluster.node_address(2)
    writer_cert, writer_key = cluster.client_cert("writer")
    writer = ConnectSecurity.for_client(cluster.config, tls_cert=str(writer_cert),
                                        tls_key=str(writer_key))
    for security in (ConnectSecurity.for_client(cluster.config), writer,
                     ConnectSecurity.for_client(cluster.config, token=READER_TOKEN)):
        with pytest.raises(ld.AccessError, match="claims to be a node"):
            NodeConnection(addr, "local", role="node", node_index=0, security=security)
    # A client may not send what only nodes send, whatever its rights on the log: the
    # node closes the connection on the frame's prefix, before decoding its header.
    with NodeConnection(addr, "local", security=writer) as conn:
        err = conn.request(Seal(request_id=5, log_id=1, seal_epoch=2**64 - 1))
        assert isinstance(err, Error) and err.status == E.ACCESS
        assert "clients may not send SEAL" in err.message
    # The node certificate is a node's.
    with NodeConnection(addr, "local", role="node", node_index=0,
                        security=cluster.node_security) as conn:
        assert conn.hello_reply.status == E.OK
    with client_as(cluster, "writer") as c:
        assert c.append(1, b"still writable") > 0


def test_a_log_group_created_at_runtime_is_judged_by_its_own_acl_at_once(local_cluster):
    # The nodes would not read the runtime log groups again for ten minutes by themselves.
    slow = local_cluster(nodes=3, replication=2, logs=LOGS, tls=True, security=SECURITY,
                         acl=GROUP_ACL, logs_config_poll_ms=600_000)
    with client_as(slow, "admin") as admin:
        admin.create_log_group("admins-only", 100, 199, replication=2,
                               acl={"append": ["admin"], "read": ["admin"]})
    with client_as(slow, "writer") as writer:
        # A hundred logs: some of them have their sequencer on a node that did not take
        # the admin's request, and knows nothing of the new group yet.
        futures = [(log, writer.append_async(log, b"x")) for log in range(100, 200)]
        for log, f in futures:
            with pytest.raises(ld.AccessError, match=f"may not append log {log}"):
                f.result(20)
        assert writer.append(1, b"still writable") > 0
    with client_as(slow, "admin") as admin:
        assert admin.append(150, b"the group's own") > 0


def test_required_client_certificates_and_tokens_without_tls(local_cluster):
    strict = local_cluster(nodes=2, replication=1, logs=range(1, 3), tls=True,
                           security={"tls": {"require_client_cert": True},
                                     "principals": {"app": {}}})
    with pytest.raises(ld.ConnectionFailedError):
        NodeConnection(strict.node_address(0), "local",
                       security=ConnectSecurity.for_client(strict.config))
    with client_as(strict, "app") as app:
        assert app.append(1, b"mutual") > 0
    strict.stop_all()
    # Tokens only, no TLS: the nodes share a generated secret.
    tokens = local_cluster(nodes=2, replication=1, logs=range(1, 3),
                           security={"principals": {"app": {"token": READER_TOKEN}}})
    assert tokens.config.security.tls is None and tokens.config.security.node_secret_file
    with tokens.client(token=READER_TOKEN) as app:
        assert app.append(1, b"token") > 0
    with tokens.client(timeout=5) as anonymous, pytest.raises(ld.AccessError):
        anonymous.append(1, b"x")
    with pytest.raises(ld.AccessError, match="claims to be a node"):
        NodeConnection(tokens.node_address(0), "local", role="node", node_index=1)
