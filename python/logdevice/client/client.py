"""``ld.Client``: the synchronous, thread-safe face of a client.

A ``Client`` runs its own asyncio loop in one background daemon thread (``LoopThread``);
every method checks its input, hands a coroutine on the client's loop to that loop and
waits for it, bounded by the client's timeout.  The checks and coroutines are written
once, in ``ClientCalls`` (``calls``), which ``AsyncClient`` awaits instead.  Any number
of threads may call it at once, and many appends in flight share one connection per
node (pipelined, matched by request id).

The loop thread, the core, the settings and what readers share are held by the client's
``ClientContext`` (``client.context``), which the client hands to the readers and writers
it creates; they use nothing else of the client.

Bad input is refused before anything is sent: a log that is not in the config gives
``NotFoundError`` (E.NOTFOUND), a payload over the limit ``TooBigError`` (E.TOOBIG),
a wrong type ``InvalidParamError``.  Every failure is a ``LogDeviceError`` with
``.status``.
"""

from __future__ import annotations

import concurrent.futures
import os
from collections.abc import Mapping, Sequence
from typing import Any, Unpack

from ldcore.checksum import crc32c
from logdevice import validate
from logdevice.client.calls import ClientCalls
from logdevice.client.combine import HeadAttributes, TailAttributes
from logdevice.client.context import ClientContext
from logdevice.client.net.loop import LOOP_SLACK
from logdevice.client.read.checkpointed_reader import CheckpointedReader
from logdevice.client.read.core import ReaderOptionKwargs
from logdevice.client.read.group_reader import GroupReader
from logdevice.client.read.reader import AsyncReader, Reader
from logdevice.client.settings import ClientSettingKwargs, ClientSettings
from logdevice.client.summaries import LogSummary, RecordRowsFound
from logdevice.client.write.append_batcher import AppendBatcher
from logdevice.client.write.buffered_writer import (
    BufferedWriter,
    BufferedWriterKwargs,
    check_option_names,
)
from logdevice.client.write.payloads import as_payload
from logdevice.config import Config, LogGroup
from logdevice.errors import E, InvalidParamError, TimedOutError, error_for

__all__ = ["Client"]


