"""The read path of a client: from the storage nodes' read streams to ``read()``.

- ``reader``: ``Reader`` and ``AsyncReader``, what users call;
- ``core``: their loop side, one sans-I/O ``ReadStream`` per log driven over the
  client's connections;
- ``queue``: the bounded hand-off between the loop and the reading threads or tasks;
- ``batch``: ``ReaderBatch``, records as columns;
- ``placement``: where a log is read from (nodesets and their history);
- ``queries``: ``is_log_empty`` and exact ``data_size``, answered by reading;
- ``checkpointed_reader``, ``group_reader``: readers that resume from checkpoints, and
  consumer groups that share logs.
"""
