"""The wheel's package list covers every package of the source tree (a package left out
installs fine and fails at import time, only outside an editable install); the library
imports without its extras; and the package's import structure: no import cycle among
module-level imports, and no import inside a function except of an optional dependency
(so an import cycle cannot hide in a function)."""

from __future__ import annotations

import ast
import io
import subprocess
import sys
import tokenize
import tomllib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "python" / "logdevice"


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
                 "from logdevice.node.roles.metrics_role import MetricsRole\n"
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
    # ldshell's tables are Arrow: status, logs and info need pyarrow as much as query does.
    r = _without(["pyarrow"], "from logdevice.tools.ldshell.main import main\nmain(['--help'])")
    assert r.stderr.strip() == "ldshell: needs pyarrow: pip install 'logdevice[cli]'"
    assert any(d.startswith("pyarrow") for d in
               _project()["project"]["optional-dependencies"]["cli"])


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


# -- import structure ----------------------------------------------------------------------
#: What a function may import: optional dependencies (the package's extras; readline is
#: missing on some platforms and changes ``input()`` once imported), imported on use.
OPTIONAL = {"duckdb", "kazoo", "prometheus_client", "pyarrow", "pyspark", "readline", "rich",
            "trustme", "uvloop"}
#: Modules of the package that import an optional dependency at their top, so importing
#: them on use is importing that dependency on use: module -> the dependency.
GATEWAYS = {"logdevice.spark.source": "pyspark"}


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _is_type_checking(node: ast.If) -> bool:
    return "TYPE_CHECKING" in ast.unparse(node.test)


def _imports(tree: ast.AST, in_function: bool = False
             ) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool, list[ast.stmt]]]:
    """Every import statement, whether it runs in a function, and the statement list
    holding it; imports under ``if TYPE_CHECKING:`` are left out (they never run)."""
    for field in ("body", "orelse", "handlers", "finalbody"):
        block = getattr(tree, field, None)
        if not isinstance(block, list):
            continue
        if field == "body" and isinstance(tree, ast.If) and _is_type_checking(tree):
            continue
        for node in block:
            if isinstance(node, ast.Import | ast.ImportFrom):
                yield node, in_function, block
            else:
                yield from _imports(node, in_function or isinstance(
                    node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda))


def _imported(node: ast.Import | ast.ImportFrom, module: str, path: Path) -> list[str]:
    """The modules ``node`` (in ``module``, file ``path``) names, absolute."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = node.module or ""
    if node.level:
        pkg = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        pkg = pkg[:len(pkg) - node.level + 1]
        base = ".".join([*pkg, base] if base else pkg)
    return [base] + [f"{base}.{a.name}" for a in node.names]


def _comments(source: str) -> dict[int, str]:
    out = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            text = tok.string.lstrip("#").strip()
            if not text.startswith(("noqa", "type: ignore", "pragma")):
                out[tok.start[0]] = text
    return out


def test_functions_import_only_optional_dependencies():
    # An import inside a function is how an import cycle gets dodged: the package has
    # none, but for optional dependencies (and the modules that import one at their top),
    # each with a comment at the import saying why it waits.
    modules = _modules()
    bad, silent = [], []
    for module, path in modules.items():
        source = path.read_text()
        comments = _comments(source)
        for node, in_function, block in _imports(ast.parse(source)):
            if not in_function:
                continue
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            names = [m for m in _imported(node, module, path)
                     if not m.startswith("logdevice") or m in modules]
            if not all(m.split(".")[0] in OPTIONAL or m in GATEWAYS for m in names):
                bad.append(f"{where}: {', '.join(names)}")
            # The comment: on the statement, or next to the group of imports it is in.
            i = next(k for k, n in enumerate(block) if n is node)
            first, last = i, i
            while first > 0 and isinstance(block[first - 1], ast.Import | ast.ImportFrom):
                first -= 1
            while last + 1 < len(block) and isinstance(block[last + 1],
                                                       ast.Import | ast.ImportFrom):
                last += 1
            lines = range(block[first].lineno - 1, (block[last].end_lineno or 0) + 2)
            if not any(n in comments for n in lines):
                silent.append(where)
    assert not bad, ("imports inside functions that are not of optional dependencies "
                     "(import at the top; if that makes a cycle, move the shared part to "
                     "a lower module): " + "; ".join(bad))
    assert not silent, "function-level imports without a comment saying why: " + \
        ", ".join(silent)


def test_gateways_import_their_optional_dependency_at_the_top():
    modules = _modules()
    for module, dependency in GATEWAYS.items():
        path = modules[module]
        top = {m.split(".")[0] for node, in_function, _ in _imports(ast.parse(path.read_text()))
               if not in_function for m in _imported(node, module, path)}
        assert dependency in top, f"{module} does not import {dependency}: not a gateway"


def _graph() -> dict[str, set[str]]:
    """module -> the package modules its module-level imports run (parent packages
    included, except the importer's own: a submodule of a package being initialized
    imports fine)."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        deps = graph.setdefault(module, set())
        for node, in_function, _ in _imports(ast.parse(path.read_text())):
            if in_function:
                continue
            for name in _imported(node, module, path):
                parts = name.split(".")
                for k in range(1, len(parts) + 1):
                    target = ".".join(parts[:k])
                    if target in modules and target != module and \
                            not module.startswith(target + "."):
                        deps.add(target)
    return graph


def test_no_import_cycle():
    graph = _graph()
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []
    cycles: list[list[str]] = []

    def visit(m: str) -> None:
        state[m] = 1
        path.append(m)
        for d in sorted(graph[m]):
            if state.get(d) == 1:
                cycles.append(path[path.index(d):] + [d])
            elif d not in state:
                visit(d)
        path.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_import_structure_checks_see_the_imports():
    # The checks above are only as good as their reading of the sources.
    graph = _graph()
    assert "logdevice.config._parse" in graph["logdevice.config.cluster"]
    assert "logdevice.epochstore" in graph["logdevice.config.cluster"]  # via .uri
    # a TYPE_CHECKING import does not count
    assert "logdevice.node.transport.server" not in graph["logdevice.node.roles.role"]
    assert "logdevice.spark.source" not in graph["logdevice.spark"]  # in a function
