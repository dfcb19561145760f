"""Actions the write-path state machines ask their driver (the node's asyncio layer) to do.

They are plain ``NamedTuple``s: cheap to build (several per append), comparable in tests,
and usable in ``match`` statements (``case SendStore(node=n, lsn=lsn): ...``).  What each
asks of the node:

``SendStore``  send a STORE for one record to one storage node.  The node attaches the
    payload it kept under ``request_id``, and sends the STOREs of one loop turn to one
    node in one frame.
``StoreWave`` the same for every member of ``copyset`` at once: what a sequencer built
    with ``store_waves=True`` emits instead of one ``SendStore`` per member.
``AckAppend``  answer the client: the record is stored on R nodes (APPENDED, status OK).
    The node may drop the payload it kept for ``request_id``.
``Reject``     answer the client with an error.  ``lsn`` is ``LSN_INVALID`` when the append
    never got an LSN (window full, too big, no copyset possible); otherwise the append was
    abandoned after getting one (sequencer deactivated), so copies may exist.  Drop the
    payload.
``Release``    broadcast RELEASE(log_id, lsn) to ``nodes``: every record of the log up to
    ``lsn`` is fully replicated and may be delivered to readers.
``Reactivate`` this sequencer cannot issue more LSNs (its epoch is exhausted): get a new
    epoch from the epoch store and start a new ``Sequencer`` for the log.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import NamedTuple

from logdevice.errors import E


class SendStore(NamedTuple):
    node: int
    log_id: int
    lsn: int
    wave: int
    copyset: tuple[int, ...]  # the same tuple object for every member of one wave
    timestamp: int  # ms since the Unix epoch, stamped by the sequencer
    flags: int  # the append's record flags, passed through unchanged
    lng: int  # last known good LSN of the epoch when the STORE was sent
    request_id: Hashable


class StoreWave(NamedTuple):
    log_id: int
    lsn: int
    wave: int
    copyset: tuple[int, ...]  # every member gets the STORE
    timestamp: int
    flags: int
    lng: int
    request_id: Hashable


class AckAppend(NamedTuple):
    request_id: Hashable
    log_id: int
    lsn: int
    timestamp: int


class Reject(NamedTuple):
    request_id: Hashable
    log_id: int
    status: E
    lsn: int = 0


class Release(NamedTuple):
    log_id: int
    lsn: int
    nodes: tuple[int, ...]


class Reactivate(NamedTuple):
    log_id: int
    epoch: int  # the exhausted epoch; the next sequencer needs a bigger one
    status: E


Action = SendStore | StoreWave | AckAppend | Reject | Release | Reactivate

