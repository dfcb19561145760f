"""The client: appends, BufferedWriter, readers, tail/head/trim/find_time/data_size.

- ``client``: ``Client``, the synchronous thread-safe facade users call;
  ``async_client``: ``AsyncClient``, its awaitable flavour for asyncio services.
- ``context``: ``ClientContext``, what a client's readers and writers work with (its
  loop, core, settings, log groups, shared reader state), handed to them by the client.
- ``checkpointed_reader``, ``group_reader``: consumers that resume from checkpoints, and
  consumer groups sharing logs.
- ``calls``: every call of ``Client`` and ``AsyncClient`` but appends, written once as
  checks and a coroutine on the client loop.
- ``core``: the coroutines on the client loop (routing, retries, storage fan-out).
- ``connection``: one pipelined connection to one node.
- ``loop``: the client's event loop thread.
- ``routing``: cluster view, suspects and sequencer routing (sans-I/O).
- ``combine``: per-node answers into one (sans-I/O).
- ``buffered_writer``, ``batching``, ``futures``: the BufferedWriter; ``payloads``: what
  an append accepts as a payload.
- ``reader`` (``Reader``, ``AsyncReader``), ``reader_core`` (their loop side),
  ``reader_queue`` (the bounded hand-off), ``reader_batch`` (``ReaderBatch``, columns),
  ``reader_placement`` (nodesets from the epoch store), ``reader_queries``
  (``is_log_empty``, ``data_size``).
- ``retry``, ``settings``: retry rules and client settings.
"""

from logdevice.client.async_client import AsyncClient
from logdevice.client.buffered_writer import MODES, BufferedWriter
from logdevice.client.checkpointed_reader import CheckpointedReader
from logdevice.client.client import Client
from logdevice.client.combine import HeadAttributes, TailAttributes
from logdevice.client.context import ClientContext
from logdevice.client.futures import BatchFuture, PayloadFuture
from logdevice.client.group_reader import GroupReader
from logdevice.client.reader import AsyncReader, Reader
from logdevice.client.reader_batch import ReaderBatch
from logdevice.client.settings import ClientSettings

__all__ = [
    "Client",
    "AsyncClient",
    "ClientContext",
    "CheckpointedReader",
    "GroupReader",
    "ClientSettings",
    "BufferedWriter",
    "MODES",
    "PayloadFuture",
    "BatchFuture",
    "TailAttributes",
    "HeadAttributes",
    "Reader",
    "AsyncReader",
    "ReaderBatch",
]
