"""The roles of a node: each owns some message types and the state behind them.

- ``role``: the ``Role`` base class and the services a role gets from its node;
- writing: ``sequencer_role`` (APPEND -> LSN -> STOREs -> APPENDED; which logs it serves
  is ``sequencer.ownership``) with ``sequencer_replies`` (what it keeps of each APPEND),
  ``activations`` (epochs from the epoch store, batched), ``store_sender`` (STOREs and
  their retries), ``recovery_driver`` (epoch recovery), ``writer_recall`` (idempotent
  writers' blobs after a failover) and ``tail_batch`` (GET_TAILS of many logs);
- storing: ``storage_role`` (STORE into LogsDB, RELEASE, per-node queries) with
  ``group_commit``, ``epoch_bound``, ``known_good`` and ``purging``;
- reading: ``read_streams_role`` (START/WINDOW/STOP over the sans-I/O
  ``readstream.server``); ``availability_role`` (the checker's per-node questions);
- the cluster: ``failure_detector_role`` (heartbeats, the cluster view),
  ``metadata_role`` (the metadata gateway; ``store_requests`` runs its epoch store
  calls), ``logs_config_role``, ``consumers_role`` (checkpoints, consumer groups),
  ``rebuilding_role`` and ``rebuilding_supervisor_role``, ``checker_role``,
  ``metrics_role`` (Prometheus) with ``stats``.
"""
