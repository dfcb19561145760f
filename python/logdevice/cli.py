"""What every console script shares: ``--version``."""

from __future__ import annotations

import argparse
from importlib.metadata import PackageNotFoundError, version

__all__ = ["add_version"]


def add_version(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Give ``p`` a ``--version`` that prints the program and the installed package's
    version."""
    try:
        v = version("logdevice")
    except PackageNotFoundError:  # a source tree that was never installed
        v = "0+unknown"
    p.add_argument("--version", action="version", version=f"%(prog)s (logdevice) {v}")
    return p
