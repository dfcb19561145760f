"""``ld-dev-cluster``: a local cluster (``LocalCluster``) run from the shell.

    ld-dev-cluster                                   # 5 nodes, logs 1-100
    ld-dev-cluster --nodes 3 --replication 2 --tls
    ld-dev-cluster --epoch-store zookeeper:127.0.0.1:2181/dev --hosts 127.0.0.2,127.0.0.3

It starts the cluster, prints its config path on stdout and runs until Ctrl-C or SIGTERM;
a node that dies ends it (exit 1, quoting the end of the node's log).  Bad arguments are
usage errors (exit 2) before anything starts.
"""

from __future__ import annotations

import argparse
import ipaddress
import signal
import sys
import threading
from typing import Any

from logdevice.cli import add_version
from logdevice.epochstore.uri import parse_epoch_store_uri
from logdevice.errors import LogDeviceError
from logdevice.local_cluster import LocalCluster

__all__ = ["build_parser", "main"]


def _parse_logs(text: str) -> list[int]:
    """``"1-100"`` or ``"1,5,7-9"`` -> log ids; ``ValueError`` saying what is wrong."""
    out: list[int] = []
    for part in text.split(","):
        lo, dash, hi = part.strip().partition("-")
        try:
            a, b = int(lo), int(hi if dash else lo)
        except ValueError:
            raise ValueError(f"{part.strip()!r} is neither a log id nor a range "
                             f"lo-hi") from None
        if a < 1 or b < a:
            raise ValueError(f"{part.strip()!r}: log ids are >= 1 and a range lo-hi has "
                             f"lo <= hi")
        out.extend(range(a, b + 1))
    return out


def _log_ids(text: str) -> list[int]:
    try:
        return _parse_logs(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{exc} (e.g. 1-100 or 1,5,7-9)") from None


def _positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer >= 1")
    return n


def _loopback_hosts(text: str) -> list[str]:
    hosts = [h.strip() for h in text.split(",")]
    for h in hosts:
        try:
            ok = ipaddress.ip_address(h) in ipaddress.ip_network("127.0.0.0/8")
        except ValueError:
            ok = False
        if not ok:
            raise argparse.ArgumentTypeError(
                f"{h!r} is not a loopback IPv4 address (127.0.0.0/8): every node of a local "
                f"cluster runs on this machine")
    return hosts


#: ``ld-dev-cluster --tls``: TLS, two principals, trim and admin for one of them.
DEV_TLS: dict[str, Any] = {
    "tls": True,
    "security": {"principals": {"app": {}, "admin": {}},
                 "acl": {"trim": ["admin"], "admin": ["admin"]}},
}


def _epoch_store(text: str) -> str:
    try:
        parse_epoch_store_uri(text)
    except LogDeviceError as exc:
        raise argparse.ArgumentTypeError(exc.message) from None
    return text


def build_parser() -> argparse.ArgumentParser:
    """The ``ld-dev-cluster`` command line."""
    p = argparse.ArgumentParser(prog="ld-dev-cluster",
                                description="Run a local logdevice cluster on loopback "
                                            "addresses: prints the config path on stdout, "
                                            "runs until Ctrl-C or SIGTERM.")
    add_version(p)
    p.add_argument("--nodes", type=_positive_int, default=None, metavar="N",
                   help="number of nodes, each sequencer and storage (default 5, or one per "
                        "--hosts address)")
    p.add_argument("--replication", type=_positive_int, default=2, metavar="R",
                   help="copies of every record, at most --nodes (default 2)")
    p.add_argument("--logs", type=_log_ids, default=_parse_logs("1-100"), metavar="IDS",
                   help="log ids, e.g. 1-100 or 1,5,7-9 (default 1-100)")
    p.add_argument("--root", default=None,
                   help="directory for config, data and node logs, kept on exit (default: a "
                        "temporary one, removed on exit)")
    p.add_argument("--log-level", default="INFO", type=str.upper,
                   choices=["DEBUG", "INFO", "WARNING", "ERROR"],
                   help="the nodes' log level (their logs: <root>/N<i>.log)")
    p.add_argument("--epoch-store", default=None, metavar="URI", type=_epoch_store,
                   help="epoch store, e.g. zookeeper:127.0.0.1:2181/dev (default: a SQLite "
                        "file in the root)")
    p.add_argument("--tls", action="store_true",
                   help="a secured cluster: TLS, node certificates, principals 'app' "
                        "(append, read) and 'admin' (also trim and admin), whose client "
                        "certificates are written to <root>/tls/")
    p.add_argument("--hosts", default=None, metavar="A,B,...", type=_loopback_hosts,
                   help="one loopback address per node, e.g. 127.0.0.2,127.0.0.3,127.0.0.4 "
                        "(each node then gets its own directory; needs a zookeeper: store)")
    return p


def main(argv: list[str] | None = None) -> int:
    """``ld-dev-cluster``: start a local cluster, print its config path, run until Ctrl-C.

    Bad arguments are usage errors (exit 2); a cluster that does not start or a node that
    dies exits 1 with the end of the node's log (its path only when ``--root`` keeps it)."""
    p = build_parser()
    args = p.parse_args(argv)
    nodes: int = args.nodes if args.nodes is not None else 5
    if args.hosts is not None:
        if args.nodes is not None and args.nodes != len(args.hosts):
            p.error(f"--nodes {args.nodes} but --hosts has {len(args.hosts)} addresses "
                    f"(one per node)")
        nodes = len(args.hosts)
        if not (args.epoch_store or "").startswith("zookeeper:"):
            p.error("--hosts needs --epoch-store zookeeper:HOST:PORT/ROOT (nodes in their own "
                    "directories share no file)")
    if args.replication > nodes:
        p.error(f"--replication {args.replication} is more than the {nodes} nodes")
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        cluster = LocalCluster(nodes=nodes, replication=args.replication, logs=args.logs,
                               root=args.root, log_level=args.log_level,
                               epoch_store=args.epoch_store, hosts=args.hosts,
                               **(DEV_TLS if args.tls else {}))
    except (TimeoutError, RuntimeError, ValueError, OSError, LogDeviceError) as exc:
        print(f"ld-dev-cluster: {exc}", file=sys.stderr)
        return 1
    with cluster:
        print(cluster.config_path, flush=True)
        if args.tls:
            for name in DEV_TLS["security"]["principals"]:
                cert, key = cluster.client_cert(name)
                print(f"principal {name}: --tls-cert {cert} --tls-key {key}",
                      file=sys.stderr, flush=True)
        kept = "" if args.root is not None else ", removed on exit"
        print(f"{cluster.n} nodes running (config, data and logs in {cluster.root}{kept}); "
              f"Ctrl-C stops them", file=sys.stderr, flush=True)
        while not stop.wait(0.5):
            dead = [i for i in range(cluster.n) if not cluster.is_running(i)]
            if dead:
                i = dead[0]
                print(f"ld-dev-cluster: N{i} exited with code {cluster.returncode(i)}; "
                      f"{cluster.log_excerpt(i)}", file=sys.stderr)
                return 1
    print("stopped", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
