"""``GroupReader``: one member of a consumer group.

    g = client.create_group_reader("indexers", logs=range(1, 17))
    while running:
        for item in g.read(1000, timeout=1.0):
            process(item)
        g.commit()
    g.close()                                  # leaves the group: its logs move at once

The members of a group share its logs: each log is read by one member at a time.  A
member heartbeats (a thread, every third of ``session_timeout``); members that join,
leave or go silent past ``session_timeout`` make the logs move (the rules are in
``logdevice.epochstore.groups``).  The reading position travels with the group's
checkpoints (a ``CheckpointedReader`` named after the group): a log that moves to another
member is read from the last commit, so a member's death loses nothing and replays at
most what it had not committed.

Rebalancing happens in ``read``, on the caller's thread: a log the member lost is
committed where ``read`` got to and then dropped; a log it gained starts from the group's
checkpoint of the moment.  A member that cannot heartbeat for a whole session stops
reading everything (the others may have its logs by then).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Protocol, Unpack

from logdevice import validate
from logdevice.client.read.checkpointed_reader import CheckpointedReader, CheckpointStore, Position
from logdevice.client.read.core import ReaderOptionKwargs
from logdevice.client.read.reader import Reader
from logdevice.errors import InvalidParamError, LogDeviceError
from logdevice.records import DataRecord, GapRecord

__all__ = ["GroupReader", "GroupClient"]


class GroupClient(CheckpointStore, Protocol):
    """What a group member needs of its ``Client``: readers, the group's heartbeats and
    its checkpoints."""

    def create_reader(self, max_logs: int = 1, **options: Unpack[ReaderOptionKwargs]
                      ) -> Reader: ...

    def group_heartbeat(self, group: str, member: str, logs: Sequence[int], *,
                        session_timeout: float = 10.0, leave: bool = False,
                        timeout: float | None = None) -> tuple[int, list[int]]: ...


class GroupReader:
    """A member of consumer group ``group`` reading its share of ``logs``.

    Parameters
    ----------
    client : GroupClient
        The ``Client`` to read through.
    group : str
    logs : sequence of int
        Every log the group reads (the same list for every member).
    member : str, optional
        This member's name (default: host, process id and a random part).
    session_timeout : float
        Seconds of silence after which the member counts as gone.
    **options : ReaderOptionKwargs
        Reader options (see ``Client.create_reader``).
    """

    def __init__(self, client: GroupClient, group: str, logs: Sequence[int], *,
                 member: str | None = None, session_timeout: float = 10.0,
                 **options: Unpack[ReaderOptionKwargs]) -> None:
        self.logs = sorted({int(x) for x in logs})
        if not self.logs:
            raise InvalidParamError(message="a group reads at least one log")
        session_timeout = validate.timeout(session_timeout, "session_timeout", positive=True)
        self.group = group
        self.member = member or (f"{socket.gethostname()}-{os.getpid()}-"
                                 f"{secrets.token_hex(4)}")
        self.session_timeout = session_timeout
        self._client = client
        self._reader = CheckpointedReader(
            client, group, client.create_reader(max_logs=len(self.logs), **options))
        self._reading: set[int] = set()
        self._lock = threading.Lock()
        self._changed = threading.Event()
        self._stop = threading.Event()
        self._assigned: set[int] = set()
        self._last_ok = time.monotonic()
        self.generation = 0
        self._beat()  # join now: fail here if the group or its logs are wrong
        self._thread = threading.Thread(target=self._heartbeats, daemon=True,
                                        name=f"group-{group}-{self.member}")
        self._thread.start()

    # ------------------------------------------------------------------ membership

    def _beat(self, leave: bool = False) -> None:
        generation, mine = self._client.group_heartbeat(
            self.group, self.member, self.logs, session_timeout=self.session_timeout,
            leave=leave, timeout=self.session_timeout / 3)
        with self._lock:
            self._last_ok = time.monotonic()
            self.generation = generation
            if set(mine) != self._assigned:
                self._assigned = set(mine)
                self._changed.set()

    def _heartbeats(self) -> None:
        while not self._stop.wait(self.session_timeout / 3):
            try:
                self._beat()
            except LogDeviceError:
                with self._lock:
                    # Our session is over as far as the group knows: let go.
                    if time.monotonic() - self._last_ok > self.session_timeout \
                            and self._assigned:
                        self._assigned = set()
                        self._changed.set()

    @property
    def assigned(self) -> frozenset[int]:
        """The logs this member reads now (as of its last heartbeat)."""
        with self._lock:
            return frozenset(self._assigned)

    # ------------------------------------------------------------------ reading

    def _rebalance(self) -> None:
        if not self._changed.is_set():
            return
        self._changed.clear()
        with self._lock:
            target = set(self._assigned)
        lost = sorted(self._reading - target)
        if lost:
            done = {log: pos for log in lost if (pos := self._reader.position(log))}
            if done:
                self._reader.commit(done)
            for log in lost:
                self._reader.stop_reading(log)
                self._reading.discard(log)
        for n, log in enumerate(sorted(target - self._reading)):
            self._reader.start_reading(log, refresh=n == 0)
            self._reading.add(log)

    def read(self, count: int, timeout: float | None = None) -> list[DataRecord | GapRecord]:
        """Records and gaps of this member's logs (see ``Reader.read``).  With no log
        assigned, waits (up to ``timeout``, or a heartbeat) for one."""
        self._rebalance()
        if not self._reading:
            self._changed.wait(self.session_timeout / 3 if timeout is None else timeout)
            self._rebalance()
            if not self._reading:
                return []
        return self._reader.read(count, timeout)

    def __iter__(self) -> Iterator[DataRecord | GapRecord]:
        while not self._stop.is_set():
            yield from self.read(4096, timeout=1.0)

    def commit(self) -> dict[int, Position]:
        """Commit where ``read`` got to in this member's logs (the group's checkpoints)."""
        return self._reader.commit()

    # ------------------------------------------------------------------ lifetime

    def close(self, leave: bool = True) -> None:
        """Stop heartbeating and reading; ``leave`` tells the group at once (else the
        member's logs move once its session times out)."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join(self.session_timeout)
        if leave:
            with contextlib.suppress(LogDeviceError):  # else the session runs out
                self._beat(leave=True)
        self._reader.close()

    def __enter__(self) -> GroupReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
