"""RocksDB iterators (:class:`Iterator`) and their bulk reads into numpy (:class:`Chunk`).

``read_many`` and ``read_keys`` copy many entries per cffi call (``ld_iter_read*`` in
``_ext/build_rocksdb.py``).  The iterator and its read options are owned by the
database's ``Ownership`` so they are always freed before the database.

:func:`read_range` is a whole read of a key range in one cffi call (``ld_read_range``): no
iterator object at all.  A small read (a young log's record or two) costs a fraction of
what the same read through an :class:`Iterator` does.

All three copy into numpy buffers that each thread keeps from read to read and grows as
reads need; a result's arrays are its own (copied out, or handed over when the read
filled most of a buffer).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator as _PyIterator
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from logdevice._rocksdb import ffi, lib
from logdevice.storage._rdb import (
    _U64,
    as_buf,
    as_u64,
    cbuf,
    check_offsets,
    closed_error,
    raise_error,
    u64p,
)


class IteratorOwner(Protocol):
    """Where an iterator's C objects are kept until freed (``rocksdb.Ownership``)."""

    iters: dict[int, tuple]  # token -> (iterator*, readoptions*, keep-alive)

    def add_iter(self, it: Any, ro: Any, keep: list[Any]) -> int: ...

    def release_iter(self, token: int) -> None: ...


@dataclass
class Chunk:
    """Entries copied out of an iterator by one bulk call (all numpy, no per-entry objects).

    Entry i has key ``keys[key_offsets[i]:key_offsets[i+1]]``, head ``heads[...]`` (empty
    unless the read split values) and body ``bodies[...]``.  ``stop`` is why the read ended:
    ``"end"`` (range exhausted), ``"count"``, ``"bytes"``.
    """

    keys: np.ndarray
    key_offsets: np.ndarray
    heads: np.ndarray
    head_offsets: np.ndarray
    bodies: np.ndarray
    body_offsets: np.ndarray
    stop: str
    found: np.ndarray | None = None  # read_keys: which wanted keys were found

    def __len__(self) -> int:
        return len(self.key_offsets) - 1


_STOP = {lib.LD_STOP_END: "end", lib.LD_STOP_COUNT: "count", lib.LD_STOP_BYTES: "bytes"}


class _Reader:
    """Growable output buffers for the bulk reads, kept by a thread from read to read
    (:func:`_reader`): a read of a record or two costs no allocation but its result's."""

    def __init__(self) -> None:
        self.r = ffi.new("ld_read_t*")
        self.limit = 0
        self.koff = np.zeros(_FIRST_ENTRIES + 1, _U64)
        self.hoff = np.zeros(_FIRST_ENTRIES + 1, _U64)
        self.boff = np.zeros(_FIRST_ENTRIES + 1, _U64)
        self.keys = np.empty(_FIRST_BYTES, np.uint8)
        self.heads = np.empty(_FIRST_BYTES, np.uint8)
        self.bodies = np.empty(_FIRST_BODY_BYTES, np.uint8)
        self._point()

    def reset(self, max_n: int, max_bytes: int, flags: int) -> None:
        """Make ready for a read of up to ``max_n`` entries (the last one's result was
        taken)."""
        r = self.r
        self.limit = max_n
        r.max_n = min(max_n, len(self.koff) - 1)
        r.max_bytes = max_bytes
        r.flags = flags
        r.n = 0
        r.consumed = 0
        r.stop = lib.LD_STOP_END

    def _point(self) -> None:
        r = self.r
        self._bufs = [ffi.from_buffer(a) for a in (self.keys, self.heads, self.bodies)]
        r.keys, r.heads, r.bodies = self._bufs
        r.keys_cap, r.heads_cap, r.bodies_cap = len(self.keys), len(self.heads), len(self.bodies)
        self._offs = [u64p(a) for a in (self.koff, self.hoff, self.boff)]
        r.key_offs, r.head_offs, r.body_offs = self._offs

    def more(self) -> bool:
        """After a call returned: grow what stopped it and say whether to call again."""
        r = self.r
        if r.stop == lib.LD_STOP_FULL:
            self.grow()
            return True
        if r.stop == lib.LD_STOP_COUNT and r.n < self.limit:
            cap = min(self.limit, 2 * int(r.max_n))
            for name in ("koff", "hoff", "boff"):
                old = getattr(self, name)
                new = np.zeros(cap + 1, _U64)
                new[: r.n + 1] = old[: r.n + 1]
                setattr(self, name, new)
            r.max_n = cap
            self._point()
            return True
        return False

    def grow(self) -> None:
        r = self.r
        n = r.n

        def bigger(arr, used, need):
            new = np.empty(max(2 * len(arr), used + need, 64), np.uint8)
            new[:used] = arr[:used]
            return new

        if self.koff[n] + r.need_key > len(self.keys):
            self.keys = bigger(self.keys, int(self.koff[n]), r.need_key)
        if self.hoff[n] + r.need_head > len(self.heads):
            self.heads = bigger(self.heads, int(self.hoff[n]), r.need_head)
        if not r.flags & lib.LD_SKIP_BODY and self.boff[n] + r.need_body > len(self.bodies):
            self.bodies = bigger(self.bodies, int(self.boff[n]), r.need_body)
        self._point()

    def take(self, found: np.ndarray | None = None) -> Chunk:
        """The entries read, in arrays of their own: what is small is copied out; a
        buffer the read mostly filled is handed over and a new one of its size takes
        its place (a copy would cost a bulk read about as much as the read)."""
        n = int(self.r.n)
        skip = self.r.flags & lib.LD_SKIP_BODY
        used = (("keys", int(self.koff[n])), ("heads", int(self.hoff[n])),
                ("bodies", 0 if skip else int(self.boff[n])),
                ("koff", n + 1), ("hoff", n + 1), ("boff", n + 1))
        out = []
        replaced = False
        for name, k in used:
            arr = getattr(self, name)
            if k < len(arr) // 8:
                out.append(arr[:k].copy())
            else:
                out.append(arr[:k])
                fresh = np.empty_like(arr)
                fresh[:1] = 0  # an offset array starts at 0
                setattr(self, name, fresh)
                replaced = True
        if replaced:
            self._point()
        keys, heads, bodies, koff, hoff, boff = out
        return Chunk(keys=keys, key_offsets=koff, heads=heads, head_offsets=hoff,
                     bodies=bodies, body_offsets=boff, stop=_STOP[self.r.stop], found=found)


