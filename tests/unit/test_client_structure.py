"""The client package's parts talk through what they make public: no new reach-in
(``x._name`` with ``x`` not ``self``/``cls``) into another object's private state.
Readers and writers get a ``ClientContext`` instead of the client's insides; reach-ins
that cannot be helped would be listed here, per file, and may only go down."""

from __future__ import annotations

import ast
from pathlib import Path

import logdevice.client

CLIENT = Path(logdevice.client.__file__).resolve().parent

#: What is left, at most, per file: nothing.
ALLOWED: dict[str, int] = {}


def reach_ins(source: str) -> list[str]:
    """Every ``x._name`` (not a dunder) whose ``x`` is not the bare name self or cls."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Attribute) or not node.attr.startswith("_"):
            continue
        if node.attr.startswith("__") and node.attr.endswith("__"):
            continue
        if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            continue
        out.append(f"{node.lineno}: {ast.unparse(node)}")
    return out


def test_no_new_reach_ins_in_the_client_package():
    found = {p.name: reach_ins(p.read_text()) for p in sorted(CLIENT.glob("*.py"))}
    over = {name: hits for name, hits in found.items()
            if len(hits) > ALLOWED.get(name, 0)}
    assert not over, ("reach-ins into another object's private attributes (use its public "
                      "interface, e.g. the ClientContext, or make one): " + "; ".join(
                          f"{name}: {', '.join(hits)}" for name, hits in over.items()))


def test_the_reach_in_check_sees_them():
    hits = reach_ins("self._a\ncls._b\nother._c\nself.x._d\ntype(x).__name__\n")
    assert hits == ["3: other._c", "4: self.x._d"]
