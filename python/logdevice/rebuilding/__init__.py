"""Rebuilding: re-replicating the records of lost or drained storage nodes.

``plan`` decides, from copyset index arrays alone, which records this node donates and
where their new copies go; ``copies`` is what a node does with the copies and copyset
amendments it is sent; ``throttle`` paces a donor to a byte rate and every node's
rebuilding work to leave appends their share; ``progress`` keeps a donor's place so a
restart resumes where it stopped.  The node role that drives them
(reading the event log, sending copies, reporting done) is ``logdevice.node.roles.rebuilding_role``.
"""

from logdevice.rebuilding.plan import EpochPlacement, amend_copysets, destinations, donor_mask

__all__ = ["EpochPlacement", "amend_copysets", "destinations", "donor_mask"]
