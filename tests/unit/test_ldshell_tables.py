"""ldshell's node-answered tables without a cluster: the ``readers`` and ``recoveries``
tables from table replies as they come off the wire, and nodes that do not answer."""

from __future__ import annotations

import io
import socket

import pytest

from logdevice.config import make_local_config
from logdevice.errors import E
from logdevice.node.read_streams import ReadStreamRow
from logdevice.node.recovery_driver import RecoveryRow
from logdevice.protocol import (
    GetReadStreams,
    ReadStreamList,
    RecoveryList,
    decode_frame,
    encode_frame,
    table_columns,
    table_reply,
)
from logdevice.tools.ldshell import tables
from logdevice.tools.ldshell.context import ShellContext

pa = pytest.importorskip("pyarrow")

LSN_MAX = 2**64 - 1


def stream(log_id: int, records: int, peer: str = "client") -> ReadStreamRow:
    return ReadStreamRow(7, log_id, 12, peer, "127.0.0.1:5000", 1, LSN_MAX, 11, 10, 500, 10,
                         1, "scd", "release", (2,), records, records * 100, 1,
                         1_700_000_000_000, 250)


def recovery(epoch: int, state: str = "done") -> RecoveryRow:
    return RecoveryRow(3, epoch, 4, 1, state, "OK" if state == "done" else "", "",
                       (0, 1, 2), (0, 1), (0, 1), (epoch << 32) | 5, 2, 1,
                       (epoch << 32) | 9, 0, 4 if state == "done" else 0, 1_700_000_000_000,
                       40)


def wire(msg):
    return decode_frame(encode_frame(msg))


class FakeContext:
    """Answers ``ask_nodes`` with prepared replies."""

    def __init__(self, replies):
        self.replies = replies

    def ask_nodes(self, make, nodes=None):
        return self.replies

    @property
    def config(self):
        return make_local_config(3, 2, root="/nonexistent", ports=[1, 2, 3])


def test_readers_table_from_the_nodes_replies():
    replies = {2: wire(table_reply(ReadStreamList, 1, 2, [stream(5, 30)])),
               0: wire(table_reply(ReadStreamList, 1, 0, [stream(5, 10),
                                                          stream(6, 0, peer="N1")])),
               1: wire(table_reply(ReadStreamList, 1, 1, []))}
    t = tables.readers(FakeContext(replies), tables.TableOptions())
    assert t.column_names == ["node", *table_columns(ReadStreamList)]
    rows = t.to_pylist()
    assert [(r["node"], r["log_id"], r["peer"], r["records_sent"]) for r in rows] == [
        (0, 5, "client", 10), (0, 6, "N1", 0), (2, 5, "client", 30)]
    assert rows[0]["until_lsn"] == LSN_MAX and rows[0]["known_down"] == [2]
    assert t.schema.field("log_id").type == pa.int64()


def test_recoveries_table_from_the_nodes_replies():
    reply = wire(table_reply(RecoveryList, 1, 1, [recovery(2), recovery(3, "mutating")]))
    t = tables.recoveries(FakeContext({1: reply}), tables.TableOptions())
    assert t.column_names == ["node", *table_columns(RecoveryList)]
    rows = t.to_pylist()
    assert [(r["node"], r["epoch"], r["state"], r["outcome"], r["last_clean_epoch"])
            for r in rows] == [(1, 2, "done", "OK", 4), (1, 3, "mutating", "", 0)]
    assert rows[0]["sealed"] == [0, 1] and rows[0]["bridge"] == (2 << 32) | 9


def test_empty_tables_keep_their_columns():
    for name, cls in (("readers", ReadStreamList), ("recoveries", RecoveryList)):
        t = tables.build(name, FakeContext({}), tables.TableOptions())
        assert t.num_rows == 0 and t.column_names == ["node", *table_columns(cls)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_nodes_that_do_not_answer_are_left_out_with_a_warning(tmp_path):
    cfg = make_local_config(2, 2, logs=[1], root=tmp_path,
                            ports=[free_port(), free_port()])
    path = cfg.dump(tmp_path / "cluster.json")
    err = io.StringIO()
    ctx = ShellContext(str(path), timeout=2.0, err=err)
    t = tables.build("recoveries", ctx, tables.TableOptions())
    assert t.num_rows == 0
    groups, *warnings = err.getvalue().splitlines()
    # No node can say what the runtime log groups are: the file's alone, said so.
    assert "runtime log groups left out: TIMEDOUT" in groups
    assert len(warnings) == 2 and all("did not answer GetRecoveries" in w for w in warnings)
    assert {w.split()[1] for w in warnings} == {"N0", "N1"}
    ctx.close()


def test_a_refusal_is_a_warning_too(monkeypatch, tmp_path):
    cfg = make_local_config(1, 1, logs=[1], root=tmp_path, ports=[free_port()])
    err = io.StringIO()
    ctx = ShellContext(str(cfg.dump(tmp_path / "cluster.json")), timeout=2.0, err=err)
    assert ctx.config.nodes  # read (the file's groups alone: no node runs) before the stub

    async def refuse(self, msg, deadline=None):
        return ReadStreamList(request_id=msg.request_id, status=E.DISABLED, node_index=0)

    monkeypatch.setattr("logdevice.client.connection.Connection.request", refuse)
    assert ctx.ask_nodes(lambda: GetReadStreams(request_id=0)) == {}
    assert "N0 refused GetReadStreams: DISABLED" in err.getvalue()
