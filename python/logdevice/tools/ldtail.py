"""``ldtail``: follow a log, like ``tail -f``.

    ldtail --config cluster.json --log 1             # new records as they are appended
    ldtail --config cluster.json --log 1 -n 20       # the last 20 records first
    ldtail --config cluster.json --log 1 --format json

Output as ``ldcat`` (payloads one per line, or JSON objects; gaps on stderr).  Each batch
is flushed as it arrives.  Ctrl-C (or SIGTERM) stops it cleanly.

``-n N`` shows the last N records before the tail: they are looked for in the last N
LSNs before the tail, then in 4x, 16x, ... as many (up to 4 tries), so a log whose
tail follows an epoch change or many gaps may show fewer.

ldtail rides out the cluster going away, and says so on stderr: one line when it starts
waiting and one when it is back, never the waiting line twice in one wait::

    ldtail: waiting for the cluster 'prod': no node reachable (N0: connection refused, ...)
    ldtail: cluster 'prod' reachable again
    ldtail: log 1: no working stream on enough of its nodes (N0: connection refused, ...); waiting
    ldtail: log 1: reading again

The first pair when no node could be reached to find the tail (CONNFAILED after the
client's ``unreachable_timeout``, or TIMEDOUT after ``--timeout``), the second when the
reader, checked about once a second, has no working stream on an f-majority of the log's
nodes.  It retries every 0.5 s, doubling up to 5 s, from where it stands: the LSN after
the last record or gap it wrote, or the tail it started from.  It waits for ever: Ctrl-C
stops it (status 130).
"""

from __future__ import annotations

import argparse
import signal
import sys
from types import FrameType
from typing import IO

from logdevice.cli import add_credentials, add_version, credentials, interruptible
from logdevice.client import Client
from logdevice.client.read.batch import ReaderBatch
from logdevice.errors import LogDeviceError
from logdevice.records import LSN_MAX, LSN_OLDEST
from logdevice.tools.health import RetryDelay, Waiting, is_away
from logdevice.tools.ldcat import _quiet_stdout, add_output_arguments, copy_log, write_batch

__all__ = ["main"]

_TRIES = 4


def last_records(client: Client, log_id: int, tail: int, n: int) -> ReaderBatch | None:
    """The last ``n`` records at or below ``tail`` (fewer if not found; see the module
    docstring)."""
    span = n
    best: ReaderBatch | None = None
    for _ in range(_TRIES):
        lo = max(LSN_OLDEST, tail - span + 1)
        with client.create_reader() as r:
            r.start_reading(log_id, lo, tail)
            parts = list(r.batches())
        rows = sum(len(b) for b in parts)
        best = _last(parts, n)
        if rows >= n or lo == LSN_OLDEST:
            break
        span *= 4
    return best


def _last(parts: list[ReaderBatch], n: int) -> ReaderBatch | None:
    if not parts:
        return None
    keep: list[ReaderBatch] = []
    rows = 0
    for b in reversed(parts):
        keep.append(b)
        rows += len(b)
        if rows >= n:
            break
    keep.reverse()
    both = ReaderBatch.concat(keep)
    skip = max(0, rows - n)
    # The rows only: the gaps among them say nothing about the lines printed.
    return ReaderBatch.of(both.log_ids[skip:], both.slice(skip, len(both)))


def _stop(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _start(client: Client, args: argparse.Namespace, out: IO[bytes],
           waiting: Waiting) -> int:
    """The tail to follow from, after the last ``-n`` records; while the cluster is
    away, the waiting line and tries again (see the module docstring)."""
    delay = RetryDelay()
    while True:
        try:
            tail = client.get_tail_lsn(args.log)
            first = last_records(client, args.log, tail, args.lines) \
                if args.lines and tail else None
        except LogDeviceError as exc:
            if not is_away(exc):
                raise
            waiting.cluster_away(client.config, exc)
            delay.sleep()
            continue
        waiting.back(f"cluster {client.config.cluster!r} reachable again")
        if first is not None:
            write_batch(out, first, args.format)
            out.flush()
        return tail


_EPILOG = ("While the cluster is away ldtail prints one line on stderr saying what it waits "
           "for, retries (every 0.5 s, doubling up to 5 s) from where it stands, and prints "
           "one more line when it reads again.  It waits until Ctrl-C (exit status 130).")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="ldtail", description=__doc__.split("\n\n")[0],
                                epilog=_EPILOG)
    add_version(p)
    add_credentials(p)
    add_output_arguments(p)
    p.add_argument("-n", "--lines", type=int, default=0, metavar="N",
                   help="first show the last N records (default 0: only new ones)")
    args = p.parse_args(argv)
    if not args.config:
        p.error("--config is required (or set LOGDEVICE_CONFIG)")
    if args.lines < 0:
        p.error("-n must be >= 0")
    signal.signal(signal.SIGTERM, _stop)
    interruptible()
    out = sys.stdout.buffer
    waiting = Waiting("ldtail")
    try:
        with Client(args.config, timeout=args.timeout, **credentials(args)) as client:
            tail = _start(client, args, out, waiting)
            copy_log(client, args.log, tail + 1, LSN_MAX, out, waiting=waiting,
                     fmt=args.format, show_gaps=args.show_gaps, no_scd=args.no_scd,
                     flush=True)
        return 0  # the log ended (a gap up to LSN_MAX)
    except KeyboardInterrupt:
        out.flush()
        return 130
    except BrokenPipeError:
        _quiet_stdout()
        return 0
    except LogDeviceError as exc:
        print(f"ldtail: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
