"""``ldtail``: follow a log, like ``tail -f``.

    ldtail --config cluster.json --log 1             # new records as they are appended
    ldtail --config cluster.json --log 1 -n 20       # the last 20 records first
    ldtail --config cluster.json --log 1 --format json

Output as ``ldcat`` (payloads one per line, or JSON objects; gaps on stderr).  Each batch
is flushed as it arrives.  Ctrl-C (or SIGTERM) stops it cleanly.

``-n N`` shows the last N records before the tail: they are looked for in the last N
LSNs before the tail, then in 4x, 16x, ... as many (up to 4 tries), so a log whose
tail follows an epoch change or many gaps may show fewer.
"""

from __future__ import annotations

import argparse
import signal
import sys
from types import FrameType

import numpy as np

from logdevice.cli import add_credentials, add_version, credentials, interruptible
from logdevice.client import Client
from logdevice.client.reader_batch import ReaderBatch
from logdevice.errors import LogDeviceError
from logdevice.records import LSN_MAX, LSN_OLDEST
from logdevice.tools.ldcat import _quiet_stdout, add_output_arguments, write_batch, write_gap

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
            r.wait_only_when_no_data()
            r.start_reading(log_id, lo, tail)
            parts = []
            while True:
                b = r.read_batch(65536)
                if not len(b) and not b.gaps:
                    break
                if len(b):
                    parts.append(b)
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
    skip = rows - n if rows > n else 0
    log_ids = np.concatenate([b.log_ids for b in keep])[skip:]
    lsns = np.concatenate([b.lsns for b in keep])[skip:]
    ts = np.concatenate([b.timestamps for b in keep])[skip:]
    bo = np.concatenate([b.batch_offsets for b in keep])[skip:]
    sizes = np.concatenate([np.diff(b.offsets) for b in keep])[skip:]
    payload = np.concatenate([b.payloads for b in keep])
    start = int(payload.nbytes - sizes.sum())
    offsets = np.zeros(len(sizes) + 1, dtype=np.uint64)
    np.cumsum(sizes, out=offsets[1:])
    return ReaderBatch(log_ids, lsns, ts, bo, payload[start:], offsets, [])


def _stop(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="ldtail", description=__doc__.split("\n\n")[0])
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
    try:
        with Client(args.config, timeout=args.timeout, **credentials(args)) as client:
            tail = client.get_tail_lsn(args.log)
            if args.lines and tail:
                first = last_records(client, args.log, tail, args.lines)
                if first is not None:
                    write_batch(out, first, args.format)
                    out.flush()
            with client.create_reader() as r:
                if args.no_scd:
                    r.force_no_single_copy_delivery()
                r.wait_only_when_no_data()
                r.start_reading(args.log, tail + 1, LSN_MAX)
                while True:
                    batch = r.read_batch(65536, timeout=1.0)
                    for gap in batch.gaps:
                        write_gap(sys.stderr, gap, args.show_gaps)
                    if len(batch):
                        write_batch(out, batch, args.format)
                        out.flush()
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
