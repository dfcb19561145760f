"""Periodic checks run by the nodes themselves, one node at a time.

With the ``checker_interval_ms`` setting above 0, every node runs this role's loop: each
interval it tries to take (or renew) the checker lease in the epoch store, and the node
holding it runs one check of the whole cluster (``checker.driver.run_check``) in a
thread of its own, so the node's event loop never waits for a verdict.  The lease is a
small record in the state of a reserved internal log (``LEASE_LOG``): the holder's index
and an expiry; a node that dies stops renewing it and another one takes over once it
expires.  The check is throttled where it reads: every storage node answers it within
its ``checker_records_per_second`` budget.

Results go to the log (each violation in full, by the driver; a summary line here) and
to the node's metrics (``metrics_snapshot``, read by ``node.roles.metrics_role``): the violations,
the summary, the nodes that were down within the grace period (counted apart) and the
details left out of the report.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from logdevice.checker.driver import CheckOptions, run_check
from logdevice.checker.report import Report
from logdevice.config import Config
from logdevice.epochstore import LogEpochState
from logdevice.errors import LogDeviceError
from logdevice.node.roles.role import NodeServices, Role, cancel_and_wait
from logdevice.security.store import open_cluster_store

log = logging.getLogger("logdevice.node.checker")

__all__ = ["CheckerRole", "LEASE_LOG", "take_lease"]

#: The internal log whose epoch-store state holds the checker lease (never a data log:
#: user logs end 1,000 ids below 2**62).
LEASE_LOG = 2**62 - 2
LEASE_KEY = "checker_lease"


def take_lease(config: Config, node: int, now_ms: int, hold_ms: int) -> bool:
    """Take or renew the checker lease for ``node`` until ``now_ms + hold_ms``; False when
    another node holds an unexpired one.  One compare-and-set in the epoch store."""
    def grab(cur: LogEpochState | None) -> LogEpochState | None:
        state = cur if cur is not None else LogEpochState(LEASE_LOG)
        lease = dict(state.extra).get(LEASE_KEY)
        if lease and lease.get("node") != node and lease.get("until_ms", 0) > now_ms:
            return None  # someone else's, still valid
        extra = {**state.extra, LEASE_KEY: {"node": node, "until_ms": now_ms + hold_ms}}
        return replace(state, extra=extra)

    with open_cluster_store(config) as store:
        state = store.update(LEASE_LOG, grab)
    return state is not None and dict(state.extra).get(LEASE_KEY, {}).get("node") == node


class CheckerRole(Role):
    """Runs a cluster check every ``checker_interval_ms`` while holding the lease."""

    name = "checker"

    def __init__(self, node: NodeServices) -> None:
        super().__init__(node)
        settings = node.config.settings
        self.interval = settings.checker_interval_ms / 1000
        self.runs = 0
        self.last: Report | None = None
        self._task: asyncio.Task[None] | None = None
        self._exec = ThreadPoolExecutor(1, thread_name_prefix="checker")

    async def start(self) -> None:
        if self.interval > 0:
            self._task = self.node.loop.create_task(self._run())

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)

    def close(self) -> None:
        self._exec.shutdown(wait=False, cancel_futures=True)

    def metrics_snapshot(self) -> dict[str, Any]:
        """Runs so far and the last report's counts (zeros before the first): violations,
        summary, and ``other``: nodes down within the grace period, details left out."""
        if self.last is None:
            return {"runs": self.runs, "violations": {}, "summary": {}, "other": {}}
        return {"runs": self.runs, "violations": self.last.violations,
                "summary": self.last.summary,
                "other": {"down_nodes": len(self.last.down_nodes),
                          "details_left_out": self.last.details_left_out}}

    async def _run(self) -> None:
        loop = self.node.loop
        config = self.node.config
        # Spread the nodes' first attempts over an interval.
        await asyncio.sleep(random.uniform(0.1, 1.0) * self.interval)
        while True:
            hold_ms = int(3 * self.interval * 1000) + 60_000
            try:
                mine = await loop.run_in_executor(
                    self._exec, take_lease, config, self.node.index,
                    int(time.time() * 1000), hold_ms)
            except LogDeviceError as exc:
                log.warning("N%d: checker lease: %s", self.node.index, exc)
                mine = False
            if mine:
                access = self.node.access  # the check asks the nodes as a node
                options = CheckOptions(recheck_delay=2.0,
                                       security=access.link if access is not None else None)
                report = await loop.run_in_executor(self._exec, run_check, config, options)
                self.last, self.runs = report, self.runs + 1
                log.info("N%d: periodic check #%d of %d logs in %.2f s: violations %s, %s, "
                         "down %s", self.node.index, self.runs, len(report.verdicts),
                         report.seconds, report.violations, report.summary,
                         sorted(report.down_nodes))
                for e in report.errors:
                    log.error("N%d: periodic check could not run: %s", self.node.index, e)
            await asyncio.sleep(self.interval)
