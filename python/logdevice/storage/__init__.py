"""Local storage of a storage node: LogsDB over RocksDB.

``rocksdb`` is the thin low-level layer over our cffi binding; ``logsdb`` the log store the
node's storage role and read path call.
"""
