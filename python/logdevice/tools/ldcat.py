"""``ldcat``: a range of a log to stdout.

    ldcat --config cluster.json --log 1                      # everything up to the tail
    ldcat --config cluster.json --log 1 --from e5n12 --until e5n900
    ldcat --config cluster.json --log 1 --format json | jq .lsn

LSNs are written ``e<epoch>n<esn>`` or as integers; ``--from`` also takes ``oldest``,
``--until`` also ``tail`` (the tail when ldcat starts, the default) and ``max`` (follow
for ever, as ``ldtail`` does).  ``--since``/``--before`` select by time instead (ms since
the Unix epoch, an ISO date-time, or ``--since=-15m`` for that long ago: s, m, h, d), through
``find_time``.  ``--format text`` (default) writes each payload followed
by a newline; ``--format json`` one object per record: log_id, lsn, lsn_str, timestamp
(ms), batch_offset and the payload (``payload`` as text when it is UTF-8, else
``payload_b64``).  Gaps that lose nothing (BRIDGE: an epoch ends; HOLE: an append that
never completed) are hidden unless ``--show-gaps``; the others (TRIM, DATALOSS, ...) go to
stderr (``gap TRIM e0n1..e1n20``), so stdout holds only records.  Records are read in
columnar batches (``Reader.read_batch``).

If the cluster goes away while ldcat reads (the reader has no working stream on enough
of the log's nodes, or reaches none of them), ldcat says so once on stderr (``ldcat: log
1: no working stream on enough of its nodes (N0: connection refused, ...); waiting``),
waits for it at most ``--timeout`` seconds, and says ``ldcat: log 1: reading again`` when
records flow again; after ``--timeout`` seconds of waiting it stops with status 1, naming
the LSN it stopped before.  A cluster unreachable when ldcat starts is not waited for:
the first query (the tail, or ``find_time``) fails after the client's
``unreachable_timeout`` (2 s) with one line, ``ldcat: CONNFAILED: ...``, and status 1.
"""

from __future__ import annotations

import argparse
import base64
import datetime
import json
import os
import re
import sys
import time
from typing import IO, Any

import numpy as np

from ldcore.lsn import parse as parse_lsn
from ldcore.lsn import to_string as lsn_str
from logdevice.cli import add_credentials, add_version, credentials, interruptible
from logdevice.client import Client, Reader
from logdevice.client.read.batch import ReaderBatch
from logdevice.errors import (
    ConnectionFailedError,
    LogDeviceError,
    NotFoundError,
    TimedOutError,
)
from logdevice.records import LSN_MAX, LSN_OLDEST, GapRecord, GapType
from logdevice.tools.health import RetryDelay, Waiting, probe_nodes

__all__ = ["main", "parse_lsn_arg", "parse_time_arg", "write_batch", "write_gap",
           "add_output_arguments", "copy_log", "POLL"]

#: Seconds between checks of the reader's health (``is_connection_healthy``), and the
#: longest a read waits before one.
POLL = 1.0

#: Gaps that say nothing was lost: shown only with --show-gaps.
BENIGN_GAPS = frozenset({GapType.BRIDGE, GapType.HOLE})
_AGO = re.compile(r"^-(\d+(?:\.\d+)?)([smhd])$")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}

_NL = np.uint8(ord("\n"))


def parse_lsn_arg(text: str) -> int | str:
    """An LSN from the command line: ``e5n12``, an integer, ``oldest``, ``max``, ``tail``."""
    t = text.strip()
    low = t.lower()
    if low in ("oldest", "lsn_oldest"):
        return LSN_OLDEST
    if low in ("max", "lsn_max"):
        return LSN_MAX
    if low == "tail":
        return "tail"
    try:
        return int(parse_lsn(t))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not an LSN: {text!r} (e<epoch>n<esn>, an integer, oldest, tail or max)"
        ) from None


def parse_time_arg(text: str) -> int:
    """A time from the command line, in ms since the Unix epoch: an integer (ms), an ISO
    date-time (UTC unless it names a zone) or ``-<n><s|m|h|d>`` (that long ago)."""
    t = text.strip()
    if t.isdigit():
        return int(t)
    m = _AGO.match(t)
    if m:
        return int((time.time() - float(m.group(1)) * _UNIT[m.group(2)]) * 1000)
    try:
        dt = datetime.datetime.fromisoformat(t)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a time: {text!r} (ms since the epoch, an ISO date-time, or -15m)") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=datetime.UTC)
    return int(dt.timestamp() * 1000)


