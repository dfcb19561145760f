"""Ratio tables for the pytest-benchmark suites.

Every benchmark belongs to a group (``@pytest.mark.benchmark(group=...)``) and sets
``benchmark.extra_info``: ``items`` (records or bytes handled per call, for a rate),
``unit`` ("records" or "bytes") and, on the anchors it is compared against,
``reference=True``.  At the end of the run each group prints one table: the median time,
the rate, and the ratio of every measurement to every reference measured in the same run
(``ref time / time``: above 1 means faster than the reference).  The table also goes to
``benchmarks/last-run.md`` so RESULTS.md can be updated from it.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

LAST_RUN = Path(__file__).with_name("last-run.md")


def _rate(meta) -> str:
    items = meta.extra_info.get("items")
    if not items:
        return ""
    per_s = items / meta.stats.median
    unit = meta.extra_info.get("unit", "records")
    if unit == "bytes":
        return f"{per_s / 1e6:,.0f} MB/s"
    return f"{per_s / 1e6:,.2f} M {unit}/s"


def ratio_tables(benchmarks) -> str:
    groups = defaultdict(list)
    for meta in benchmarks:
        if meta.stats:
            groups[meta.group or "ungrouped"].append(meta)
    lines = []
    for group, metas in sorted(groups.items()):
        refs = [m for m in metas if m.extra_info.get("reference")]
        lines.append(f"\n### {group}\n")
        header = "| benchmark | median | rate | " + " | ".join(f"vs {r.name}" for r in refs)
        lines.append(header + " |")
        lines.append("|" + "---|" * (3 + len(refs)))
        for m in metas:
            ratios = [f"{r.stats.median / m.stats.median:.2f}x" for r in refs]
            lines.append(
                f"| {m.name} | {m.stats.median * 1e3:.3f} ms | {_rate(m)} | "
                + " | ".join(ratios)
                + " |"
            )
    return "\n".join(lines) + "\n"


def pytest_terminal_summary(terminalreporter, config):
    session = getattr(config, "_benchmarksession", None)
    if session is None or not session.benchmarks:
        return
    text = ratio_tables(session.benchmarks)
    LAST_RUN.write_text("# Last benchmark run (ratios measured in this run)\n" + text)
    terminalreporter.write_sep("=", "ratios against references measured in this run")
    terminalreporter.write_line(text)
