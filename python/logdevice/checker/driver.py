"""The checker's driver: asks the storage nodes, re-checks, re-asks, reports.

One check (``run_check`` / ``check_cluster``):

1. Read the metadata, from any node (the checker never opens the epoch store): every
   log's metadata history (each epoch's nodeset and replication), where its recovered
   epochs end (recovery's outcome: the bridge record), and each node's authoritative
   status from the event log, with when it stopped being fully authoritative.
2. Go through the logs one at a time.  Each log is read from every node of its nodesets
   in parallel (GET_RECORD_AVAILABILITY, page after page, the next page asked for while
   this one is judged) and judged window by window (``window_records`` per node), so
   the memory a check needs does not grow with the log.  A window ends on an LSN some
   node holds, so runs of LSNs nobody holds never straddle two windows.  A node that
   does not answer is not judged yet: after ``recheck_delay`` it is asked again (the
   delayed re-check, once per node and check; a slow or paused node is not data loss).
   One still silent is looked up in the cluster's view (GET_CLUSTER_VIEW): held dead for
   less than the grace period (``self_rebuild_grace_period_ms``, or
   ``checker_grace_period_ms`` when self-rebuilding is off), plus the time the rebuilding
   supervisor needs to put it in the event log (``down_limit_ms``), it is *down*,
   counted apart (a restart is no violation); held alive, it is asked again until it answers or the
   cluster holds it dead (bounded by the failure detector's dead timeout: a node that
   just came back, or just went); otherwise it is silent: an availability violation.
3. Each window is judged over the log's live range (highest trim point + 1 .. highest
   release pointer, as the nodes' first replies give them) with ``verdict.judge``,
   each epoch's records against the replication property and nodeset the log had in
   that epoch, each epoch up to where it ends (its bridge record, or the release
   pointer for the epoch being written), so lost tails and lost epochs are seen.
   The windows' verdicts are added up into one per log as they come
   (``LogVerdict.absorb``, a bounded number of details); a window with violations is
   set aside as its LSN range only.
4. Before reporting anything: re-read the metadata (event log, statuses) and ask the
   nodes again for the ranges set aside, then judge those once more; only what
   survives is reported.  Rebuilding or a trim in flight does not raise an alarm.

All replies are kept as arrays; nothing here loops over records.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ldcore.lsn import epoch_of, esn_of
from logdevice.checker.client import (
    DEFAULT_PAGE_RECORDS,
    LSN_MAX,
    AvailabilityClient,
    NodeStream,
)
from logdevice.checker.report import Report
from logdevice.checker.verdict import LogVerdict, judge
from logdevice.client.metadata import LOGS_PER_REQUEST, decode_log_states, decode_statuses
from logdevice.config import Config
from logdevice.errors import E, LogDeviceError
from logdevice.security import ConnectSecurity
from logdevice.shards import AuthoritativeStatus

__all__ = ["CheckOptions", "Metadata", "read_metadata", "check_cluster", "run_check",
           "down_limit_ms"]

log = logging.getLogger("logdevice.checker")

#: Seconds between asks of a node that does not answer although the cluster holds it
#: alive.
SETTLE_POLL = 0.5


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
    window_records : int
        Records per node judged at a time: memory stays bounded by a few windows however
        long the log is.
    grace_ms : int, optional
        Progress grace period (default: the ``checker_grace_period_ms`` setting).
    down_grace_ms : int, optional
        How long a node the cluster holds dead is *down* (counted apart) rather than an
        availability violation (default: the ``self_rebuild_grace_period_ms`` setting,
        or ``checker_grace_period_ms`` when that is 0: self-rebuilding off).
    max_details : int
        Details kept, per log and in the whole report (the rest are counted).
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
    window_records: int = 4 * DEFAULT_PAGE_RECORDS
    grace_ms: int | None = None
    down_grace_ms: int | None = None
    on_event: Callable[[str], None] | None = None
    max_details: int = 1000
    security: ConnectSecurity | None = None


@dataclass
class Metadata:
    """What the epoch store says: per log, its nodesets (every epoch's), its metadata
    history as (first epoch, replication, nodeset) and where its recovered epochs end
    (epoch -> ESN of the bridge record); each node's status."""

    nodesets: dict[int, tuple[int, ...]] = field(default_factory=dict)
    history: dict[int, list[tuple[int, Any, tuple[int, ...]]]] = field(default_factory=dict)
    ends: dict[int, dict[int, int]] = field(default_factory=dict)
    statuses: dict[int, AuthoritativeStatus] = field(default_factory=dict)
    since_ms: dict[int, int] = field(default_factory=dict)


async def read_metadata(asker: AvailabilityClient, config: Config,
                        logs: Iterable[int] | None) -> Metadata:
    """Nodesets of ``logs`` (default: every configured log the epoch store knows) and the
    nodes' authoritative statuses with the time each left FULLY_AUTHORITATIVE, asked of
    the nodes."""
    meta = Metadata()
    # Unless asked for, only configured logs (the store also holds internal state).
    wanted = ([x for x in await asker.metadata("logs") if config.has_log(x)]
              if logs is None else list(logs))
    for log_id in wanted:
        if not config.has_log(log_id):
            raise LogDeviceError(E.NOTFOUND, f"log {log_id} is not in the config")
    states = {}
    for i in range(0, len(wanted), LOGS_PER_REQUEST):
        states.update(decode_log_states(
            await asker.metadata("log_states", wanted[i:i + LOGS_PER_REQUEST])))
    for log_id in wanted:
        state = states.get(log_id)
        if state is None or not state.history:
            meta.nodesets[log_id] = ()
            continue
        meta.nodesets[log_id] = tuple(sorted({x for m in state.history for x in m.nodeset}))
        meta.history[log_id] = sorted(
            ((m.first_epoch, dict(m.replication), m.nodeset) for m in state.history),
            key=lambda entry: entry[0])
        # A recovered epoch ends with its bridge record (none: it had no room for one).
        meta.ends[log_id] = {o.epoch: o.bridge for o in state.recovered if o.bridge}
    meta.statuses, meta.since_ms = decode_statuses(await asker.metadata("shard_statuses"))
    return meta


class _Check:
    """One check run: the state between logs and passes."""

    def __init__(self, config: Config, options: CheckOptions) -> None:
        self.config = config
        self.options = options
        self.asker = AvailabilityClient(config, timeout=options.timeout,
                                        page_records=options.page_records,
                                        security=options.security)
        self.report = Report(max_details=options.max_details)
        self.silent: set[int] = set()  # still silent after their delayed re-check (a pass)
        self.down: dict[int, int] = {}  # silent, but down within the grace period (a pass)
        self.locations = {n.index: n.location for n in config.nodes}
        settings = config.settings
        self.grace_ms = (options.grace_ms if options.grace_ms is not None
                         else settings.checker_grace_period_ms)
        self.down_grace_ms = (options.down_grace_ms if options.down_grace_ms is not None
                              else settings.self_rebuild_grace_period_ms
                              or settings.checker_grace_period_ms)
        # Given explicitly, the grace is exact; else, with self-rebuilding on, the event
        # log's lag behind the failure detector is allowed for.
        self.down_limit_ms = (down_limit_ms(self.down_grace_ms, settings.dead_timeout_ms,
                                            settings.rebuilding_poll_ms)
                              if options.down_grace_ms is None
                              and settings.self_rebuild_grace_period_ms
                              else self.down_grace_ms)
        # A node silent but held alive is asked again until the failure detector would
        # have held it dead (a node just back, or just gone), no longer.
        self.settle_s = settings.dead_timeout_ms / 1000 + options.recheck_delay

    def say(self, text: str) -> None:
        log.info("%s", text)
        if self.options.on_event is not None:
            self.options.on_event(text)

    async def _fill(self, streams: dict[int, NodeStream], want: int) -> list[int]:
        """Fill every stream; returns the nodes that failed."""
        nodes = list(streams)
        results = await asyncio.gather(*(streams[x].fill(want) for x in nodes),
                                       return_exceptions=True)
        failed = []
        for x, res in zip(nodes, results, strict=True):
            if isinstance(res, BaseException):
                if not isinstance(res, LogDeviceError | OSError):
                    raise res
                self.say(f"N{x} did not answer: {res}")
                failed.append(x)
        return failed

    async def fill(self, streams: dict[int, NodeStream], want: int) -> None:
        """Fill every stream.  A node that fails for the first time in this check is asked
        again after ``recheck_delay`` (a slow or paused node is not data loss); one that
        still fails is looked up in the cluster's view (``_settle``) and leaves
        ``streams``, down or silent."""
        failed = await self._fill(streams, want)
        first = [x for x in failed if x not in self.report.rechecked_nodes]
        if first:
            self.report.rechecked_nodes |= set(first)
            self.say(f"re-checking {', '.join(f'N{x}' for x in first)} in "
                     f"{self.options.recheck_delay:g} s")
            await asyncio.sleep(self.options.recheck_delay)
            again = await self._fill({x: streams[x] for x in first}, want)
            failed = [x for x in failed if x not in first] + again
        if failed:
            failed = await self._settle(streams, failed, want)
        if failed:
            self.say(f"silent: {', '.join(f'N{x}' for x in sorted(failed))}")
        for x in failed:
            self.silent.add(x)
        for x in list(streams):
            if x in self.silent or x in self.down:
                streams.pop(x).close()

    async def _settle(self, streams: dict[int, NodeStream], failed: list[int],
                      want: int) -> list[int]:
        """Of nodes that still fail after their re-check: those the cluster holds dead for
        less than ``down_limit_ms`` go to ``self.down``; those it holds alive are asked
        again (every ``SETTLE_POLL`` s, at most ``settle_s``) until they answer or it
        holds them dead.  Returns the rest: silent (availability violations)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settle_s
        pending, silent = list(failed), list[int]()
        while pending:
            try:
                dead = await self.asker.dead_for_ms(
                    skip=set(pending) | self.silent | set(self.down))
            except LogDeviceError as exc:  # nobody to ask: no sign that they are down
                self.say(f"no cluster view: {exc}")
                return silent + pending
            alive = []
            for x in pending:
                if x not in dead:
                    alive.append(x)
                elif dead[x] < self.down_limit_ms:
                    self.say(f"N{x} is down (dead for {dead[x] / 1000:.1f} s, within the "
                             f"grace period): counted apart")
                    self.down[x] = dead[x]
                    self.report.down_nodes[x] = max(dead[x], self.report.down_nodes.get(x, 0))
                else:
                    silent.append(x)
            if not alive or loop.time() >= deadline:
                return silent + alive
            await asyncio.sleep(SETTLE_POLL)
            pending = await self._fill({x: streams[x] for x in alive}, want)
        return silent

    def judge_window(self, log_id: int, lo: int, hi: int, streams: dict[int, NodeStream],
                     meta: Metadata, ends: dict[int, int]) -> LogVerdict:
        """Judge ``[lo, hi]`` with what the streams hold of it (taken out of them).  Runs
        off the event loop: no stream is being filled meanwhile."""
        holdings = {x: s.take(hi) for x, s in streams.items()}
        nodeset = meta.nodesets.get(log_id, ())
        return judge(log_id, lo, hi, holdings,
                     replication=self.config.log_group(log_id).replication, nodeset=nodeset,
                     silent=self.silent & set(nodeset), down=set(self.down) & set(nodeset),
                     locations=self.locations, statuses=meta.statuses,
                     since_ms=meta.since_ms, now_ms=int(time.time() * 1000),
                     grace_ms=self.grace_ms, max_details=self.options.max_details,
                     epochs=meta.history.get(log_id, ()), ends=ends)

    async def check_log(self, log_id: int, meta: Metadata,
                        ranges: list[tuple[int, int]] | None = None, *,
                        set_aside: bool = True
                        ) -> tuple[LogVerdict | None, list[tuple[int, int]]]:
        """One pass over a log's live range (or over ``ranges`` of it), window by window.
        Returns the windows' verdicts added up (None if there were none) and, with
        ``set_aside``, the ranges of the windows with violations, which are left out of
        the verdict (they are to be asked again)."""
        loop = asyncio.get_running_loop()
        nodes = [x for x in meta.nodesets.get(log_id, ())
                 if self.config.has_node(x) and x not in self.silent and x not in self.down]
        verdict: LogVerdict | None = None
        dirty: list[tuple[int, int]] = []
        for a, b in ranges or [(1, LSN_MAX - 1)]:
            streams = {x: self.asker.stream(x, log_id, a, b) for x in nodes}
            try:
                await self.fill(streams, 1)  # first replies: trim points, release pointers
                trim = max((s.trim_point for s in streams.values()), default=0)
                released = max((s.last_released for s in streams.values()), default=0)
                lo = max(a, trim + 1)
                hi = max(min(b, released), lo - 1)  # an empty live range is judged as one
                ends = _epoch_ends(meta.ends.get(log_id, {}), released)
                while True:
                    await self.fill(streams, self.options.window_records)
                    upto = min([hi] + [s.horizon for s in streams.values()])
                    last = [t for s in streams.values()
                            if (t := s.last_at_or_below(upto)) is not None]
                    # A window ends on a record someone holds, so a run of LSNs nobody
                    # holds is always inside one window's grid.
                    whi = hi if upto >= hi else max(last, default=upto)
                    window = await loop.run_in_executor(
                        None, self.judge_window, log_id, lo, whi, streams, meta, ends)
                    if set_aside and not window.clean:
                        dirty = _coalesce(dirty + [(lo, whi)])
                    elif verdict is None:
                        verdict = window
                    else:
                        verdict.absorb(window, self.options.max_details)
                    if whi >= hi:
                        break
                    lo = whi + 1
            finally:
                for s in streams.values():
                    s.close()
        return verdict, dirty

    async def run(self) -> Report:
        t0 = time.monotonic()
        meta = await read_metadata(self.asker, self.config, self.options.logs)
        nodes = {x for ns in meta.nodesets.values() for x in ns if self.config.has_node(x)}
        self.say(f"checking {len(meta.nodesets)} log(s) on {len(nodes)} node(s)")
        verdicts: dict[int, LogVerdict | None] = {}
        dirty: dict[int, list[tuple[int, int]]] = {}
        for log_id in meta.nodesets:
            verdicts[log_id], ranges = await self.check_log(log_id, meta)
            if ranges:
                dirty[log_id] = ranges
        if dirty:
            # Before reporting: fresh metadata, and the nodes asked again for the ranges
            # with violations (rebuilding or a trim may have moved on meanwhile).
            self.say(f"{len(dirty)} log(s) with violations: re-reading metadata and "
                     f"asking the nodes again")
            meta = await read_metadata(self.asker, self.config, list(dirty))
            self.silent, self.down = set(), {}
            for log_id, ranges in dirty.items():
                again, _ = await self.check_log(log_id, meta, ranges, set_aside=False)
                verdict = verdicts[log_id]
                if verdict is None:
                    verdicts[log_id] = again
                elif again is not None:
                    verdict.absorb(again, self.options.max_details)
        for log_id in sorted(verdicts):
            verdict = verdicts[log_id]
            if verdict is None:
                continue
            for d in verdict.details:
                log.warning("violation: %s", d)
            self.report.add(verdict)
        self.report.bytes_received = self.asker.bytes_received
        self.report.seconds = time.monotonic() - t0
        return self.report


def down_limit_ms(grace_ms: int, dead_timeout_ms: int, poll_ms: int) -> int:
    """How long a node may be held dead and still be *down* (counted apart): the grace
    period, plus the time the event log may lag behind: the rebuilding supervisor's
    failure detector may hold the node dead up to a dead timeout later than the node
    asked, and it acts at its next poll.  Until then a node just past the grace period
    cannot be in the event log yet (a node killed for good, a slow restart)."""
    return grace_ms + dead_timeout_ms + poll_ms


def _epoch_ends(recovered: dict[int, int], released: int) -> dict[int, int]:
    """Where each epoch ends: recovered epochs at their bridge record, and the epoch of
    the release pointer no earlier than the pointer (ESNs up to it are released)."""
    ends = dict(recovered)
    if released:
        epoch, esn = epoch_of(released), esn_of(released)
        ends[epoch] = max(ends.get(epoch, 0), esn)
    return ends


def _coalesce(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted LSN ranges with neighbours (``hi + 1 == lo``) merged."""
    out: list[tuple[int, int]] = []
    for lo, hi in ranges:
        if out and out[-1][1] + 1 >= lo:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


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
