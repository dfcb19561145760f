"""The README's Python examples type-check with ``mypy --strict`` as a user's script would:
the code blocks are taken from README.md as it is now (so the test fails when the README
drifts from the API), written to a file outside the source tree, and checked from there with
this environment's Python, so the package must be visible to mypy as installed (an editable
install's import hook is not: ci/python-deps.sh adds a .pth for it) and typed precisely
enough that nothing the examples bind is ``Any``."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

mypy_api = pytest.importorskip("mypy.api")

ROOT = Path(__file__).resolve().parents[2]
#: The README sections whose ``python`` blocks make a script, in order (the kernels' example
#: is a script of its own: its ``lsn`` module is not the client example's ``lsn``).
CLIENT_SECTIONS = ("Using it from Python", "Changing a running cluster")
KERNEL_SECTIONS = ("Using the kernels",)
pytestmark = pytest.mark.slow  # mypy reads the package and numpy's stubs: ~10 s cold

#: What the examples bind, and the type mypy must infer for it (``assert_type`` fails on
#: ``Any`` too).
EXPECTED = {
    "cluster": "ld.LocalCluster",
    "client": "ld.Client",
    "lsn": "int",
    "fut": "concurrent.futures.Future[int]",
    "w": "BufferedWriter",
    "reader": "Reader",
    "item": "ld.DataRecord | ld.GapRecord",
    "r": "CheckpointedReader",
    "g": "GroupReader",
    "items": "list[ld.DataRecord | ld.GapRecord]",
}
IMPORTS = """
import concurrent.futures
from typing import assert_type

from logdevice.client import BufferedWriter, CheckpointedReader, GroupReader, Reader
"""


def readme_code(sections: tuple[str, ...]) -> str:
    text = (ROOT / "README.md").read_text()
    blocks = []
    for title in sections:
        m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
        assert m, f"README has no section {title!r}"
        found = re.findall(r"^```python\n(.*?)^```", m.group(1), re.M | re.S)
        assert found, f"README section {title!r} has no python block"
        blocks += found
    return "\n".join(blocks)


def run_mypy(tmp_path: Path, **scripts: str) -> tuple[str, int]:
    """``mypy --strict`` on the scripts (name -> code) as a user runs it: from ``tmp_path``,
    with this environment's Python (the project's .venv)."""
    paths = []
    for name, code in scripts.items():
        paths.append(tmp_path / f"{name}.py")
        paths[-1].write_text(code)
    out, err, status = mypy_api.run(
        ["--strict", "--no-error-summary", "--cache-dir", str(tmp_path / "mypy-cache"),
         "--python-executable", sys.executable, *map(str, paths)])
    return out + err, status


@pytest.fixture
def outside(tmp_path, monkeypatch):
    """A working directory outside the source tree (no pyproject.toml, no package dirs to
    find by accident): mypy must find the installed package."""
    assert ROOT not in tmp_path.parents
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_readme_examples_pass_mypy_strict(outside):
    code = readme_code(CLIENT_SECTIONS)
    for call in ("cluster.client()", "create_buffered_writer", "create_reader",
                 "create_checkpointed_reader", "create_group_reader"):
        assert call in code, f"the README examples no longer use {call}"
    checks = "".join(f"assert_type({name}, {t})\n" for name, t in EXPECTED.items())
    out, status = run_mypy(outside, user_script=code + "\n" + IMPORTS + checks,
                           kernels_script=readme_code(KERNEL_SECTIONS))
    assert status == 0, out


def test_mypy_sees_the_package_and_its_option_types(outside):
    # Not vacuous: a misspelt reader option and a wrong client setting type are errors,
    # which needs the package found (not an ``Any`` from a missing import).
    code = ("import logdevice as ld\n"
            "c = ld.Client('cluster.json', unreachable_timeout='2')\n"
            "r = c.create_reader(bufer_size=10)\n")
    out, status = run_mypy(outside, typo=code)
    assert status == 1
    assert "import-not-found" not in out and "import-untyped" not in out, out
    assert '"unreachable_timeout"' in out and 'Unexpected keyword argument "bufer_size"' in out, \
        out
