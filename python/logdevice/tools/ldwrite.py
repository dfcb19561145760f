"""``ldwrite``: lines from stdin or a file into a log, through the BufferedWriter.

    ldwrite --config cluster.json --log 1 access.log
    producer | ldwrite --config cluster.json --log 1

Each line (without its newline) becomes one record.  Input is read as it arrives (up to
4 MiB at a time) and split with numpy: the newlines are found and dropped in one
vectorised pass and the lines go to ``append_many`` as ``(buffer, offsets)``, so no Python
object is made per line, and a line piped in is written within the time trigger.
A progress bar shows lines acknowledged; at the end it prints records/s, MB/s and the
last LSN written (``--quiet``: nothing but errors).  Ctrl-C writes what was read and exits
with status 130.  Exit status 1 if any record could not be written.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections.abc import Iterator
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
from logdevice.errors import LogDeviceError

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


def _chunks(f: IO[bytes]) -> Iterator[tuple[np.ndarray, np.ndarray, int]]:
    carry = b""
    read1 = getattr(f, "read1", f.read)  # what is there now, not a full CHUNK
    while True:
        block = read1(CHUNK)
        final = not block
        data = carry + block if carry else block
        if not data:
            return
        body, offsets, used = split_lines(data, final=final)
        carry = data[used:]
        if len(offsets) > 1:
            yield body, offsets, used
        elif final:
            return


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="ldwrite", description=__doc__.split("\n\n")[0])
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
    p.add_argument("--quiet", action="store_true", help="no progress bar")
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
    stats = {"acked": 0, "failed": 0, "last": 0}
    first_error: list[BaseException] = []
    lock = threading.Lock()

    def on_done(fut: Any) -> None:
        exc = fut.exception()
        with lock:
            if exc is None:
                lsns = fut.result()
                stats["acked"] += len(lsns)
                if len(lsns):
                    stats["last"] = max(stats["last"], int(lsns.max()))
            else:
                stats["failed"] += len(fut.batch_offsets)
                if not first_error:
                    first_error.append(exc)

    t0 = time.perf_counter()
    interrupted = False
    read = 0
    try:
        with Client(args.config, timeout=args.timeout, **credentials(args)) as client, src:
            w = client.create_buffered_writer(size_trigger=args.size_trigger,
                                              time_trigger=args.time_trigger,
                                              compression=args.compression, mode=args.mode)
            with Progress(TextColumn("[bold]ldwrite"), BarColumn(), DownloadColumn(),
                          TextColumn("{task.fields[lines]}"), TimeElapsedColumn(),
                          console=console, disable=args.quiet) as prog:
                task = prog.add_task("write", total=total, lines="")
                read = 0
                try:
                    for body, offsets, used in _chunks(src):
                        w.append_many(args.log, (body, offsets)).add_done_callback(on_done)
                        read += used
                        prog.update(task, completed=read,
                                    lines=f"{stats['acked']:,} lines acknowledged")
                except KeyboardInterrupt:
                    interrupted = True  # write what was read, then stop
                w.flush()
                w.close()
                prog.update(task, completed=read, total=read,
                            lines=f"{stats['acked']:,} lines acknowledged")
    except (LogDeviceError, OSError) as exc:
        console.print(f"ldwrite: {exc}", markup=False)
        return 1
    except KeyboardInterrupt:  # a second Ctrl-C while writing out what was read
        return 130
    elapsed = time.perf_counter() - t0
    n = stats["acked"]
    if not args.quiet:
        console.print(f"{n:,} records in {elapsed:.2f} s: {n / elapsed:,.0f} records/s, "
                      f"{read / elapsed / 1e6:.1f} MB/s; last LSN {lsn_str(stats['last'])} "
                      f"({stats['last']})", markup=False)
    if stats["failed"]:
        console.print(f"ldwrite: {stats['failed']:,} records failed: {first_error[0]}",
                      markup=False)
        return 1
    return 130 if interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
