"""Per storage node state of a client read stream."""

from __future__ import annotations


class SenderState:
    """What the stream knows about one node of the read set.

    ``next_lsn`` is the smallest LSN the node may still send: a record at X or a gap
    ending at X - 1 says it has nothing below X.  ``ur_regions`` are under-replicated
    ranges ``[lo, until)``: the node may be missing records there (or holds a copy that
    failed its checksum), so its "nothing here" does not count for gap detection.
    ``bad_until`` remembers a checksum failure: while the read pointer is below it, the
    node stays off the SCD read set.
    """

    __slots__ = (
        "node",
        "next_lsn",
        "ur_regions",
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
        self.ur_regions: list[tuple[int, int]] = []
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
        self.ur_regions = []
        self.shipped_record = False
        self.reconnect_at = None

    def mark_under_replicated(self, lo: int, hi: int, next_to_deliver: int) -> None:
        """The node may be missing records in ``[lo, hi]`` (regions arrive in LSN order,
        like everything a node sends)."""
        regions = [r for r in self.ur_regions if r[1] > next_to_deliver]
        if regions and regions[-1][1] >= lo:
            last = regions[-1]
            regions[-1] = (min(last[0], lo), max(last[1], hi + 1))
        else:
            regions.append((lo, hi + 1))
        self.ur_regions = regions

    def gap_state(self, next_to_deliver: int) -> tuple[int, int]:
        """``(state, marker)`` for the LSN ``next_to_deliver``: state 0 NONE (may still
        send it), 1 GAP, 2 UNDER_REPLICATED; marker is the next LSN where the state
        changes (a gap cannot extend past it)."""
        if self.next_lsn <= next_to_deliver:
            return 0, 0
        for lo, until in self.ur_regions:
            if until > next_to_deliver:
                if lo <= next_to_deliver:
                    return 2, until
                return 1, lo
        return 1, self.next_lsn

    def __repr__(self) -> str:
        return (f"SenderState(node={self.node}, next_lsn={self.next_lsn}, "
                f"ur_regions={self.ur_regions}, connected={self.connected}, "
                f"acked_version={self.acked_version})")
