"""The node's LogsConfig poller without sockets: a fresh read starts after it was asked
for (a read already in flight may predate the change), many requests meanwhile share one
more read, and a change reaches the node as one new config."""

import asyncio
import threading

from logdevice.config import Config, make_local_config
from logdevice.logs_config_store import StoreLogsConfig
from logdevice.node.roles.logs_config_role import LogsConfigRole
from tests.waiting import async_wait_until


class FakeNode:
    """What the role uses of a node: its loop, config, index and ``set_config``."""

    def __init__(self, config, loop):
        self.config, self.loop, self.index = config, loop, 0
        self.adopted = []

    def set_config(self, config):
        self.config = config
        self.adopted.append(config)


def test_fresh_reads_start_after_the_request_and_are_shared(tmp_path):
    config = make_local_config(3, 2, logs=[1], root=tmp_path, ports=[1, 2, 3])
    config = Config.load(config.dump(tmp_path / "cluster.json"))
    writer = StoreLogsConfig(config)
    writer.create("g", 100, 109, {"replication": 2})  # creates the store too

    async def run():
        node = FakeNode(config, asyncio.get_running_loop())
        role = LogsConfigRole(node)
        polls = 0
        gate = threading.Event()
        real_poll = role.source.poll

        def slow_poll():
            nonlocal polls
            polls += 1
            gate.wait(5)
            return real_poll()

        role.source.poll = slow_poll
        first = role.fresh()  # a read in flight...
        await async_wait_until(lambda: polls == 1, 5, message="the first read never started")
        later = [role.fresh() for _ in range(10)]  # ... those asked meanwhile share one more
        assert all(f is later[0] for f in later) and later[0] is not first
        gate.set()
        await asyncio.wait_for(asyncio.gather(first, *later), 10)
        assert polls == 2
        assert [g.name for g in node.config.runtime_logs] == ["g"] and len(node.adopted) == 1
        called = asyncio.Event()
        role.after_fresh_read(called.set)
        await asyncio.wait_for(called.wait(), 10)
        assert polls == 3 and len(node.adopted) == 1  # nothing changed: nothing adopted
        role.close()

    asyncio.run(run())
    writer.close()
