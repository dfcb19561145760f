"""A thin, low-level Python layer over our cffi RocksDB binding (``logdevice._rocksdb``).

It mirrors the C API one object per interface (h5py style): :class:`DB`,
:class:`ColumnFamily`, :class:`WriteBatch`, :class:`Iterator`.  LogsDB builds on it; nothing
else should need RocksDB.

Ownership: every pointer that depends on the open database (column family handles,
iterators and their read options) belongs to one ``Ownership`` object, which frees them in a
safe order: iterators, then handles, then the database.  ``DB.close()`` and the garbage
collector both go through it, so closing is idempotent and never frees twice; using a
closed object raises :class:`~logdevice.errors.LogDeviceError` (``E.SHUTDOWN``) instead of
crashing.  Independent C objects (write batches, options) use ``ffi.gc``.

Errors from the C API's ``char** errptr`` are read, freed and raised in one place,
:func:`logdevice.storage._rdb.raise_error`.

Bulk helpers (``WriteBatch.put_many``, ``Iterator.read_many``, ``Iterator.read_keys``) move
many records per cffi call: a cffi call costs about a microsecond, more than RocksDB needs
for one small record.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable
from collections.abc import Iterator as _PyIterator
from dataclasses import dataclass
from os import fspath

from logdevice._rocksdb import ffi, lib
from logdevice.errors import E, error_for
from logdevice.storage._rdb import DEFAULT_CF, as_buf, closed_error, raise_error
from logdevice.storage.rocksdb_batch import WriteBatch
from logdevice.storage.rocksdb_iter import Chunk, Iterator, read_range

__all__ = ["DB", "ColumnFamily", "Options", "WriteBatch", "Iterator", "Chunk",
           "list_column_families", "COMPRESSION"]

COMPRESSION = {"none": 0, "snappy": 1, "zlib": 2, "bz2": 3, "lz4": 4, "lz4hc": 5, "zstd": 7}
#: RocksDB's WALRecoveryMode: what opening does with a damaged write-ahead log.
#: "absolute": refuse to open (Corruption) on any damage; "point_in_time": replay up to the
#: first damaged entry and drop the rest silently (RocksDB's default); "skip_any": skip
#: damaged entries.
WAL_RECOVERY = {"absolute": 1, "point_in_time": 2, "skip_any": 3}


# --------------------------------------------------------------------------- options


@dataclass(frozen=True)
class Options:
    """Database-wide and per-column-family options (one set for every family).

    ``None`` leaves RocksDB's default.  ``block_cache_bytes`` makes one LRU cache shared by
    every column family of the database.
    """

    create_if_missing: bool = True
    create_missing_column_families: bool = True
    error_if_exists: bool = False
    compression: str | None = None
    write_buffer_size: int | None = None
    db_write_buffer_size: int | None = None
    max_write_buffer_number: int | None = None
    max_background_jobs: int | None = None
    max_open_files: int | None = None
    max_total_wal_size: int | None = None
    block_cache_bytes: int | None = None
    block_size: int | None = None
    statistics: bool = False
    atomic_flush: bool = False
    keep_log_file_num: int | None = 4
    wal_recovery: str | None = None  # a key of WAL_RECOVERY; None: RocksDB's default

    def build(self):
        """The C options object (freed when garbage-collected)."""
        opt = ffi.gc(lib.rocksdb_options_create(), lib.rocksdb_options_destroy)
        lib.rocksdb_options_set_create_if_missing(opt, self.create_if_missing)
        lib.rocksdb_options_set_create_missing_column_families(
            opt, self.create_missing_column_families
        )
        lib.rocksdb_options_set_error_if_exists(opt, self.error_if_exists)
        if self.compression is not None:
            if self.compression not in COMPRESSION:
                raise error_for(
                    E.INVALID_PARAM,
                    f"compression must be one of {sorted(COMPRESSION)}, got {self.compression!r}",
                )
            lib.rocksdb_options_set_compression(opt, COMPRESSION[self.compression])
        for value, setter in (
            (self.write_buffer_size, lib.rocksdb_options_set_write_buffer_size),
            (self.db_write_buffer_size, lib.rocksdb_options_set_db_write_buffer_size),
            (self.max_write_buffer_number, lib.rocksdb_options_set_max_write_buffer_number),
            (self.max_background_jobs, lib.rocksdb_options_set_max_background_jobs),
            (self.max_open_files, lib.rocksdb_options_set_max_open_files),
            (self.max_total_wal_size, lib.rocksdb_options_set_max_total_wal_size),
            (self.keep_log_file_num, lib.rocksdb_options_set_keep_log_file_num),
        ):
            if value is not None:
                setter(opt, value)
        if self.wal_recovery is not None:
            if self.wal_recovery not in WAL_RECOVERY:
                raise error_for(E.INVALID_PARAM, f"wal_recovery must be one of "
                                f"{sorted(WAL_RECOVERY)}, got {self.wal_recovery!r}")
            lib.rocksdb_options_set_wal_recovery_mode(opt, WAL_RECOVERY[self.wal_recovery])
        if self.atomic_flush:
            lib.rocksdb_options_set_atomic_flush(opt, 1)
        if self.statistics:
            lib.rocksdb_options_enable_statistics(opt)
        if self.block_cache_bytes is not None or self.block_size is not None:
            table = lib.rocksdb_block_based_options_create()
            try:
                if self.block_size is not None:
                    lib.rocksdb_block_based_options_set_block_size(table, self.block_size)
                if self.block_cache_bytes == 0:
                    lib.rocksdb_block_based_options_set_no_block_cache(table, 1)
                elif self.block_cache_bytes is not None:
                    cache = lib.rocksdb_cache_create_lru(self.block_cache_bytes)
                    # The table options keep their own reference to the cache.
                    lib.rocksdb_block_based_options_set_block_cache(table, cache)
                    lib.rocksdb_cache_destroy(cache)
                lib.rocksdb_options_set_block_based_table_factory(opt, table)
            finally:
                lib.rocksdb_block_based_options_destroy(table)
        return opt


# --------------------------------------------------------------------------- ownership


class Ownership:
    """Owns the database pointer and everything that must be freed before it."""

    def __init__(self, db, options) -> None:
        self.db = db
        self.options = options  # kept: statistics are read through it
        self.cfs: dict[str, object] = {}  # name -> rocksdb_column_family_handle_t*
        self.iters: dict[int, tuple] = {}  # token -> (iterator*, readoptions*, keep-alive)
        self.next_token = 0
        self.lock = threading.Lock()
        self.flush_opts = ffi.gc(
            lib.rocksdb_flushoptions_create(), lib.rocksdb_flushoptions_destroy
        )
        self.read_opts = ffi.gc(lib.rocksdb_readoptions_create(), lib.rocksdb_readoptions_destroy)
        self.write_opts = {}
        for sync in (False, True):
            for wal in (False, True):
                wo = ffi.gc(lib.rocksdb_writeoptions_create(), lib.rocksdb_writeoptions_destroy)
                lib.rocksdb_writeoptions_set_sync(wo, sync)
                lib.rocksdb_writeoptions_disable_WAL(wo, 0 if wal else 1)
                self.write_opts[sync, wal] = wo

    def add_iter(self, it, ro, keep) -> int:
        with self.lock:
            token = self.next_token
            self.next_token += 1
            self.iters[token] = (it, ro, keep)
            return token

    def release_iter(self, token: int) -> None:
        with self.lock:
            entry = self.iters.pop(token, None)
        if entry is not None:
            lib.rocksdb_iter_destroy(entry[0])
            lib.rocksdb_readoptions_destroy(entry[1])

    def release_cf(self, name: str) -> None:
        with self.lock:
            handle = self.cfs.pop(name, None)
        if handle is not None:
            lib.rocksdb_column_family_handle_destroy(handle)

    def close(self) -> None:
        with self.lock:
            db, self.db = self.db, None
            iters, self.iters = self.iters, {}
            cfs, self.cfs = self.cfs, {}
        if db is None:
            return
        for it, ro, _ in iters.values():
            lib.rocksdb_iter_destroy(it)
            lib.rocksdb_readoptions_destroy(ro)
        for handle in cfs.values():
            lib.rocksdb_column_family_handle_destroy(handle)
        lib.rocksdb_close(db)


# --------------------------------------------------------------------------- DB


class ColumnFamily:
    """A handle on one column family of an open :class:`DB`."""

    __slots__ = ("db", "name", "__weakref__")

    def __init__(self, db: DB, name: str) -> None:
        self.db = db
        self.name = name

    def handle(self):
        """The C handle (SHUTDOWN once the database is closed, NOTFOUND once dropped)."""
        return self.db.cf_handle(self.name)

    def __repr__(self) -> str:
        return f"ColumnFamily({self.name!r})"


class DB:
    """An open RocksDB database with its column families.

    Use :meth:`DB.open`.  ``db[name]`` is the :class:`ColumnFamily` called ``name``.
    """

    def __init__(self, state: Ownership, path: str, options: Options) -> None:
        self._state = state
        self.path = path
        self.options = options
        self._cfs: dict[str, ColumnFamily] = {n: ColumnFamily(self, n) for n in state.cfs}
        self._finalizer = weakref.finalize(self, state.close)

    # ---- open / close

    @classmethod
    def open(
        cls,
        path,
        column_families: Iterable[str] = (),
        options: Options | None = None,
        **option_kwargs,
    ) -> DB:
        """Open (by default create) the database at ``path``.

        Every existing column family is opened, plus those named in ``column_families``
        (created when missing).  Options come from ``options`` or keyword arguments of
        :class:`Options`.
        """
        if options is None:
            options = Options(**option_kwargs)
        elif option_kwargs:
            raise error_for(E.INVALID_PARAM, "pass either options or keyword options, not both")
        path = fspath(path)
        opt = options.build()
        bpath = path.encode()
        names = [DEFAULT_CF]
        for name in _list_cfs(path, opt):
            if name not in names:
                names.append(name)
        for name in column_families:
            if name not in names:
                names.append(name)
        c_names = [ffi.new("char[]", n.encode()) for n in names]
        n = len(names)
        handles = ffi.new("rocksdb_column_family_handle_t*[]", n)
        err = ffi.new("char**")
        db = lib.rocksdb_open_column_families(
            opt, bpath, n, ffi.new("char*[]", c_names), ffi.new("rocksdb_options_t*[]", [opt] * n),
            handles, err,
        )
        raise_error(err)
        state = Ownership(db, opt)
        for i, name in enumerate(names):
            state.cfs[name] = handles[i]
        return cls(state, path, options)

    def close(self) -> None:
        """Close iterators, column family handles and the database.  Idempotent."""
        self._state.close()

    @property
    def closed(self) -> bool:
        return self._state.db is None

    def __enter__(self) -> DB:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _db(self):
        db = self._state.db
        if db is None:
            raise closed_error()
        return db

    # ---- column families


    def cf_handle(self, name: str):
        """The C handle of column family ``name`` (SHUTDOWN once closed, NOTFOUND once
        dropped)."""
        handle = self._state.cfs.get(name)
        if handle is None:
            if self._state.db is None:
                raise closed_error()
            raise error_for(E.NOTFOUND, f"column family {name!r} was dropped")
        return handle
    def __getitem__(self, name: str) -> ColumnFamily:
        self._db()
        cf = self._cfs.get(name)
        if cf is None or name not in self._state.cfs:
            raise error_for(E.NOTFOUND, f"no column family {name!r}")
        return cf

    def __contains__(self, name: str) -> bool:
        return name in self._state.cfs

    def column_families(self) -> list[str]:
        """Names of the open column families."""
        self._db()
        return list(self._state.cfs)

    def create_cf(self, name: str) -> ColumnFamily:
        """Create column family ``name`` (with the database's options)."""
        db = self._db()
        if name in self._state.cfs:
            raise error_for(E.INVALID_PARAM, f"column family {name!r} exists")
        err = ffi.new("char**")
        handle = lib.rocksdb_create_column_family(db, self._state.options, name.encode(), err)
        raise_error(err)
        self._state.cfs[name] = handle
        cf = self._cfs[name] = ColumnFamily(self, name)
        return cf

    def drop_cf(self, cf: ColumnFamily | str) -> None:
        """Drop a column family and all its data."""
        db = self._db()
        name = cf if isinstance(cf, str) else cf.name
        if name == DEFAULT_CF:
            raise error_for(E.INVALID_PARAM, "the default column family cannot be dropped")
        handle = self[name].handle()
        err = ffi.new("char**")
        lib.rocksdb_drop_column_family(db, handle, err)
        raise_error(err)
        self._cfs.pop(name, None)
        self._state.release_cf(name)

    # ---- writes

    def write(self, batch: WriteBatch, sync: bool = False, wal: bool = True) -> None:
        """Apply ``batch`` atomically; ``sync`` waits for the WAL to reach the disk."""
        db = self._db()
        err = ffi.new("char**")
        lib.rocksdb_write(db, self._state.write_opts[sync, wal], batch.handle(), err)
        raise_error(err)

    def put(self, key, value, cf: ColumnFamily | None = None, sync: bool = False) -> None:
        db = self._db()
        handle = self._state.cfs[DEFAULT_CF] if cf is None else cf.handle()
        err = ffi.new("char**")
        lib.rocksdb_put_cf(
            db, self._state.write_opts[sync, True], handle,
            as_buf(key), len(key), as_buf(value), len(value), err,
        )
        raise_error(err)

    # ---- reads

    def get(self, key, cf: ColumnFamily | None = None) -> bytes | None:
        """The value at ``key``, or None."""
        db = self._db()
        handle = self._state.cfs[DEFAULT_CF] if cf is None else cf.handle()
        err = ffi.new("char**")
        pin = lib.rocksdb_get_pinned_cf(
            db, self._state.read_opts, handle, as_buf(key), len(key), err
        )
        raise_error(err)
        if pin == ffi.NULL:
            return None
        try:
            size = ffi.new("size_t*")
            ptr = lib.rocksdb_pinnableslice_value(pin, size)
            return ffi.unpack(ptr, size[0])
        finally:
            lib.rocksdb_pinnableslice_destroy(pin)

    def iterator(
        self,
        cf: ColumnFamily | None = None,
        lower: bytes | None = None,
        upper: bytes | None = None,
        *,
        fill_cache: bool = True,
        readahead: int = 0,
    ) -> Iterator:
        """An :class:`Iterator` over ``[lower, upper)`` of ``cf``, not yet positioned."""
        return Iterator(self, self._state, self._db(),
                        self.cf_handle(cf.name if cf else DEFAULT_CF), lower, upper,
                        fill_cache, readahead)

    def read_range(self, cf: ColumnFamily | None, lower: bytes, upper: bytes, max_n: int,
                   max_bytes: int = 0, *, split_head: bool = False,
                   skip_body: bool = False) -> Chunk:
        """Up to ``max_n`` entries of ``[lower, upper)`` of ``cf`` from its start, as
        ``Iterator.read_many`` would copy them from an iterator seeked to ``lower``, in
        one call (no iterator to create and close: see :func:`.rocksdb_iter.read_range`)."""
        return read_range(self._db(), self.cf_handle(cf.name if cf else DEFAULT_CF), lower,
                          upper, max_n, max_bytes, split_head=split_head, skip_body=skip_body)

    def iterate(
        self, cf: ColumnFamily | None = None, lower: bytes | None = None,
        upper: bytes | None = None,
    ) -> _PyIterator[tuple[bytes, bytes]]:
        """Yield ``(key, value)`` over ``[lower, upper)`` in key order (convenience)."""
        with self.iterator(cf, lower, upper) as it:
            if lower is None:
                it.seek_to_first()
            else:
                it.seek(lower)
            yield from it

    # ---- maintenance

    def flush(self, cf: ColumnFamily | None = None, wait: bool = True) -> None:
        """Flush memtables (of ``cf``, or of every family) to SST files."""
        db = self._db()
        lib.rocksdb_flushoptions_set_wait(self._state.flush_opts, wait)
        err = ffi.new("char**")
        if cf is None:
            for name in list(self._state.cfs):
                lib.rocksdb_flush_cf(db, self._state.flush_opts, self[name].handle(), err)
                raise_error(err)
        else:
            lib.rocksdb_flush_cf(db, self._state.flush_opts, cf.handle(), err)
            raise_error(err)

    def flush_wal(self, sync: bool = True) -> None:
        err = ffi.new("char**")
        lib.rocksdb_flush_wal(self._db(), sync, err)
        raise_error(err)

    def compact_range(
        self, cf: ColumnFamily | None = None, start: bytes | None = None,
        end: bytes | None = None,
    ) -> None:
        """Compact ``[start, end]`` of ``cf`` (None: unbounded)."""
        db = self._db()
        handle = self._state.cfs[DEFAULT_CF] if cf is None else cf.handle()
        lib.rocksdb_compact_range_cf(
            db, handle,
            ffi.NULL if start is None else start, 0 if start is None else len(start),
            ffi.NULL if end is None else end, 0 if end is None else len(end),
        )

    def property(self, name: str, cf: ColumnFamily | None = None) -> str | None:
        """A RocksDB property such as ``rocksdb.estimate-num-keys``; None if unknown."""
        db = self._db()
        if cf is None:
            ptr = lib.rocksdb_property_value(db, name.encode())
        else:
            ptr = lib.rocksdb_property_value_cf(db, cf.handle(), name.encode())
        if ptr == ffi.NULL:
            return None
        try:
            return ffi.string(ptr).decode("utf-8", "replace")
        finally:
            lib.rocksdb_free(ptr)

    def property_int(self, name: str, cf: ColumnFamily | None = None) -> int | None:
        value = self.property(name, cf)
        return None if value is None else int(value)

    def statistics(self) -> str | None:
        """RocksDB's statistics dump, when opened with ``statistics=True``."""
        self._db()
        if not self.options.statistics:
            return None
        ptr = lib.rocksdb_options_statistics_get_string(self._state.options)
        if ptr == ffi.NULL:
            return None
        try:
            return ffi.string(ptr).decode("utf-8", "replace")
        finally:
            lib.rocksdb_free(ptr)

    def approximate_size(self, cf: ColumnFamily, start: bytes, end: bytes) -> int:
        """Approximate on-disk bytes of ``[start, end)`` in ``cf`` (SST files only)."""
        db = self._db()
        sizes = ffi.new("uint64_t[1]")
        err = ffi.new("char**")
        lib.rocksdb_approximate_sizes_cf(
            db, cf.handle(), 1, ffi.new("char*[]", [ffi.from_buffer(start)]),
            ffi.new("size_t[]", [len(start)]), ffi.new("char*[]", [ffi.from_buffer(end)]),
            ffi.new("size_t[]", [len(end)]), sizes, err,
        )
        raise_error(err)
        return int(sizes[0])


def list_column_families(path, options: Options | None = None) -> list[str]:
    """Column families of the database at ``path``; [] if there is none."""
    return _list_cfs(fspath(path), (options or Options()).build())


def _list_cfs(path: str, opt) -> list[str]:
    size = ffi.new("size_t*")
    err = ffi.new("char**")
    names = lib.rocksdb_list_column_families(opt, path.encode(), size, err)
    if err[0] != ffi.NULL:
        # No database there yet (the usual case) or not a database: open() reports it.
        lib.rocksdb_free(err[0])
        return []
    try:
        return [ffi.string(names[i]).decode() for i in range(size[0])]
    finally:
        lib.rocksdb_list_column_families_destroy(names, size[0])
