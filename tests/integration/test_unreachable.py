"""With every node unreachable (a config whose loopback ports nobody listens on), appends,
tail queries and reads fail fast with CONNFAILED (``ConnectionFailedError``), after the
client's ``unreachable_timeout`` rather than at their own, much longer, timeout.  A read
does not even start: no node can give the log's metadata, and the reader does not guess
where to read.  No cluster is needed: nothing answers."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest

import logdevice as ld
from logdevice.config import make_local_config
from logdevice.local_cluster import free_ports

CALL_TIMEOUT = 30.0  # what a call would wait without the unreachable rule
SLACK = 3.0  # a loaded machine: the bound is the setting plus this


@pytest.fixture
def config(tmp_path):
    # Ports that were free a moment ago and that nobody listens on: connections are refused.
    return make_local_config(3, 2, range(1, 5), root=tmp_path, ports=free_ports(3))


def timed_failure(fn: Callable[[], Any]) -> tuple[float, ld.ConnectionFailedError]:
    t0 = time.monotonic()
    with pytest.raises(ld.ConnectionFailedError) as ei:
        fn()
    return time.monotonic() - t0, ei.value


@pytest.mark.parametrize("unreachable", [None, 0.5])
def test_append_tail_and_read_fail_fast_with_connfailed(config, unreachable):
    settings = {} if unreachable is None else {"unreachable_timeout": unreachable}
    bound = (2.0 if unreachable is None else unreachable) + SLACK  # 2 s: the default

    def read_first() -> None:
        with ld.Client(config, timeout=CALL_TIMEOUT, **settings) as c, c.create_reader() as r:
            r.start_reading(1)  # no node can say where the log's records are
            raise AssertionError("start_reading returned")

    def append() -> None:
        with ld.Client(config, timeout=CALL_TIMEOUT, **settings) as c:
            c.append(1, b"x")

    def tail() -> None:
        with ld.Client(config, timeout=CALL_TIMEOUT, **settings) as c:
            c.get_tail_lsn(1)

    for name, fn in (("read", read_first), ("append", append), ("get_tail_lsn", tail)):
        took, exc = timed_failure(fn)
        assert took < bound, (name, took)
        assert exc.status == ld.E.CONNFAILED
        assert "reachable" in exc.message and "refused" in exc.message, exc.message
        if unreachable is not None:  # the setting is what the calls wait, not less
            assert took >= unreachable * 0.9, (name, took)


def test_a_read_that_cannot_start_leaves_the_reader_usable(config):
    with ld.Client(config, timeout=CALL_TIMEOUT, unreachable_timeout=0.3) as c, \
            c.create_reader(max_logs=2) as r:
        took, exc = timed_failure(lambda: r.start_reading(1))
        assert took < 0.3 + SLACK
        assert "log 1: cannot read its metadata" in exc.message, exc.message
        assert not r.is_reading(1)
        assert r.read(10, timeout=0) == []  # nothing is queued
        took, exc = timed_failure(lambda: r.start_reading(2))  # the reader still works
        assert "log 2: cannot read its metadata" in exc.message


def test_async_reader_fails_fast_too(config):
    async def main() -> tuple[float, ld.ConnectionFailedError]:
        async with ld.AsyncClient(config, timeout=CALL_TIMEOUT, unreachable_timeout=0.3) as c:
            r = c.create_reader()
            t0 = time.monotonic()
            try:
                with pytest.raises(ld.ConnectionFailedError) as ei:
                    await r.start_reading(1)
            finally:
                await r.aclose()
            return time.monotonic() - t0, ei.value

    took, exc = asyncio.run(main())
    assert took < 0.3 + SLACK and exc.status == ld.E.CONNFAILED
