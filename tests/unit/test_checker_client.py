"""The checker's client against a node's real answers (``availability_page`` over a LogsDB
in a tmp dir, through the wire encoding), without sockets."""

from __future__ import annotations

import asyncio

import numpy as np

from logdevice.checker.client import AvailabilityClient
from logdevice.config import make_local_config
from logdevice.errors import E
from logdevice.node.roles.availability_role import availability_page
from logdevice.protocol import RecordAvailability, decode_frame, encode_frame
from logdevice.storage.logsdb import LogsDB


class NodeConn:
    """Answers GET_RECORD_AVAILABILITY from ``db`` as the node would."""

    def __init__(self, db: LogsDB) -> None:
        self.db = db

    async def request(self, msg, deadline=None):
        fields = availability_page(self.db, msg.log_id, msg.lo, msg.hi,
                                   msg.max_records or 1 << 16)
        fields.pop("records")
        reply = RecordAvailability(request_id=msg.request_id, status=E.OK,
                                   log_id=msg.log_id, node_index=0, lo=msg.lo, **fields)
        return decode_frame(encode_frame(reply))


def test_a_node_holding_nothing_of_a_log_answers_an_empty_holding(tmp_path):
    cfg = make_local_config(2, 2, logs=[1, 2], root=tmp_path, ports=[1, 2])
    with LogsDB(tmp_path / "db") as db:
        db.write_records(1, [5, 6], [1, 2], [0, 0], [[0, 1], [0, 1]], b"ab", [0, 1, 2])
        client = AvailabilityClient(cfg)
        client.conns[0] = NodeConn(db)  # type: ignore[assignment]
        empty = asyncio.run(client.fetch_log(0, 2))
        assert len(empty.holdings.lsns) == 0
        held = asyncio.run(client.fetch_log(0, 1))
        assert held.holdings.lsns.tolist() == [5, 6]
        assert np.array_equal(held.holdings.copysets, [[0, 1], [0, 1]])
