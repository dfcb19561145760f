"""What counts as data loss for a Spark read, and what happens then (sans-I/O).

A read asked for LSNs it cannot deliver in three ways: a DATALOSS gap (acknowledged
records are gone), a TRIM gap inside a range the plan meant to read (the log was trimmed
while the read ran, or the range started below the trim point: a stream that fell behind
retention, a checkpoint older than a trim, an explicit ``from_lsn``), or a range the
driver finds below the trim point before it plans.  All are loss: with
``fail_on_data_loss`` (the default) the query fails with ``LogDeviceError`` status
DATALOSS naming the log and the LSN range; otherwise the range is skipped, logged as a
warning and counted.

Not loss: the default start of a read (``earliest`` / no ``from_lsn``) means "from the
trim point", and ``from_time`` means "from the first record at or after that time that
the log still holds".  The caller decides which starts were explicit; this module only
compares a range with a trim point.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from logdevice.errors import E, LogDeviceError, error_for

__all__ = ["LostRange", "below_trim_point", "loss_error", "LossCounter"]

log = logging.getLogger("logdevice.spark")

#: How ``fail_on_data_loss=false`` is spelled in messages.
SKIP_HINT = "set option fail_on_data_loss=false to skip it"


@dataclass(frozen=True)
class LostRange:
    """LSNs ``lo..hi`` (inclusive) of ``log_id`` the read cannot deliver, and why
    (``"trimmed"`` or ``"lost"``: a DATALOSS gap)."""

    log_id: int
    lo: int
    hi: int
    cause: str

    def describe(self) -> str:
        if self.cause == "trimmed":
            return (f"log {self.log_id}: LSN range [{self.lo}, {self.hi}] was trimmed "
                    "before it was read")
        return f"log {self.log_id}: records lost in LSN range [{self.lo}, {self.hi}] " \
               "(DATALOSS gap)"


def below_trim_point(log_id: int, lo: int, hi: int, trim_point: int) -> LostRange | None:
    """The part of ``lo..hi`` at or below ``trim_point`` (None if there is none)."""
    top = min(hi, trim_point)
    return LostRange(log_id, lo, top, "trimmed") if lo <= top else None


def loss_error(lost: LostRange) -> LogDeviceError:
    """The error a query fails with (status DATALOSS)."""
    return error_for(E.DATALOSS, f"{lost.describe()}; {SKIP_HINT}")


@dataclass
class LossCounter:
    """Ranges skipped with ``fail_on_data_loss=false``: count and LSN total per cause."""

    trimmed_ranges: int = 0
    trimmed_lsns: int = 0
    lost_ranges: int = 0
    lost_lsns: int = 0

    def add(self, other: LossCounter) -> None:
        """Count what ``other`` counted too."""
        self.trimmed_ranges += other.trimmed_ranges
        self.trimmed_lsns += other.trimmed_lsns
        self.lost_ranges += other.lost_ranges
        self.lost_lsns += other.lost_lsns

    def handle(self, lost: LostRange, fail_on_data_loss: bool) -> None:
        """Raise ``loss_error(lost)``, or count the range and log a warning."""
        if fail_on_data_loss:
            raise loss_error(lost)
        n = lost.hi - lost.lo + 1
        if lost.cause == "trimmed":
            self.trimmed_ranges += 1
            self.trimmed_lsns += n
        else:
            self.lost_ranges += 1
            self.lost_lsns += n
        log.warning("%s; skipped (fail_on_data_loss=false)", lost.describe())
