"""Security without I/O: the config's ``security`` section and log group ACLs (valid ones
round-trip, bad ones are refused naming field and file), who a HELLO authenticates as,
what a principal may do, and the node's request gate."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest

from logdevice.config import Acl, Config
from logdevice.errors import E, InvalidConfigError, InvalidParamError
from logdevice.node.transport.request_gate import RequestGate
from logdevice.protocol import (
    AdminRequest,
    Append,
    Error,
    GetCheckpoints,
    GetClusterView,
    GetMetadata,
    GetPartitions,
    GetRecordAvailability,
    GetTail,
    Heartbeat,
    Seal,
    SetCheckpoints,
    Start,
    Started,
    Stop,
    Store,
    Trim,
)
from logdevice.protocol.flags import StartFlag
from logdevice.security import (
    ANONYMOUS_PRINCIPAL,
    NODE_PRINCIPAL,
    Authenticator,
    Authorizer,
    ConnectSecurity,
    subject_cn,
    user,
)
from logdevice.security.identity import read_secret
from tests.unit.test_config import _set

ALICE_TOKEN = "alice-token-0123456789"
BOB_TOKEN = "bob-token-0123456789ab"
NODE_SECRET = "node-secret-0123456789"


def secure_config() -> dict:
    return {
        "cluster": "test",
        "nodes": [{"index": i, "host": "127.0.0.1", "port": 4440 + i} for i in range(3)],
        "logs": [
            {"name": "open", "id": [1, 10], "replication": 2},
            {"name": "private", "id": [11, 20], "replication": 2,
             "acl": {"append": ["alice"], "read": ["alice", "bob"], "trim": []}},
            {"name": "public", "id": 30, "replication": 2, "acl": {"read": ["anonymous"]}},
        ],
        "security": {
            "node_secret_file": "node.secret",
            "principals": {"alice": {"token": ALICE_TOKEN}, "bob": {"token": BOB_TOKEN},
                           "carol": {}},
            "acl": {"admin": ["carol"]},
        },
    }


def load(tmp_path: Path, d: dict) -> Config:
    secret = tmp_path / "node.secret"
    if not secret.exists():
        secret.write_text(NODE_SECRET + "\n")
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(d))
    return Config.load(path)


# -- the config ----------------------------------------------------------------------------
def test_security_round_trips_and_defaults(tmp_path):
    cfg = load(tmp_path, secure_config())
    sec = cfg.security
    assert sec is not None and sec.tls is None and sec.node_secret_file == "node.secret"
    assert [p.name for p in sec.principals] == ["alice", "bob", "carol"]
    assert sec.principal("carol").token is None and sec.principal("zed") is None
    # Unset actions of the default ACL: append and read for every authenticated
    # principal, trim and admin for nobody.
    assert sec.acl == Acl(append=("*",), read=("*",), trim=(), admin=("carol",))
    assert cfg.logs[1].acl == Acl(append=("alice",), read=("alice", "bob"), trim=())
    assert cfg.logs[0].acl is None
    assert Config.from_dict(cfg.to_dict(), base_dir=tmp_path) == cfg
    # No security section: nothing changes (and no ACL anywhere).
    plain = copy.deepcopy(secure_config())
    del plain["security"]
    for g in plain["logs"]:
        g.pop("acl", None)
    assert load(tmp_path, plain).security is None
    assert "security" not in load(tmp_path, plain).to_dict()


def test_tls_section_and_paths(tmp_path):
    d = secure_config()
    d["security"]["tls"] = {"cert": "tls/node.pem", "key": "tls/node.key", "ca": "/etc/ca.pem"}
    d["security"]["node_subjects"] = ["node-1", "node-2"]
    cfg = load(tmp_path, d)
    tls = cfg.security.tls
    assert (tls.cert, tls.require_client_cert) == ("tls/node.pem", False)
    assert cfg.resolve_path(tls.cert) == (tmp_path / "tls" / "node.pem").resolve()
    assert cfg.resolve_path(tls.ca) == Path("/etc/ca.pem")
    assert Config.from_dict(cfg.to_dict(), base_dir=tmp_path) == cfg


def _drop(path):
    def mutate(d):
        obj = d
        for key in path[:-1]:
            obj = obj[key]
        del obj[path[-1]]
    return mutate


def _no_security(d):
    del d["security"]


BAD = [
    ("security-type", _set(["security"], []), "security", "expected an object"),
    ("unknown-key", _set(["security", "principal"], {}), "security.principal",
     "did you mean 'principals'"),
    ("no-node-auth", _drop(["security", "node_secret_file"]), "security",
     "nodes could not authenticate each other"),
    ("inline-secret", _set(["security", "node_secret"], NODE_SECRET), "security.node_secret",
     "may not be in the config file every client reads"),
    ("insecure-and-more", _set(["security", "insecure"], True), "security.insecure",
     "no other security settings"),
    ("insecure-false", lambda d: d.update(security={"insecure": False}), "security.insecure",
     "only true"),
    ("zookeeper-no-auth", _set(["epoch_store"], "zookeeper:127.0.0.1:2181/x"),
     "security.zookeeper", "auth_file"),
    ("zookeeper-operator", _set(["security", "zookeeper"], {"auth_file": "zk",
                                                            "operator": "ops:secret"}),
     "security.zookeeper.operator", "base64(sha1"),
    ("subjects-without-tls", _set(["security", "node_subjects"], ["n"]),
     "security.node_subjects", "need 'tls'"),
    ("tls-missing-key", _set(["security", "tls"], {"cert": "a", "ca": "c"}),
     "security.tls.key", "required"),
    ("tls-unknown", _set(["security", "tls"], {"cert": "a", "key": "b", "ca": "c",
                                               "verify": True}),
     "security.tls.verify", "unknown key"),
    ("tls-require-type", _set(["security", "tls"], {"cert": "a", "key": "b", "ca": "c",
                                                    "require_client_cert": "yes"}),
     "security.tls.require_client_cert", "true or false"),
    ("principal-name", _set(["security", "principals", "a b"], {}),
     "security.principals.a b", "not a principal name"),
    ("principal-star", _set(["security", "principals", "*"], {}),
     "security.principals.*", "not a principal name"),
    ("principal-key", _set(["security", "principals", "bob"], {"tokn": "x"}),
     "security.principals.bob.tokn", "did you mean 'token'"),
    ("short-token", _set(["security", "principals", "bob"], {"token": "abc"}),
     "security.principals.bob.token", "at least 16"),
    ("dup-token", _set(["security", "principals", "bob"], {"token": ALICE_TOKEN}),
     "security.principals.bob.token", "also 'alice'"),
    ("acl-action", _set(["security", "acl"], {"write": ["*"]}), "security.acl.write",
     "unknown key"),
    ("acl-unknown-name", _set(["security", "acl"], {"read": ["mallory"]}),
     "security.acl.read[0]", "'mallory' is not a principal"),
    ("acl-type", _set(["logs", 1, "acl"], {"read": "alice"}), "logs[1].acl.read",
     "expected an array"),
    ("log-acl-name", _set(["logs", 1, "acl"], {"trim": ["alice", "eve"]}),
     "logs[1].acl.trim[1]", "'eve' is not a principal"),
    ("acl-without-security", _no_security, "logs[1].acl", "need a top-level 'security'"),
]


@pytest.mark.parametrize(("mutate", "field", "words"), [b[1:] for b in BAD],
                         ids=[b[0] for b in BAD])
def test_bad_security_names_field_and_file(tmp_path, mutate, field, words):
    d = copy.deepcopy(secure_config())
    mutate(d)
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(d))
    with pytest.raises(InvalidConfigError) as ei:
        Config.load(path)
    err = ei.value
    assert err.status == E.INVALID_CONFIG
    assert err.field == field, str(err)
    assert str(path) in str(err) and words in str(err), str(err)


def test_secret_files_are_read_relative_to_the_config(tmp_path):
    d = secure_config()
    d["security"]["node_secret_file"] = "secrets/node"
    d["security"]["principals"]["bob"] = {"token_file": "secrets/bob"}
    cfg = load(tmp_path, d)  # files are read when needed: clients do not need them
    with pytest.raises(InvalidConfigError, match=r"principals.bob.token_file: cannot read"):
        Authenticator.from_config(cfg)
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "bob").write_text("")
    with pytest.raises(InvalidConfigError, match=r"principals.bob.token_file: .*empty"):
        Authenticator.from_config(cfg)
    (tmp_path / "secrets" / "bob").write_text(BOB_TOKEN + "\nignored\n")
    with pytest.raises(InvalidConfigError, match=r"security.node_secret_file: cannot read"):
        Authenticator.from_config(cfg)
    (tmp_path / "secrets" / "node").write_text(NODE_SECRET + "\n")
    assert read_secret(cfg, "secrets/bob", "x") == BOB_TOKEN
    auth = Authenticator.from_config(cfg)
    assert auth.authenticate("client", BOB_TOKEN, None) == (E.OK, user("bob"), "")
    assert auth.authenticate("node", NODE_SECRET, None)[:2] == (E.OK, NODE_PRINCIPAL)


# -- authentication ------------------------------------------------------------------------
def test_who_a_hello_is():
    auth = Authenticator({ALICE_TOKEN: "alice"}, NODE_SECRET, ["logdevice-node"])
    assert auth.authenticate("client", "", None) == (E.OK, ANONYMOUS_PRINCIPAL, "")
    assert auth.authenticate("client", ALICE_TOKEN, None) == (E.OK, user("alice"), "")
    assert auth.authenticate("client", "", "dave") == (E.OK, user("dave"), "")
    assert auth.authenticate("client", "", "logdevice-node")[1] == NODE_PRINCIPAL
    assert auth.authenticate("node", "", "logdevice-node")[1] == NODE_PRINCIPAL
    assert auth.authenticate("node", NODE_SECRET, None)[1] == NODE_PRINCIPAL
    # A token that matches nobody is refused, even with a good certificate.
    status, who, why = auth.authenticate("client", "guess-0123456789abcdef", "dave")
    assert (status, who) == (E.ACCESS, None) and "matches no principal" in why
    # Claiming to be a node takes a node certificate or the node secret.
    for token, subject in (("", None), (ALICE_TOKEN, None), ("", "dave")):
        status, who, why = auth.authenticate("node", token, subject)
        assert (status, who) == (E.ACCESS, None) and "claims to be a node" in why
    # Without a node secret, no token is the node's.
    assert auth.__class__({}, None, ()).authenticate("node", NODE_SECRET, None)[0] == E.ACCESS


def test_subject_cn():
    cert = {"subject": ((("organizationName", "x"),), (("commonName", "alice"),))}
    assert subject_cn(cert) == "alice"
    assert subject_cn(None) is None and subject_cn({}) is None
    assert subject_cn({"subject": ((("organizationName", "x"),),)}) is None


# -- authorization -------------------------------------------------------------------------
def test_authorizer(tmp_path):
    authz = Authorizer(load(tmp_path, secure_config()))
    alice, bob, carol, dave = user("alice"), user("bob"), user("carol"), user("dave")
    anon = ANONYMOUS_PRINCIPAL
    # "open": the default ACL: every authenticated principal appends and reads, nobody
    # trims, admin only carol.
    for who in (alice, bob, carol, dave):
        assert all(authz.allowed(who, 5, a) for a in ("append", "read"))
        assert not authz.allowed(who, 5, "trim")
    assert authz.allowed(carol, 5, "admin") and not authz.allowed(alice, 5, "admin")
    assert not any(authz.allowed(anon, 5, a) for a in ("append", "read", "trim", "admin"))
    # "private": its own ACL, the default for what it leaves out.
    assert authz.allowed(alice, 11, "append") and not authz.allowed(bob, 11, "append")
    assert authz.allowed(bob, 20, "read") and not authz.allowed(dave, 20, "read")
    meta_20 = 20 | (1 << 63)  # its metadata log: judged by the group's ACL too
    assert authz.allowed(bob, meta_20, "read") and not authz.allowed(dave, meta_20, "read")
    assert not authz.allowed(alice, 15, "trim")  # an empty list: nobody
    assert authz.allowed(carol, 15, "admin") and not authz.allowed(anon, 15, "read")
    # "public": anonymous readers too, appends still need a principal.
    assert authz.allowed(anon, 30, "read") and authz.allowed(dave, 30, "read")
    assert not authz.allowed(anon, 30, "append")
    # Nodes may do everything; logs not in the config fall back on the default ACL.
    assert all(authz.allowed(NODE_PRINCIPAL, 15, a) for a in ("append", "trim", "admin"))
    assert authz.allowed(alice, 999, "read") and not authz.allowed(anon, 999, "read")
    assert authz.allowed_cluster(carol, "admin") and not authz.allowed_cluster(bob, "admin")
    with pytest.raises(ValueError):
        Authorizer(Config.from_dict({k: v for k, v in secure_config().items()
                                     if k not in ("security", "logs")}))


def test_request_gate(tmp_path):
    gate = RequestGate(Authorizer(load(tmp_path, secure_config())))
    alice, bob = user("alice"), user("bob")
    append = Append(request_id=7, log_id=11, payload=b"x")
    assert gate.refusal(alice, append) is None
    refused = gate.refusal(bob, append)
    assert isinstance(refused, Error) and (refused.request_id, refused.status) == (7, E.ACCESS)
    assert refused.in_reply_to == Append.TYPE and "bob may not append log 11" in refused.message
    start = Start(read_stream_id=3, log_id=11, start_lsn=1, until_lsn=9, window_high=9,
                  filter_version=2)
    assert gate.refusal(bob, start) is None
    digest = Start(read_stream_id=4, log_id=11, start_lsn=1, until_lsn=9, window_high=9,
                   flags=int(StartFlag.DIGEST))
    assert gate.refusal(bob, digest).status == E.ACCESS  # recovery's streams: nodes only
    started = gate.refusal(ANONYMOUS_PRINCIPAL, start)
    assert isinstance(started, Started)
    assert (started.read_stream_id, started.filter_version, started.status) == (3, 2, E.ACCESS)
    assert gate.refusal(alice, Trim(request_id=1, log_id=11, lsn=5)).status == E.ACCESS
    assert gate.refusal(alice, Trim(request_id=1, log_id=1, lsn=5)).status == E.ACCESS
    # Metadata: a log's state for its readers (or admins), cluster-wide reads and every
    # change for admins only.
    states = GetMetadata(request_id=1, kind="log_states", log_ids=np.array([12], np.uint64))
    assert gate.refusal(bob, states) is None and gate.refusal(user("carol"), states) is None
    assert gate.refusal(user("dave"), states).status == E.ACCESS
    for kind in ("shard_statuses", "logs_config"):
        assert gate.refusal(user("dave"), GetMetadata(request_id=1, kind=kind)) is None
        assert gate.refusal(ANONYMOUS_PRINCIPAL, GetMetadata(request_id=1, kind=kind)) \
            is not None
    for kind in ("events", "rebuilding_set", "logs", "log_states"):  # no logs: all of them
        assert gate.refusal(alice, GetMetadata(request_id=1, kind=kind)).status == E.ACCESS
        assert gate.refusal(user("carol"), GetMetadata(request_id=1, kind=kind)) is None
    create = AdminRequest(request_id=1, action="create_log_group", name="evil", lo=500,
                          hi=600, attributes={"replication": 1})
    assert "alice may not admin the cluster" in gate.refusal(alice, create).message
    assert gate.refusal(user("carol"), create) is None
    assert gate.refusal(bob, GetTail(request_id=1, log_id=12)) is None
    avail = GetRecordAvailability(request_id=1, log_id=1, lo=1, hi=2)
    assert gate.refusal(alice, avail).status == E.ACCESS
    assert gate.refusal(user("carol"), avail) is None
    assert gate.refusal(alice, GetPartitions(request_id=1)).status == E.ACCESS
    # Checkpoints: read on every log named; reading them needs a principal.
    ckpt = SetCheckpoints(request_id=1, name="c", log_ids=np.array([1, 11], np.uint64),
                          lsns=np.array([1, 1], np.uint64),
                          batch_offsets=np.zeros(2, np.uint32))
    assert gate.refusal(bob, ckpt) is None
    assert gate.refusal(user("dave"), ckpt).status == E.ACCESS
    assert gate.refusal(ANONYMOUS_PRINCIPAL, GetCheckpoints(request_id=1, name="c")) \
        is not None
    # Open to everyone who passed HELLO; nothing before HELLO.
    for msg in (GetClusterView(request_id=1), Stop(read_stream_id=1)):
        assert gate.refusal(ANONYMOUS_PRINCIPAL, msg) is None
        assert gate.refusal(None, msg) is not None
    # Node requests: nodes only.
    seal = Seal(request_id=4, log_id=1, seal_epoch=2**64 - 1)
    heartbeat = Heartbeat(node_index=0, generation=1, time_ms=1)
    for msg in (seal, heartbeat, Store(request_id=5, log_id=1, epoch=1)):
        refusal = gate.refusal(alice, msg)
        assert refusal.status == E.ACCESS and "only nodes" in refusal.message
        assert gate.refusal(NODE_PRINCIPAL, msg) is None


def test_client_credentials_must_fit_the_cluster(tmp_path):
    cfg = load(tmp_path, secure_config())
    assert ConnectSecurity.for_client(cfg, token=ALICE_TOKEN).token == ALICE_TOKEN
    assert ConnectSecurity.for_client(cfg).ssl is None
    with pytest.raises(InvalidParamError, match="does not use TLS"):
        ConnectSecurity.for_client(cfg, tls_cert="c.pem")
    plain = copy.deepcopy(secure_config())
    del plain["security"]
    for g in plain["logs"]:
        g.pop("acl", None)
    with pytest.raises(InvalidParamError, match="no security section"):
        ConnectSecurity.for_client(load(tmp_path, plain), token=ALICE_TOKEN)
    node = ConnectSecurity.for_node(cfg)
    assert (node.ssl, node.token) == (None, NODE_SECRET)


# -- TLS material --------------------------------------------------------------------------
def tls_config(tmp_path: Path) -> dict:
    import trustme

    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    node = ca.issue_cert("127.0.0.1", common_name="logdevice-node")
    node.private_key_pem.write_to_path(str(tmp_path / "node.key"))
    node.cert_chain_pems[0].write_to_path(str(tmp_path / "node.pem"))
    d = secure_config()
    d["security"]["tls"] = {"cert": "node.pem", "key": "node.key", "ca": "ca.pem"}
    d["security"]["node_subjects"] = ["logdevice-node"]
    del d["security"]["node_secret_file"]
    return d


def test_node_access_loads_tls_and_tells_nodes_apart(tmp_path):
    from logdevice.node.transport.access import NodeAccess

    access = NodeAccess(load(tmp_path, tls_config(tmp_path)))
    assert access.server_ssl is not None and access.link.ssl is not None
    assert access.link.token == ""  # the node certificate speaks for the links
    node = {"subject": ((("commonName", "logdevice-node"),),)}
    assert access.dialed_a_node(node)
    assert not access.dialed_a_node({"subject": ((("commonName", "alice"),),)})
    assert not access.dialed_a_node(None)
    # A node certificate speaks for the nodes whose host it names, no other.
    node["subjectAltName"] = (("IP Address", "127.0.0.1"),)
    assert access.authenticate("node", "", node, 1)[:2] == (E.OK, NODE_PRINCIPAL)


def test_a_node_certificate_is_one_node(tmp_path):
    from logdevice.node.transport.access import NodeAccess

    d = tls_config(tmp_path)
    d["nodes"] = [{"index": 0, "host": "ld0.example", "port": 4440},
                  {"index": 1, "host": "ld1.example", "port": 4440}]
    d["epoch_store"] = "zookeeper:zk.example:2181/test"
    d["security"]["zookeeper"] = {"auth_file": "zk.auth"}
    access = NodeAccess(load(tmp_path, d))
    ld0 = {"subject": ((("commonName", "logdevice-node"),),),
           "subjectAltName": (("DNS", "ld0.example"),)}
    assert access.authenticate("node", "", ld0, 0)[:2] == (E.OK, NODE_PRINCIPAL)
    status, principal, why = access.authenticate("node", "", ld0, 1)
    assert (status, principal) == (E.ACCESS, None) and "N1 (ld1.example)" in why
    assert access.authenticate("node", "", ld0, 7)[0] == E.ACCESS  # not in the config


def test_tls_files_that_do_not_load_name_their_field(tmp_path):
    from logdevice.node.transport.access import NodeAccess

    d = tls_config(tmp_path)
    (tmp_path / "node.key").write_text("not a key")
    with pytest.raises(InvalidConfigError, match=r"cluster.json: security.tls.cert: cannot "
                                                 r"load .*node.pem / node.key"):
        NodeAccess(load(tmp_path, d))
    d["security"]["tls"]["ca"] = "missing.pem"
    with pytest.raises(InvalidConfigError, match=r"security.tls.ca: cannot load"):
        ConnectSecurity.for_client(load(tmp_path, d))
    cfg = load(tmp_path, tls_config(tmp_path))
    with pytest.raises(InvalidParamError, match="tls_cert nope.pem"):
        ConnectSecurity.for_client(cfg, tls_cert="nope.pem", tls_key="nope.key")
    with pytest.raises(InvalidParamError, match="tls_key without tls_cert"):
        ConnectSecurity.for_client(cfg, tls_key="k.pem")


def test_a_client_may_trust_its_own_ca_file_instead_of_the_configs(tmp_path):
    d = tls_config(tmp_path)
    (tmp_path / "mine").mkdir()
    (tmp_path / "ca.pem").rename(tmp_path / "mine" / "ca.pem")
    cfg = load(tmp_path, d)  # names ca.pem, which this machine does not have
    with pytest.raises(InvalidConfigError, match=r"security.tls.ca: cannot load"):
        ConnectSecurity.for_client(cfg)
    ctx = ConnectSecurity.for_client(cfg, tls_ca=str(tmp_path / "mine" / "ca.pem")).ssl
    assert ctx is not None and ctx.cert_store_stats()["x509_ca"] == 1
    with pytest.raises(InvalidParamError, match=r"tls_ca .*nope.pem: cannot load"):
        ConnectSecurity.for_client(cfg, tls_ca=str(tmp_path / "nope.pem"))
    plain = load(tmp_path, secure_config())  # security without TLS: a CA is of no use
    with pytest.raises(InvalidParamError, match="does not use TLS"):
        ConnectSecurity.for_client(plain, tls_ca=str(tmp_path / "mine" / "ca.pem"))
