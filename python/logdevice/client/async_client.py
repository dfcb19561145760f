"""``AsyncClient``: the client for asyncio services.

    async with ld.AsyncClient(config_path) as client:
        lsn = await client.append(1, b"event")
        tail = await client.get_tail_lsn(1)
        reader = client.create_reader()          # an AsyncReader
        await reader.start_reading(1)

A ``Client`` does its network work on a loop thread of its own; ``AsyncClient`` awaits
each call's coroutine there from the caller's event loop (``ClientCalls.wait``: the loop
thread's future, through ``asyncio.wrap_future``), so no thread of the caller's side
waits for it, however many calls are in flight.  The checks and coroutines are the
``Client``'s own (``client.calls``), and so are the settings, timeouts and errors.
Bad input raises when the call is awaited, before anything is sent.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Any, Unpack

from logdevice.client.calls import Call
from logdevice.client.client import Client
from logdevice.client.combine import HeadAttributes, TailAttributes
from logdevice.client.read.core import ReaderOptionKwargs
from logdevice.client.read.reader import AsyncReader
from logdevice.client.settings import ClientSettingKwargs
from logdevice.config import Config

__all__ = ["AsyncClient"]


class AsyncClient:
    """Awaitable appends and queries over a ``Client`` (same arguments: the config, the
    timeout of every call, and the client settings, ``ClientSettingKwargs``)."""

    def __init__(self, config_path: str | os.PathLike[str] | Config, timeout: float = 10.0,
                 **settings: Unpack[ClientSettingKwargs]) -> None:
        self.client = Client(config_path, timeout=timeout, **settings)

    async def _call(self, log_id: Any, checked: Callable[[], Call]) -> Any:
        """Check (``checked`` makes the call), then await the call on the client's loop.
        A log not in the config makes the check read the runtime log groups, a blocking
        read: that check runs on the log groups' own thread, never on the caller's loop."""
        ctx = self.client.context
        if ctx.knows(log_id):
            call = checked()
        else:
            call = await asyncio.wrap_future(ctx.log_groups.run_blocking(checked))
        return await self.client.calls.wait(call)

    async def append(self, log_id: int, payload: Any, *, timeout: float | None = None) -> int:
        """Append one record; its LSN once acknowledged (errors as ``Client.append``)."""
        client = self.client
        if not client.context.knows(log_id):  # see _call
            await asyncio.wrap_future(client.context.log_groups.run_blocking(
                lambda: client.context.log_group(log_id)))
        return await asyncio.wrap_future(client.append_async(log_id, payload, timeout=timeout))

    async def get_tail_lsn(self, log_id: int, *, timeout: float | None = None) -> int:
        return (await self.get_tail_attributes(log_id, timeout=timeout)
                ).last_released_real_lsn

    async def get_tail_attributes(self, log_id: int, *,
                                  timeout: float | None = None) -> TailAttributes:
        calls = self.client.calls
        return await self._call(log_id, lambda: calls.tail_attributes(log_id, timeout))  # type: ignore[no-any-return]

    async def get_head_attributes(self, log_id: int, *,
                                  timeout: float | None = None) -> HeadAttributes:
        calls = self.client.calls
        return await self._call(log_id, lambda: calls.head_attributes(log_id, timeout))  # type: ignore[no-any-return]

    async def trim(self, log_id: int, lsn: int, *, timeout: float | None = None) -> None:
        calls = self.client.calls
        await self._call(log_id, lambda: calls.trim(log_id, lsn, False, timeout))

    async def find_time(self, log_id: int, ms: float, *, timeout: float | None = None) -> int:
        calls = self.client.calls
        return await self._call(log_id, lambda: calls.find_time(log_id, ms, timeout))  # type: ignore[no-any-return]

    async def is_log_empty(self, log_id: int, *, timeout: float | None = None) -> bool:
        calls = self.client.calls
        return await self._call(log_id, lambda: calls.is_log_empty(log_id, timeout))  # type: ignore[no-any-return]

    def create_reader(self, max_logs: int = 1, **options: Unpack[ReaderOptionKwargs]
                      ) -> AsyncReader:
        """An ``AsyncReader`` of up to ``max_logs`` logs at once; ``**options`` as for
        ``Client.create_reader`` (an unknown one: ``InvalidParamError`` listing them)."""
        return self.client.create_async_reader(max_logs, **options)

    async def close(self) -> None:
        """Close the client (as ``Client.close``: it waits for the loop thread to stop,
        so it runs in a worker thread of the caller's loop)."""
        await asyncio.to_thread(self.client.close)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