# A thread's reader starts this big and grows as reads need (keeping what it grew to).
_FIRST_ENTRIES = 256
_FIRST_BYTES = 4096
_FIRST_BODY_BYTES = 64 << 10
_per_thread = threading.local()


def _reader(max_n: int, max_bytes: int, split_head: bool, skip_body: bool) -> _Reader:
    """This thread's reader, reset for a read."""
    rd = getattr(_per_thread, "reader", None)
    if rd is None:
        rd = _per_thread.reader = _Reader()
    flags = (lib.LD_SPLIT_U16 if split_head else 0) | (lib.LD_SKIP_BODY if skip_body else 0)
    rd.reset(max_n, max_bytes, flags)
    return rd


def read_range(dbp, handle, lower: bytes, upper: bytes, max_n: int, max_bytes: int = 0, *,
               split_head: bool = False, skip_body: bool = False) -> Chunk:
    """Up to ``max_n`` entries of ``[lower, upper)`` from its start (``dbp``, ``handle``:
    the C database and column family), as :meth:`Iterator.read_many` reads them from a
    fresh iterator seeked to ``lower``; ``max_bytes`` and the flags as there."""
    lower, upper = bytes(lower), bytes(upper)  # (no copy when they are bytes already)
    rd = _reader(max_n, max_bytes, split_head, skip_body)
    rg = ffi.new("ld_range_t*")
    err = ffi.new("char**")
    # cffi hands RocksDB the bytes' own buffers, which the range's read options point
    # at: these locals keep them alive until the range is freed.
    more = lib.ld_read_range(dbp, handle, lower, len(lower), upper, len(upper), max_n, rd.r,
                             rg, err)
    try:
        while more:
            rd.more()
            more = lib.ld_range_more(rg, max_n, rd.r, err)
    finally:
        if more:
            lib.ld_range_free(rg)
    raise_error(err)
    return rd.take()


