"""The systems benchmarks/peers.py compares, each behind the same small interface.

- ``Ours``: a ``LocalCluster`` of 3 node processes, R=2, the node's default
  ``append_store_durability`` (``async_write``: a STORED answer means the record is in
  RocksDB's write-ahead log on each of the 2 copies, written but not fsynced).  One
  ``Client`` writes, another reads.
- ``RedisStreams``: Debian's ``redis-server`` (AOF on, ``appendfsync everysec``, no RDB
  snapshots; one copy), redis-py: ``XADD`` to write, ``XREAD`` (``BLOCK`` to tail) to read.
- ``JetStream``: Debian's ``nats-server -js`` with a store dir (file storage, R=1: one
  copy; the server's default sync interval: the file store is fsynced every 2 minutes, an
  ack does not wait for it), nats-py: ``publish_async`` (acks collected asynchronously,
  a bounded number pending) to write, an ordered push consumer to read.

Every server is started here on a free 127.0.0.1 port in the run's temp dir, waited for
with a bounded wait, and stopped (terminate, then kill) when the system closes; it also
dies with this process (``PR_SET_PDEATHSIG``).  Each system's writer and reader are
separate clients (connections), as a producer and a consumer would be.

Every latency run goes through ``System.latency_run``: the same open-loop scheduler
(``peers_openloop.run_open_loop``) hands records to the system's ``send``; the system's
tailing reader marks them delivered.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import numpy as np
from peers_openloop import Deliveries, index_of, latency_figures, run_open_loop

from logdevice.local_cluster import _die_with_parent, free_ports
from logdevice.records import LSN_MAX

__all__ = ["SYSTEMS", "System", "Ours", "RedisStreams", "JetStream", "Settings"]

Sender = tuple[Callable[[int, int], None], Callable[[], dict[str, Any]]]


class Settings:
    """What every system is run with (from peers.py's arguments)."""

    def __init__(self, *, window: int, bw_memory: int, bw_time_trigger: float,
                 compression: str, drain_seconds: float, timeout: float) -> None:
        self.window = window  # records in flight / pending acks / per pipeline
        self.bw_memory = bw_memory  # BufferedWriter memory_limit_bytes
        self.bw_time_trigger = bw_time_trigger  # BufferedWriter time trigger, latency rows
        self.compression = compression  # BufferedWriter blob compression
        self.drain_seconds = drain_seconds  # latency: wait for the last deliveries
        self.timeout = timeout


def _rate(records: int, payload_bytes: int, seconds: float, **extra: Any) -> dict[str, Any]:
    return {"records": records, "seconds": seconds, "records_per_s": records / seconds,
            "mb_per_s": payload_bytes / seconds / 1e6, **extra}


def _which(name: str) -> str:
    exe = shutil.which(name) or next(
        (p for p in (f"/usr/sbin/{name}", f"/usr/bin/{name}") if os.access(p, os.X_OK)), None)
    if exe is None:
        raise SystemExit(f"{name} not found: run ci/system-deps.sh (Debian package {name})")
    return exe


@contextlib.contextmanager
def server_process(name: str, cmd: list[str], log: Path, ready: Callable[[], bool],
                   timeout: float = 20.0) -> Iterator[subprocess.Popen[bytes]]:
    """Start ``cmd`` (output to ``log``), poll ``ready()`` until it is true (at most
    ``timeout`` seconds), yield the process; terminate it (kill after 10 s) on exit."""
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
    try:
        deadline = time.monotonic() + timeout
        while not ready():
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace")[-2000:]
                raise SystemExit(f"{name} did not start within {timeout:g} s "
                                 f"(exit {proc.poll()}); its log:\n{tail}")
            time.sleep(0.05)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@contextlib.contextmanager
def redis_server(data: Path) -> Iterator[tuple[int, int]]:
    """redis-server on a free 127.0.0.1 port with its files in ``data`` (AOF on,
    ``appendfsync everysec``, no RDB snapshots); yields the port and the server's pid."""
    data.mkdir(parents=True, exist_ok=True)
    (port,) = free_ports(1)
    cmd = [_which("redis-server"), "--port", str(port), "--bind", "127.0.0.1",
           "--dir", str(data), "--appendonly", "yes", "--appendfsync", "everysec",
           "--save", "", "--daemonize", "no"]
    with server_process("redis-server", cmd, data / "redis.log",
                        lambda: _answers(port, b"PING\r\n", b"+PONG")) as proc:
        yield port, proc.pid


def _answers(port: int, send: bytes, expect: bytes) -> bool:
    """Does 127.0.0.1:port accept a connection and answer ``send`` with ``expect``?"""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as s:
            if send:
                s.sendall(send)
            return s.recv(64).startswith(expect)
    except OSError:
        return False


class System:
    """One system under test; a context manager (servers start on enter, stop on exit)."""

    key = ""
    label = ""
    durability = ""
    #: max-rate rows: (row key, what the row measures)
    max_rate_rows: list[tuple[str, str]] = []
    #: latency rows: (row key, what sends the records)
    latency_rows: list[tuple[str, str]] = []

    def __init__(self, work: Path, settings: Settings) -> None:
        self.work = work
        self.s = settings
        self._stack = contextlib.ExitStack()
        self._seq = 0

    def __enter__(self) -> System:
        try:
            self.start()
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def start(self) -> None:
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        return {"label": self.label, "durability": self.durability}

    def server_pids(self) -> dict[str, int]:
        """The system's server processes (name -> pid), for CPU accounting."""
        raise NotImplementedError

    def new_streams(self, k: int) -> list[Any]:
        """``k`` fresh logs / streams (each workload writes its own)."""
        raise NotImplementedError

    def max_rate(self, row: str, streams: list[Any], payloads: list[bytes],
                 seconds: float) -> dict[str, Any]:
        """Write ``payloads`` (cycled) round robin over ``streams`` as fast as the row's
        path goes for about ``seconds``; records/s counted to the last acknowledgement."""
        raise NotImplementedError

    def start_tail(self, stream: Any, deliveries: Deliveries) -> Callable[[], None]:
        """A tailing reader of ``stream`` marking each record in ``deliveries``; returns
        the function that stops it."""
        raise NotImplementedError

    def open_sender(self, row: str, stream: Any, payloads: list[bytes],
                    acks: Deliveries | None = None) -> Sender:
        """``send(lo, hi)``: records ``lo .. hi-1`` of ``payloads``, as the row's client
        sends them (ours and JetStream without waiting for acknowledgements; redis-py's
        pipeline waits for its replies); ``finish()``: wait for every acknowledgement,
        return the error counts.  ``acks``, if given, is marked with the time each
        record's acknowledgement arrived."""
        raise NotImplementedError

    def backfill(self, n: int, payloads: list[bytes]) -> dict[str, Any]:
        """Write ``n`` records (``payloads`` cycled) into one fresh stream with the
        system's bulk path, then read them all back from the start; both timed."""
        raise NotImplementedError

    def latency_run(self, row: str, rate: float, total: int,
                    payloads: list[bytes]) -> dict[str, Any]:
        """The open-loop latency workload, the same code for every system."""
        (stream,) = self.new_streams(1)
        warm = 200  # the path and the reader are warm before the clock starts
        deliveries = Deliveries(warm + total)
        stop = self.start_tail(stream, deliveries)
        try:
            send, finish = self.open_sender(row, stream, payloads)
            for i in range(warm):
                send(i, i + 1)
                time.sleep(0.001)
            deliveries.wait_count(warm, self.s.drain_seconds)
            sched = run_open_loop(rate, total, lambda lo, hi: send(lo + warm, hi + warm))
            deliveries.wait(self.s.drain_seconds)
            acks = finish()
        finally:
            stop()
        out = latency_figures(sched["due"], deliveries.after(warm))
        out.update(rate=rate, send_lag_ms=sched["send_lag_ms"], **acks)
        return out


# ---------------------------------------------------------------------------- ours


class Ours(System):
    key = "ours"
    label = "ours (LocalCluster 3 nodes, R=2)"
    durability = ("ack after 2 copies are in RocksDB's WAL on 2 nodes, WAL not fsynced "
                  "(append_store_durability=async_write, the node default)")
    max_rate_rows = [
        ("append_async", "append_async, {window} in flight"),
        ("buffered", "BufferedWriter.append per record ({compression} blobs, "
                     "<= {bw_memory_mb} MB buffered + in flight)"),
    ]
    latency_rows = [
        ("append_async", "append_async per record"),
        ("buffered", "BufferedWriter.append, time trigger {bw_time_trigger_ms:g} ms"),
    ]
    LOGS = 64

    def start(self) -> None:
        from logdevice.client import Client
        from logdevice.local_cluster import LocalCluster

        self.cluster = self._stack.enter_context(LocalCluster(
            nodes=3, replication=2, logs=range(1, self.LOGS + 1), root=self.work / "ours",
            log_level="WARNING"))
        self.writer = self._stack.enter_context(
            Client(self.cluster.config_path, timeout=self.s.timeout))
        self.reader_client = self._stack.enter_context(
            Client(self.cluster.config_path, timeout=self.s.timeout))

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "nodes": 3, "replication": 2}

    def server_pids(self) -> dict[str, int]:
        return {f"N{i}": pid for i in self.cluster.running()
                if (pid := self.cluster.pid(i)) is not None}

    def new_streams(self, k: int) -> list[int]:
        if self._seq + k > self.LOGS:
            raise RuntimeError("out of logs")
        logs = list(range(self._seq + 1, self._seq + k + 1))
        self._seq += k
        for log in logs:  # each log's sequencer is active before any clock starts
            self.writer.append(log, b"warm-up")
        return logs

    def max_rate(self, row: str, streams: list[Any], payloads: list[bytes],
                 seconds: float) -> dict[str, Any]:
        if row == "append_async":
            return self._append_async_max(streams, payloads, seconds)
        return self._buffered_max(streams, payloads, seconds)

    def _append_async_max(self, logs: list[int], payloads: list[bytes],
                          seconds: float) -> dict[str, Any]:
        window = self.s.window
        sem = threading.Semaphore(window)
        errors = [0]

        def done(f: Future[int]) -> None:
            if f.exception() is not None:
                errors[0] += 1
            sem.release()

        c, nl, npay = self.writer, len(logs), len(payloads)
        n = nbytes = 0
        t0 = time.perf_counter()
        end = t0 + seconds
        while time.perf_counter() < end:
            for _ in range(256):
                sem.acquire()
                p = payloads[n % npay]
                c.append_async(logs[n % nl], p).add_done_callback(done)
                n += 1
                nbytes += len(p)
        for _ in range(window):
            if not sem.acquire(timeout=self.s.timeout):
                raise RuntimeError("append_async: acknowledgements did not arrive")
        elapsed = time.perf_counter() - t0
        return _rate(n, nbytes, elapsed, errors=errors[0])

    def _buffered_max(self, logs: list[int], payloads: list[bytes],
                      seconds: float) -> dict[str, Any]:
        w = self.writer.create_buffered_writer(
            size_trigger=1_000_000, time_trigger=0.01, compression=self.s.compression,
            memory_limit_bytes=self.s.bw_memory)
        nl, npay = len(logs), len(payloads)
        n = nbytes = 0
        t0 = time.perf_counter()
        end = t0 + seconds
        while time.perf_counter() < end:
            for _ in range(1024):
                p = payloads[n % npay]
                w.append(logs[n % nl], p)
                n += 1
                nbytes += len(p)
        if not w.flush(wait=True, timeout=self.s.timeout * 4):
            raise RuntimeError("BufferedWriter: blobs did not finish")
        elapsed = time.perf_counter() - t0
        st = dict(w.stats)
        w.close(timeout=self.s.timeout)
        return _rate(n, nbytes, elapsed, errors=st.get("failed_blobs", 0),
                     blobs=st.get("blobs", 0))

    def start_tail(self, stream: Any, deliveries: Deliveries) -> Callable[[], None]:
        start = self.writer.get_tail_lsn(stream) + 1
        stop = threading.Event()
        started = threading.Event()

        def read() -> None:
            with self.reader_client.create_reader() as r:
                r.wait_only_when_no_data()
                r.start_reading(stream, start, LSN_MAX)
                started.set()
                while not stop.is_set():
                    b = r.read_batch(10_000, timeout=0.1)
                    if not len(b):
                        continue
                    now = time.perf_counter()
                    p, starts = b.payloads, b.offsets[:-1].astype(np.intp)
                    idx = np.zeros(len(b), dtype=np.int64)
                    for k in range(8):  # the first 8 payload bytes hold the index
                        idx |= p[starts + k].astype(np.int64) << (8 * k)
                    deliveries.mark_many(idx, now)

        t = threading.Thread(target=read, name="peers-ours-tail", daemon=True)
        t.start()
        started.wait(self.s.timeout)
        time.sleep(0.2)  # the reader's streams are up on the nodes

        def halt() -> None:
            stop.set()
            t.join(self.s.timeout)
        return halt

    def open_sender(self, row: str, stream: Any, payloads: list[bytes],
                    acks: Deliveries | None = None) -> Sender:
        errors = [0]
        pending = [0]
        lock = threading.Lock()
        idle = threading.Event()
        idle.set()

        def done(f: Any, i: int = -1) -> None:
            if acks is not None:
                acks.mark(i, time.perf_counter())
            with lock:
                if f.exception() is not None:
                    errors[0] += 1
                pending[0] -= 1
                if pending[0] == 0:
                    idle.set()

        if row == "append_async":
            c = self.writer

            def send(lo: int, hi: int) -> None:
                with lock:
                    pending[0] += hi - lo
                    idle.clear()
                for i in range(lo, hi):
                    c.append_async(stream, payloads[i]).add_done_callback(
                        functools.partial(done, i=i))

            def finish() -> dict[str, Any]:
                idle.wait(self.s.timeout)
                return {"errors": errors[0], "unacked": pending[0]}
            return send, finish

        w = self.writer.create_buffered_writer(
            size_trigger=1_000_000, time_trigger=self.s.bw_time_trigger,
            compression=self.s.compression, memory_limit_bytes=self.s.bw_memory)

        def bsend(lo: int, hi: int) -> None:
            with lock:
                pending[0] += hi - lo
                idle.clear()
            for i in range(lo, hi):
                w.append(stream, payloads[i]).add_done_callback(functools.partial(done, i=i))

        def bfinish() -> dict[str, Any]:
            w.flush(wait=True, timeout=self.s.timeout)
            idle.wait(self.s.timeout)
            w.close(timeout=self.s.timeout)
            return {"errors": errors[0], "unacked": pending[0]}
        return bsend, bfinish

    def backfill(self, n: int, payloads: list[bytes]) -> dict[str, Any]:
        """Bulk path: BufferedWriter.append_many of 10,000 payloads per call; read back
        with one Reader's read_batch (100,000 records per batch)."""
        (log,) = self.new_streams(1)
        size, chunk = len(payloads[0]), min(10_000, len(payloads))
        base = np.frombuffer(b"".join(payloads[:chunk]), dtype=np.uint8)
        offsets = np.arange(chunk + 1, dtype=np.uint64) * np.uint64(size)
        w = self.writer.create_buffered_writer(size_trigger=1_000_000, time_trigger=0.01,
                                               compression=self.s.compression)
        lo, hi = LSN_MAX, 0
        t0 = time.perf_counter()
        futs = []
        for start in range(0, n, chunk):
            m = min(chunk, n - start)
            futs.append(w.append_many(log, (base[:m * size], offsets[:m + 1])))
        w.flush()
        for f in futs:
            lsns = f.result(self.s.timeout * 4)
            lo, hi = min(lo, int(lsns.min())), max(hi, int(lsns.max()))
        write_s = time.perf_counter() - t0
        w.close(timeout=self.s.timeout)
        got = nbytes = 0
        with self.reader_client.create_reader() as r:
            t0 = time.perf_counter()
            r.start_reading(log, lo, hi)
            while got < n:
                b = r.read_batch(100_000, timeout=self.s.timeout)
                if not len(b) and not b.gaps:
                    break
                got += len(b)
                nbytes += int(b.payloads.nbytes)
            read_s = time.perf_counter() - t0
        return {"write": _rate(n, n * size, write_s), "read": _rate(got, nbytes, read_s)}


