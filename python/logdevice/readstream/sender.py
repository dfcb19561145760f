"""Per storage node state of a client read stream."""

from __future__ import annotations


class SenderState:
    """What the stream knows about one node of the read set.

    ``next_lsn`` is the smallest LSN the node may still send: a record at X or a gap
    ending at X - 1 says it has nothing below X.  ``[ur_lo, ur_until)`` is an
    under-replicated region: the node may be missing records there (or holds a copy that
    failed its checksum), so its "nothing here" does not count for gap detection.
    ``bad_until`` remembers a checksum failure: while the read pointer is below it, the
    node stays off the SCD read set.
    """

    __slots__ = (
        "node",
        "next_lsn",
        "ur_lo",
        "ur_until",
        "bad_until",
        "acked_version",
        "connected",
        "shipped_record",
        "reconnect_at",
        "backoff",
        "window_sent",
    )

    def __init__(self, node: int, initial_backoff: float) -> None:
        self.node = node
        self.next_lsn = 0
        self.ur_lo = 0
        self.ur_until = 0
        self.bad_until = 0
        self.acked_version = 1  # the first START is implicitly acknowledged
        self.connected = True
        self.shipped_record = False  # sent a record since its last START
        self.reconnect_at: float | None = None
        self.backoff = initial_backoff
        self.window_sent = 0  # window_high in the last START or WINDOW sent to it

    def reset_for_start(self) -> None:
        """A new START goes out: the node will resend from the read pointer."""
        self.next_lsn = 0
        self.ur_lo = self.ur_until = 0
        self.shipped_record = False
        self.reconnect_at = None

    def mark_under_replicated(self, lo: int, hi: int, next_to_deliver: int) -> None:
        """The node may be missing records in ``[lo, hi]``.  One region is kept: a new
        one merges with a region still ahead of the read pointer (covering what lies
        between, which can only delay a gap, never make a wrong one)."""
        if self.ur_until <= next_to_deliver:
            self.ur_lo = lo
        else:
            self.ur_lo = min(self.ur_lo, lo)
        self.ur_until = max(self.ur_until, hi + 1)

    def gap_state(self, next_to_deliver: int) -> tuple[int, int]:
        """``(state, marker)`` for the LSN ``next_to_deliver``: state 0 NONE (may still
        send it), 1 GAP, 2 UNDER_REPLICATED; marker is the next LSN where the state
        changes (a gap cannot extend past it)."""
        if self.next_lsn <= next_to_deliver:
            return 0, 0
        if next_to_deliver < self.ur_until:
            if next_to_deliver >= self.ur_lo:
                return 2, self.ur_until
            return 1, self.ur_lo
        return 1, self.next_lsn

    def __repr__(self) -> str:
        return (f"SenderState(node={self.node}, next_lsn={self.next_lsn}, "
                f"ur_until={self.ur_until}, connected={self.connected}, "
                f"acked_version={self.acked_version})")
