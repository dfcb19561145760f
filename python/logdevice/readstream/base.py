"""The fields every part of ``ReadStream`` shares, declared once for the mixins."""

from __future__ import annotations

from collections.abc import Callable

from logdevice.readstream.delivery import Delivery
from logdevice.readstream.fmajority import FailureDomainNodeSet
from logdevice.readstream.gaps import GapDetector
from logdevice.readstream.sender import Senders, SenderState
from logdevice.readstream.window import RecordWindow


class StreamBase:
    """Attribute declarations and cross-mixin hooks (implemented in ``ReadStream``)."""

    log_id: int
    _until: int
    _next: int  # next LSN to deliver == head of the window buffer while not done
    _window: RecordWindow
    _senders: Senders
    _fmaj: FailureDomainNodeSet
    _delivery: Delivery
    _clock: Callable[[], float]
    _gaps: GapDetector
    _scd_timeout: float
    _asa_timeout: float
    _scd_wanted: bool  # the log uses SCD and the user did not force it off
    _scd_active: bool
    _known_down: set[int]
    _rewind_pending: bool
    _mode_pending: str | None  # "scd" / "asa": the mode the pending rewind switches to
    _stall_since: float | None
    _last_kd_change: float
    _stopped: bool

    def _after_event(self) -> None:
        raise NotImplementedError

    def _after_consume(self) -> None:
        raise NotImplementedError

    def tick(self) -> None:
        raise NotImplementedError

    def _send_window(self, s: SenderState) -> None:
        raise NotImplementedError
