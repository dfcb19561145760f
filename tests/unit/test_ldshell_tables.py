"""ldshell's node-answered tables without a cluster: the ``readers`` and ``recoveries``
tables from table replies as they come off the wire (nodes that do not answer:
tests/integration/test_ldshell_tables.py)."""

from __future__ import annotations

import pytest

from logdevice.config import make_local_config
from logdevice.node.roles.read_streams_role import ReadStreamRow
from logdevice.node.roles.recovery_driver import RecoveryRow
from logdevice.protocol import (
    ReadStreamList,
    RecoveryList,
    decode_frame,
    encode_frame,
    table_columns,
    table_reply,
)
from logdevice.tools.ldshell import tables

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
