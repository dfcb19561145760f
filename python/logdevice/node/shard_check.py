"""A storage node that comes up with an empty LogsDB after holding data marks itself.

A node whose data directory was wiped (disk replaced, directory deleted) starts with a
fresh, empty LogsDB.  Its read streams then answer "no records" for every LSN, which a
reader would count as proof that no copy exists: with one more node down, that is a
wrong DATALOSS gap while fewer than R copies are really gone.  So at start-up, if the
store is new but the epoch store's metadata history shows that some log placed records
on this node, the node appends ``SHARD_NEEDS_REBUILD`` with ``unrecoverable: true`` to
the event log: its authoritative status becomes UNDERREPLICATION, and readers no longer
count its silence as evidence until rebuilding has copied its records elsewhere and the
node, acknowledging, takes new records again (``node.rebuilding_role``).

The check is conservative: a node that joins a running cluster for the first time after
a log already named it in a nodeset is marked too (it never had data, so the only cost
is that its answers do not count until it is acknowledged).  A ``file:`` store that was
never created has no history and is not consulted; a ``zookeeper:`` store always is.
"""

from __future__ import annotations

import logging

from logdevice.config import Config
from logdevice.epochstore import AuthoritativeStatus
from logdevice.errors import LogDeviceError
from logdevice.rebuilding.requests import request_rebuild
from logdevice.security.store import open_existing_cluster_store

__all__ = ["mark_if_data_lost"]

log = logging.getLogger("logdevice.node.shard_check")


def mark_if_data_lost(config: Config, index: int) -> bool:
    """Mark node ``index`` UNDERREPLICATION in the event log if logs placed data on it.

    Call when the node's LogsDB was just created.  Returns True if it marked the node.
    Errors reaching the epoch store are logged, not raised (the node still starts).
    """
    try:
        store = open_existing_cluster_store(config)
        if store is None:
            return False
        with store:
            held = [log_id for log_id in store.logs()
                    if (st := store.get(log_id)) is not None
                    and any(index in m.nodeset for m in st.history)]
            if not held:
                return False
            if store.shard_status(index) != AuthoritativeStatus.FULLY_AUTHORITATIVE:
                return False  # already being dealt with
            request_rebuild(store, config, index, unrecoverable=True)
    except LogDeviceError as exc:
        log.error("N%d: could not check the event log for lost data: %s", index, exc)
        return False
    log.warning("N%d: started with an empty store although %d log(s) placed records here "
                "(e.g. logs %s): marked UNDERREPLICATION in the event log", index, len(held),
                held[:5])
    return True
