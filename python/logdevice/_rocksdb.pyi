# The cffi extension built by _ext/build_rocksdb.py: ``ffi`` (types, buffers, errors) and
# ``lib`` (the RocksDB C API and the ld_* helpers declared there).  cffi objects are
# dynamic, so they are typed as Any; storage/rocksdb*.py wraps them in typed classes.
from typing import Any

ffi: Any
lib: Any