# ---------------------------------------------------------------------------- Redis


class RedisStreams(System):
    key = "redis"
    label = "Redis Streams"
    durability = ("ack once the XADD is in the AOF (written, appendfsync everysec: fsynced "
                  "once a second); one copy")
    max_rate_rows = [("xadd_pipeline", "redis-py XADD, pipelines of {window}")]
    latency_rows = [("xadd", "redis-py XADD, the records due at once in one pipeline")]

    def start(self) -> None:
        import redis  # the bench extra

        self._redis = redis
        self.port, self.pid = self._stack.enter_context(redis_server(self.work / "redis"))
        self.r = self.client()
        self._stack.callback(self.r.close)
        self.version = self.r.info("server")["redis_version"]

    def client(self) -> Any:
        return self._redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=60)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "version": f"redis-server {self.version}"}

    def server_pids(self) -> dict[str, int]:
        return {"redis-server": self.pid}

    def new_streams(self, k: int) -> list[str]:
        keys = [f"s{self._seq + i}" for i in range(k)]
        self._seq += k
        return keys

    def max_rate(self, row: str, streams: list[Any], payloads: list[bytes],
                 seconds: float) -> dict[str, Any]:
        window, nl, npay = self.s.window, len(streams), len(payloads)
        n = nbytes = 0
        t0 = time.perf_counter()
        end = t0 + seconds
        while time.perf_counter() < end:
            pipe = self.r.pipeline(transaction=False)
            for _ in range(window):
                p = payloads[n % npay]
                pipe.xadd(streams[n % nl], {"p": p})
                n += 1
                nbytes += len(p)
            pipe.execute()
        elapsed = time.perf_counter() - t0
        return _rate(n, nbytes, elapsed, errors=0)

    def start_tail(self, stream: Any, deliveries: Deliveries) -> Callable[[], None]:
        stop = threading.Event()
        rr = self.client()

        def read() -> None:
            last = "0-0"  # the stream is new: everything in it is the run's
            while not stop.is_set():
                resp = rr.xread({stream: last}, count=1000, block=100)
                if not resp:
                    continue
                now = time.perf_counter()
                entries = resp[0][1]
                for _id, fields in entries:
                    deliveries.mark(index_of(fields[b"p"]), now)
                last = entries[-1][0]

        t = threading.Thread(target=read, name="peers-redis-tail", daemon=True)
        t.start()

        def halt() -> None:
            stop.set()
            t.join(self.s.timeout)
            rr.close()
        return halt

    def open_sender(self, row: str, stream: Any, payloads: list[bytes],
                    acks: Deliveries | None = None) -> Sender:
        r = self.r

        def send(lo: int, hi: int) -> None:
            if hi - lo == 1:
                r.xadd(stream, {"p": payloads[lo]})
            else:
                pipe = r.pipeline(transaction=False)
                for i in range(lo, hi):
                    pipe.xadd(stream, {"p": payloads[i]})
                pipe.execute()
            if acks is not None:
                now = time.perf_counter()
                for i in range(lo, hi):
                    acks.mark(i, now)

        return send, lambda: {"errors": 0, "unacked": 0}

    def backfill(self, n: int, payloads: list[bytes]) -> dict[str, Any]:
        """Bulk path: the same XADDs RESP-encoded once and pipelined over the socket
        (1,000 per round trip, Redis's best case from one client); read back with XREAD
        COUNT 10000 (non-blocking), one page after another."""
        from write_path import xadd_raw  # benchmarks/: run as scripts

        (key,) = self.new_streams(1)
        cmds = xadd_commands(payloads, key.encode())
        t0 = time.perf_counter()
        done = 0
        while done < n:
            m = min(len(cmds), n - done)
            xadd_raw(self.r, cmds[:m])
            done += m
        write_s = time.perf_counter() - t0
        if self.r.xlen(key) != n:
            raise RuntimeError(f"redis backfill: {self.r.xlen(key)} of {n} entries")
        rr = self.client()
        got = nbytes = 0
        last = "0-0"
        t0 = time.perf_counter()
        while got < n:
            resp = rr.xread({key: last}, count=10_000)
            if not resp:
                break
            entries = resp[0][1]
            got += len(entries)
            nbytes += sum(len(f[b"p"]) for _, f in entries)
            last = entries[-1][0]
        read_s = time.perf_counter() - t0
        rr.close()
        size = len(payloads[0])
        return {"write": _rate(n, n * size, write_s), "read": _rate(got, nbytes, read_s)}