class Client:
    """A connection to one cluster.

    Parameters
    ----------
    config : path or Config
        The cluster config file, or an already loaded ``Config``.
    timeout : float
        Seconds any call may take before it fails with ``TimedOutError`` (E.TIMEDOUT).
    **settings : ClientSettingKwargs
        Client settings (meaning and defaults: ``ClientSettings``): ``connect_timeout``,
        ``max_payload_size``, ``initial_backoff``, ``max_backoff``,
        ``view_refresh_interval``, ``suspect_time``, ``append_checksum``,
        ``max_redirects``, ``max_appends_in_flight``, ``unreachable_timeout``,
        ``keepalive_timeout``, ``view_max_age``, ``append_batch_bytes``,
        ``append_linger``, ``tls_cert``, ``tls_key``, ``tls_ca``, ``token``.  Another name:
        ``InvalidParamError`` listing these.

    Examples
    --------
    >>> with ld.Client("cluster.json") as client:          # doctest: +SKIP
    ...     lsn = client.append(1, b"hello")
    """

    def __init__(self, config: str | os.PathLike[str] | Config, timeout: float = 10.0,
                 **settings: Unpack[ClientSettingKwargs]) -> None:
        loaded = config if isinstance(config, Config) else Config.load(config)
        timeout = validate.timeout(timeout, positive=True)
        # The loop, core, runtime log groups and what readers share live in the context;
        # readers and writers get the context, not the client.
        self._ctx = ClientContext(loaded, ClientSettings.from_config(loaded, settings),
                                  timeout, owner=self)
        self._calls = ClientCalls(self._ctx)
        self._appends = AppendBatcher(self._ctx.loop, self._ctx.core)
        self._ctx.on_close(self._appends.close)

    def __repr__(self) -> str:
        state = "closed" if self._ctx.closed else "open"
        return f"<Client cluster={self.config.cluster!r} {state}>"

    @property
    def context(self) -> ClientContext:
        """What this client's readers and writers work with: its loop, core, settings,
        log groups and shared reader state (see ``ClientContext``)."""
        return self._ctx

    @property
    def calls(self) -> ClientCalls:
        """This client's calls as checks and coroutines on its loop (what ``AsyncClient``
        awaits; see ``ClientCalls``)."""
        return self._calls

    @property
    def config(self) -> Config:
        """The effective config: the config file's, with the log groups created at
        runtime (kept current)."""
        return self._ctx.config

    @config.setter
    def config(self, config: Config) -> None:
        self._ctx.adopt_config(config)

    @property
    def settings(self) -> ClientSettings:
        """The client settings (``ClientSettings``)."""
        return self._ctx.settings

    @property
    def timeout(self) -> float:
        """Seconds any call may take (the default of every call's ``timeout``)."""
        return self._ctx.timeout

    @timeout.setter
    def timeout(self, timeout: float) -> None:
        self._ctx.timeout = timeout

    # ------------------------------------------------------------------ log groups

    def create_log_group(self, name: str, lo: int, hi: int, *,
                         replication: int | Mapping[str, int],
                         nodeset_size: int | None = None, scd: bool | None = None,
                         sticky_copysets: bool | None = None,
                         backlog_retention_ms: int | None = None,
                         max_writes_in_flight: int | None = None,
                         **attributes: Any) -> LogGroup:
        """Create the log group ``name`` over log ids ``lo..hi`` (inclusive) at runtime.

        The group is stored in the epoch store (LogsConfig); nodes and clients pick it up
        without a restart (within ``logs_config_poll_ms``; a call naming one of its logs
        reads it at once).  It is validated like a ``logs`` entry of the config file.

        Parameters
        ----------
        name : str
            Unique among all log groups, the config file's included.
        lo, hi : int
            The id range; it may not overlap another group's.
        replication : int or dict
            Copies per record, e.g. ``2`` or ``{"rack": 2, "node": 3}``.
        nodeset_size, scd, sticky_copysets, backlog_retention_ms, max_writes_in_flight
            As in the config file (None: the default).
        **attributes
            The other attributes of a config file entry: ``sticky_block_bytes``,
            ``sticky_block_ms``, ``store_timeout_ms``, ``acl``.

        Returns
        -------
        LogGroup

        Raises
        ------
        InvalidParamError
            A bad or unknown attribute (the message lists the valid names).
        LogDeviceError
            EXISTS: the name is taken or the range overlaps a group (both are named).
        """
        self._ctx.check_open()
        attrs = {"replication": replication, "nodeset_size": nodeset_size, "scd": scd,
                 "sticky_copysets": sticky_copysets,
                 "backlog_retention_ms": backlog_retention_ms,
                 "max_writes_in_flight": max_writes_in_flight, **attributes}
        return self._ctx.log_groups.create(name, lo, hi, {k: v for k, v in attrs.items()
                                                      if v is not None})

    def update_log_group(self, name: str, **changes: Any) -> LogGroup:
        """Change attributes of a group created at runtime, e.g.
        ``update_log_group("events", replication=3)``; a value None puts the default back.

        A change of what a sequencer is built from (replication, nodeset size, sticky
        copysets, window, store timeouts) starts a new epoch of each log of the group:
        records from then on follow it, earlier ones keep the placement they were
        written with.

        Raises
        ------
        NotFoundError
            No runtime group has this name.
        InvalidParamError
            An unknown attribute or a bad value, or a group of the config file.
        """
        self._ctx.check_open()
        return self._ctx.log_groups.update(name, changes)

    def remove_log_group(self, name: str) -> None:
        """Remove a group created at runtime: appends to its logs get NOTFOUND and
        readers see a NOTINCONFIG gap.  Its records stay on the nodes until they are
        trimmed or expire; a group created again over the range reads them again.

        Raises
        ------
        NotFoundError
            No runtime group has this name.
        """
        self._ctx.check_open()
        self._ctx.log_groups.remove(name)

    def log_groups(self) -> list[LogGroup]:
        """Every log group, the config file's first, then those created at runtime (as
        of a read of the epoch store now)."""
        self._ctx.check_open()
        self._ctx.log_groups.refresh()
        return list(self.config.logs)

    def _prepare_append(self, log_id: int, payload: Any) -> tuple[Any, int]:
        """The checked payload and its crc32c (0 unless the client sends checksums)."""
        ctx = self._ctx
        ctx.log_group(log_id)
        data = as_payload(payload)
        size = len(data)
        settings = ctx.settings
        if size > settings.max_payload_size:
            raise error_for(E.TOOBIG, f"payload of {size} bytes exceeds the limit of "
                                      f"{settings.max_payload_size} bytes")
        return data, crc32c(data) if settings.append_checksum else 0

    # ------------------------------------------------------------------ appends

    def append(self, log_id: int, payload: Any, *, timeout: float | None = None) -> int:
        """Append one record and wait until it is acknowledged (stored on R nodes).

        Returns
        -------
        int
            The record's LSN.  LSNs of records appended synchronously to one log by one
            client increase.

        Raises
        ------
        NotFoundError, TooBigError, InvalidParamError
            Bad input (nothing sent).
        TimedOutError
            Not acknowledged within the timeout, or its sequencer node stopped answering
            for ``keepalive_timeout`` (it may still be stored).
        LogDeviceError
            The sequencer refused it (SEQNOBUFS, OVERLOADED, NOSPC, ...) or the
            connection dropped after it was sent (PEER_CLOSED).
        """
        if self._ctx.loop.in_loop_thread():
            raise InvalidParamError(
                message="a blocking append from the client's own loop thread (a future "
                        "callback) would deadlock; use append_async there")
        fut = self.append_async(log_id, payload, timeout=timeout)
        wait = self._calls.timeout(timeout) + LOOP_SLACK
        try:
            return fut.result(wait)
        except concurrent.futures.TimeoutError:
            raise TimedOutError(message=f"append to log {log_id}: no answer within "
                                        f"{wait:g} s") from None

    def append_async(self, log_id: int, payload: Any, *,
                     timeout: float | None = None) -> concurrent.futures.Future[int]:
        """Start an append; a Future of its LSN (failures as for ``append``).

        Bad input raises here, at once.  The payload is copied unless it is ``bytes``.
        Appends to one log that queue while the client is busy travel to the sequencer
        together (``append_batch_bytes``, ``append_linger``).
        """
        ctx = self._ctx
        ctx.check_open()
        data, checksum = self._prepare_append(log_id, payload)
        return self._appends.submit(log_id, data, checksum, self._calls.timeout(timeout))

    # ------------------------------------------------------------------ tail and head

    @property
    def stats(self) -> dict[str, int]:
        """Back-pressure and batching figures: ``appends_waited`` (appends that queued in
        this client because the log had as many in flight as allowed),
        ``refusals_retried`` (appends a sequencer refused before taking an LSN, tried
        again), ``append_batches`` (APPEND_BATCHes the single-record appends travelled
        in, retries included) and ``append_logs_frames`` (APPEND_LOGS frames that carried
        several of them, of different logs, to one node); ``storage_requests`` and
        ``sequencer_requests``: requests sent to storage nodes (one per node of each
        storage-side call) and to sequencer nodes (each attempt, GET_TAILS included)."""
        return dict(self._ctx.core.stats)

    def get_tail_lsn(self, log_id: int, *, timeout: float | None = None) -> int:
        """The last released LSN of the log (LSN_INVALID if nothing was released)."""
        return self.get_tail_attributes(log_id, timeout=timeout).last_released_real_lsn

    def get_tail_attributes(self, log_id: int, *,
                            timeout: float | None = None) -> TailAttributes:
        """Last released LSN, its timestamp (and byte offset when tracked), from the
        log's sequencer."""
        return self._calls.run(self._calls.tail_attributes(log_id, timeout))  # type: ignore[no-any-return]

    def get_head_attributes(self, log_id: int, *,
                            timeout: float | None = None) -> HeadAttributes:
        """Trim point and the timestamp of the first record after it (see ``combine``)."""
        return self._calls.run(self._calls.head_attributes(log_id, timeout))  # type: ignore[no-any-return]

    def is_log_empty(self, log_id: int, *, timeout: float | None = None) -> bool:
        """True if the log holds no record past its trim point.

        Answered by reading (see ``read.queries``): the log is read without payloads
        from its trim point until the first record or past the last released LSN.
        """
        return self._calls.run(self._calls.is_log_empty(log_id, timeout))  # type: ignore[no-any-return]

    # ------------------------------------------------------------------ storage-side calls

    def trim(self, log_id: int, lsn: int, *, force: bool = False,
             timeout: float | None = None) -> None:
        """Trim the log: records at or below ``lsn`` go away; the trim point is persisted
        on the storage nodes.  Needs OK answers from an f-majority of them, else
        ``LogDeviceError(E.PARTIAL)`` (some trimmed) or the common failure.  A trim past
        the log's tail would swallow records not written yet: the nodes refuse it
        (``TooBigError``) unless ``force`` (which needs ``admin`` on the log)."""
        self._calls.run(self._calls.trim(log_id, lsn, force, timeout))

    def find_time(self, log_id: int, ms: float, *, timeout: float | None = None) -> int:
        """The first LSN whose record has a timestamp >= ``ms`` (ms since the Unix epoch);
        one past the last record if all are older.  The rule is in ``combine``."""
        return self._calls.run(self._calls.find_time(log_id, ms, timeout))  # type: ignore[no-any-return]

    def data_size(self, log_id: int, start_ms: float, end_ms: float, *,
                  timeout: float | None = None) -> int:
        """Payload bytes of the log's records with timestamps in ``[start_ms, end_ms]``
        (BufferedWriter payloads counted one by one).

        Exact: the range is read (single copy delivery), so the cost grows with the data;
        ``approximate_data_size`` is the cheap estimate from storage-node statistics.
        """
        return self._calls.run(self._calls.data_size(  # type: ignore[no-any-return]
            log_id, start_ms, end_ms, timeout))

    def approximate_data_size(self, log_id: int, start_ms: float, end_ms: float, *,
                              timeout: float | None = None) -> int:
        """Estimated bytes stored for the log's records with timestamps in
        ``[start_ms, end_ms]``, from each storage node's partition statistics (stored
        record size, headers included; partitions partly in range count in proportion
        to their time overlap), divided by the replication factor."""
        return self._calls.run(self._calls.approximate_data_size(  # type: ignore[no-any-return]
            log_id, start_ms, end_ms, timeout))

    # ------------------------------------------------------------------ many logs at once

    def log_summaries(self, log_ids: Sequence[int], *, find_times: Sequence[float] = (),
                      size_window: tuple[float, float] | None = None, tails: bool = True,
                      timeout: float | None = None) -> list[LogSummary]:
        """Trim point, last released LSN, time span, size estimate and ``find_time``
        answers of many logs, in one request to each storage node (and, with ``tails``,
        one to each sequencer node); the rules are in ``client.summaries``.

        Parameters
        ----------
        log_ids : sequence of int
        find_times : sequence of float
            Timestamps (ms) to locate in every log: ``LogSummary.find_time`` holds, in
            this order, what ``find_time`` would answer.
        size_window : (start_ms, end_ms), optional
            The window of ``est_bytes`` (default: all records above the trim point), as
            for ``approximate_data_size``.
        tails : bool
            Also ask the logs' sequencers (``get_tail_attributes``, batched per node):
            ``last_released`` then covers every acknowledged append.  Without, it is the
            storage nodes' release pointer: released, but possibly a little older.

        Returns
        -------
        list of LogSummary
            One per log, in the order of ``log_ids``.

        Raises
        ------
        NotFoundError
            A log that is not in the config (nothing sent).
        LogDeviceError
            The first log without an f-majority of answers (PARTIAL or the common
            failure) or whose tail failed; its message names the log.
        """
        return self._calls.run(self._calls.log_summaries(  # type: ignore[no-any-return]
            log_ids, find_times, size_window, tails, timeout))

    def record_rows(self, ranges: Mapping[int, tuple[int, int]], *,
                    max_rows: int | None = None, timeout: float | None = None
                    ) -> dict[int, RecordRowsFound]:
        """The records of LSN ranges of many logs with the rows each holds (a
        BufferedWriter blob: its payload count, from its header; a plain record: 1; hole
        plugs and bridges: 0), in one request to each storage node.

        Parameters
        ----------
        ranges : mapping of log id to (lo, hi)
            Inclusive LSN ranges of released records.
        max_rows : int, optional
            Each node stops a log once the rows it listed exceed this, so a log may come
            back incomplete: ``next_lsn`` says how far it is complete (ask again from
            there).

        Returns
        -------
        dict of log id to RecordRowsFound
            The records in ``[lo, next_lsn - 1]``, in LSN order.

        Raises
        ------
        NotFoundError, InvalidParamError
            A log not in the config, a bad range (nothing sent).
        LogDeviceError
            The first log without an f-majority of answers; its message names it.
        """
        return self._calls.run(self._calls.record_rows(  # type: ignore[no-any-return]
            ranges, max_rows, timeout))

    # ------------------------------------------------------------------ checkpoints

    def load_checkpoints(self, name: str, *,
                         timeout: float | None = None) -> dict[int, tuple[int, int]]:
        """The checkpoints of consumer ``name``: log id -> (lsn, batch offset) of the last
        record it processed (empty if it has none).  Kept in the cluster's epoch store,
        reached through any node."""
        return self._calls.run(self._calls.load_checkpoints(name, timeout))  # type: ignore[no-any-return]

    def store_checkpoints(self, name: str, positions: Mapping[int, tuple[int, int]], *,
                          timeout: float | None = None) -> dict[int, tuple[int, int]]:
        """Set consumer ``name``'s checkpoints of the given logs, atomically (others stay
        as they are); all of its checkpoints after the change."""
        return self._calls.run(self._calls.store_checkpoints(  # type: ignore[no-any-return]
            name, positions, timeout))

    def group_heartbeat(self, group: str, member: str, logs: Sequence[int], *,
                        session_timeout: float = 10.0, leave: bool = False,
                        timeout: float | None = None) -> tuple[int, list[int]]:
        """``member`` of consumer group ``group`` (reading ``logs``) is alive for
        ``session_timeout`` more seconds (or leaves): the group's generation and the logs
        the member reads now.  ``GroupReader`` calls it; tools may, to look."""
        return self._calls.run(self._calls.group_heartbeat(  # type: ignore[no-any-return]
            group, member, logs, session_timeout, leave, timeout))

    # ------------------------------------------------------------------ writers

    def create_buffered_writer(self, **options: Unpack[BufferedWriterKwargs]
                               ) -> BufferedWriter:
        """A ``BufferedWriter`` on this client.

        Parameters
        ----------
        **options : BufferedWriterKwargs
            ``size_trigger`` (int or None, default 1 MB), ``time_trigger`` (seconds or
            None, default 0.05), ``count_trigger`` (int or None, default None),
            ``compression`` ("zstd" or "none"), ``compression_level`` (int, default 1),
            ``mode`` ("independent" or "one_at_a_time"), ``retries`` (int, default 3),
            ``backoff`` (seconds, or (initial, max); default (0.05, 2.0)),
            ``memory_limit_bytes`` (int or None, default 256 MiB), ``block`` (bool,
            default True); their meaning: ``BufferedWriter``.

        Raises
        ------
        InvalidParamError
            An unknown option (the message lists the known ones) or a bad value.
        """
        check_option_names(options)
        self._ctx.check_open()
        return BufferedWriter(self._ctx, **options)

    # ------------------------------------------------------------------ readers

    def create_reader(self, max_logs: int = 1, **options: Unpack[ReaderOptionKwargs]
                      ) -> Reader:
        """A ``Reader`` of up to ``max_logs`` logs at once.

        Parameters
        ----------
        max_logs : int
            How many logs it may read at once.
        **options : ReaderOptionKwargs
            ``buffer_size`` (int, the read window in LSNs), ``flow_control_threshold``
            (float), ``grace_period``, ``scd_timeout``, ``scd_all_send_all_timeout``
            (seconds); defaults from the config's settings.  ``max_buffered_records``
            (int, default 262144) and ``max_buffered_bytes`` (int, default 64 MiB).

        Raises
        ------
        InvalidParamError
            An unknown option (the message lists the known ones) or a bad value.
        """
        return Reader(self._ctx, max_logs, **options)

    def create_checkpointed_reader(self, name: str, max_logs: int = 1,
                                   **options: Unpack[ReaderOptionKwargs]
                                   ) -> CheckpointedReader:
        """A ``Reader`` that resumes each log after consumer ``name``'s checkpoint and
        commits where the application got to (see ``CheckpointedReader``).  ``max_logs``
        and ``**options`` as for ``create_reader``."""
        return CheckpointedReader(self, name, self.create_reader(max_logs, **options))

    def create_group_reader(self, group: str, logs: Sequence[int], *,
                            member: str | None = None, session_timeout: float = 10.0,
                            **options: Unpack[ReaderOptionKwargs]) -> GroupReader:
        """Join consumer group ``group`` reading ``logs``: each log is read by one member
        at a time, from the group's checkpoints (see ``GroupReader``).  ``member``: this
        member's name (default: host, process id and a random part); ``session_timeout``:
        seconds of silence after which it counts as gone; ``**options``: reader options,
        as for ``create_reader``."""
        return GroupReader(self, group, logs, member=member,
                           session_timeout=session_timeout, **options)

    def create_async_reader(self, max_logs: int = 1, **options: Unpack[ReaderOptionKwargs]
                            ) -> AsyncReader:
        """An ``AsyncReader`` (the asyncio flavour of ``Reader``); ``max_logs`` and
        ``**options`` as for ``create_reader``."""
        return AsyncReader(self._ctx, max_logs, **options)

    @property
    def bytes_received(self) -> int:
        """Bytes this client has read from all node connections so far (reads, replies)."""
        return sum(c.bytes_received for c in list(self._ctx.core.conns.values()))

    # ------------------------------------------------------------------ closing

    def close(self) -> None:
        """Close writers (their unsent payloads fail with E.SHUTDOWN), connections and
        the loop thread.  Idempotent."""
        self._ctx.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

