"""``ldshell``: the admin shell (status, logs, info, check, trim, SQL query).

- ``context``: the cluster behind a config and the bounded calls that look inside it;
- ``tables``: Arrow tables for ``query`` (nodes, shards, sequencers, epoch_store, ...);
- ``commands``: one function per command, each returning its exit code;
- ``main``: argument parsing and the interactive prompt.
"""
