"""``ldwrite``: lines from stdin or a file into a log, through the BufferedWriter.

    ldwrite --config cluster.json --log 1 access.log
    producer | ldwrite --config cluster.json --log 1

Each line (without its newline) becomes one record.  Input is read as it arrives (up to
4 MiB at a time) and split with numpy: the newlines are found and dropped in one
vectorised pass and the lines go to ``append_many`` as ``(buffer, offsets)``, so no Python
object is made per line, and a line piped in is written within the time trigger.
A progress bar shows lines acknowledged; at the end it prints records/s, MB/s and the
last LSN written (``--quiet``: nothing but errors).

While the cluster is away (appends fail with CONNFAILED or TIMEDOUT once the
BufferedWriter's retries are spent), ldwrite keeps the lines that failed, stops reading
its input, and says so once on stderr::

    ldwrite: waiting for the cluster 'prod': no node reachable (N0: ...); 1,000 lines held
    ldwrite: cluster 'prod' reachable again; 1,000 held lines written

It appends them again in the order they were read (every 0.5 s, doubling up to 5 s) until
the cluster takes them, then reads on.  It waits for ever; lines still held when it is
interrupted count as not written.  Lines are written at least once: a line may be stored
twice when an append was stored but not acknowledged and then retried (by the
BufferedWriter, or after the wait), or when part of the lines appended in one call were
stored and the others failed (the call is appended again whole).

Exit status: 0 when every line was written; 130 after Ctrl-C (it writes what was read
first) when every line read was written; 1 if any line could not be written (an error
other than the cluster being away, or lines still held at Ctrl-C) or on a client or
input error.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import os
import select
import stat
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from typing import IO, Any

import numpy as np

from ldcore.lsn import to_string as lsn_str
from logdevice.cli import (
    add_credentials,
    add_version,
    credentials,
    interruptible,
    missing_extra,
)
from logdevice.cli import console as tool_console
from logdevice.client import Client
from logdevice.errors import E, LogDeviceError
from logdevice.tools.health import RetryDelay, Waiting, cluster_line, is_away

try:
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )
except ImportError as exc:  # the "cli" extra
    raise missing_extra("ldwrite", "cli", exc) from None

__all__ = ["main", "split_lines"]

CHUNK = 4 * 1024 * 1024
#: Seconds between looks at the appends while no input arrives.
TICK = 0.25
_NL = np.uint8(ord("\n"))


def split_lines(data: bytes, *, final: bool) -> tuple[np.ndarray, np.ndarray, int]:
    """Lines of ``data`` as ``(buffer without newlines, offsets, bytes consumed)``.

    A trailing partial line is not consumed unless ``final`` (end of input).  Offsets are
    the n + 1 boundaries of the lines inside the returned buffer.
    """
    arr = np.frombuffer(data, dtype=np.uint8)
    nl = np.flatnonzero(arr == _NL)
    consumed = int(nl[-1]) + 1 if len(nl) else 0
    ends = nl
    if final and consumed < len(arr):
        ends = np.append(nl, len(arr))
        consumed = len(arr)
    if len(ends) == 0:
        return np.empty(0, np.uint8), np.zeros(1, np.uint64), consumed
    body = np.delete(arr[:consumed], nl) if len(nl) else arr[:consumed].copy()
    offsets = np.zeros(len(ends) + 1, dtype=np.uint64)
    # the i-th line ends where its newline was, minus the i newlines removed before it
    offsets[1:] = ends - np.arange(len(ends))
    return body, offsets, consumed


def _blocks(f: IO[bytes], tick: float) -> Iterator[bytes | None]:
    """What ``f`` holds, as it arrives (up to ``CHUNK`` bytes at a time, not a full
    ``CHUNK``); ``None`` when nothing came for ``tick`` seconds (so the caller can look
    after its appends meanwhile), ``b""`` at the end."""
    fd = f.fileno()
    regular = stat.S_ISREG(os.fstat(fd).st_mode)  # always readable (and epoll refuses it)
    while True:
        if not regular and not select.select([fd], [], [], tick)[0]:
            yield None
            continue
        block = os.read(fd, CHUNK)
        yield block
        if not block:
            return


def _chunks(blocks: Iterable[bytes | None]) -> Iterator[tuple[np.ndarray, np.ndarray, int]
                                                         | None]:
    """The lines of ``blocks`` as ``split_lines`` gives them; ``None`` for a block that
    completed no line (or was ``None``)."""
    carry = b""
    for block in blocks:
        if block is None:
            yield None
            continue
        final = not block
        data = carry + block if carry else block
        if not data:
            return
        body, offsets, used = split_lines(data, final=final)
        carry = data[used:]
        yield (body, offsets, used) if len(offsets) > 1 else None
        if final:
            return


class _Chunk:
    """Lines appended with one ``append_many``, kept until they are acknowledged."""

    __slots__ = ("seq", "body", "offsets", "n", "again")

    def __init__(self, seq: int, body: np.ndarray, offsets: np.ndarray) -> None:
        self.seq = seq  # order of reading
        self.body = body
        self.offsets = offsets
        self.n = len(offsets) - 1
        self.again = False  # appended again after the cluster was away


class _Appender:
    """Appends chunks of lines through the BufferedWriter ``w`` and keeps the chunks that
    failed because the cluster is away (``is_away``: CONNFAILED, TIMEDOUT), to append
    them again, in the order they were read, once it answers (``recover``)."""

    def __init__(self, w: Any, log_id: int, config: Any, waiting: Waiting) -> None:
        self.w = w
        self.log_id = log_id
        self.config = config
        self.waiting = waiting
        self.lock = threading.Lock()
        self.acked = 0
        self.failed = 0
        self.last = 0
        self.first_error: BaseException | None = None
        self.held: dict[int, _Chunk] = {}  # failed while the cluster was away
        self.sent: dict[int, _Chunk] = {}  # appended, not yet acknowledged nor failed
        self.away_error: BaseException | None = None
        self.written_again = 0  # lines held, then written, in the current wait
        self._seq = itertools.count()
        self._delay = RetryDelay()

    def append(self, body: np.ndarray, offsets: np.ndarray) -> None:
        self._send(_Chunk(next(self._seq), body, offsets))

    def _send(self, chunk: _Chunk) -> None:
        with self.lock:
            self.sent[chunk.seq] = chunk
        fut = self.w.append_many(self.log_id, (chunk.body, chunk.offsets))
        fut.add_done_callback(functools.partial(self._done, chunk))

    def _done(self, chunk: _Chunk, fut: Any) -> None:  # on the client's loop thread
        exc = fut.exception()
        with self.lock:
            self.sent.pop(chunk.seq, None)
            if exc is None:
                self.held.pop(chunk.seq, None)
                lsns = fut.result()
                self.acked += chunk.n
                if chunk.again:
                    self.written_again += chunk.n
                if len(lsns):
                    self.last = max(self.last, int(lsns.max()))
            elif is_away(exc):
                self.held[chunk.seq] = chunk
                self.away_error = exc
            else:
                self.held.pop(chunk.seq, None)
                self.failed += chunk.n
                if self.first_error is None:
                    self.first_error = exc

    def holding(self) -> int:
        """Lines held for the cluster to come back."""
        with self.lock:
            return sum(c.n for c in self.held.values())

    def settle(self) -> None:
        """Send what is buffered and wait until every chunk sent is acknowledged, failed
        or held (in short waits, so Ctrl-C is taken at once)."""
        while not self.w.flush(wait=True, timeout=0.25):
            pass

    def recover(self) -> None:
        """If chunks are held: print the waiting line, and append them again, in the
        order they were read, until they are written (the oldest alone first, then the
        others; a ``RetryDelay`` between tries); then the back line.  Nothing else is
        appended meanwhile: the input waits.  A chunk stays in ``held`` until it is
        acknowledged (or fails otherwise), also while it is appended again, so what an
        interruption leaves is counted by ``give_up``."""
        if not self.holding():
            return
        self.waiting.away(lambda: f"{cluster_line(self.config, self.away_error)}; "
                                  f"{self.holding():,} lines held")
        while True:
            self.settle()  # every chunk in flight is written, failed or held
            with self.lock:
                if not self.held:
                    break
                first = self.held[min(self.held)]
            first.again = True
            self._send(first)
            self.settle()
            with self.lock:
                away = first.seq in self.held
                rest = [self.held[seq] for seq in sorted(self.held)] if not away else []
            if away:  # the others stay held too
                self._delay.sleep()
                continue
            self._delay.reset()
            for c in rest:
                c.again = True
                self._send(c)
        with self.lock:
            n, self.written_again = self.written_again, 0
        self.waiting.back(f"cluster {self.config.cluster!r} reachable again; "
                          f"{n:,} held lines written")

    def give_up(self) -> None:
        """Once the writer is closed: count the lines still held (interrupted while the
        cluster was away), and any whose append was interrupted before its outcome could
        be seen, as not written."""
        with self.lock:
            lost = {**self.held, **self.sent}
            self.held.clear()
            self.sent.clear()
            n = sum(c.n for c in lost.values())
            if n:
                self.failed += n
                if self.first_error is None:
                    self.first_error = self.away_error or LogDeviceError(
                        E.CANCELLED, "interrupted before the append was acknowledged")


_EPILOG = ("While the cluster is away ldwrite keeps the lines that failed, stops reading, "
           "prints one line on stderr saying what it waits for, appends them again in order "
           "(every 0.5 s, doubling up to 5 s), and prints one more line once they are "
           "written.  Lines are written at least once: a line may be written twice when an "
           "append is retried (by the BufferedWriter, or after the wait) after part or all "
           "of it was stored without an acknowledgement.  Exit status: 0 all lines "
           "written; 130 Ctrl-C, every line read written; 1 some line not written.")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="ldwrite", description=__doc__.split("\n\n")[0],
                                epilog=_EPILOG)
    add_version(p)
    add_credentials(p)
    p.add_argument("file", nargs="?", default="-", help="input file (default: stdin)")
    p.add_argument("--config", default=os.environ.get("LOGDEVICE_CONFIG"),
                   help="cluster config (default: $LOGDEVICE_CONFIG)")
    p.add_argument("--log", type=int, required=True, help="log id to write to")
    p.add_argument("--timeout", type=float, default=30.0, help="client timeout, seconds")
    p.add_argument("--size-trigger", type=int, default=1_000_000, help="bytes per blob")
    p.add_argument("--time-trigger", type=float, default=0.05, help="seconds")
    p.add_argument("--compression", default="zstd", choices=["zstd", "none"])
    p.add_argument("--mode", default="independent", choices=["independent", "one_at_a_time"])
    p.add_argument("--quiet", action="store_true",
                   help="no progress bar, no summary, no waiting lines: only errors")
    args = p.parse_args(argv)
    interruptible()
    console = tool_console(stderr=True)
    if not args.config:
        p.error("--config is required (or set LOGDEVICE_CONFIG)")

    try:
        src: IO[bytes] = sys.stdin.buffer if args.file == "-" else open(args.file, "rb")  # noqa: SIM115
    except OSError as exc:
        console.print(f"ldwrite: cannot read {args.file}: {exc.strerror}", markup=False)
        return 1
    total = None if args.file == "-" else os.path.getsize(args.file)
    waiting = Waiting("ldwrite", quiet=args.quiet, console=console)

    t0 = time.perf_counter()
    interrupted = False
    read = 0
    try:
        with Client(args.config, timeout=args.timeout, **credentials(args)) as client, src:
            w = client.create_buffered_writer(size_trigger=args.size_trigger,
                                              time_trigger=args.time_trigger,
                                              compression=args.compression, mode=args.mode)
            job = _Appender(w, args.log, client.config, waiting)
            with Progress(TextColumn("[bold]ldwrite"), BarColumn(), DownloadColumn(),
                          TextColumn("{task.fields[lines]}"), TimeElapsedColumn(),
                          console=console, disable=args.quiet) as prog:
                task = prog.add_task("write", total=total, lines="")
                try:
                    for chunk in _chunks(_blocks(src, TICK)):
                        job.recover()  # the cluster was away: write what it missed first
                        if chunk is not None:
                            body, offsets, used = chunk
                            job.append(body, offsets)
                            read += used
                        prog.update(task, completed=read,
                                    lines=f"{job.acked:,} lines acknowledged")
                    while True:  # the end of input: until every line is written
                        job.settle()
                        if not job.holding():
                            break
                        job.recover()
                except KeyboardInterrupt:
                    interrupted = True  # write what was read, then stop
                w.flush()
                w.close()
                job.give_up()  # held lines were not written
                prog.update(task, completed=read, total=read,
                            lines=f"{job.acked:,} lines acknowledged")
    except (LogDeviceError, OSError) as exc:
        console.print(f"ldwrite: {exc}", markup=False)
        return 1
    except KeyboardInterrupt:  # a second Ctrl-C while writing out what was read
        return 130
    elapsed = time.perf_counter() - t0
    n = job.acked
    if not args.quiet:
        console.print(f"{n:,} records in {elapsed:.2f} s: {n / elapsed:,.0f} records/s, "
                      f"{read / elapsed / 1e6:.1f} MB/s; last LSN {lsn_str(job.last)} "
                      f"({job.last})", markup=False)
    if job.failed:
        console.print(f"ldwrite: {job.failed:,} records failed: {job.first_error}",
                      markup=False)
        return 1
    return 130 if interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
