"""The tree's structure, checked by reading the source (``ast``; nothing is imported).

- No import cycle between modules of ``logdevice``: every ``import`` / ``from`` counts,
  those under ``if TYPE_CHECKING:`` and inside functions too (an import kept out of the
  running code still ties two modules together).  A package's ``__init__`` may import its
  own submodules, and ``from package import name`` counts as an import of the module
  the package's ``__init__`` takes ``name`` from.
- No new reach-in: ``x._name`` (not a dunder) where ``x`` is not the bare name ``self`` or
  ``cls``, in the package, benchmarks, spark jobs and tests.  A NamedTuple's ``_fields``,
  ``_replace``, ``_asdict`` and ``_make`` are its public API, and ``super()._name`` is the
  object's own; neither counts.  Parts talk through what they make public (a method, a
  property, a small ``typing.Protocol``), not through each other's private attributes.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "python"
PACKAGE = SOURCE / "logdevice"

#: Where reach-ins are left, at most this many per file (paths from the repository root).
#: May only go down.
ALLOWED_REACH_INS: dict[str, int] = {
    # argparse lists a parser's options only in its private _actions
    "tests/unit/test_ld_dev_cluster.py": 2,
    # sys._current_frames: the documented way to see where another thread is
    "tests/waiting.py": 1,
}

#: Where reach-ins are looked for.
REACH_IN_ROOTS = ("python/logdevice", "benchmarks", "spark", "tests")

#: A NamedTuple's public API, despite the underscore.
NAMEDTUPLE_API = frozenset({"_fields", "_replace", "_asdict", "_make"})


# -- the import graph ---------------------------------------------------------------------
def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SOURCE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


class ImportGraph:
    """Modules and what each imports (module -> {module imported: line}).

    ``sources``: module name -> source text; ``packages``: the names among them that are
    a package's ``__init__``."""

    def __init__(self, sources: dict[str, str], packages: set[str]) -> None:
        self.packages = packages
        self.trees = {m: ast.parse(text, m) for m, text in sources.items()}
        self.edges = {m: self._imports(m) for m in self.trees}

    @classmethod
    def of_package(cls) -> ImportGraph:
        files = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
        return cls({m: p.read_text() for m, p in files.items()},
                   {m for m, p in files.items() if p.name == "__init__.py"})

    def _absolute(self, module: str, node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        base = module.split(".")
        if module not in self.packages:
            base.pop()
        base = base[:len(base) - (node.level - 1)]
        return ".".join(base + ([node.module] if node.module else []))

    def _source_of(self, package: str, name: str, seen: frozenset[str] = frozenset()) -> str:
        """The module ``from package import name`` really imports: the submodule
        ``name``, else the module the package's ``__init__`` takes ``name`` from."""
        if f"{package}.{name}" in self.trees:
            return f"{package}.{name}"
        if package in self.packages and package not in seen:
            for node in self.trees[package].body:
                if isinstance(node, ast.ImportFrom):
                    source = self._absolute(package, node)
                    if source in self.trees and any(
                            (a.asname or a.name) == name for a in node.names):
                        return self._source_of(source, name, seen | {package})
        return package

    def _imports(self, module: str) -> dict[str, int]:
        out: dict[str, int] = {}
        for node in ast.walk(self.trees[module]):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in self.trees:
                        out.setdefault(alias.name, node.lineno)
            elif isinstance(node, ast.ImportFrom):
                source = self._absolute(module, node)
                if source in self.trees:
                    for alias in node.names:
                        out.setdefault(self._source_of(source, alias.name), node.lineno)
        out.pop(module, None)
        if module in self.packages:  # a package's __init__ may import its own submodules
            out = {m: line for m, line in out.items() if not m.startswith(module + ".")}
        return out

    def strongly_connected(self) -> list[list[str]]:
        """The groups of modules that import each other (through others), size > 1."""
        index: dict[str, int] = {}
        low: dict[str, int] = {}
        stack: list[str] = []
        on_stack: set[str] = set()
        groups: list[list[str]] = []
        for start in sorted(self.trees):
            if start in index:
                continue
            # Tarjan's algorithm without recursion: (module, its targets left to visit).
            work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(self.edges[start])))]
            index[start] = low[start] = len(index)
            stack.append(start)
            on_stack.add(start)
            while work:
                v, targets = work[-1]
                w = next(targets, None)
                if w is not None:
                    if w not in index:
                        index[w] = low[w] = len(index)
                        stack.append(w)
                        on_stack.add(w)
                        work.append((w, iter(sorted(self.edges[w]))))
                    elif w in on_stack:
                        low[v] = min(low[v], index[w])
                    continue
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    group = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        group.append(w)
                        if w == v:
                            break
                    if len(group) > 1:
                        groups.append(sorted(group))
        return groups

    def cycle_in(self, group: list[str]) -> str:
        """One cycle through ``group``'s first module, each step with its import line."""
        inside = set(group)
        start = group[0]
        came_from: dict[str, str] = {}
        frontier = [start]
        while frontier:  # breadth first: the shortest way back to start
            nxt = []
            for v in frontier:
                for w in sorted(self.edges[v]):
                    if w in inside and w not in came_from:
                        came_from[w] = v
                        nxt.append(w)
            if start in came_from:
                break
            frontier = nxt
        path = [start]
        while True:
            prev = came_from[path[-1]]
            if prev == start:
                break
            path.append(prev)
        path.reverse()
        steps = [start, *path]
        return " -> ".join(f"{a} (line {self.edges[a][b]})"
                           for a, b in zip(steps, steps[1:], strict=False)) + f" -> {start}"


