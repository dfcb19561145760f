"""LogsDB's write path: :class:`PendingWrite`, records of any number of logs in one
RocksDB write batch.

Per record: a data entry.  In the same partition, copyset index (CSI) entries: one per
record, or (LogsDB's ``csi_ranges``, the default, or ``sticky_block``) one range entry per
log and partition in the write: a block when the LSNs are consecutive and share flags and
copyset, else a run listing each LSN's flags and copyset.  A RocksDB entry costs about as
much as a small record, so range entries nearly halve the write cost.

The partition directory is updated in the same batch, so a crash leaves either all of a
commit or none of it.

A run of records (one log, one partition) is encoded by one kernel call
(``ldcore.storefmt.encode_run``: keys, record heads with their checksums, the CSI entries)
into a put plan that one binding call puts into the batch, the payloads staying where
they are: a write of a few records costs a handful of Python calls, not a few per record
and field.  The common write (every record in the newest partition, above the LSNs the
log has) skips the partition assignment by numpy; others are cut into a run per
partition after all their records were checked.

``PendingWrite.add_logs`` takes the writes of many logs at once (a group commit of a
load spread over many logs: a record or two per log): those that are the common write
are encoded by one kernel call for all of them (``storefmt.encode_runs``) and put by one
binding call, the rest go through ``add`` one by one.

An LSN rewritten into a different partition than the one holding it (recovery, rebuilding
with old timestamps) is deleted from the old one in the same batch: every LSN lives in one
partition.  CSI blocks are only written over LSN ranges the log has nowhere yet, and a
single entry wins over a block when both cover an LSN, so rewrites never need to split
a block.  A write that may rewrite LSNs (its range meets the log's) deletes their
amendments (``keys``) in the same batch: the copy written now is the newest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import numpy as np

from ldcore import storefmt
from logdevice.errors import E, error_for
from logdevice.protocol.flags import FLAG_BUFFERED_WRITER_BLOB
from logdevice.storage import keys as K
from logdevice.storage import producers
from logdevice.storage.partitions import Usage

if TYPE_CHECKING:
    import contextlib

    from logdevice.storage.partitioned import PartitionedDB
    from logdevice.storage.record_cache import RecordCache

_BLOB = int(FLAG_BUFFERED_WRITER_BLOB)  # records that may carry a writer entry
_U64 = (1 << 64) - 1  # (encode_runs gives LSNs as int64 bit patterns)


def _invalid(message: str):
    return error_for(E.INVALID_PARAM, f"logsdb: {message}")


def _array(values, dtype, name: str) -> np.ndarray:
    try:
        return np.ascontiguousarray(values, dtype=dtype)
    except (TypeError, ValueError, OverflowError) as e:
        raise _invalid(f"{name}: {e}") from None


def _copysets16(copysets, n: int) -> np.ndarray:
    """``copysets`` as C-contiguous int16 rows padded with -1 (checked; no copy when the
    caller, e.g. a decoded STORE, already has that)."""
    if (type(copysets) is np.ndarray and copysets.dtype == np.int16 and copysets.ndim == 2
            and copysets.flags.c_contiguous):
        return copysets
    cs, _ = K.normalize_copysets(copysets, n)
    return np.ascontiguousarray(cs, dtype=np.int16)  # node indices fit: checked above


def _column(values, n: int, dtype, name: str) -> np.ndarray:
    if (type(values) is np.ndarray and values.dtype == dtype and values.shape == (n,)
            and values.flags.c_contiguous):
        return values  # a decoded STORE's column: as it is (the checks cost more here)
    arr = _array(values, dtype, name)
    if arr.shape != (n,):
        raise _invalid(f"{name} must have {n} entries, got shape {arr.shape}")
    return arr


def _bytes_like(payloads):
    """``payloads`` as bytes or a flat uint8 buffer (INVALID_PARAM unless bytes-like)."""
    if type(payloads) is bytes or (type(payloads) is memoryview and payloads.format == "B"
                                   and payloads.c_contiguous):
        return payloads  # (a decoded STORE's: as it is)
    if isinstance(payloads, np.ndarray):
        return np.ascontiguousarray(payloads).reshape(-1).view(np.uint8)
    if isinstance(payloads, bytes):
        return payloads
    try:
        return memoryview(payloads).cast("B")
    except TypeError as e:
        raise _invalid(f"payloads must be bytes-like: {e}") from None


class WriteTarget(Protocol):
    """What a pending write uses of its store (``logsdb.LogsDB`` is one)."""

    parts: PartitionedDB
    #: Told of every commit (None: the store keeps no record cache).
    cache: RecordCache | None
    max_payload: int | None
    csi_ranges: bool
    sync_writes: bool

    def check_open(self) -> None: ...

    def operation(self) -> contextlib.AbstractContextManager[None]: ...

    def cache_written(self, written: list[tuple | Written]) -> None: ...


class Written:
    """The columns of ``PendingWrite.add_logs``' entries back to back, checked as ``add``
    checks them: log ``log_ids[j]``'s records are rows ``ends[j] - counts[j]`` to
    ``ends[j]``, and the payloads are one buffer that ``offsets`` index.  (What the
    record cache is told of such a write.)"""

    __slots__ = ("log_ids", "ids", "counts", "ends", "lsns", "ts", "fl", "wv", "cs16",
                 "payloads", "offsets")

    def __init__(self, entries: list[tuple[int, tuple]]) -> None:
        self.log_ids = [log_id for log_id, _ in entries]
        cols = [c for _, c in entries]
        try:
            self.ids = np.array(self.log_ids, np.uint64)
            counts = [len(c[0]) for c in cols]
        except (TypeError, ValueError, OverflowError) as e:
            raise _invalid(f"log ids or lsns: {e}") from None
        if not self.ids.all():
            raise _invalid("invalid log id 0")
        if not all(counts):
            raise _invalid("add_logs takes at least one record per log")
        if any(len(c[1]) != k or len(c[2]) != k or len(c[3]) != k or len(c[5]) != k + 1
               or (c[6] is not None and len(c[6]) != k) for c, k in zip(cols, counts, strict=True)):
            raise _invalid("timestamps, flags, copysets and waves must have an entry per "
                           "record, offsets one more")
        self.counts = np.array(counts, np.intp)
        self.ends = np.cumsum(self.counts)
        n = int(self.ends[-1])

        def joined(i: int, dtype, name: str, extra: int = 0) -> np.ndarray:
            try:  # numpy's checks, once for all entries
                return np.concatenate([c[i] for c in cols], dtype=dtype, casting="safe")
            except (TypeError, ValueError):  # not arrays of the dtype: each one checked
                return np.concatenate([_column(c[i], k + extra, dtype, name)
                                       for c, k in zip(cols, counts, strict=True)])

        self.lsns = joined(0, np.uint64, "lsns")
        self.ts, self.fl = joined(1, np.int64, "timestamps"), joined(2, np.uint32, "flags")
        self.wv = None if all(c[6] is None for c in cols) else np.concatenate(
            [np.ones(k, np.uint32) if c[6] is None else _column(c[6], k, np.uint32, "waves")
             for c, k in zip(cols, counts, strict=True)])
        try:  # (numpy's checks, once for all entries)
            cs16 = np.concatenate([c[3] for c in cols], dtype=np.int16, casting="safe")
            if cs16.ndim != 2:
                raise ValueError("copysets must be 2-D")
        except (TypeError, ValueError):  # copysets of different widths, or not arrays
            css = [_copysets16(c[3], k) for c, k in zip(cols, counts, strict=True)]
            width = max(cs.shape[1] for cs in css)
            cs16 = np.concatenate([cs if cs.shape[1] == width else np.pad(
                cs, ((0, 0), (0, width - cs.shape[1])), constant_values=-1) for cs in css])
        self.cs16 = cs16
        # One payload buffer; record i's length comes from its entry's offsets (entry
        # e's k + 1 offsets start at row i + e of them all).
        offs = joined(5, np.uint64, "offsets", 1)
        at = np.arange(n) + np.repeat(np.arange(len(cols)), self.counts)
        self.offsets = np.zeros(n + 1, np.uint64)
        np.cumsum(offs[at + 1] - offs[at], out=self.offsets[1:])  # (decreasing: too big)
        bufs = [_bytes_like(c[4]) for c in cols]
        lo = offs[at[self.ends - self.counts]]
        hi = offs[at[self.ends - 1] + 1]
        sizes = np.fromiter((len(b) for b in bufs), np.uint64, len(bufs))
        if not (lo.any() or (hi != sizes).any()):  # (the common case: whole buffers)
            self.payloads = b"".join(bufs)
        else:
            self.payloads = b"".join([memoryview(buf)[a:b] for buf, a, b in zip(
                bufs, lo.tolist(), hi.tolist(), strict=True)])


class PendingWrite:
    """Records for one atomic commit; fill with :meth:`add`, then :meth:`commit` once.

    The node group-commits concurrent STOREs by adding them all to one pending write.
    """

    def __init__(self, store: WriteTarget) -> None:
        self._store = store
        self._batch = store.parts.take_batch()
        self._usage: dict[int, dict[int, Usage]] = {}  # log -> pid -> what this write adds
        self.records = 0
        self.payload_bytes = 0
        self._done = False
        self._broken = False
        # What each add wrote, for the store's record cache (only when it has one): per
        # add a tuple, per add_logs its joined columns (``Written``).
        self._written: list[tuple | Written] | None = [] if store.cache is not None else None

    def add(
        self,
        log_id: int,
        lsns,
        timestamps,
        flags,
        copysets,
        payloads,
        offsets,
        waves=None,
        *,
        sticky_block: bool = False,
    ) -> None:
        """Add n records of ``log_id``.

        Parameters
        ----------
        lsns : uint64[n], strictly increasing
        timestamps : int64[n], milliseconds; they choose the partition
        flags : uint32[n], ``storage.flags`` bits
        copysets : int[n, k], node indices, padded with -1
        payloads : bytes-like, all payloads back to back
        offsets : uint64[n + 1], record i is ``payloads[offsets[i]:offsets[i + 1]]``
        waves : uint32[n] or None (all 1)
        sticky_block : bool
            The records share one sticky copyset: describe them with one CSI block entry
            (also done whenever the store groups CSI entries, ``LogsDB(csi_ranges=True)``).
        """
        if self._done:
            raise _invalid("this pending write was already committed")
        store = self._store
        store.check_open()
        log_id = K.check_log_id(log_id)
        lsns = _array(lsns, np.uint64, "lsns")
        if lsns.ndim != 1:
            raise _invalid("lsns must be 1-D")
        n = len(lsns)
        ts = _column(timestamps, n, np.int64, "timestamps")
        fl = _column(flags, n, np.uint32, "flags")
        wv = None if waves is None else _column(waves, n, np.uint32, "waves")
        offs = _column(offsets, n + 1, np.uint64, "offsets")
        payloads = _bytes_like(payloads)
        if n == 0:
            return
        cs16 = _copysets16(copysets, n)
        limit = -1 if store.max_payload is None else store.max_payload
        grouped = sticky_block or store.csi_ranges
        # The common write: every record in the newest partition, none at an LSN the log
        # has (or this write adds) anywhere: one run, encoded and put in one call each.
        if n == 1:
            t_min = t_max = int(ts[0])
        else:
            t_min, t_max = storefmt.time_range(ts)
        pid = store.parts.newest_holding(t_min, t_max)
        run = None
        try:
            if pid is not None and not self._meets(log_id, int(lsns[0]), int(lsns[-1])):
                run = storefmt.encode_run(log_id, lsns, ts, fl, wv, cs16, payloads, offs,
                                          limit, grouped, _BLOB)
            else:  # check every record before any is in the batch
                storefmt.check_records(lsns, ts, fl, wv, cs16, payloads, offs, limit)
        except storefmt.RecordTooBigError as e:
            raise error_for(E.TOOBIG, f"logsdb: {e}") from None
        except storefmt.RecordFormatError as e:
            raise _invalid(str(e)) from None
        # For the record cache: did the log have nothing in this write's LSN range?
        fresh = run is not None or (self._written is not None and not self._meets(
            log_id, int(lsns[0]), int(lsns[-1])))
        try:
            if run is not None:
                self._put_run(log_id, pid, run, lsns, ts, fl, payloads, offs)
            else:
                self._add_runs(log_id, lsns, ts, fl, wv, cs16, payloads, offs, grouped)
        except BaseException:
            self._broken = True  # part of the records are in the batch: never commit it
            raise
        self.records += n
        self.payload_bytes += run.payload_bytes if run is not None else int(offs[-1] - offs[0])
        if self._written is not None:
            self._written.append((log_id, lsns, ts, fl, wv, cs16, payloads, offs, fresh))

    def add_logs(self, entries: list[tuple[int, tuple]], *,
                 sticky_block: bool = False) -> list[int]:
        """Add the records of several logs at once: each entry is a log id and its
        columns as ``add`` takes them (``lsns, timestamps, flags, copysets, payloads,
        offsets, waves``), at least one record, one entry per log.

        Entries that are the common write (every record in the newest partition, none
        at an LSN the log has) are encoded by one kernel call and put by one binding
        call: a group commit of many logs' few records pays those once, not once per
        log.  Returns the indices of the entries left out, for ``add`` one by one (a
        write that meets the log's LSNs, or that needs another partition).  Raises as
        ``add`` would (for some entry, not saying which) having added nothing.
        """
        if self._done:
            raise _invalid("this pending write was already committed")
        self._store.check_open()
        if len({log_id for log_id, _ in entries}) != len(entries):
            raise _invalid("add_logs takes one entry per log")
        if not entries:
            return []
        cols = Written(entries)
        pid = self._store.parts.newest_holding(*storefmt.time_range(cols.ts))
        if pid is None:
            return list(range(len(entries)))
        firsts = cols.lsns[cols.ends - cols.counts].tolist()
        lasts = cols.lsns[cols.ends - 1].tolist()
        left = [i for i, (log_id, lo, hi) in enumerate(zip(cols.log_ids, firsts, lasts,
                                                            strict=True))
                if self._meets(log_id, lo, hi)]
        if left:
            skip = set(left)
            taken = [e for i, e in enumerate(entries) if i not in skip]
            if not taken:
                return left
            cols = Written(taken)
        self._put_common(cols, pid, sticky_block)
        return left

    def _put_common(self, cols: Written, pid: int, sticky: bool) -> None:
        """Put ``add_logs``' entries ``cols``, which all go to partition ``pid`` and meet
        nothing their logs have."""
        store = self._store
        limit = -1 if store.max_payload is None else store.max_payload
        try:
            plan, figures = storefmt.encode_runs(
                cols.ids, cols.ends.astype(np.uint64), cols.lsns, cols.ts, cols.fl, cols.wv,
                cols.cs16, cols.payloads, cols.offsets, limit, sticky or store.csi_ranges,
                _BLOB)
        except storefmt.RecordTooBigError as e:
            raise error_for(E.TOOBIG, f"logsdb: {e}") from None
        except storefmt.RecordFormatError as e:
            raise _invalid(str(e)) from None
        cf = store.parts.cf(pid)
        ends = cols.ends.tolist()
        starts = [0, *ends[:-1]]
        try:
            self._batch.put_plan(plan, cols.payloads, cf)
            for j in figures[:, 5].nonzero()[0].tolist():  # writer entries of blobs
                lo, hi = starts[j], ends[j]
                for key, value in producers.writer_entries(
                        cols.log_ids[j], cols.lsns[lo:hi], cols.ts[lo:hi], cols.fl[lo:hi],
                        cols.payloads, cols.offsets[lo:hi + 1]):
                    self._batch.put(key, value, cf)
        except BaseException:
            self._broken = True  # part of the records are in the batch: never commit it
            raise
        usage = self._usage
        for log_id, lo, hi, (first, last, t0, t1, nbytes, _) in zip(
                cols.log_ids, starts, ends, figures.tolist(), strict=True):
            delta = Usage(first & _U64, last & _U64, t0, t1, hi - lo, nbytes)
            added = usage.setdefault(log_id, {})
            prev = added.get(pid)
            added[pid] = delta if prev is None else delta.merged(prev)
        if self._written is not None:  # every log's write is fresh: it met nothing
            self._written.append(cols)
        self.records += ends[-1]
        self.payload_bytes += len(cols.payloads)

    def _known(self, log_id: int) -> list[tuple[int, Usage]]:
        known = self._store.parts.directory.usage(log_id)
        for pid, u in self._usage.get(log_id, {}).items():
            known[pid] = u.merged(known.get(pid))
        return list(known.items())

    def _meets(self, log_id: int, lo: int, hi: int) -> bool:
        """Whether ``[lo, hi]`` meets the LSN range of the log in any partition (held, or
        added by this write)."""
        if log_id in self._usage:
            usages = [u for _, u in self._known(log_id)]
        else:
            usages = self._store.parts.directory.usages(log_id)
        return any(u.max_lsn >= lo and u.min_lsn <= hi for u in usages)

    def _add_runs(self, log_id, lsns, ts, fl, wv, cs16, payloads, offs, grouped) -> None:
        """Add records (checked) that may span partitions or rewrite LSNs: a run per
        partition."""
        n = len(lsns)
        pids = self._store.parts.assign(ts)
        if n == 1 or pids[0] == pids[-1] and bool(np.all(pids == pids[0])):
            cuts = [0, n]
        else:
            cuts = [0, *(np.flatnonzero(pids[1:] != pids[:-1]) + 1).tolist(), n]
        for a, b in zip(cuts, cuts[1:], strict=False):
            self._add_run(log_id, int(pids[a]), lsns[a:b], ts[a:b], fl[a:b],
                          None if wv is None else wv[a:b], cs16[a:b], payloads,
                          offs[a:b + 1], grouped)

    def _add_run(self, log_id, pid, lsns, ts, fl, wv, cs16, payloads, offs, grouped) -> None:
        store = self._store
        batch = self._batch
        cf = store.parts.cf(pid)
        m = len(lsns)
        lo, hi = int(lsns[0]), int(lsns[-1])
        overlap = False
        for other, u in self._known(log_id):
            if u.max_lsn < lo or u.min_lsn > hi:
                continue
            overlap = True
            if other != pid and other in store.parts.directory.parts:
                a = int(np.searchsorted(lsns, np.uint64(u.min_lsn), side="left"))
                b = int(np.searchsorted(lsns, np.uint64(u.max_lsn), side="right"))
                moved = lsns[a:b]
                if len(moved):
                    ocf = store.parts.cf(other)
                    batch.delete_many(K.data_keys(log_id, moved),
                                      K.fixed_offsets(len(moved), K.DATA_KEY_LEN), ocf)
                    batch.delete_many(K.csi_keys(log_id, moved, K.CSI_SINGLE),
                                      K.fixed_offsets(len(moved), K.CSI_KEY_LEN), ocf)
                    batch.delete_many(K.amend_keys(log_id, moved),
                                      K.fixed_offsets(len(moved), K.DATA_KEY_LEN), ocf)
        if overlap:
            batch.delete_many(K.amend_keys(log_id, lsns), K.fixed_offsets(m, K.DATA_KEY_LEN), cf)
        # Rewritten LSNs get single CSI entries (they win over any range entry).
        run = storefmt.encode_run(log_id, lsns, ts, fl, wv, cs16, payloads, offs,
                                  grouped=grouped and not overlap, blob_flags=_BLOB)
        self._put_run(log_id, pid, run, lsns, ts, fl, payloads, offs)

    def _put_run(self, log_id, pid, run: storefmt.Run, lsns, ts, fl, payloads, offs) -> None:
        """Put an encoded run into partition ``pid`` (with its writer entries) and count
        it in the directory's usage."""
        cf = self._store.parts.cf(pid)
        batch = self._batch
        batch.put_plan(run.plan, payloads, cf)
        if run.blobs:
            for key, value in producers.writer_entries(log_id, lsns, ts, fl, payloads, offs):
                batch.put(key, value, cf)
        delta = Usage(run.first_lsn, run.last_lsn, run.min_ts, run.max_ts, run.records,
                      run.payload_bytes + run.head_bytes)
        added = self._usage.setdefault(log_id, {})
        prev = added.get(pid)
        added[pid] = delta if prev is None else delta.merged(prev)

    def commit(self, sync: bool = False, wal: bool = True) -> None:
        """Write everything added, atomically; ``sync`` (or the store's ``sync_writes``)
        waits for the write-ahead log to reach the disk; ``wal=False`` skips the
        write-ahead log (the records live only in the memtable until a flush)."""
        if self._done:
            raise _invalid("this pending write was already committed")
        if self._broken:
            raise error_for(E.FAILED, "logsdb: an add() to this pending write failed half-way")
        store = self._store
        with store.operation(), store.parts.lock:
            usage = {(pid, log_id): u for log_id, added in self._usage.items()
                     for pid, u in added.items()}
            store.parts.commit(self._batch, usage, sync=sync or store.sync_writes, wal=wal)
            if self._written:  # in the store's order of changes: under its lock
                store.cache_written(self._written)
        self._done = True
        store.parts.return_batch(self._batch)

    def __len__(self) -> int:
        return self.records