def xadd_commands(payloads: list[bytes], key: bytes) -> np.ndarray:
    """``XADD key * p <payload>`` for each (equal-sized) payload, RESP-encoded, one row
    per command."""
    size = len(payloads[0])
    head = b"*5\r\n$4\r\nXADD\r\n$%d\r\n%s\r\n$1\r\n*\r\n$1\r\np\r\n$%d\r\n" % (len(key), key,
                                                                               size)
    cmd = np.empty((len(payloads), len(head) + size + 2), np.uint8)
    cmd[:, :len(head)] = np.frombuffer(head, np.uint8)
    cmd[:, len(head):-2] = np.frombuffer(b"".join(payloads), np.uint8).reshape(-1, size)
    cmd[:, -2:] = np.frombuffer(b"\r\n", np.uint8)
    return cmd


# ---------------------------------------------------------------------------- NATS JetStream


class _LoopThread:
    """An asyncio loop in a thread of its own (one per NATS connection)."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self.thread.start()

    def run(self, coro: Any, timeout: float) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        if not self.thread.is_alive():
            self.loop.close()


class JetStream(System):
    key = "jetstream"
    label = "NATS JetStream (1 server, R=1)"
    durability = ("ack once the message is in the stream's file store (file storage, "
                  "R=1: one copy; the server's default sync interval: fsync every 2 min)")
    max_rate_rows = [("publish_async", "nats-py js.publish_async, <= {window} acks pending")]
    latency_rows = [("publish_async", "nats-py js.publish_async (acks not awaited)")]

    def start(self) -> None:
        import nats  # the bench extra

        self._nats = nats
        data = self.work / "nats"
        data.mkdir(parents=True, exist_ok=True)
        (self.port,) = free_ports(1)
        cmd = [_which("nats-server"), "-a", "127.0.0.1", "-p", str(self.port), "-js",
               "-sd", str(data / "store"), "-l", str(data / "nats.log")]
        self.pid = self._stack.enter_context(server_process(
            "nats-server", cmd, data / "stdout.log",
            lambda: _answers(self.port, b"", b"INFO"))).pid
        self.wloop = _LoopThread("peers-nats-writer")
        self._stack.callback(self.wloop.close)
        self.rloop = _LoopThread("peers-nats-reader")
        self._stack.callback(self.rloop.close)
        self.nc = self.wloop.run(self._connect(), self.s.timeout)
        self._stack.callback(lambda: self.wloop.run(self.nc.close(), 10))
        self.rnc = self.rloop.run(self._connect(), self.s.timeout)
        self._stack.callback(lambda: self.rloop.run(self.rnc.close(), 10))
        self.js = self.nc.jetstream(publish_async_max_pending=self.s.window,
                                    timeout=self.s.timeout)
        self.rjs = self.rnc.jetstream(timeout=self.s.timeout)
        v = self.nc.connected_server_version
        self.version = f"{v.major}.{v.minor}.{v.patch}"

    async def _connect(self) -> Any:
        deadline = time.monotonic() + 20
        while True:  # JetStream may answer a moment after the port does
            nc = await self._nats.connect(f"nats://127.0.0.1:{self.port}",
                                          allow_reconnect=False)
            try:
                await nc.jetstream().account_info()
                return nc
            except Exception:
                await nc.close()
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.1)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "version": f"nats-server {self.version}"}

    def server_pids(self) -> dict[str, int]:
        return {"nats-server": self.pid}

    def new_streams(self, k: int) -> list[str]:
        from nats.js.api import StorageType

        subjects = [f"s{self._seq + i}" for i in range(k)]
        self._seq += k

        async def create() -> None:
            for subj in subjects:
                await self.js.add_stream(name=subj.upper(), subjects=[subj],
                                         storage=StorageType.FILE, num_replicas=1)
        self.wloop.run(create(), self.s.timeout)
        return subjects

    async def _publish(self, subjects: list[str], payloads: list[bytes], n: int | None,
                       seconds: float | None) -> dict[str, Any]:
        """publish_async round robin over ``subjects`` for ``seconds``, then wait for
        every ack."""
        js, nl, npay = self.js, len(subjects), len(payloads)
        errors = [0]

        def acked(f: asyncio.Future[Any]) -> None:
            if f.cancelled() or f.exception() is not None:
                errors[0] += 1

        i = nbytes = 0
        t0 = time.perf_counter()
        end = t0 + (seconds if seconds is not None else 1e9)
        while (n is None or i < n) and time.perf_counter() < end:
            for _ in range(256 if n is None else min(256, n - i)):
                p = payloads[i % npay]
                (await js.publish_async(subjects[i % nl], p)).add_done_callback(acked)
                i += 1
                nbytes += len(p)
        await asyncio.wait_for(js.publish_async_completed(), self.s.timeout)
        elapsed = time.perf_counter() - t0
        return _rate(i, nbytes, elapsed, errors=errors[0])

    def max_rate(self, row: str, streams: list[Any], payloads: list[bytes],
                 seconds: float) -> dict[str, Any]:
        out: dict[str, Any] = self.wloop.run(self._publish(streams, payloads, None, seconds),
                                             seconds + self.s.timeout * 2)
        return out

    def start_tail(self, stream: Any, deliveries: Deliveries) -> Callable[[], None]:
        async def cb(msg: Any) -> None:
            deliveries.mark(index_of(msg.data), time.perf_counter())

        sub = self.rloop.run(self.rjs.subscribe(stream, ordered_consumer=True, cb=cb),
                             self.s.timeout)
        time.sleep(0.2)

        def halt() -> None:
            self.rloop.run(sub.unsubscribe(), self.s.timeout)
        return halt

    def open_sender(self, row: str, stream: Any, payloads: list[bytes],
                    acks: Deliveries | None = None) -> Sender:
        js, loop = self.js, self.wloop.loop
        errors = [0]
        q: asyncio.Queue[tuple[int, int] | None] = asyncio.Queue()

        def acked(f: asyncio.Future[Any], i: int) -> None:
            if f.cancelled() or f.exception() is not None:
                errors[0] += 1
            elif acks is not None:
                acks.mark(i, time.perf_counter())

        async def publisher() -> None:  # sends in the order the scheduler handed them over
            while (item := await q.get()) is not None:
                for i in range(*item):
                    (await js.publish_async(stream, payloads[i])).add_done_callback(
                        lambda f, i=i: acked(f, i))
            await asyncio.wait_for(js.publish_async_completed(), self.s.timeout)

        task = asyncio.run_coroutine_threadsafe(publisher(), loop)

        def send(lo: int, hi: int) -> None:
            loop.call_soon_threadsafe(q.put_nowait, (lo, hi))

        def finish() -> dict[str, Any]:
            loop.call_soon_threadsafe(q.put_nowait, None)
            task.result(self.s.timeout * 2)
            return {"errors": errors[0], "unacked": 0}
        return send, finish

    async def _publish_core(self, subj: str, payloads: list[bytes], n: int) -> dict[str, Any]:
        """Core NATS publishes to the stream's subject (no reply subject, so no ack per
        message), then wait until the stream holds all ``n``."""
        nc, npay, nbytes = self.nc, len(payloads), 0
        t0 = time.perf_counter()
        for i in range(n):
            p = payloads[i % npay]
            await nc.publish(subj, p)
            nbytes += len(p)
        await nc.flush(self.s.timeout)
        deadline = time.monotonic() + self.s.timeout + n / 20_000
        while (stored := (await self.js.stream_info(subj.upper())).state.messages) < n:
            if time.monotonic() > deadline:
                raise RuntimeError(f"jetstream backfill: {stored} of {n} messages stored")
            await asyncio.sleep(0.02)
        return _rate(n, nbytes, time.perf_counter() - t0)

    def backfill(self, n: int, payloads: list[bytes]) -> dict[str, Any]:
        """Bulk path: core publishes into the stream (no per-message ack) until it holds
        all ``n``; read back with an ordered push consumer (flow control, no acks) from
        the first message."""
        (subj,) = self.new_streams(1)
        write = self.wloop.run(self._publish_core(subj, payloads, n),
                               self.s.timeout * 2 + n / 10_000)
        got = [0, 0]
        done = asyncio.Event()

        async def read() -> float:
            async def cb(msg: Any) -> None:
                got[0] += 1
                got[1] += len(msg.data)
                if got[0] >= n:
                    done.set()
            t0 = time.perf_counter()
            sub = await self.rjs.subscribe(subj, ordered_consumer=True, cb=cb)
            await asyncio.wait_for(done.wait(), self.s.timeout + n / 1000)
            elapsed = time.perf_counter() - t0
            await sub.unsubscribe()
            return elapsed

        read_s = self.rloop.run(read(), self.s.timeout * 2 + n / 1000)
        return {"write": write, "read": _rate(got[0], got[1], read_s)}


SYSTEMS: dict[str, type[System]] = {"ours": Ours, "redis": RedisStreams,
                                    "jetstream": JetStream}
