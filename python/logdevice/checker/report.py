"""A check's result over many logs: counts per category, details, summary, JSON, exit code.

Counts of placement, durability and progress are records; availability counts nodes
(a node that did not answer is one violation however many logs it holds).  Details are
bounded: at most ``max_details`` in the whole report (each log keeps as many at most);
``details_left_out`` counts the runs of violations that are not listed.  Nodes that did
not answer but that the cluster holds dead for less than the grace period are listed in
``down_nodes`` (with how long they had been dead), not counted as violations.  The JSON
form is the contract of ``ldshell check --json``::

    {"violations": {"placement": n, "durability": n, "progress": n, "availability": n},
     "details": [{"category", "kind", "log_id", "lsn_lo", "lsn_hi", "records",
                  "nodes_missing", "copysets"}, ...],
     "details_left_out": n,
     "summary": {"logs": n, "records": n, "under_replicated": n, "no_replica": n,
                 "extra_copies": n, "rebuilding": n, "unchecked": n, "outside_nodeset": n},
     "down_nodes": {node: dead_for_ms, ...},
     "bytes_received": n, "seconds": s, "rechecked_nodes": [...], "errors": [...]}
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from logdevice.checker.verdict import CATEGORIES, MAX_DETAILS, SUMMARY_KEYS, LogVerdict

__all__ = ["Report", "CATEGORIES", "EXIT_CLEAN", "EXIT_VIOLATIONS", "EXIT_FAILED"]

EXIT_CLEAN = 0
EXIT_VIOLATIONS = 1
EXIT_FAILED = 2


@dataclass
class Report:
    """Verdicts of the logs checked, plus what the driver saw on the way."""

    verdicts: list[LogVerdict] = field(default_factory=list)
    bytes_received: int = 0
    seconds: float = 0.0
    rechecked_nodes: set[int] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)
    down_nodes: dict[int, int] = field(default_factory=dict)  # node -> dead for (ms)
    max_details: int = MAX_DETAILS
    _kept: int = 0  # details kept so far, over every verdict

    def add(self, verdict: LogVerdict) -> None:
        """Add one log's verdict; its details beyond the report's cap are dropped (and
        counted in ``details_left_out``)."""
        room = max(0, self.max_details - self._kept)
        if len(verdict.details) > room:  # (a truncated detail's runs are counted)
            verdict.left_out += sum(d["kind"] != "truncated" for d in verdict.details[room:])
            del verdict.details[room:]
        self._kept += len(verdict.details)
        self.verdicts.append(verdict)

    @property
    def violations(self) -> dict[str, int]:
        out = dict.fromkeys(CATEGORIES, 0)
        unavailable: set[int] = set()
        for v in self.verdicts:
            for c in ("placement", "durability", "progress"):
                out[c] += v.counts[c]
            unavailable |= v.unavailable
        out["availability"] = len(unavailable)
        return out

    @property
    def details_left_out(self) -> int:
        return sum(v.left_out for v in self.verdicts)

    @property
    def summary(self) -> dict[str, int]:
        out = {"logs": len(self.verdicts), **dict.fromkeys(SUMMARY_KEYS, 0)}
        for v in self.verdicts:
            for key in SUMMARY_KEYS:
                out[key] += v.summary[key]
        return out

    @property
    def details(self) -> list[dict[str, Any]]:
        return [d for v in self.verdicts for d in v.details]

    @property
    def exit_code(self) -> int:
        if self.errors and not self.verdicts:
            return EXIT_FAILED
        return EXIT_VIOLATIONS if any(self.violations.values()) else EXIT_CLEAN

    def to_json(self) -> dict[str, Any]:
        return {"violations": self.violations, "details": self.details,
                "details_left_out": self.details_left_out, "summary": self.summary,
                "down_nodes": {str(n): ms for n, ms in sorted(self.down_nodes.items())},
                "bytes_received": self.bytes_received,
                "seconds": round(self.seconds, 3),
                "rechecked_nodes": sorted(self.rechecked_nodes), "errors": self.errors}
