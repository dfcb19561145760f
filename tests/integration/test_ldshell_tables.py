"""ldshell's node-answered tables against nodes that do not answer: ports nobody listens
on (the tables from the nodes' replies themselves are in tests/unit/test_ldshell_tables.py)."""

from __future__ import annotations

import io

import pytest

from logdevice.config import make_local_config
from logdevice.errors import E
from logdevice.local_cluster import free_ports
from logdevice.protocol import GetReadStreams, ReadStreamList
from logdevice.tools.ldshell import tables
from logdevice.tools.ldshell.context import ShellContext

pytest.importorskip("pyarrow")


def test_nodes_that_do_not_answer_are_left_out_with_a_warning(tmp_path):
    cfg = make_local_config(2, 2, logs=[1], root=tmp_path,
                            ports=free_ports(2))
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
    cfg = make_local_config(1, 1, logs=[1], root=tmp_path, ports=free_ports(1))
    err = io.StringIO()
    ctx = ShellContext(str(cfg.dump(tmp_path / "cluster.json")), timeout=2.0, err=err)
    assert ctx.config.nodes  # read (the file's groups alone: no node runs) before the stub

    async def refuse(self, msg, deadline=None):
        return ReadStreamList(request_id=msg.request_id, status=E.DISABLED, node_index=0)

    monkeypatch.setattr("logdevice.client.net.connection.Connection.request", refuse)
    assert ctx.ask_nodes(lambda: GetReadStreams(request_id=0)) == {}
    assert "N0 refused GetReadStreams: DISABLED" in err.getvalue()
