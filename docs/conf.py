"""Sphinx configuration of the logdevice docs (``make docs``).

The configuration reference and the command-line reference are generated at build time
from the code (the config dataclasses and their comments; each tool's ``--help``), so
they cannot drift from what the package does.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import io
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT / "python"), str(ROOT / "src")]

project = "logdevice for Python"
author = "the logdevice authors"
copyright = "2026, the logdevice authors"  # noqa: A001
extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.viewcode"]
napoleon_numpy_docstring = True
napoleon_google_docstring = False
autodoc_member_order = "bysource"
autodoc_typehints = "description"
html_theme = "alabaster"
exclude_patterns = ["_build"]
suppress_warnings = ["ref.python"]  # ambiguous cross-references in type hints


def _field_rows(cls: type) -> list[tuple[str, str, str]]:
    """(name, default, comment) of a dataclass's fields, comments from its source."""
    src = inspect.getsource(cls)
    comments = dict(re.findall(r"^\s+(\w+):[^#\n]*#\s*(.+)$", src, re.M))
    rows = []
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            default = repr(f.default)
        elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            default = repr(f.default_factory())  # type: ignore[misc]
        else:
            default = "(required)"
        rows.append((f.name, default, comments.get(f.name, "")))
    return rows


def _table(title: str, rows: list[tuple[str, str, str]]) -> str:
    out = [f".. list-table:: {title}", "   :header-rows: 1", "   :widths: 25 20 55", "",
           "   * - field", "     - default", "     - meaning"]
    for name, default, comment in rows:
        out += [f"   * - ``{name}``", f"     - ``{default}``", f"     - {comment}"]
    return "\n".join(out) + "\n"


def _generate() -> None:
    from logdevice.client.settings import ClientSettings
    from logdevice.config.model import (
        Acl,
        LogGroup,
        NodeConfig,
        PrincipalConfig,
        SecurityConfig,
        Settings,
        TlsConfig,
        ZooKeeperAuth,
    )

    gen = HERE / "_generated"
    gen.mkdir(exist_ok=True)
    (gen / "config_tables.rst").write_text(
        _table("settings (cluster-wide)", _field_rows(Settings)) + "\n"
        + _table("a log group (logs[])", _field_rows(LogGroup)) + "\n"
        + _table("a node (nodes[])", _field_rows(NodeConfig)) + "\n"
        + _table("client settings (keyword arguments of ld.Client)", _field_rows(ClientSettings)))
    (gen / "security_tables.rst").write_text(
        _table("security", _field_rows(SecurityConfig)) + "\n"
        + _table("security.tls", _field_rows(TlsConfig)) + "\n"
        + _table("security.zookeeper", _field_rows(ZooKeeperAuth)) + "\n"
        + _table("a principal (security.principals.<name>)",
                 [r for r in _field_rows(PrincipalConfig) if r[0] != "name"]) + "\n"
        + _table("an ACL (security.acl, logs[].acl)", _field_rows(Acl)))
    from logdevice.node import main as node_main
    from logdevice.tools import dev_cluster, ldbench, ldcat, ldtail, ldwrite

    parts = []
    for name, mod in (("logdeviced", node_main), ("ldwrite", ldwrite), ("ldcat", ldcat),
                      ("ldtail", ldtail), ("ldbench", ldbench),
                      ("ld-dev-cluster", dev_cluster)):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf), contextlib.suppress(SystemExit):
            mod.main(["--help"])
        parts += [name, "-" * len(name), "", "::", ""]
        parts += ["    " + line for line in buf.getvalue().splitlines()] + [""]
    (gen / "cli_help.rst").write_text("\n".join(parts))


_generate()
