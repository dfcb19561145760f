"""``logdeviced``: run one node of a cluster.

    logdeviced --config cluster.json --node-index 3

Logs go to stderr.  SIGTERM or SIGINT stops the node cleanly: it stops accepting
connections, answers or fails what is in flight, flushes the group commit and the
last-released pointers, and closes LogsDB.  Exit codes: 0 after a clean stop, 1 when the
node could not run (port in use, storage error), 2 for bad arguments or a bad config (the
message names the file and the field; nothing was started).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from logdevice.config import Config
from logdevice.errors import InvalidConfigError, LogDeviceError
from logdevice.node.assemble import build_node

log = logging.getLogger("logdevice.node.main")

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="logdeviced", description="Run one logdevice node.")
    p.add_argument("--config", required=True, metavar="PATH", help="cluster config (JSON)")
    p.add_argument("--node-index", required=True, type=int, metavar="I",
                   help="this node's index in the config")
    p.add_argument("--log-level", default="INFO",
                   choices=["DEBUG", "INFO", "WARNING", "ERROR"], help="stderr log level")
    p.add_argument("--no-uvloop", action="store_true",
                   help="use the standard asyncio loop even when uvloop is installed")
    return p


async def serve(config: Config, index: int) -> int:
    """Run node ``index`` until SIGTERM/SIGINT; returns the exit code."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    node = build_node(config, index, loop)
    try:
        await node.start()
    except (OSError, LogDeviceError) as exc:
        log.error("N%d cannot start: %s", index, exc)
        await node.stop()
        return EXIT_FAILED
    await stop.wait()
    log.info("N%d: stopping", index)
    await node.stop()
    return EXIT_OK


def _run(coro, use_uvloop: bool) -> int:  # type: ignore[no-untyped-def]
    if use_uvloop:
        try:
            import uvloop
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
    if not config.has_node(args.node_index):
        print(f"logdeviced: node index {args.node_index} is not in {args.config} "
              f"(nodes: {sorted(n.index for n in config.nodes)})", file=sys.stderr)
        return EXIT_USAGE
    try:
        return _run(serve(config, args.node_index), not args.no_uvloop)
    except KeyboardInterrupt:
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
