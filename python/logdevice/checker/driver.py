"""The checker's driver: asks the storage nodes, re-checks, re-asks, reports.

One check (``run_check`` / ``check_cluster``):

1. Read the metadata: every log's nodesets (all epochs, from the epoch store) and each
   node's authoritative status from the event log, with when it stopped being fully
   authoritative.
2. Ask every storage node, in parallel, for the records it holds of each log it may hold
   (GET_RECORD_AVAILABILITY, page after page).  A node that does not answer is not judged
   yet: after ``recheck_delay`` it is asked again (the delayed re-check; a slow or
   paused node is not data loss).
3. Judge each log over its live range (highest trim point + 1 .. highest release
   pointer) with ``verdict.judge``, each epoch's records against the replication
   property the log had in that epoch.
4. Before reporting anything: re-read the metadata (event log, statuses) and ask the
   nodes named by violations again, then judge once more; only what survives is
   reported.  Rebuilding or a trim in flight does not raise an alarm.

All replies are kept as arrays; nothing here loops over records.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from logdevice.checker.client import DEFAULT_PAGE_RECORDS, AvailabilityClient, Fetched
from logdevice.checker.report import Report
from logdevice.checker.verdict import judge
from logdevice.config import Config
from logdevice.errors import E, LogDeviceError
from logdevice.security import ConnectSecurity
from logdevice.shards import AuthoritativeStatus

__all__ = ["CheckOptions", "Metadata", "read_metadata", "check_cluster", "run_check"]

log = logging.getLogger("logdevice.checker")



@dataclass
class CheckOptions:
    """How a check runs.

    Attributes
    ----------
    logs : list of int, optional
        Logs to check (default: every configured log the epoch store knows).
    timeout : float
        Seconds for connecting to a node and for each reply.
    recheck_delay : float
        Seconds before nodes that did not answer are asked again.
    page_records : int
        Records per GET_RECORD_AVAILABILITY reply.
    grace_ms : int, optional
        Progress grace period (default: the ``checker_grace_period_ms`` setting).
    on_event : callable, optional
        Called with a line of text at each step (progress for people, and tests).
    security : ConnectSecurity, optional
        TLS and token of the connections to the nodes (a secure cluster's nodes answer
        the checker only for principals with ``admin`` on the logs).
    """

    logs: list[int] | None = None
    timeout: float = 5.0
    recheck_delay: float = 2.0
    page_records: int = DEFAULT_PAGE_RECORDS
    grace_ms: int | None = None
    on_event: Callable[[str], None] | None = None
    max_details: int = 1000
    security: ConnectSecurity | None = None


@dataclass
class Metadata:
    """What the epoch store says: per log, its nodesets (every epoch's) and its metadata
    history as (first epoch, replication) pairs; each node's status."""

    nodesets: dict[int, tuple[int, ...]] = field(default_factory=dict)
    history: dict[int, list[tuple[int, Any]]] = field(default_factory=dict)
    statuses: dict[int, AuthoritativeStatus] = field(default_factory=dict)
    since_ms: dict[int, int] = field(default_factory=dict)


def read_metadata(config: Config, logs: Iterable[int] | None) -> Metadata:
    """Nodesets of ``logs`` (default: every configured log in the epoch store) and the
    nodes' authoritative statuses with the time each left FULLY_AUTHORITATIVE."""
    from logdevice.epochstore import ShardStatusFold, open_epoch_store

    meta = Metadata()
    with open_epoch_store(config.epoch_store_uri) as store:
        # Unless asked for, only configured logs (the store also holds internal state).
        wanted = ([x for x in store.logs() if config.has_log(x)] if logs is None
                  else list(logs))
        for log_id in wanted:
            if not config.has_log(log_id):
                raise LogDeviceError(E.NOTFOUND, f"log {log_id} is not in the config")
            state = store.get(log_id)
            if state is None or not state.history:
                meta.nodesets[log_id] = ()
                continue
            meta.nodesets[log_id] = tuple(sorted({x for m in state.history for x in m.nodeset}))
            meta.history[log_id] = sorted(
                ((m.first_epoch, dict(m.replication)) for m in state.history),
                key=lambda entry: entry[0])
        fold = ShardStatusFold()
        for ev in store.events():
            before = fold.status(ev["node"])
            fold.apply(ev)
            after = fold.status(ev["node"])
            if before == AuthoritativeStatus.FULLY_AUTHORITATIVE != after:
                meta.since_ms[ev["node"]] = int(ev.get("time_ms", 0))
        meta.statuses = dict(fold.statuses())
    return meta


class _Check:
    """One check run: the state between rounds."""

    def __init__(self, config: Config, options: CheckOptions) -> None:
        self.config = config
        self.options = options
        self.asker = AvailabilityClient(config, timeout=options.timeout,
                                        page_records=options.page_records,
                                        security=options.security)
        self.report = Report()
        self.fetched: dict[int, dict[int, Fetched]] = {}  # log -> node -> what it holds

    def say(self, text: str) -> None:
        log.info("%s", text)
        if self.options.on_event is not None:
            self.options.on_event(text)

    async def ask(self, plan: Mapping[int, list[int]]) -> set[int]:
        """Ask each node of ``plan`` (node -> logs); returns the nodes that failed."""
        nodes = sorted(plan)
        results = await asyncio.gather(
            *(self.asker.fetch_node(x, plan[x]) for x in nodes), return_exceptions=True)
        failed = set()
        for x, res in zip(nodes, results, strict=True):
            if isinstance(res, BaseException):
                if not isinstance(res, LogDeviceError | OSError):
                    raise res
                failed.add(x)
                self.say(f"N{x} did not answer: {res}")
                continue
            for log_id, f in res.items():
                self.fetched.setdefault(log_id, {})[x] = f
        return failed

    async def ask_with_recheck(self, plan: Mapping[int, list[int]]) -> set[int]:
        failed = await self.ask(plan)
        if failed:
            self.report.rechecked_nodes |= failed
            self.say(f"re-checking {', '.join(f'N{x}' for x in sorted(failed))} in "
                     f"{self.options.recheck_delay:g} s")
            await asyncio.sleep(self.options.recheck_delay)
            failed = await self.ask({x: plan[x] for x in failed})
            if failed:
                self.say(f"still silent after the re-check: "
                         f"{', '.join(f'N{x}' for x in sorted(failed))}")
        return failed

    def judge_log(self, log_id: int, meta: Metadata, silent: set[int]) -> Any:
        group = self.config.log_group(log_id)
        got = self.fetched.get(log_id, {})
        nodeset = meta.nodesets.get(log_id, ())
        trim = max((f.trim_point for f in got.values()), default=0)
        released = max((f.last_released for f in got.values()), default=0)
        locations = {n.index: n.location for n in self.config.nodes}
        grace = (self.options.grace_ms if self.options.grace_ms is not None
                 else self.config.settings.checker_grace_period_ms)
        return judge(log_id, trim + 1, max(released, trim),
                     {x: f.holdings for x, f in got.items()},
                     replication=group.replication, nodeset=nodeset,
                     silent=silent & set(nodeset), locations=locations,
                     statuses=meta.statuses, since_ms=meta.since_ms,
                     now_ms=int(time.time() * 1000), grace_ms=grace,
                     max_details=self.options.max_details,
                     epochs=meta.history.get(log_id, ()))

    async def run(self) -> Report:
        t0 = time.monotonic()
        loop = asyncio.get_running_loop()
        meta = await loop.run_in_executor(None, read_metadata, self.config,
                                          self.options.logs)
        plan: dict[int, list[int]] = {}
        for log_id, nodeset in meta.nodesets.items():
            for x in nodeset:
                if self.config.has_node(x):
                    plan.setdefault(x, []).append(log_id)
        self.say(f"checking {len(meta.nodesets)} log(s) on {len(plan)} node(s)")
        silent = await self.ask_with_recheck(plan)
        verdicts = {log_id: self.judge_log(log_id, meta, silent) for log_id in meta.nodesets}
        suspects = {log_id: v.suspects for log_id, v in verdicts.items() if not v.clean}
        if suspects:
            # Before reporting: fresh metadata, and the nodes concerned asked again.
            self.say(f"{len(suspects)} log(s) with violations: re-reading metadata and "
                     f"asking the nodes concerned again")
            meta = await loop.run_in_executor(None, read_metadata, self.config,
                                              list(suspects))
            again: dict[int, list[int]] = {}
            for log_id, nodes in suspects.items():
                for x in nodes:
                    again.setdefault(x, []).append(log_id)
            silent = (silent - set(again)) | await self.ask_with_recheck(again)
            for log_id in suspects:
                verdicts[log_id] = self.judge_log(log_id, meta, silent)
        for log_id in sorted(verdicts):
            self.report.add(verdicts[log_id])
            for d in verdicts[log_id].details:
                log.warning("violation: %s", d)
        self.report.bytes_received = self.asker.bytes_received
        self.report.seconds = time.monotonic() - t0
        return self.report


async def check_cluster(config: Config, options: CheckOptions | None = None) -> Report:
    """Run one check of ``config``'s cluster (see the module docstring)."""
    check = _Check(config, options or CheckOptions())
    try:
        return await check.run()
    finally:
        await check.asker.close()


def run_check(config: Config, options: CheckOptions | None = None) -> Report:
    """``check_cluster`` on a loop of its own; errors that stop the check, ours included
    (logged with their traceback), are in ``report.errors`` (exit code 2)."""
    try:
        return asyncio.run(check_cluster(config, options))
    except LogDeviceError as exc:
        return Report(errors=[f"{exc.status.name}: {exc.message or exc}"])
    except Exception as exc:  # a bug must not pass for "violations found" (exit code 1)
        log.exception("the check failed")
        return Report(errors=[f"internal error: {type(exc).__name__}: {exc}"])
