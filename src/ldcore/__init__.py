"""ldcore: the hot paths of logdevice as Cython kernels over numpy arrays.

Each module takes numpy arrays (or buffers) and returns numpy arrays (or buffers); none
builds a Python object per record.  Modules: ``lsn``, ``codec``, ``checksum``, ``scd``,
``window``, ``availability``.
"""
