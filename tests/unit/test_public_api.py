"""The top-level ``logdevice`` namespace: real exports, a version, the error classes."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest

import logdevice as ld


def test_every_public_name_is_a_real_attribute():
    # Only LocalCluster (node processes, not the client) is resolved on first use.
    assert set(ld.__all__) - set(vars(ld)) <= {"LocalCluster"}
    for name in ld.__all__:
        assert name in dir(ld), name
        assert getattr(ld, name) is not None
    assert ld.Client.__module__ == "logdevice.client.client"
    assert ld.LocalCluster.__module__ == "logdevice.local_cluster"


def test_version_is_the_installed_one():
    assert ld.__version__ == version("logdevice")


def test_error_classes_derive_the_base_and_a_builtin():
    assert issubclass(ld.TimedOutError, ld.LogDeviceError)
    assert issubclass(ld.TimedOutError, TimeoutError)
    assert issubclass(ld.NotFoundError, LookupError)
    assert issubclass(ld.InvalidParamError, ValueError)
    assert issubclass(ld.ConnectionFailedError, ConnectionError)
    assert ld.error_for(ld.E.TIMEDOUT).status == ld.E.TIMEDOUT
    assert type(ld.error_for(ld.E.NOTFOUND)) is ld.NotFoundError


def _console_scripts() -> list[str]:
    project = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    return sorted(project["project"]["scripts"])


@pytest.mark.parametrize("script", _console_scripts())
def test_every_console_script_says_its_version(script):
    # Every entry of [project.scripts], so a script added later is covered too.
    exe = Path(sys.executable).parent / script
    p = subprocess.run([str(exe), "--version"], capture_output=True, text=True, timeout=60,
                       check=False)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == f"{script} (logdevice) {ld.__version__}"
