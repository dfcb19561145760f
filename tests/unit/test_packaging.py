"""The wheel's package list covers every package of the source tree (a package left out
installs fine and fails at import time, only outside an editable install)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_package_is_in_the_wheel():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(project["tool"]["setuptools"]["packages"])
    dirs = project["tool"]["setuptools"]["package-dir"]
    found = set()
    for top, where in dirs.items():
        base = ROOT / where
        for init in base.rglob("__init__.py"):
            rel = init.parent.relative_to(base).parts
            found.add(".".join((top, *rel)))
    assert found <= listed, f"not in pyproject's packages: {sorted(found - listed)}"


def _without(modules: list[str], code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter where importing ``modules`` fails, as when the
    extras that bring them are not installed."""
    block = "".join(f"sys.modules[{m!r}] = None\n" for m in modules)
    return subprocess.run([sys.executable, "-c", f"import sys\n{block}{code}"],
                          capture_output=True, text=True, timeout=60)


def test_the_library_needs_no_extra():
    # Client, readers, writers, the node's roles and LocalCluster import without the
    # optional dependencies; a node without prometheus-client serves no /metrics.
    r = _without(["rich", "uvloop", "prometheus_client", "duckdb", "pyarrow", "kazoo"],
                 "import logdevice, logdevice.client, logdevice.node.assemble\n"
                 "from logdevice.node.metrics import MetricsRole\n"
                 "print(logdevice.Client.__name__, logdevice.LocalCluster.__name__)")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["Client", "LocalCluster"]


def test_tools_without_their_extra_say_what_to_install():
    for module, tool in (("logdevice.tools.ldwrite", "ldwrite"),
                         ("logdevice.tools.ldbench", "ldbench")):
        r = _without(["rich"], f"import {module}")
        assert r.returncode == 1
        assert r.stderr.strip() == f"{tool}: needs rich: pip install 'logdevice[cli]'"
    r = _without(["rich"], "from logdevice.tools.ldshell.main import main\nmain(['--help'])")
    assert r.stderr.strip() == "ldshell: needs rich: pip install 'logdevice[cli]'"


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_metadata_has_urls_and_the_license_it_declares():
    # What PyPI shows next to the package: its links, and a license whose text ships in
    # the wheel (.dist-info/licenses) and is the one the SPDX expression names.
    project = _project()["project"]
    urls = project.get("urls", {})
    assert urls, "pyproject.toml has no [project.urls]"
    assert all(u.startswith("https://") for u in urls.values()), urls
    assert project["license"] == "Apache-2.0"
    for name in project["license-files"]:
        text = (ROOT / name).read_text()
        assert "Apache License" in text and "Version 2.0, January 2004" in text, name


def test_no_generated_c_in_the_wheel():
    # include-package-data ships every source of an extension that lies in a package
    # directory, and Cython writes its .c next to the .pyx in src/ldcore/ (ci/wheel.sh
    # checks the built wheel too).
    setuptools = _project()["tool"]["setuptools"]
    assert "*.c" in setuptools.get("exclude-package-data", {}).get("ldcore", [])
