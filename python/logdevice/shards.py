"""Authoritative status of a storage shard, shared by the event log, readers and rebuilding.

Readers use it to decide which nodes count towards an f-majority; the epoch
store derives it from the event log (``epochstore.events``).
"""

from __future__ import annotations

from enum import IntEnum


class AuthoritativeStatus(IntEnum):
    FULLY_AUTHORITATIVE = 0  # normal: the node has every record it was sent
    UNDERREPLICATION = 1  # data lost (marked unrecoverable), being rebuilt: not a gap witness
    AUTHORITATIVE_EMPTY = 2  # rebuilt elsewhere: the node holds nothing, leaves the nodeset
    UNAVAILABLE = 3  # down and being rebuilt; may come back with its data: wait for it
