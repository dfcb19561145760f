"""The cluster metadata checker (BookKeeper BP-34, for logs).

It audits, never repairs:

- ``runs``: copysets as runs, the form storage nodes ship them in;
- ``verdict``: the sans-I/O core: per-node availability + copysets + the log's replication
  property and the nodes' authoritative status in, violations out (vectorized);
- ``report``: the aggregate of many logs' verdicts, its JSON form and counts;
- ``driver``: asks the nodes (GET_RECORD_AVAILABILITY), re-checks nodes that did not
  answer, re-reads metadata and re-asks before it reports anything.
"""

from logdevice.checker.report import CATEGORIES, Report
from logdevice.checker.verdict import LogVerdict, NodeHoldings, judge

__all__ = ["CATEGORIES", "Report", "LogVerdict", "NodeHoldings", "judge"]