def write_batch(out: IO[bytes], batch: ReaderBatch, fmt: str) -> None:
    """The batch's records to ``out`` (text: payload + newline, vectorised; json: one
    object per line)."""
    n = len(batch)
    if n == 0:
        return
    if fmt == "text":
        # A newline after every payload, inserted in one pass over the buffer.
        body = np.insert(batch.payloads, batch.offsets[1:].astype(np.intp), _NL)
        out.write(body.data)
        return
    buf = batch.payloads.tobytes()
    offs = batch.offsets.tolist()
    lines = []
    for i, (log_id, lsn, ts, bo) in enumerate(zip(
            batch.log_ids.tolist(), batch.lsns.tolist(), batch.timestamps.tolist(),
            batch.batch_offsets.tolist(), strict=True)):
        rec: dict[str, Any] = {"log_id": log_id, "lsn": lsn, "lsn_str": lsn_str(lsn),
                               "timestamp": ts, "batch_offset": bo}
        raw = buf[offs[i]:offs[i + 1]]
        try:
            rec["payload"] = raw.decode()
        except UnicodeDecodeError:
            rec["payload_b64"] = base64.b64encode(raw).decode()
        lines.append(json.dumps(rec, ensure_ascii=False))
    out.write(("\n".join(lines) + "\n").encode())


def write_gap(err: IO[str], gap: GapRecord, show_all: bool = False) -> None:
    """A gap to ``err``, unless it is benign and ``show_all`` is off."""
    if gap.type in BENIGN_GAPS and not show_all:
        return
    err.write(f"gap {gap.type.name} {lsn_str(gap.lo)}..{lsn_str(gap.hi)} "
              f"(log {gap.log_id}, {gap.lo}..{gap.hi})\n")


def copy_log(client: Client, log_id: int, first: int, until: int, out: IO[bytes], *,
             waiting: Waiting, fmt: str = "text", show_gaps: bool = False,
             no_scd: bool = False, flush: bool = False, give_up: float | None = None,
             err: IO[str] | None = None) -> None:
    """Write the records of ``log_id`` from ``first`` to ``until`` to ``out`` (gaps to
    ``err``, default stderr), riding out the cluster going away.

    Every ``POLL`` seconds the reader's health is asked: when it has no working stream
    on an f-majority of the log's nodes, ``waiting`` prints its waiting line (once), and
    its back line when the reader is healthy again or records arrive.  A reader that
    reached no node (``ConnectionFailedError``: the whole nodeset refused connections for
    the client's ``unreachable_timeout``) is started again, after a ``RetryDelay``, from
    the LSN after the last record or gap written (it delivered nothing itself).

    ``give_up``: seconds of waiting after which ``TimedOutError`` is raised (None: wait
    for ever).  ``flush``: flush ``out`` after every batch (following a log)."""
    err = err if err is not None else sys.stderr
    next_lsn = first
    delay = RetryDelay()
    while next_lsn <= until:
        try:
            with client.create_reader() as r:
                if no_scd:
                    r.force_no_single_copy_delivery()
                r.wait_only_when_no_data()  # write what has arrived; do not wait for more
                r.start_reading(log_id, next_lsn, until)
                polled = time.monotonic()
                unhealthy = False  # the last poll found too few working streams
                while True:
                    # Done once ``is_reading`` says so and a last read (which raises a
                    # failure of the stream, if that is what ended it) brings nothing.
                    done = not r.is_reading(log_id)
                    batch = r.read_batch(65536, timeout=0 if done else POLL)
                    for gap in batch.gaps:
                        write_gap(err, gap, show_gaps)
                        next_lsn = max(next_lsn, gap.hi + 1)
                    if len(batch):
                        write_batch(out, batch, fmt)
                        if flush:
                            out.flush()
                        next_lsn = max(next_lsn, int(batch.lsns[-1]) + 1)
                    if len(batch) or batch.gaps:
                        delay.reset()
                        waiting.back(f"log {log_id}: reading again")
                    elif done:
                        return
                    now = time.monotonic()
                    if now - polled >= POLL:
                        polled = now
                        if _healthy(r, log_id):
                            unhealthy = False
                            waiting.back(f"log {log_id}: reading again")
                        elif not unhealthy:  # a wait begins (not again while it lasts)
                            unhealthy = True
                            waiting.away(lambda: f"log {log_id}: no working stream on "
                                                 f"enough of its nodes "
                                                 f"({probe_nodes(client.config)}); waiting")
                    _check_give_up(waiting, give_up, log_id, next_lsn)
        except ConnectionFailedError as exc:
            waiting.cluster_away(client.config, exc)
            _check_give_up(waiting, give_up, log_id, next_lsn)
            since = waiting.since
            delay.sleep(None if give_up is None or since is None else since + give_up)


