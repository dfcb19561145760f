"""``logdeviced``: run one node of a cluster.

    logdeviced --config cluster.json --node-index 3

Logs go to stderr.  SIGTERM or SIGINT stops the node cleanly: it stops accepting
connections, answers or fails what is in flight, flushes the group commit and the
last-released pointers, and closes LogsDB.  Exit codes: 0 after a clean stop, 1 when the
node could not run (port in use, storage error, its epoch store unreachable or not the
one its peers use), 2 for bad arguments or a bad config (the
message names the file and the field, also for a TLS certificate, key or secret file
that cannot be loaded; nothing was started).

``--no-uvloop`` (or ``LOGDEVICED_LOOP=asyncio``) uses the standard asyncio loop.
``--profile PATH`` (or ``LOGDEVICED_PROFILE_DIR=dir``: ``dir/N<i>.prof``) runs the node
under cProfile and writes the stats on exit; ``LOGDEVICED_PROFILE_CLOCK=cpu`` makes it count
the main thread's CPU time instead of wall time (a node waiting for the CPU or in
``epoll`` then costs nothing).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import logging
import os
import signal
import sys
import time

from logdevice.cli import add_version
from logdevice.config import Config
from logdevice.errors import InvalidConfigError, LogDeviceError
from logdevice.node.assemble import build_node
from logdevice.node.store_identity import check_store_identity
from logdevice.node.transport.access import exposure_refusal

log = logging.getLogger("logdevice.node.main")

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
#: Seconds a thread may hold the GIL while another waits (Python's default: 0.005).
SWITCH_INTERVAL = 0.0005


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="logdeviced", description="Run one logdevice node.")
    add_version(p)
    p.add_argument("--config", required=True, metavar="PATH", help="cluster config (JSON)")
    p.add_argument("--node-index", required=True, type=int, metavar="I",
                   help="this node's index in the config")
    p.add_argument("--log-level", default="INFO",
                   choices=["DEBUG", "INFO", "WARNING", "ERROR"], help="stderr log level")
    p.add_argument("--no-uvloop", action="store_true",
                   help="use the standard asyncio loop even when uvloop is installed")
    p.add_argument("--profile", metavar="PATH", default=None,
                   help="run under cProfile and write the stats to PATH on exit")
    return p


async def serve(config: Config, index: int) -> int:
    """Run node ``index`` until SIGTERM/SIGINT; returns the exit code."""
    loop = asyncio.get_running_loop()
    # The writer and reader threads need the GIL for short stretches between RocksDB
    # calls; with the default 5 ms switch interval a busy event loop makes them wait that
    # long for it, and every append's latency with them.
    sys.setswitchinterval(float(os.environ.get("LOGDEVICED_SWITCH_INTERVAL", SWITCH_INTERVAL)))
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        node = build_node(config, index, loop)
    except InvalidConfigError as exc:  # a certificate, key or secret file it cannot load
        log.error("N%d cannot start: invalid config: %s", index, exc.message)
        return EXIT_USAGE
    try:
        # Before serving: the epoch store must be the one the peers use.
        node.store_id = await loop.run_in_executor(None, check_store_identity, config, index)
        await node.start()
    except (OSError, LogDeviceError) as exc:
        log.error("N%d cannot start: %s", index, exc)
        await node.stop()
        return EXIT_FAILED
    # What start-up allocated (modules, config, roles) lives as long as the process: move it
    # out of the collector's sight, so a full collection (rare, but it would scan all of it:
    # 20-30 ms with the loop stopped) looks at what the node allocated since.
    gc.collect()
    gc.freeze()
    await stop.wait()
    log.info("N%d: stopping", index)
    await node.stop()
    return EXIT_OK


def _run(coro, use_uvloop: bool) -> int:  # type: ignore[no-untyped-def]
    if use_uvloop:
        try:
            import uvloop  # optional ("server" extra): asyncio's loop without it
        except ImportError:
            pass
        else:
            return uvloop.run(coro)  # type: ignore[no-any-return]
    return asyncio.run(coro)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr, level=getattr(logging, args.log_level),
        format=f"%(asctime)s N{args.node_index} %(levelname)s %(name)s: %(message)s")
    try:
        config = Config.load(args.config)
    except InvalidConfigError as exc:
        print(f"logdeviced: invalid config: {exc.message}", file=sys.stderr)
        return EXIT_USAGE
    refusal = exposure_refusal(config)
    if refusal is not None:
        print(f"logdeviced: {refusal}", file=sys.stderr)
        return EXIT_USAGE
    if config.insecure:
        log.warning("N%d: security is off (\"security\": {\"insecure\": true}): any peer "
                    "that reaches a node may append, read, trim and change the cluster",
                    args.node_index)
    if not config.has_node(args.node_index):
        print(f"logdeviced: node index {args.node_index} is not in {args.config} "
              f"(nodes: {sorted(n.index for n in config.nodes)})", file=sys.stderr)
        return EXIT_USAGE
    use_uvloop = not args.no_uvloop and os.environ.get("LOGDEVICED_LOOP", "") != "asyncio"
    profile = args.profile
    if profile is None and os.environ.get("LOGDEVICED_PROFILE_DIR"):
        profile = os.path.join(os.environ["LOGDEVICED_PROFILE_DIR"], f"N{args.node_index}.prof")
    try:
        if profile:
            clock = (time.thread_time if os.environ.get("LOGDEVICED_PROFILE_CLOCK") == "cpu"
                     else time.perf_counter)
            with cProfile.Profile(clock) as prof:
                code = _run(serve(config, args.node_index), use_uvloop)
            prof.dump_stats(profile)
            return code
        return _run(serve(config, args.node_index), use_uvloop)
    except KeyboardInterrupt:
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
