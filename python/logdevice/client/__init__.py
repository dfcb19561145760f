"""The client: appends, BufferedWriter, readers, tail/head/trim/find_time/data_size.

The tree follows the paths a record takes:

- on top, the faces users call: ``client`` (``Client``, blocking and thread-safe) and
  ``async_client`` (``AsyncClient``, for asyncio services); ``context``
  (``ClientContext``: the loop, core, settings and log groups its readers and writers
  get); ``settings`` (``ClientSettings``);
- ``calls``: ``ClientCalls``, every call but appends written once: its checks, then a
  coroutine on the client's loop that ``Client`` waits for and ``AsyncClient`` awaits;
- ``core``: ``ClientCore``, the requests those coroutines are made of (routing, retries,
  the storage fan-out of queries);
- ``write/``: the way of an appended record: ``append_batcher`` (single appends gathered
  per log), ``append_slots`` (records in flight per log), ``send_order``, and the
  BufferedWriter (``buffered_writer``, ``batching``, ``futures``); ``payloads`` (what an
  append accepts);
- ``read/``: the way of a record read: ``reader`` (``Reader``, ``AsyncReader``), ``core``
  (their loop side, one read stream per log), ``queue`` (the bounded hand-off),
  ``batch`` (``ReaderBatch``), ``placement`` (nodesets), ``queries`` (``is_log_empty``,
  ``data_size``), and the consumers ``checkpointed_reader`` and ``group_reader``;
- ``net/``: how both reach the nodes: ``loop`` (the client's loop thread), ``connection``
  (one pipelined connection per node) with its ``keepalive``, ``routing`` (cluster view
  and sequencer choice), ``retry`` (what is retried, and when);
- the answers of many nodes made one (sans-I/O): ``combine``, ``summaries``; the
  cluster's metadata through the nodes: ``metadata``, ``log_groups``.
"""

from logdevice.client.async_client import AsyncClient
from logdevice.client.client import Client
from logdevice.client.combine import HeadAttributes, TailAttributes
from logdevice.client.context import ClientContext
from logdevice.client.read.batch import ReaderBatch
from logdevice.client.read.checkpointed_reader import CheckpointedReader
from logdevice.client.read.group_reader import GroupReader
from logdevice.client.read.reader import AsyncReader, Reader
from logdevice.client.settings import ClientSettings
from logdevice.client.write.buffered_writer import MODES, BufferedWriter
from logdevice.client.write.futures import BatchFuture, PayloadFuture

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
