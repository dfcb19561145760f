"""RocksDB write batches (:class:`WriteBatch`), with bulk puts and deletes.

``put_many`` and ``delete_many`` loop over n records in C (``ld_batch_*`` in
``_ext/build_rocksdb.py``): one cffi call per batch instead of one per record.
``put_plan`` puts a put plan (``ldcore.storefmt.encode_run``: keys and values of any
kind encoded into one buffer) the same way.
"""

from __future__ import annotations

from typing import Any, Protocol

from logdevice._rocksdb import ffi, lib
from logdevice.errors import E, error_for
from logdevice.storage._rdb import as_buf, as_u64, cbuf, check_offsets, closed_error, u64p


class Family(Protocol):
    """A column family as a batch uses it (``rocksdb.ColumnFamily``)."""

    def handle(self) -> Any:
        """The C column family handle."""


def _cf_handle(cf: Family | None):
    return ffi.NULL if cf is None else cf.handle()


class WriteBatch:
    """Updates applied atomically by :meth:`DB.write`.  Data is copied in at each call."""

    __slots__ = ("_ptr",)

    def __init__(self) -> None:
        self._ptr = ffi.gc(lib.rocksdb_writebatch_create(), lib.rocksdb_writebatch_destroy)

    def handle(self):
        """The C write batch (SHUTDOWN-like error once closed)."""
        if self._ptr is None:
            raise closed_error("write batch")
        return self._ptr

    def put(self, key, value, cf: Family | None = None) -> None:
        b = self.handle()
        if cf is None:
            lib.rocksdb_writebatch_put(b, as_buf(key), len(key), as_buf(value), len(value))
        else:
            lib.rocksdb_writebatch_put_cf(
                b, cf.handle(), as_buf(key), len(key), as_buf(value), len(value)
            )

    def delete(self, key, cf: Family | None = None) -> None:
        b = self.handle()
        if cf is None:
            lib.rocksdb_writebatch_delete(b, as_buf(key), len(key))
        else:
            lib.rocksdb_writebatch_delete_cf(b, cf.handle(), as_buf(key), len(key))

    def delete_range(self, start, end, cf: Family | None = None) -> None:
        """Delete every key in ``[start, end)``."""
        b = self.handle()
        if cf is None:
            lib.rocksdb_writebatch_delete_range(b, as_buf(start), len(start), as_buf(end), len(end))
        else:
            lib.rocksdb_writebatch_delete_range_cf(
                b, cf.handle(), as_buf(start), len(start), as_buf(end), len(end)
            )

    def put_many(
        self,
        keys,
        key_offsets,
        values,
        value_offsets,
        cf: Family | None = None,
        heads=None,
        head_offsets=None,
        *,
        checked: bool = False,
    ) -> None:
        """Put n records in one call.

        Key i is ``keys[key_offsets[i]:key_offsets[i+1]]``; value i is the same slice of
        ``values``, preceded by that of ``heads`` when ``heads`` is given.  Offsets are
        n + 1 non-decreasing integers (uint64 arrays avoid a conversion).  ``checked``:
        the caller has already checked that every offset array is non-decreasing and ends
        within its buffer (as ``ldcore.storefmt`` does), so the numpy checks, most of the
        cost of a put of a few records, are skipped.
        """
        b = self.handle()
        koff = as_u64(key_offsets)
        voff = as_u64(value_offsets)
        n = len(koff) - 1
        if n < 0 or len(voff) != n + 1:
            raise error_for(E.INVALID_PARAM, "key and value offsets need n + 1 entries each")
        if not checked:
            check_offsets(koff, len(keys), "key")
            check_offsets(voff, len(values), "value")
        if heads is not None:
            hoff = as_u64(head_offsets)
            if len(hoff) != n + 1:
                raise error_for(E.INVALID_PARAM, "head offsets need n + 1 entries")
            if not checked:
                check_offsets(hoff, len(heads), "head")
            hp, hop = cbuf(heads), u64p(hoff)
        else:
            hp = hop = ffi.NULL
        if n:
            lib.ld_batch_put_many(
                b, _cf_handle(cf), n, cbuf(keys), u64p(koff), hp, hop, cbuf(values),
                u64p(voff),
            )

    def put_plan(self, plan: bytes, bodies, cf: Family | None = None) -> int:
        """Put the entries of ``plan`` (made by ``ldcore.storefmt.encode_run``), whose
        values end in slices of ``bodies`` (bytes-like); returns how many.  A plan that
        runs past its end, or past the end of ``bodies``, puts nothing: INVALID_PARAM."""
        b = self.handle()
        # bytes go to C as they are; a buffer of 0 bytes may come back as NULL, which
        # no entry reads (its bodies must be empty).
        body = bodies if isinstance(bodies, bytes) else ffi.from_buffer(bodies)
        size = len(body)
        n = lib.ld_batch_put_plan(b, _cf_handle(cf), plan, len(plan), body, size)
        if n < 0:
            raise error_for(E.INVALID_PARAM, "put plan runs past its end or its bodies")
        return n

    def delete_many(self, keys, key_offsets, cf: Family | None = None) -> None:
        """Delete n keys given as one buffer and n + 1 offsets."""
        b = self.handle()
        koff = as_u64(key_offsets)
        check_offsets(koff, len(keys), "key")
        if len(koff) > 1:
            lib.ld_batch_delete_many(b, _cf_handle(cf), len(koff) - 1, cbuf(keys), u64p(koff))

    def count(self) -> int:
        return lib.rocksdb_writebatch_count(self.handle())

    def data_size(self) -> int:
        """Bytes of the batch's serialized form."""
        size = ffi.new("size_t*")
        lib.rocksdb_writebatch_data(self.handle(), size)
        return int(size[0])

    def clear(self) -> None:
        lib.rocksdb_writebatch_clear(self.handle())

    def close(self) -> None:
        ptr, self._ptr = self._ptr, None
        if ptr is not None:
            ffi.release(ptr)

    def __len__(self) -> int:
        return self.count()
