"""A storage node that comes up with an empty or damaged LogsDB marks itself.

A node whose data directory was wiped (disk replaced, directory deleted) starts with a
fresh, empty LogsDB.  Its read streams then answer "no records" for every LSN, which a
reader would count as proof that no copy exists: with one more node down, that is a
wrong DATALOSS gap while fewer than R copies are really gone.  So at start-up, if the
store is new but the epoch store's metadata history shows that some log placed records
on this node, the node appends ``SHARD_NEEDS_REBUILD`` with ``unrecoverable: true`` to
the event log: its authoritative status becomes UNDERREPLICATION, and readers no longer
count its silence as evidence until rebuilding has copied its records elsewhere and the
node, acknowledging, takes new records again (``node.roles.rebuilding_role``).

A node whose store reports damage (a corrupt write-ahead log at open, a block or record
checksum failing on a read) marks itself the same way (``mark_damaged``): it cannot tell
which copies it lost.

The empty-store check is conservative: a node that joins a running cluster for the first time after
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
from logdevice.security.store import open_cluster_store, open_existing_cluster_store

__all__ = ["mark_if_data_lost", "mark_damaged"]

#: Statuses under which readers may still count on the node's data: a node that finds
#: its data gone must say so (being rebuilt while down, UNAVAILABLE, counts: the node
#: would otherwise abort that rebuilding as one that came back whole).
_MAY_HOLD_DATA = (AuthoritativeStatus.FULLY_AUTHORITATIVE, AuthoritativeStatus.UNAVAILABLE)

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
            if store.shard_status(index) not in _MAY_HOLD_DATA:
                return False  # already known to have lost it
            request_rebuild(store, config, index, unrecoverable=True,
                            reason="started with an empty store")
    except LogDeviceError as exc:
        log.error("N%d: could not check the event log for lost data: %s", index, exc)
        return False
    log.warning("N%d: started with an empty store although %d log(s) placed records here "
                "(e.g. logs %s): marked UNDERREPLICATION in the event log", index, len(held),
                held[:5])
    return True


def mark_damaged(config: Config, index: int, damage: str) -> bool:
    """Mark node ``index`` UNDERREPLICATION because its store reported ``damage``
    (corruption at open or on a read): it cannot tell which copies it lost, so every
    record that names it is re-replicated.  Returns True if it marked the node (False:
    already marked, or the epoch store could not be reached; the error is logged)."""
    try:
        with open_cluster_store(config) as store:
            if store.shard_status(index) not in _MAY_HOLD_DATA:
                return False
            request_rebuild(store, config, index, unrecoverable=True,
                            reason=f"store damaged: {damage}")
    except LogDeviceError as exc:
        log.error("N%d: could not mark the damaged store for rebuilding: %s", index, exc)
        return False
    log.error("N%d: store damaged (%s): marked UNDERREPLICATION, its records will be "
              "re-replicated", index, damage)
    return True
