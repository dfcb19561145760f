"""``FileEpochStore``: the embedded epoch store, one SQLite file shared by the node
processes of a machine.

Why it is safe across processes: the file is in WAL mode (readers never block the
writer), every change runs in a ``BEGIN IMMEDIATE`` transaction (the write lock is taken
before the read, so a read-modify-write cannot interleave with another process's), waits
for the lock are bounded by the busy timeout, and ``synchronous=FULL`` makes a committed
epoch survive a power cut, so an epoch is never handed out twice.

A connection must not cross ``fork()``: open the store in the process that uses it.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgspec

from logdevice.backoff import ExponentialBackoff
from logdevice.epochstore.base import EpochStore
from logdevice.epochstore.events import validate_event
from logdevice.epochstore.records import (
    LogEpochState,
    LogsConfigState,
    VersionMismatchError,
    check_log_id,
)
from logdevice.epochstore.transitions import (
    LogsConfigFn,
    UpdateFn,
    next_logs_config,
    next_state,
)
from logdevice.errors import E, LogDeviceError, TimedOutError

SCHEMA_VERSION = 1
_IN_MAX = 500  # log ids per "IN (...)" (SQLite allows 999 parameters per statement)
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS logs (
    log_id INTEGER PRIMARY KEY,
    version INTEGER NOT NULL,
    epoch INTEGER NOT NULL,
    last_clean_epoch INTEGER NOT NULL,
    state TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS logs_config (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    version INTEGER NOT NULL,
    body TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS events (
    version INTEGER PRIMARY KEY AUTOINCREMENT,
    time_ms INTEGER NOT NULL,
    event TEXT NOT NULL
);
"""


