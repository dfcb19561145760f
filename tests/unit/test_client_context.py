"""``ClientContext``: what readers and writers get instead of the client's insides.  A
client makes one and hands it to what it creates; readers and writers built directly from
a ``Client`` (the public constructors) find it there.  Closing the client closes them; a
reader or writer keeps the context (so the loop) alive, not the client.  No cluster: the
config's ports are closed and nothing here connects."""

from __future__ import annotations

import asyncio
import gc
import weakref

import pytest

from logdevice.client import AsyncReader, BufferedWriter, Client, ClientContext, Reader
from logdevice.errors import E, InvalidParamError, LogDeviceError, NotFoundError


def test_the_client_hands_its_context_to_what_it_creates(client):
    ctx = client.context
    assert isinstance(ctx, ClientContext)
    assert ctx.client is client and ctx.config is client.config
    assert (ctx.settings, ctx.timeout, ctx.loop, ctx.core) == (
        client.settings, client.timeout, client.calls.context.loop, client.calls.context.core)
    # one of each shared reader part per client
    assert ctx.placements() is ctx.placements() and ctx.read_router() is ctx.read_router()
    w = client.create_buffered_writer()
    try:
        assert w.client is client
    finally:
        w.close()
    client.timeout = 3.0
    assert ctx.timeout == 3.0


@pytest.mark.parametrize("via", ["client", "context"])
def test_public_constructors_take_a_client_or_its_context(client, via):
    source = client if via == "client" else client.context
    with Reader(source, 2, buffer_size=32) as r:
        assert (r.max_logs, r.options.buffer_size) == (2, 32)
        assert r.read(5, timeout=0) == []
    w = BufferedWriter(source, time_trigger=None)
    try:
        assert w.client is client
        with pytest.raises(NotFoundError):
            w.append(99, b"x")
    finally:
        w.close()

    async def main() -> None:
        r = AsyncReader(source)
        assert await r.read(1, timeout=0) == []
        await r.aclose()

    asyncio.run(main())


def test_log_group_lookup_and_open_check(client):
    ctx = client.context
    assert ctx.log_group(1).name == client.config.log_group(1).name
    with pytest.raises(InvalidParamError, match="log id must be an int"):
        ctx.log_group("1")  # type: ignore[arg-type]
    with pytest.raises(NotFoundError):
        ctx.log_group(99)
    ctx.check_open()
    client.close()
    assert ctx.closed
    with pytest.raises(LogDeviceError) as ei:
        ctx.check_open()
    assert ei.value.status == E.SHUTDOWN
    assert ctx.close() is False  # once


def test_closing_the_client_closes_readers_and_fails_writers(config):
    c = Client(config, timeout=1.0)
    r = c.create_reader()
    direct = Reader(c)
    w = c.create_buffered_writer(time_trigger=None)  # nothing sent before the close
    fut = w.append(1, b"pending")
    c.close()
    assert fut.exception(5).status == E.SHUTDOWN
    for reader in (r, direct):
        with pytest.raises(LogDeviceError) as ei:
            reader.read(1, timeout=0)
        assert ei.value.status == E.SHUTDOWN
    with pytest.raises(LogDeviceError):
        c.create_reader()


def test_a_reader_keeps_the_loop_not_the_client(config):
    c = Client(config, timeout=1.0)
    thread = c.context.loop.thread
    r = c.create_reader()
    client_ref = weakref.ref(c)
    del c
    gc.collect()
    assert client_ref() is None and r.read(1, timeout=0) == []
    assert thread.is_alive()  # the reader still has its context
    reader_ref = weakref.ref(r)
    del r
    gc.collect()
    assert reader_ref() is None  # the context's close hook does not hold it
    thread.join(5)
    assert not thread.is_alive()
