"""What every console script shares: ``--version``, the client tools' credentials, and
the message for an optional dependency that is not installed."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from importlib.metadata import PackageNotFoundError, version
from typing import IO, TYPE_CHECKING, TypedDict

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["add_version", "add_credentials", "credentials", "Credentials", "console",
           "interruptible",
           "missing_extra",
           "PIPE_WIDTH"]


#: Columns of tables and lines printed to a file or a pipe (no terminal to fit).
PIPE_WIDTH = 200


def console(*, file: IO[str] | None = None, stderr: bool = False) -> Console:
    """A rich ``Console`` for a tool's output: on a terminal, as rich does; to a file or a
    pipe, lines are not wrapped and tables get ``PIPE_WIDTH`` columns (rich would fold
    both at 80), and there are no colours."""
    from rich.console import Console  # optional ("cli" extra): the tools check for it

    stream = file if file is not None else sys.stderr if stderr else sys.stdout
    tty = stream.isatty()
    return Console(file=file, stderr=stderr, soft_wrap=not tty,
                   width=None if tty else PIPE_WIDTH)


def interruptible() -> None:
    """Make Ctrl-C (SIGINT) raise KeyboardInterrupt in this process even if it started
    with SIGINT ignored, as children of ``nohup`` or of a shell's background job do: the
    tools that promise to finish cleanly and exit 130 on Ctrl-C keep that promise."""
    signal.signal(signal.SIGINT, signal.default_int_handler)


def missing_extra(tool: str, extra: str, exc: ImportError) -> SystemExit:
    """The one-line exit of ``tool`` when an optional dependency of the package's
    ``extra`` is not installed (``raise missing_extra(...) from None``)."""
    module = (exc.name or str(exc)).split(".")[0]
    return SystemExit(f"{tool}: needs {module}: pip install 'logdevice[{extra}]'")


def add_version(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Give ``p`` a ``--version`` that prints the program and the installed package's
    version."""
    try:
        v = version("logdevice")
    except PackageNotFoundError:  # a source tree that was never installed
        v = "0+unknown"
    p.add_argument("--version", action="version", version=f"%(prog)s (logdevice) {v}")
    return p


def add_credentials(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Give ``p`` the options saying who the tool is on a cluster with a ``security``
    section: ``--tls-cert`` / ``--tls-key`` (a client certificate) and ``--token``
    (default ``$LOGDEVICE_TOKEN``).  None of them: the anonymous principal."""
    p.add_argument("--tls-cert", metavar="PATH", default=None,
                   help="client certificate (PEM) for a cluster with TLS: act as its CN")
    p.add_argument("--tls-key", metavar="PATH", default=None,
                   help="the certificate's private key (unless in the same file)")
    p.add_argument("--token", default=os.environ.get("LOGDEVICE_TOKEN"),
                   help="a principal's token (default: $LOGDEVICE_TOKEN)")
    return p


class Credentials(TypedDict, total=False):
    """Who a tool is on the cluster: the client settings ``add_credentials``' options give
    (a subset of ``ClientSettingKwargs``, for ``ld.Client(**...)``)."""

    tls_cert: str
    tls_key: str
    token: str


def credentials(args: argparse.Namespace) -> Credentials:
    """The client settings (``ld.Client(**...)``) that ``add_credentials``' options give."""
    out: Credentials = {}
    if (cert := getattr(args, "tls_cert", None)) is not None:
        out["tls_cert"] = cert
    if (key := getattr(args, "tls_key", None)) is not None:
        out["tls_key"] = key
    if (token := getattr(args, "token", None)) is not None:
        out["token"] = token
    return out
