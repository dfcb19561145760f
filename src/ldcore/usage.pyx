# What one log has in one LogsDB partition (``logdevice.storage.partitions.Usage``), as
# six C integers.  A storage node keeps one per log and partition for as long as the
# partition lives, so for a node holding many logs this is per-log memory: 64 bytes
# here, against about 260 as a dataclass whose fields are Python ints.
#
# The persisted form is ``logdevice.storage.keys.DIR_VALUE`` (little-endian: min lsn,
# max lsn, min ts, max ts, records, bytes); ``encode``/``decode`` read and write it.
from libc.stdint cimport int64_t, uint8_t, uint64_t

from ldcore.byteorder cimport get_le64, put_le64

DEF SIZE = 48


cdef class Usage:
    """What one log has in one partition (also used for deltas of a pending write):
    its LSN range, timestamp range, records and stored bytes."""

    cdef public uint64_t min_lsn, max_lsn
    cdef public int64_t min_ts, max_ts
    cdef public uint64_t records, nbytes

    def __init__(self, uint64_t min_lsn, uint64_t max_lsn, int64_t min_ts, int64_t max_ts,
                 uint64_t records, uint64_t nbytes):
        self.min_lsn = min_lsn
        self.max_lsn = max_lsn
        self.min_ts = min_ts
        self.max_ts = max_ts
        self.records = records
        self.nbytes = nbytes

    def encode(self):
        cdef uint8_t[SIZE] row
        put_le64(row, self.min_lsn)
        put_le64(row + 8, self.max_lsn)
        put_le64(row + 16, <uint64_t>self.min_ts)
        put_le64(row + 24, <uint64_t>self.max_ts)
        put_le64(row + 32, self.records)
        put_le64(row + 40, self.nbytes)
        return (<char *>row)[:SIZE]

    @staticmethod
    def decode(const unsigned char[::1] value):
        if value.shape[0] != SIZE:
            raise ValueError(f"a directory entry has {SIZE} bytes, got {value.shape[0]}")
        cdef const uint8_t *row = &value[0]
        cdef Usage u = Usage.__new__(Usage)
        u.min_lsn, u.max_lsn = get_le64(row), get_le64(row + 8)
        u.min_ts, u.max_ts = <int64_t>get_le64(row + 16), <int64_t>get_le64(row + 24)
        u.records, u.nbytes = get_le64(row + 32), get_le64(row + 40)
        return u

    cpdef Usage copy(self):
        cdef Usage u = Usage.__new__(Usage)
        u.min_lsn, u.max_lsn = self.min_lsn, self.max_lsn
        u.min_ts, u.max_ts = self.min_ts, self.max_ts
        u.records, u.nbytes = self.records, self.nbytes
        return u

    cpdef Usage merged(self, Usage other):
        """Both together (a copy of this one when ``other`` is None)."""
        if other is None:
            return self.copy()
        cdef Usage u = Usage.__new__(Usage)
        u.min_lsn = min(self.min_lsn, other.min_lsn)
        u.max_lsn = max(self.max_lsn, other.max_lsn)
        u.min_ts = min(self.min_ts, other.min_ts)
        u.max_ts = max(self.max_ts, other.max_ts)
        u.records = self.records + other.records
        u.nbytes = self.nbytes + other.nbytes
        return u

    cdef tuple _fields(self):
        return (self.min_lsn, self.max_lsn, self.min_ts, self.max_ts, self.records,
                self.nbytes)

    def __eq__(self, other):
        if not isinstance(other, Usage):
            return NotImplemented
        return self._fields() == (<Usage>other)._fields()

    __hash__ = None  # mutable, like the dataclass it replaces

    def __repr__(self):
        return ("Usage(min_lsn={}, max_lsn={}, min_ts={}, max_ts={}, records={}, "
                "nbytes={})".format(*self._fields()))

    def __reduce__(self):
        return (Usage, self._fields())
