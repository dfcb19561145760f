"""The tools' rich console: piped output keeps long lines and tables whole."""

from __future__ import annotations

import io

from rich.table import Table

from logdevice.cli import PIPE_WIDTH, console


def test_piped_output_is_not_wrapped_at_80_columns():
    out = io.StringIO()
    line = "ldwrite: " + "x" * 150
    console(file=out).print(line, markup=False)
    assert out.getvalue() == line + "\n"
    t = Table()
    t.add_column("a" * 60)
    t.add_column("b" * 60)
    t.add_row("1", "2")
    out = io.StringIO()
    console(file=out).print(t)
    widths = {len(row) for row in out.getvalue().splitlines()}
    assert max(widths) > 120 and max(widths) <= PIPE_WIDTH  # both headers whole
    assert "a" * 60 in out.getvalue() and "\x1b[" not in out.getvalue()  # no colours