class FileEpochStore(EpochStore):
    """The epoch store in a SQLite file (created, with its directory, if missing).

    Parameters
    ----------
    path : path-like
        The SQLite file, e.g. ``<cluster root>/epochs.sqlite``.
    timeout : float
        Seconds to wait for another process's transaction before TIMEDOUT.
    """

    def __init__(self, path: str | os.PathLike[str], timeout: float = 10.0) -> None:
        super().__init__()
        self.path = Path(path).absolute()
        self.uri = f"file:{self.path}"
        self.timeout = float(timeout)
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(str(self.path), timeout=self.timeout, isolation_level=None,
                                   check_same_thread=False)
        except (OSError, sqlite3.Error) as e:
            raise LogDeviceError(E.FAILED, f"cannot open the epoch store {self.path}: {e}"
                                 ) from None
        self._conn = conn
        try:
            self._retry_busy(lambda: conn.execute("PRAGMA journal_mode=WAL").fetchone())
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute(f"PRAGMA busy_timeout={int(self.timeout * 1000)}")
            with self._transaction() as c:
                for stmt in filter(str.strip, _SCHEMA.split(";")):
                    c.execute(stmt)
                row = c.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
                if row is None:
                    c.execute("INSERT INTO meta VALUES ('schema_version', ?)",
                              (str(SCHEMA_VERSION),))
                elif int(row[0]) > SCHEMA_VERSION:
                    raise LogDeviceError(E.FAILED, f"epoch store {self.path} has schema "
                                                   f"{row[0]}, newer than this code's "
                                                   f"{SCHEMA_VERSION}")
        except BaseException:
            self.close()
            raise

    # -- plumbing -------------------------------------------------------------------------
    def _retry_busy(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn``, retrying while SQLite says busy/locked, until ``timeout``."""
        deadline = time.monotonic() + self.timeout
        backoff = ExponentialBackoff(0.001, 0.05)
        while True:
            try:
                return fn()
            except sqlite3.OperationalError as e:
                msg = str(e).lower()
                if "locked" not in msg and "busy" not in msg:
                    raise self._failed(e) from None
                if time.monotonic() >= deadline:
                    raise TimedOutError(message=f"epoch store {self.path} stayed busy for "
                                                f"{self.timeout:g}s: {e}") from None
                time.sleep(backoff.next_delay())

    def _failed(self, e: Exception) -> LogDeviceError:
        return LogDeviceError(E.FAILED, f"epoch store {self.path}: {e}")

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise LogDeviceError(E.SHUTDOWN, f"epoch store {self.path} is closed")
        return self._conn

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction: the write lock is held from the first read to the commit."""
        with self._lock:
            conn = self._connection()
            self._retry_busy(lambda: conn.execute("BEGIN IMMEDIATE"))
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            try:
                self._retry_busy(lambda: conn.execute("COMMIT"))
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    def _read(self, sql: str, args: tuple[Any, ...] = ()) -> list[Any]:
        with self._lock:
            conn = self._connection()
            try:
                return self._retry_busy(lambda: conn.execute(sql, args).fetchall())  # type: ignore[no-any-return]
            except sqlite3.Error as e:
                raise self._failed(e) from None

    @staticmethod
    def _plain(version: int, text: str) -> dict[str, Any]:
        """A stored state in its plain form (``LogEpochState.to_dict``).  (msgspec's
        decoder: a reader's start asks for thousands of logs' states at once, and
        ``json.loads`` took five times as long.)"""
        d: dict[str, Any] = msgspec.json.decode(text)
        d["version"] = version
        return d

    @classmethod
    def _decode(cls, version: int, text: str) -> LogEpochState:
        return LogEpochState.from_dict(cls._plain(version, text))

    # -- EpochStore -----------------------------------------------------------------------
    def get(self, log_id: int) -> LogEpochState | None:
        log_id = check_log_id(log_id)
        rows = self._read("SELECT version, state FROM logs WHERE log_id=?", (log_id,))
        return self._decode(*rows[0]) if rows else None

    def get_many(self, log_ids: Sequence[int]) -> dict[int, LogEpochState]:
        return {log_id: self._decode(version, text) for log_id, version, text
                in self._read_in("log_id, version, state", log_ids)}

    def get_many_plain(self, log_ids: Sequence[int]) -> dict[int, dict[str, Any]]:
        return {log_id: self._plain(version, text) for log_id, version, text
                in self._read_in("log_id, version, state", log_ids)}

    def epochs(self, log_ids: Sequence[int]) -> dict[int, int]:
        return dict(self._read_in("log_id, epoch", log_ids))

    def _read_in(self, columns: str, log_ids: Sequence[int]) -> list[Any]:
        """``columns`` of the rows of ``log_ids`` (those the store has)."""
        ids = [check_log_id(log_id) for log_id in log_ids]
        rows: list[Any] = []
        for i in range(0, len(ids), _IN_MAX):
            chunk = ids[i:i + _IN_MAX]
            marks = ",".join("?" * len(chunk))
            rows += self._read(f"SELECT {columns} FROM logs WHERE log_id IN ({marks})",
                               tuple(chunk))
        return rows

    def update(self, log_id: int, fn: UpdateFn) -> LogEpochState | None:
        log_id = check_log_id(log_id)
        try:
            with self._transaction() as c:
                return self._update_in(c, log_id, fn)
        except sqlite3.Error as e:
            raise self._failed(e) from None

    def update_many(self, changes: Sequence[tuple[int, UpdateFn]]
                    ) -> list[LogEpochState | None | LogDeviceError]:
        """Every change in one transaction: one commit (one fsync) for the batch."""
        checked = [(check_log_id(log_id), fn) for log_id, fn in changes]
        out: list[LogEpochState | None | LogDeviceError] = []
        try:
            with self._transaction() as c:
                for log_id, fn in checked:
                    try:
                        out.append(self._update_in(c, log_id, fn))
                    except LogDeviceError as exc:  # from fn: nothing written for this log
                        out.append(exc)
        except sqlite3.Error as e:
            raise self._failed(e) from None
        return out

    def _update_in(self, c: sqlite3.Connection, log_id: int,
                   fn: UpdateFn) -> LogEpochState | None:
        """``update`` inside the caller's transaction."""
        row = c.execute("SELECT version, state FROM logs WHERE log_id=?", (log_id,)).fetchone()
        cur = self._decode(*row) if row else None
        step = next_state(log_id, cur, fn)
        if step is None:
            return cur
        new, body = step
        c.execute("INSERT OR REPLACE INTO logs VALUES (?, ?, ?, ?, ?)",
                  (log_id, new.version, new.epoch, new.last_clean_epoch,
                   json.dumps(body, separators=(",", ":"))))
        return new

    def remove(self, log_id: int, expected_version: int | None = None) -> bool:
        log_id = check_log_id(log_id)
        try:
            with self._transaction() as c:
                row = c.execute("SELECT version FROM logs WHERE log_id=?", (log_id,)).fetchone()
                have = row[0] if row else 0
                if expected_version is not None and have != expected_version:
                    raise VersionMismatchError(message=f"log {log_id} is at version {have}, "
                                                       f"expected {expected_version}")
                c.execute("DELETE FROM logs WHERE log_id=?", (log_id,))
                return row is not None
        except sqlite3.Error as e:
            raise self._failed(e) from None

    def logs(self) -> list[int]:
        return [r[0] for r in self._read("SELECT log_id FROM logs ORDER BY log_id")]

    def append_event(self, event: Mapping[str, Any]) -> int:
        ev = validate_event(event)
        try:
            with self._transaction() as c:
                cur = c.execute("INSERT INTO events (time_ms, event) VALUES (?, ?)",
                                (int(time.time() * 1000), json.dumps(ev, separators=(",", ":"))))
                return int(cur.lastrowid or 0)
        except sqlite3.Error as e:
            raise self._failed(e) from None

    def events(self, since_version: int = 0) -> list[dict[str, Any]]:
        rows = self._read("SELECT version, time_ms, event FROM events WHERE version > ? "
                          "ORDER BY version", (int(since_version),))
        out = []
        for version, time_ms, text in rows:
            ev = json.loads(text)
            ev["version"] = version
            ev["time_ms"] = time_ms
            out.append(ev)
        return out

    def logs_config(self) -> LogsConfigState:
        rows = self._read("SELECT version, body FROM logs_config WHERE id=1")
        if not rows:
            return LogsConfigState()
        return LogsConfigState.from_body(rows[0][0], json.loads(rows[0][1]))

    def update_logs_config(self, fn: LogsConfigFn) -> LogsConfigState:
        try:
            with self._transaction() as c:
                row = c.execute("SELECT version, body FROM logs_config WHERE id=1").fetchone()
                cur = (LogsConfigState.from_body(row[0], json.loads(row[1])) if row
                       else LogsConfigState())
                new = next_logs_config(cur, fn)
                if new is None:
                    return cur
                c.execute("INSERT OR REPLACE INTO logs_config VALUES (1, ?, ?)",
                          (new.version, json.dumps(new.to_body(), separators=(",", ":"))))
                return new
        except sqlite3.Error as e:
            raise self._failed(e) from None

    def cluster_identity(self, cluster: str) -> str:
        try:
            with self._transaction() as c:
                row = c.execute("SELECT value FROM meta WHERE key='identity'").fetchone()
                if row is None:
                    stored = {"cluster": cluster, "id": uuid.uuid4().hex}
                    c.execute("INSERT INTO meta VALUES ('identity', ?)", (json.dumps(stored),))
                else:
                    stored = json.loads(row[0])
        except sqlite3.Error as e:
            raise self._failed(e) from None
        return self._check_identity(stored, cluster)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    @property
    def closed(self) -> bool:
        return self._conn is None

    def __repr__(self) -> str:
        return f"FileEpochStore({str(self.path)!r}{', closed' if self.closed else ''})"