class Iterator:
    """A RocksDB iterator over ``[lower, upper)`` of one column family.

    Per-entry methods mirror the C API (``seek``, ``next``, ``valid``, ``key``, ``value``);
    :meth:`read_many` and :meth:`read_keys` copy many entries per call into numpy buffers.
    Iterating the object yields ``(key, value)`` from the current position.
    """

    def __init__(self, db: object, state: IteratorOwner, dbp, handle, lower, upper, fill_cache=True,
                 readahead=0) -> None:
        ro = lib.rocksdb_readoptions_create()
        keep = []
        # The read options point at the bound bytes: they must live as long as the iterator.
        if lower is not None:
            lo = ffi.new("char[]", bytes(lower))
            keep.append(lo)
            lib.rocksdb_readoptions_set_iterate_lower_bound(ro, lo, len(lower))
        if upper is not None:
            up = ffi.new("char[]", bytes(upper))
            keep.append(up)
            lib.rocksdb_readoptions_set_iterate_upper_bound(ro, up, len(upper))
        lib.rocksdb_readoptions_set_fill_cache(ro, fill_cache)
        if readahead:
            lib.rocksdb_readoptions_set_readahead_size(ro, readahead)
        it = lib.rocksdb_create_iterator_cf(dbp, ro, handle)
        self._db = db  # kept alive: collecting it closes the database
        self._state = state
        self._token = state.add_iter(it, ro, keep)
        self._finalizer = weakref.finalize(self, state.release_iter, self._token)
        self._size = ffi.new("size_t*")

    def _it(self):
        entry = self._state.iters.get(self._token)
        if entry is None:
            raise closed_error("iterator")
        return entry[0]

    def close(self) -> None:
        self._finalizer()

    def __enter__(self) -> Iterator:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- per-entry C API

    def seek(self, key) -> None:
        lib.rocksdb_iter_seek(self._it(), as_buf(key), len(key))

    def seek_for_prev(self, key) -> None:
        lib.rocksdb_iter_seek_for_prev(self._it(), as_buf(key), len(key))

    def seek_to_first(self) -> None:
        lib.rocksdb_iter_seek_to_first(self._it())

    def seek_to_last(self) -> None:
        lib.rocksdb_iter_seek_to_last(self._it())

    def valid(self) -> bool:
        return bool(lib.rocksdb_iter_valid(self._it()))

    def next(self) -> None:
        lib.rocksdb_iter_next(self._it())

    def prev(self) -> None:
        lib.rocksdb_iter_prev(self._it())

    def key(self) -> bytes:
        ptr = lib.rocksdb_iter_key(self._it(), self._size)
        return ffi.unpack(ptr, self._size[0])

    def value(self) -> bytes:
        ptr = lib.rocksdb_iter_value(self._it(), self._size)
        return ffi.unpack(ptr, self._size[0])

    def check(self) -> None:
        """Raise the iterator's error, if it has one (call once it stops being valid)."""
        err = ffi.new("char**")
        lib.rocksdb_iter_get_error(self._it(), err)
        raise_error(err)

    def __iter__(self) -> _PyIterator[tuple[bytes, bytes]]:
        it = self._it()
        size = self._size
        while lib.rocksdb_iter_valid(it):
            k = ffi.unpack(lib.rocksdb_iter_key(it, size), size[0])
            v = ffi.unpack(lib.rocksdb_iter_value(it, size), size[0])
            yield k, v
            it = self._it()
            lib.rocksdb_iter_next(it)
        self.check()

    # ---- bulk

    def read_many(self, max_n: int = 1024, max_bytes: int = 0, *, split_head: bool = False,
                  skip_body: bool = False) -> Chunk:
        """Copy up to ``max_n`` entries from the current position, advancing past them.

        ``max_bytes`` (0: none) stops once that many body bytes are taken (at least one
        entry is).  ``split_head`` splits each value at a head whose length is its first
        two bytes (little-endian u16); ``skip_body`` copies heads only (body offsets then
        still count body lengths).
        """
        it = self._it()
        rd = _reader(max_n, max_bytes, split_head, skip_body)
        while True:
            lib.ld_iter_read(it, rd.r)
            if not rd.more():
                break
        if rd.r.stop == lib.LD_STOP_END:
            self.check()
        return rd.take()

    def read_keys(self, keys, key_offsets, max_bytes: int = 0, *, split_head: bool = False,
                  skip_body: bool = False) -> Chunk:
        """Copy the entries at the given sorted keys (those that exist), in order.

        Returns a :class:`Chunk` of the found entries with ``found``, a bool array over the
        wanted keys.  With ``max_bytes`` the read may end early (``stop == "bytes"``): then
        ``found`` covers only the first ``len(found)`` wanted keys.  ``split_head`` and
        ``skip_body`` are as for :meth:`read_many`.
        """
        it = self._it()
        koff = as_u64(key_offsets)
        nwant = max(len(koff) - 1, 0)
        check_offsets(koff, len(keys), "key")
        found = np.zeros(nwant, np.uint8)
        rd = _reader(nwant, max_bytes, split_head, skip_body)
        if nwant > 0:
            kp, kop, fp = cbuf(keys), u64p(koff), ffi.from_buffer("uint8_t[]", found)
            while True:
                lib.ld_iter_read_keys(it, rd.r, nwant, kp, kop, fp)
                if not rd.more():
                    break
            self.check()
        consumed = int(rd.r.consumed) if nwant > 0 else 0
        return rd.take(found=found[:consumed].astype(bool))
