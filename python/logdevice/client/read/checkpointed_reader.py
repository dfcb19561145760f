"""``CheckpointedReader``: a reader that resumes where its consumer left off.

    r = client.create_checkpointed_reader("billing")
    r.start_reading(log_id)              # after the last committed checkpoint, or the start
    for item in r.read(1000, timeout=1):
        process(item)
    r.commit()                           # durably: what read() handed out is processed

A consumer is named; its checkpoints (per log, the last record it processed: an LSN and
the batch offset within a BufferedWriter blob) live in the cluster's epoch store, so they
survive the client and the cluster restarting.  ``commit`` stores the position of the last
item ``read`` returned for every log read since; ``commit(positions)`` stores explicit
ones (e.g. to rewind); ``commit_async`` does it without blocking.

Resuming reads each log again from its checkpoint's LSN and skips what is at or before
the checkpoint, so a consumer that commits after processing sees every record at least
once and, between commits, nothing twice.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Iterator, Mapping
from typing import Protocol

from logdevice.client.read.reader import Reader
from logdevice.errors import InvalidParamError
from logdevice.records import LSN_MAX, LSN_OLDEST, DataRecord, GapRecord

__all__ = ["CheckpointedReader", "CheckpointStore"]

#: Batch offset meaning "everything at this LSN was processed" (a gap, or a whole record).
ALL = 0xFFFFFFFF
Position = tuple[int, int]


class CheckpointStore(Protocol):
    """Where a consumer's checkpoints are kept: a ``Client`` (its ``load_checkpoints``
    and ``store_checkpoints``)."""

    def load_checkpoints(self, name: str, *,
                         timeout: float | None = None) -> dict[int, Position]: ...

    def store_checkpoints(self, name: str, positions: Mapping[int, Position], *,
                          timeout: float | None = None) -> dict[int, Position]: ...


def _position(item: DataRecord | GapRecord) -> Position:
    if isinstance(item, DataRecord):
        return item.lsn, item.batch_offset
    return item.hi, ALL


class CheckpointedReader:
    """A ``Reader`` of consumer ``name`` with checkpoints in the cluster.

    Parameters
    ----------
    client : CheckpointStore
        The ``Client`` whose cluster keeps the checkpoints.
    name : str
        The consumer; at most 255 bytes.
    reader : Reader
        The reader it drives (from ``client.create_reader``).
    """

    def __init__(self, client: CheckpointStore, name: str, reader: Reader) -> None:
        self.name = name
        self._client = client
        self._reader = reader
        self._committed = client.load_checkpoints(name)
        self._skip: dict[int, Position] = {}  # log -> checkpoint to skip up to
        self._seen: dict[int, Position] = {}  # log -> last position handed out
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ reading

    def checkpoints(self) -> dict[int, Position]:
        """The consumer's committed checkpoints as this reader knows them."""
        with self._lock:
            return dict(self._committed)

    def start_reading(self, log_id: int, until_lsn: int = LSN_MAX, *,
                      refresh: bool = False) -> None:
        """Read ``log_id`` from after its checkpoint (from the oldest record if it has
        none) up to ``until_lsn``.  ``refresh``: load the checkpoints again first
        (another reader of the same consumer may have moved them)."""
        if refresh:
            committed = self._client.load_checkpoints(self.name)
            with self._lock:
                self._committed = committed
        with self._lock:
            ckpt = self._committed.get(log_id)
        if ckpt is None:
            self._reader.start_reading(log_id, LSN_OLDEST, until_lsn)
            return
        lsn, offset = ckpt
        if offset == ALL:
            start = lsn + 1
        else:
            start = lsn
            with self._lock:
                self._skip[log_id] = ckpt
        if start > until_lsn:
            raise InvalidParamError(message=f"log {log_id}: consumer {self.name!r} is past "
                                            f"until_lsn {until_lsn} already ({ckpt})")
        self._reader.start_reading(log_id, start, until_lsn)

    def stop_reading(self, log_id: int) -> None:
        """Stop reading ``log_id``; a later ``commit()`` leaves its checkpoint alone."""
        self._reader.stop_reading(log_id)
        with self._lock:
            self._seen.pop(log_id, None)
            self._skip.pop(log_id, None)

    def position(self, log_id: int) -> Position | None:
        """Where ``read`` got to in ``log_id`` (None: nothing handed out yet)."""
        with self._lock:
            return self._seen.get(log_id)

    def read(self, count: int, timeout: float | None = None) -> list[DataRecord | GapRecord]:
        """Like ``Reader.read``; what it returns counts as handed out for ``commit``."""
        items = self._reader.read(count, timeout)
        if not items:
            return items
        with self._lock:
            if self._skip:
                items = [i for i in items if not self._before_checkpoint(i)]
            for item in items:
                self._seen[item.log_id] = _position(item)
        return items

    def _before_checkpoint(self, item: DataRecord | GapRecord) -> bool:
        ckpt = self._skip.get(item.log_id)
        if ckpt is None:
            return False
        if _position(item) <= ckpt and isinstance(item, DataRecord):
            return True
        del self._skip[item.log_id]  # past it: nothing more to skip in this log
        return False

    def __iter__(self) -> Iterator[DataRecord | GapRecord]:
        while True:
            items = self.read(4096)
            if not items:
                return
            yield from items

    # ------------------------------------------------------------------ committing

    def commit(self, positions: Mapping[int, Position] | None = None, *,
               timeout: float | None = None) -> dict[int, Position]:
        """Store checkpoints durably: ``positions`` (log -> (lsn, batch offset)), or by
        default where ``read`` got to in every log.  Returns all committed checkpoints."""
        with self._lock:
            todo = dict(self._seen if positions is None else positions)
        if not todo:
            return self.checkpoints()
        stored = self._client.store_checkpoints(self.name, todo, timeout=timeout)
        with self._lock:
            self._committed = stored
        return dict(stored)

    def commit_async(self, positions: Mapping[int, Position] | None = None
                     ) -> concurrent.futures.Future[dict[int, Position]]:
        """``commit`` in a thread; a Future of the committed checkpoints."""
        with self._lock:
            todo = dict(self._seen if positions is None else positions)
        fut: concurrent.futures.Future[dict[int, Position]] = concurrent.futures.Future()

        def run() -> None:
            try:
                fut.set_result(self.commit(todo))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                fut.set_exception(exc)

        threading.Thread(target=run, name=f"commit-{self.name}", daemon=True).start()
        return fut

    # ------------------------------------------------------------------ lifetime

    def close(self) -> None:
        self._reader.close()

    def __enter__(self) -> CheckpointedReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # Reader settings (columnar read_batch is not offered: commit follows read()).
    def force_no_single_copy_delivery(self) -> None:
        self._reader.force_no_single_copy_delivery()

    def wait_only_when_no_data(self) -> None:
        self._reader.wait_only_when_no_data()

    def without_payload(self) -> None:
        self._reader.without_payload()
