"""``ZooKeeperEpochStore``: the epoch store in a ZooKeeper ensemble, for clusters that span
machines (through ``kazoo``).

Layout under the root znode (``zookeeper:zk1:2181,zk2:2181/logdevice/prod``)::

    <root>/identity         {"cluster": name, "id": hex}: which cluster owns the store
    <root>/logs/<log_id>    {"s": LogEpochState without version, "w": writer token}
    <root>/events           the last event version (a decimal string)
    <root>/events/<v>       {"e": event, "t": time_ms, "w": writer token}, v zero-padded
    <root>/logs_config      {"s": runtime log groups, "w": writer token} (LogsConfig)

A log's ``version`` is its znode's data version + 1 (1 after creation), and every change is
a ``setData`` conditional on the version read (or a ``create`` for a new log), so ZooKeeper
does the compare-and-set.  An event is appended by one multi-op transaction that bumps the
counter conditionally and creates the event's znode, so versions are dense and ordered.

Why the writer token: when the connection drops after a write was sent, its outcome is
unknown.  Every write carries a random token; on reconnect the store reads the znode back
and knows whether the write landed (its token, the expected version) or not (retry).
Without it, two activations that computed identical state would both believe they own the
same epoch.

With a ``ZooKeeperCredential`` the store authenticates (ZooKeeper's ``digest`` scheme) and
creates every znode with an ACL that admits only that identity, and the credential's
optional operator identity, with every permission: anyone else gets NOAUTH, for reads
and writes alike.  Znodes made before the store was locked get that ACL when it first
connects.  Nodes use one credential; clients never open the store.

While ZooKeeper is unreachable (connection lost, session expired, server restarting) an
operation waits and retries with exponential backoff, logging once what it waits for.  The
store gives ZooKeeper ``timeout`` seconds from the moment it became unreachable: an
operation that started before waits at most ``timeout`` seconds, one that starts during
the outage waits only for what is left of them, and once they are over every operation
fails at once with TIMEDOUT until ZooKeeper is back.  So requests queued behind each other
(a node answers its clients' metadata requests one after another) are all answered within
``timeout`` of the outage, not one ``timeout`` after the other.  Nothing waits forever.
The store keeps no ephemeral znodes, so a new session loses nothing.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from logdevice.backoff import ExponentialBackoff
from logdevice.epochstore.base import EpochStore
from logdevice.epochstore.events import validate_event
from logdevice.epochstore.outcome import EpochOutcome
from logdevice.epochstore.records import (
    LogEpochState,
    LogsConfigState,
    TailRecord,
    VersionMismatchError,
    check_log_id,
)
from logdevice.epochstore.transitions import (
    LogsConfigFn,
    MetadataArg,
    UpdateFn,
    next_logs_config,
    next_state,
)
from logdevice.epochstore.uri import EpochStoreURI
from logdevice.errors import E, LogDeviceError, TimedOutError

log = logging.getLogger("logdevice.epochstore.zookeeper")

SCHEMA_VERSION = 1
_EVENT_DIGITS = 20  # znode names sort like the numbers they spell
_BACKOFF_START = 0.05
_BACKOFF_MAX = 1.0
_QUIET_CONNECT = 1.0  # seconds a new store may take to connect before we log a wait
#: Logs per ``multi`` in ``update_many``: a log's znode is a few hundred bytes and
#: ZooKeeper refuses requests over 1 MB (``jute.maxbuffer``).
_MULTI_MAX = 500


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


@dataclass(frozen=True)
class ZooKeeperCredential:
    """Who the store is in ZooKeeper (``digest`` scheme), and the ACL of its znodes."""

    user: str
    password: str
    operator: str | None = None  # "name:base64(sha1(name:password))", also admitted

    def __repr__(self) -> str:  # never print the password
        return f"ZooKeeperCredential(user={self.user!r}, operator={self.operator!r})"

    def acl(self) -> list[Any]:
        from kazoo.security import (  # kazoo: optional, see ZooKeeperEpochStore
            ACL,
            Id,
            Permissions,
            make_digest_acl,
        )

        out = [make_digest_acl(self.user, self.password, all=True)]
        if self.operator is not None:
            out.append(ACL(Permissions.ALL, Id("digest", self.operator)))
        return out


class _Retry(Exception):
    """A compare-and-set lost to another writer: read again and recompute."""


class ZooKeeperEpochStore(EpochStore):
    """The epoch store in ZooKeeper.

    Parameters
    ----------
    uri : EpochStoreURI
        A parsed ``zookeeper:`` URI (the ensemble and the root znode).
    timeout : float
        Seconds an operation may wait for ZooKeeper (reconnects included) before TIMEDOUT.
    session_timeout : float
        The ZooKeeper session timeout asked for.
    auth : ZooKeeperCredential, optional
        Authenticate, and lock every znode to this identity (see the module docstring).
    """

    def __init__(self, uri: EpochStoreURI, timeout: float = 10.0,
                 session_timeout: float = 10.0, auth: ZooKeeperCredential | None = None
                 ) -> None:
        super().__init__()
        try:  # kazoo is optional (the "zookeeper" extra): imported when a store opens
            from kazoo.client import KazooClient
            from kazoo.retry import KazooRetry
        except ImportError:
            raise LogDeviceError(E.NOTSUPPORTED, "the zookeeper: epoch store needs kazoo "
                                                 "(pip install 'logdevice[zookeeper]')"
                                 ) from None
        if uri.scheme != "zookeeper":
            raise LogDeviceError(E.INVALID_PARAM, f"not a zookeeper: URI: {uri.uri}")
        self.uri = uri.uri
        self.timeout = float(timeout)
        self._root = uri.root.rstrip("/")
        self._logs = f"{self._root}/logs"
        self._events = f"{self._root}/events"
        self._identity = f"{self._root}/identity"
        self._logs_config = f"{self._root}/logs_config"
        self._lock = threading.Lock()
        self._ready = False
        self._closed = False
        hosts = ",".join(f"{h}:{p}" for h, p in uri.hosts)
        kazoo_log = logging.getLogger("logdevice.epochstore.kazoo")
        if kazoo_log.level == logging.NOTSET:
            # We log once what an operation waits for; kazoo would log every reconnect
            # attempt (several a second during an outage).  Lower it to see them.
            kazoo_log.setLevel(logging.ERROR)
        self._acl = auth.acl() if auth is not None else None
        # Reconnect forever in the background (kazoo's connection retry); each operation
        # bounds its own wait.
        self._zk = KazooClient(
            hosts=hosts, timeout=session_timeout, default_acl=self._acl,
            auth_data=[("digest", f"{auth.user}:{auth.password}")] if auth else None,
            connection_retry=KazooRetry(max_tries=-1, delay=0.05, backoff=2, max_delay=1.0),
            logger=kazoo_log)
        self._connected = threading.Event()
        self._ever_connected = False
        self._down_since: float | None = time.monotonic()  # None while connected
        self._purpose = threading.local()  # what the caller is doing, for the wait log line
        self._zk.add_listener(self._on_state)
        self._zk.start_async()

    def _on_state(self, state: str) -> None:  # kazoo's thread: only flip the event
        if state == "CONNECTED":
            self._ever_connected = True
            self._down_since = None
            self._connected.set()
        else:
            self._connected.clear()
            if self._down_since is None:
                self._down_since = time.monotonic()

    # -- plumbing -------------------------------------------------------------------------
    def _call(self, what: str, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` (ZooKeeper operations), retrying while ZooKeeper is unreachable, with
        backoff, until ``timeout`` seconds after this call or the outage began, whichever
        was first."""
        from kazoo.exceptions import (  # kazoo: optional, see __init__
            ConnectionClosedError,
            ConnectionLoss,
            OperationTimeoutError,
            SessionExpiredError,
        )

        # ConnectionClosedError: kazoo between sessions (our own close is checked first).
        unreachable = (ConnectionLoss, SessionExpiredError, OperationTimeoutError,
                       ConnectionClosedError, self._zk.handler.timeout_exception)
        what = self._what(what)
        start = time.monotonic()
        backoff = ExponentialBackoff(_BACKOFF_START, _BACKOFF_MAX)
        waited_since: float | None = None
        while True:
            if self._closed:
                raise LogDeviceError(E.SHUTDOWN, f"epoch store {self.uri} is closed")
            now = time.monotonic()
            why = "not connected"
            if self._connected.is_set():
                try:
                    if not self._ready:
                        self._ensure_layout(start + self.timeout)
                    out = fn()
                    if waited_since is not None:
                        log.info("epoch store %s: ZooKeeper is back; %s done after waiting "
                                 "%.1f s", self.uri, what, time.monotonic() - waited_since)
                    return out
                except unreachable as exc:
                    why = type(exc).__name__
                    now = time.monotonic()
            down_since = self._down_since
            since = start if down_since is None else min(start, down_since)
            deadline = since + self.timeout
            if now >= deadline:
                raise TimedOutError(message=f"epoch store {self.uri}: ZooKeeper unreachable "
                                            f"for {now - since:.0f} s (the store waits "
                                            f"{self.timeout:g} s for it); could not {what}")
            # A store just opened is still connecting: say nothing for its first second.
            if waited_since is None and (why != "not connected" or self._ever_connected
                                         or now - start >= _QUIET_CONNECT):
                waited_since = now
                log.warning("epoch store %s: ZooKeeper unreachable (%s); waiting to %s, "
                            "retrying for up to %.1f s", self.uri, why, what, deadline - now)
            delay = min(backoff.next_delay(), deadline - now)
            if why == "not connected":  # back off, but wake up as soon as kazoo reconnects
                self._connected.wait(delay)
            else:  # connected, yet the call failed: the connection is going down
                time.sleep(delay)

    def _wait(self, async_result: Any, deadline: float | None = None) -> Any:
        """The result of a kazoo async call, waiting at most until ``deadline``."""
        if deadline is None:
            deadline = time.monotonic() + self.timeout
        return async_result.get(timeout=max(0.01, deadline - time.monotonic()))

    def _ensure_layout(self, deadline: float) -> None:
        from kazoo.exceptions import NodeExistsError  # kazoo: optional, see __init__

        for path in (self._logs, self._events):
            with contextlib.suppress(NodeExistsError):
                self._wait(self._zk.create_async(path, b"0" if path == self._events else b"",
                                                 makepath=True), deadline)
        if self._acl is not None:
            self._lock_znodes(deadline)
        self._ready = True

    def _lock_znodes(self, deadline: float) -> None:
        """Give every znode under the root our ACL, once: a store made before security
        was on (or by an older version) would stay open to anyone otherwise."""
        acls, _stat = self._wait(self._zk.get_acls_async(self._root), deadline)
        if list(acls) == list(self._acl or ()):
            return
        log.warning("epoch store %s: znodes not locked yet; setting their ACLs", self.uri)
        pending = [self._root]
        while pending:
            path = pending.pop()
            self._wait(self._zk.set_acls_async(path, self._acl), deadline)
            pending += [f"{path}/{child}" for child in
                        self._wait(self._zk.get_children_async(path), deadline)]

    def _outcome_unknown(self, exc: BaseException) -> bool:
        from kazoo.exceptions import ConnectionLoss, OperationTimeoutError  # optional: kazoo

        return isinstance(exc, ConnectionLoss | OperationTimeoutError
                          | self._zk.handler.timeout_exception)

    def _log_path(self, log_id: int) -> str:
        return f"{self._logs}/{log_id}"

    def _read_log(self, log_id: int) -> tuple[LogEpochState | None, Any, str | None]:
        """(state, znode stat, writer token) of a log; (None, None, None) when absent."""
        return self._read_result(log_id, self._zk.get_async(self._log_path(log_id)))

    def _read_result(self, log_id: int,
                     pending: Any) -> tuple[LogEpochState | None, Any, str | None]:
        """``_read_log``'s answer from a read already sent (``get_async``)."""
        from kazoo.exceptions import NoNodeError  # kazoo: optional, see __init__

        try:
            data, stat = self._wait(pending)
        except NoNodeError:
            return None, None, None
        d = json.loads(data)
        body = dict(d["s"])
        body["version"] = stat.version + 1
        body["log_id"] = log_id
        return LogEpochState.from_dict(body), stat, d.get("w")

    @contextlib.contextmanager
    def _doing(self, what: str) -> Iterator[None]:
        """Name what this thread's operations are for (the wait log line says it)."""
        outer = getattr(self._purpose, "what", None)
        self._purpose.what = outer or what
        try:
            yield
        finally:
            self._purpose.what = outer

    def _what(self, default: str) -> str:
        return getattr(self._purpose, "what", None) or default

    # -- EpochStore -----------------------------------------------------------------------
    def activate(self, log_id: int, metadata: MetadataArg = None,
                 expected_version: int | None = None) -> tuple[int, LogEpochState]:
        with self._doing(f"activate a new epoch of log {log_id} (sequencer activation)"):
            return super().activate(log_id, metadata, expected_version)

    def set_last_clean_epoch(self, log_id: int, epoch: int,
                             tail: TailRecord | None = None,
                             outcomes: tuple[EpochOutcome, ...] = ()) -> LogEpochState:
        with self._doing(f"record log {log_id} clean up to epoch {epoch} (recovery)"):
            return super().set_last_clean_epoch(log_id, epoch, tail, outcomes)

    def get(self, log_id: int) -> LogEpochState | None:
        """The log's state, including every write ZooKeeper acknowledged before the call:
        the server this session talks to may lag behind another session's write (a
        sequencer's new epoch), so the read follows a sync."""
        log_id = check_log_id(log_id)

        def read() -> LogEpochState | None:
            self._wait(self._zk.sync_async(self._log_path(log_id)))
            return self._read_log(log_id)[0]

        return self._call(f"read log {log_id}", read)  # type: ignore[no-any-return]

    def get_many(self, log_ids: Sequence[int]) -> dict[int, LogEpochState]:
        """One sync (so every write ZooKeeper acknowledged before the call is seen, as in
        ``get``), then every log's read sent at once."""
        ids = [check_log_id(log_id) for log_id in log_ids]

        def read() -> dict[int, LogEpochState]:
            self._wait(self._zk.sync_async(self._logs))
            pending = [self._zk.get_async(self._log_path(log_id)) for log_id in ids]
            out = {}
            for log_id, p in zip(ids, pending, strict=True):
                state = self._read_result(log_id, p)[0]
                if state is not None:
                    out[log_id] = state
            return out

        return self._call(f"read {len(ids)} logs", read)  # type: ignore[no-any-return]

    def epochs(self, log_ids: Sequence[int]) -> dict[int, int]:
        return {log_id: state.epoch for log_id, state in self.get_many(log_ids).items()}

    def update(self, log_id: int,
               fn: Callable[[LogEpochState | None], LogEpochState | None]) -> LogEpochState | None:
        log_id = check_log_id(log_id)
        path = self._log_path(log_id)
        token = uuid.uuid4().hex
        sent: list[Any] = []  # what the last write sent: (expected stat version, new state)

        def attempt() -> LogEpochState | None:
            cur, stat, writer = self._read_log(log_id)
            if sent:  # a write whose answer was lost: did it land?
                expected, new_state = sent.pop()
                if writer == token and stat is not None and stat.version == expected + 1:
                    return replace(new_state, version=stat.version + 1)
            step = next_state(log_id, cur, fn)
            if step is None:
                return cur
            new, body = step
            self._write_versioned(path, _dumps({"s": body, "w": token}), stat, sent, new)
            return new

        return self._cas_loop(f"update log {log_id}", attempt)  # type: ignore[no-any-return]

    def update_many(self, changes: Sequence[tuple[int, UpdateFn]]
                    ) -> list[LogEpochState | None | LogDeviceError]:
        """The changes in ``multi`` transactions of up to ``_MULTI_MAX`` logs: one round
        trip per transaction (reads sent together, then one conditional write of them
        all), atomic like ``update``.  A log named twice goes one change at a time."""
        checked = [(check_log_id(log_id), fn) for log_id, fn in changes]
        if len(checked) < 2 or len({log_id for log_id, _ in checked}) != len(checked):
            return super().update_many(checked)
        out: list[LogEpochState | None | LogDeviceError] = []
        for i in range(0, len(checked), _MULTI_MAX):
            out += self._update_multi(checked[i:i + _MULTI_MAX])
        return out

    def _update_multi(self, changes: list[tuple[int, UpdateFn]]
                      ) -> list[LogEpochState | None | LogDeviceError]:
        token = uuid.uuid4().hex
        # A multi whose answer was lost: (expected znode version per entry, None where the
        # entry wrote nothing; the results it would give).  The next attempt's reads tell
        # whether it landed: a multi lands whole or not at all.
        sent: list[tuple[list[int | None], list[Any]]] = []

        def attempt() -> list[LogEpochState | None | LogDeviceError]:
            pending = [self._zk.get_async(self._log_path(log_id)) for log_id, _ in changes]
            current = [self._read_result(log_id, p)
                       for (log_id, _), p in zip(changes, pending, strict=True)]
            if sent:
                was_expected, would_return = sent.pop()
                if any(e is not None and stat is not None and writer == token
                       and stat.version == e + 1
                       for e, (_, stat, writer) in zip(was_expected, current, strict=True)):
                    return would_return
            tx = self._zk.transaction()
            results: list[LogEpochState | None | LogDeviceError] = []
            expected: list[int | None] = []
            for (log_id, fn), (cur, stat, _) in zip(changes, current, strict=True):
                try:
                    step = next_state(log_id, cur, fn)
                except LogDeviceError as exc:  # this entry's own refusal
                    results.append(exc)
                    expected.append(None)
                    continue
                if step is None:
                    results.append(cur)
                    expected.append(None)
                    continue
                new, body = step
                data = _dumps({"s": body, "w": token})
                if stat is None:
                    tx.create(self._log_path(log_id), data)
                    expected.append(-1)
                else:
                    tx.set_data(self._log_path(log_id), data, version=stat.version)
                    expected.append(stat.version)
                results.append(new)
            if all(e is None for e in expected):
                return results
            try:
                answers = self._wait(tx.commit_async())
            except Exception as exc:
                if self._outcome_unknown(exc):
                    sent.append((expected, results))
                raise
            if any(isinstance(a, Exception) for a in answers):
                raise _Retry()  # another writer changed one of the logs: read again
            return results

        return self._cas_loop(  # type: ignore[no-any-return]
            f"update {len(changes)} logs ({changes[0][0]}..)", attempt)

    def _write_versioned(self, path: str, data: bytes, stat: Any, sent: list[Any],
                         new: Any) -> None:
        """Create ``path`` (``stat`` None) or set it at ``stat``'s version; ``_Retry`` when
        another writer came first.  On an error that leaves the outcome unknown, (expected
        version, ``new``) goes to ``sent``: the next attempt's read tells whether it landed
        (the data carries the writer's token)."""
        from kazoo.exceptions import BadVersionError, NodeExistsError  # optional: kazoo

        expected = stat.version if stat is not None else -1
        try:
            if stat is None:
                self._wait(self._zk.create_async(path, data))
            else:
                self._wait(self._zk.set_async(path, data, version=stat.version))
        except (BadVersionError, NodeExistsError):
            raise _Retry() from None
        except Exception as exc:
            if self._outcome_unknown(exc):
                sent.append((expected, new))
            raise

    def _cas_loop(self, what: str, attempt: Callable[[], Any]) -> Any:
        what = self._what(what)
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                return self._call(what, attempt)
            except _Retry:
                if time.monotonic() > deadline:
                    raise TimedOutError(message=f"epoch store {self.uri}: could not {what}: "
                                                f"other writers kept winning for "
                                                f"{self.timeout:g} s") from None

    def remove(self, log_id: int, expected_version: int | None = None) -> bool:
        log_id = check_log_id(log_id)
        path = self._log_path(log_id)

        def attempt() -> bool:
            from kazoo.exceptions import BadVersionError, NoNodeError  # optional: kazoo

            cur, stat, _ = self._read_log(log_id)
            have = cur.version if cur is not None else 0
            if expected_version is not None and have != expected_version:
                raise VersionMismatchError(message=f"log {log_id} is at version {have}, "
                                                   f"expected {expected_version}", current=cur)
            if stat is None:
                return False
            try:
                self._wait(self._zk.delete_async(path, version=stat.version))
            except NoNodeError:
                return False  # removed by someone else (or by our own lost-answer delete)
            except BadVersionError:
                raise _Retry() from None
            return True

        return self._cas_loop(f"remove log {log_id}", attempt)  # type: ignore[no-any-return]

    def logs(self) -> list[int]:
        def attempt() -> list[int]:
            names = self._wait(self._zk.get_children_async(self._logs))
            return sorted(int(n) for n in names if n.isdigit())

        return self._call("list logs", attempt)  # type: ignore[no-any-return]

    def append_event(self, event: Mapping[str, Any]) -> int:
        ev = validate_event(event)
        token = uuid.uuid4().hex
        data = _dumps({"e": ev, "t": int(time.time() * 1000), "w": token})
        sent: list[int] = []

        def attempt() -> int:
            from kazoo.exceptions import NoNodeError  # kazoo: optional, see __init__

            if sent:  # the transaction's answer was lost: did it commit?
                n = sent.pop()
                try:
                    got, _ = self._wait(self._zk.get_async(self._event_path(n)))
                    if json.loads(got).get("w") == token:
                        return n
                except NoNodeError:
                    pass
            counter, stat = self._wait(self._zk.get_async(self._events))
            n = int(counter or b"0") + 1
            tx = self._zk.transaction()
            tx.set_data(self._events, str(n).encode(), version=stat.version)
            tx.create(self._event_path(n), data)
            try:
                results = self._wait(tx.commit_async())
            except Exception as exc:
                if self._outcome_unknown(exc):
                    sent.append(n)
                raise
            if any(isinstance(r, Exception) for r in results):
                raise _Retry()  # another event took version n first
            return n

        return self._cas_loop("append an event", attempt)  # type: ignore[no-any-return]

    def _event_path(self, version: int) -> str:
        return f"{self._events}/{version:0{_EVENT_DIGITS}d}"

    def events(self, since_version: int = 0) -> list[dict[str, Any]]:
        since = int(since_version)

        def attempt() -> list[dict[str, Any]]:
            names = self._wait(self._zk.get_children_async(self._events))
            versions = sorted(v for v in (int(n) for n in names if n.isdigit()) if v > since)
            pending = [self._zk.get_async(self._event_path(v)) for v in versions]
            out = []
            for v, res in zip(versions, pending, strict=True):
                d = json.loads(self._wait(res)[0])
                ev = dict(d["e"])
                ev["version"] = v
                ev["time_ms"] = d["t"]
                out.append(ev)
            return out

        return self._call("read the event log", attempt)  # type: ignore[no-any-return]

    def _read_logs_config(self) -> tuple[LogsConfigState, Any, str | None]:
        """(state, znode stat, writer token); (empty state, None, None) when absent."""
        from kazoo.exceptions import NoNodeError  # kazoo: optional, see __init__

        try:
            data, stat = self._wait(self._zk.get_async(self._logs_config))
        except NoNodeError:
            return LogsConfigState(), None, None
        d = json.loads(data)
        return LogsConfigState.from_body(stat.version + 1, d["s"]), stat, d.get("w")

    def logs_config(self) -> LogsConfigState:
        """The runtime log groups, including every change ZooKeeper acknowledged before
        the call (the read follows a sync, like ``get``)."""
        def read() -> LogsConfigState:
            self._wait(self._zk.sync_async(self._logs_config))
            return self._read_logs_config()[0]

        return self._call("read the log groups", read)  # type: ignore[no-any-return]

    def update_logs_config(self, fn: LogsConfigFn) -> LogsConfigState:
        token = uuid.uuid4().hex
        sent: list[Any] = []  # what the last write sent: (expected stat version, new state)

        def attempt() -> LogsConfigState:
            cur, stat, writer = self._read_logs_config()
            if sent:  # a write whose answer was lost: did it land?
                expected, new_state = sent.pop()
                if writer == token and stat is not None and stat.version == expected + 1:
                    return cur
            new = next_logs_config(cur, fn)
            if new is None:
                return cur
            self._write_versioned(self._logs_config, _dumps({"s": new.to_body(), "w": token}),
                                  stat, sent, new)
            return new

        return self._cas_loop("update the log groups", attempt)  # type: ignore[no-any-return]

    def cluster_identity(self, cluster: str) -> str:
        def attempt() -> str:
            from kazoo.exceptions import NodeExistsError  # kazoo: optional, see __init__

            proposed = {"cluster": cluster, "id": uuid.uuid4().hex, "schema": SCHEMA_VERSION}
            try:
                self._wait(self._zk.create_async(self._identity, _dumps(proposed)))
                return self._check_identity(proposed, cluster)
            except NodeExistsError:
                data, _ = self._wait(self._zk.get_async(self._identity))
                return self._check_identity(json.loads(data), cluster)

        return self._call("read the cluster identity", attempt)  # type: ignore[no-any-return]

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            self._zk.stop()
        finally:
            self._zk.close()

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def session(self) -> tuple[int, bytes] | None:
        """The ZooKeeper session (id, password) now held, None while there is none."""
        return self._zk.client_id  # type: ignore[no-any-return]

    @property
    def connected(self) -> bool:
        """Whether the client holds a live ZooKeeper connection now."""
        return bool(self._zk.connected)

    def __repr__(self) -> str:
        return f"ZooKeeperEpochStore({self.uri!r}{', closed' if self._closed else ''})"

