"""A check's result over many logs: counts per category, details, summary, JSON, exit code.

Counts of placement, durability and progress are records; availability counts nodes
(a node that did not answer is one violation however many logs it holds).  The JSON form
is the contract of ``ldshell check --json``::

    {"violations": {"placement": n, "durability": n, "progress": n, "availability": n},
     "details": [{"category", "kind", "log_id", "lsn_lo", "lsn_hi", "records",
                  "nodes_missing", "copysets"}, ...],
     "summary": {"logs": n, "records": n, "under_replicated": n, "no_replica": n,
                 "extra_copies": n, "rebuilding": n, "unchecked": n},
     "bytes_received": n, "seconds": s, "rechecked_nodes": [...], "errors": [...]}
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from logdevice.checker.verdict import CATEGORIES, SUMMARY_KEYS, LogVerdict

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

    def add(self, verdict: LogVerdict) -> None:
        self.verdicts.append(verdict)

    @property
    def violations(self) -> dict[str, int]:
        out = dict.fromkeys(CATEGORIES, 0)
        silent: set[int] = set()
        for v in self.verdicts:
            for c in ("placement", "durability", "progress"):
                out[c] += v.counts[c]
            silent |= {d["nodes_missing"][0] for d in v.details
                       if d["category"] == "availability"}
        out["availability"] = len(silent)
        return out

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
                "summary": self.summary, "bytes_received": self.bytes_received,
                "seconds": round(self.seconds, 3),
                "rechecked_nodes": sorted(self.rechecked_nodes), "errors": self.errors}
