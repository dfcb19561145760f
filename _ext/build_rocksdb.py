"""cffi build script: the subset of RocksDB's C API (rocksdb/c.h) that LogsDB uses.

Out-of-line API mode: declarations are checked against the real header at build time and
compiled into ``logdevice._rocksdb``.  Declare each function once, here.
"""

from cffi import FFI

CDEF = """
typedef struct rocksdb_t rocksdb_t;
typedef struct rocksdb_options_t rocksdb_options_t;
rocksdb_options_t* rocksdb_options_create(void);
void rocksdb_options_destroy(rocksdb_options_t*);
void rocksdb_options_set_create_if_missing(rocksdb_options_t*, unsigned char);
rocksdb_t* rocksdb_open(const rocksdb_options_t* options, const char* name, char** errptr);
void rocksdb_close(rocksdb_t* db);
void rocksdb_free(void* ptr);
"""

ffi = FFI()
ffi.cdef(CDEF)
ffi.set_source("logdevice._rocksdb", "#include <rocksdb/c.h>", libraries=["rocksdb"])

if __name__ == "__main__":
    ffi.compile(verbose=True)