def _healthy(r: Reader, log_id: int) -> bool:
    try:
        return r.is_connection_healthy(log_id)
    except NotFoundError:  # its stream just ended (done, or failed: the next read says)
        return True


def _check_give_up(waiting: Waiting, give_up: float | None, log_id: int,
                   next_lsn: int) -> None:
    since = waiting.since
    if give_up is not None and since is not None and time.monotonic() - since >= give_up:
        raise TimedOutError(message=f"log {log_id}: waited {give_up:g} s for the cluster; "
                                    f"stopped before {lsn_str(next_lsn)} ({next_lsn})")


def add_output_arguments(p: argparse.ArgumentParser,
                         timeout_help: str = "client timeout, seconds") -> None:
    p.add_argument("--config", default=os.environ.get("LOGDEVICE_CONFIG"),
                   help="cluster config (default: $LOGDEVICE_CONFIG)")
    p.add_argument("--log", type=int, required=True, help="log id")
    p.add_argument("--format", choices=["text", "json"], default="text",
                   help="text: payloads one per line; json: one object per record")
    p.add_argument("--show-gaps", action="store_true",
                   help="also show gaps that lose nothing (BRIDGE, HOLE)")
    p.add_argument("--no-scd", action="store_true",
                   help="read all-send-all (every copy) instead of single copy delivery")
    p.add_argument("--timeout", type=float, default=30.0, help=timeout_help)


_EPILOG = ("If the cluster goes away while ldcat reads, it prints one line on stderr saying "
           "what it waits for, waits at most --timeout seconds (then exits 1), and one more "
           "line when it reads again.  A cluster unreachable when ldcat starts is not "
           "waited for: one CONNFAILED line, exit status 1.")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="ldcat", description=__doc__.split("\n\n")[0],
                                epilog=_EPILOG)
    add_version(p)
    add_credentials(p)
    add_output_arguments(p, "client timeout, seconds; also the longest ldcat waits for a "
                            "cluster that went away while it reads")
    p.add_argument("--from", dest="from_lsn", type=parse_lsn_arg, default=LSN_OLDEST,
                   help="first LSN (default oldest)")
    p.add_argument("--until", type=parse_lsn_arg, default="tail",
                   help="last LSN (default: the tail when ldcat starts; max: follow)")
    p.add_argument("--since", type=parse_time_arg, default=None, metavar="TIME",
                   help="start at the first record at or after TIME (instead of --from)")
    p.add_argument("--before", type=parse_time_arg, default=None, metavar="TIME",
                   help="stop before the first record at or after TIME (instead of --until)")
    args = p.parse_args(argv)
    interruptible()
    if not args.config:
        p.error("--config is required (or set LOGDEVICE_CONFIG)")
    if args.from_lsn == "tail":
        p.error("--from takes an LSN or oldest (ldtail follows from the tail)")
    out = sys.stdout.buffer
    try:
        with Client(args.config, timeout=args.timeout, **credentials(args)) as client:
            until = client.get_tail_lsn(args.log) if args.until == "tail" else args.until
            if args.since is not None:
                args.from_lsn = client.find_time(args.log, args.since)
            if args.before is not None:
                until = min(until, client.find_time(args.log, args.before) - 1)
            if until < args.from_lsn:
                return 0  # an empty range (e.g. an empty log)
            copy_log(client, args.log, args.from_lsn, until, out, waiting=Waiting("ldcat"),
                     fmt=args.format, show_gaps=args.show_gaps, no_scd=args.no_scd,
                     flush=until == LSN_MAX, give_up=args.timeout)
            out.flush()
    except BrokenPipeError:  # ldcat ... | head
        _quiet_stdout()
        return 0
    except KeyboardInterrupt:
        return 130
    except LogDeviceError as exc:
        print(f"ldcat: {exc}", file=sys.stderr)
        return 1
    return 0


def _quiet_stdout() -> None:
    """After EPIPE: point stdout at /dev/null so the interpreter's final flush is quiet."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


if __name__ == "__main__":
    sys.exit(main())