def test_no_import_cycles_in_the_package():
    graph = ImportGraph.of_package()
    assert len(graph.trees) > 100 and graph.edges["logdevice.node.transport.server"]
    found = graph.strongly_connected()
    assert not found, "import cycles (TYPE_CHECKING imports count too; depend on a small " \
                      "Protocol or pass what is needed instead): " + "; ".join(
                          graph.cycle_in(g) for g in found)


def test_the_cycle_check_sees_them():
    graph = ImportGraph({
        "p": "from p.a import A\n",  # a package's __init__ importing its own submodule
        "p.a": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from p.b import B\n",
        "p.b": "def f():\n    import p.c\n",
        "p.c": "from p import A\nimport p.d\n",  # A: the module p takes it from, p.a
        "p.d": "from . import c\n",
    }, {"p"})
    assert graph.edges["p"] == {}
    assert graph.edges["p.c"] == {"p.a": 1, "p.d": 2}
    assert graph.edges["p.d"] == {"p.c": 1}
    groups = graph.strongly_connected()
    assert groups == [["p.a", "p.b", "p.c", "p.d"]]
    assert graph.cycle_in(groups[0]) == "p.a (line 3) -> p.b (line 2) -> p.c (line 1) -> p.a"


# -- reach-ins ----------------------------------------------------------------------------
def reach_ins(source: str) -> list[str]:
    """Every ``x._name`` (not a dunder) whose ``x`` is not the bare name self or cls,
    other than a NamedTuple's API and ``super()._name``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Attribute) or not node.attr.startswith("_"):
            continue
        if node.attr.startswith("__") and node.attr.endswith("__"):
            continue
        if node.attr in NAMEDTUPLE_API:
            continue
        owner = node.value
        if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
            continue
        if (isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name)
                and owner.func.id == "super"):
            continue
        out.append(f"{node.lineno}: {ast.unparse(node)}")
    return out


def _python_files() -> Iterator[Path]:
    for top in REACH_IN_ROOTS:
        yield from sorted((ROOT / top).rglob("*.py"))


def test_no_new_reach_ins():
    found = {p.relative_to(ROOT).as_posix(): reach_ins(p.read_text()) for p in _python_files()}
    assert "python/logdevice/node/transport/server.py" in found
    over = {name: hits for name, hits in found.items()
            if len(hits) > ALLOWED_REACH_INS.get(name, 0)}
    assert not over, ("reach-ins into another object's private attributes (use its public "
                      "interface, or make one): " + "; ".join(
                          f"{name}: {', '.join(hits)}" for name, hits in over.items()))


def test_the_reach_in_check_sees_them():
    hits = reach_ins("self._a\ncls._b\nother._c\nself.x._d\ntype(x).__name__\n")
    assert hits == ["3: other._c", "4: self.x._d"]


def test_namedtuple_api_and_super_are_not_reach_ins():
    hits = reach_ins("p._replace(x=1)\np._fields\nsuper()._setup()\nq._asdict()\nr._x\n")
    assert hits == ["5: r._x"]
