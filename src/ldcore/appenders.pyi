from collections.abc import Callable, Hashable
from enum import IntEnum
from random import Random
from typing import Any

from logdevice.errors import E

STORE_TIMEOUT: tuple[float, float]
STORE_SLACK: float
STORE_RATE_PRIOR: float
STORE_RATE_FLOOR: float
RATE_SAMPLE_BYTES: int
RATE_ALPHA_DOWN: float
RATE_ALPHA_UP: float
LATENCY_FACTOR: float
LATENCY_MEMORY: float
LATENCY_WAIT_MAX: float

class AppenderState(IntEnum):
    REPLICATING = 0
    WAITING = 1
    REPLICATED = 2
    ABORTED = 3

class StoreLatency:
    def __init__(self) -> None: ...
    def observe(self, node: int, seconds: float, now: float) -> None: ...
    def timeout(self, nodes: tuple[int, ...], now: float) -> float: ...

class AppenderContext:
    log_id: int
    selector: Any  # CopysetSelector | StickyCopysetSelector
    replication: Any  # Replication
    rng: Random
    health: Any  # NodeHealth
    latency: StoreLatency
    timeout_initial: float
    timeout_max: float
    store_rate: float
    lng: int
    unstored_bytes: int
    store_waves: bool
    def __init__(
        self,
        log_id: int,
        selector: Any,
        rng: Random,
        health: Any = None,
        store_timeout: tuple[float, float] = ...,
        store_waves: bool = False,
    ) -> None: ...
    def backlog(self) -> float: ...
    def store_timeout(
        self, wave: int, copyset: tuple[int, ...] = (), now: float = 0.0
    ) -> float: ...
    def observe(self, backlog: float, seconds: float) -> None: ...
    def pick(self, payload_len: int, now: float) -> tuple[tuple[int, ...] | None, E]: ...
    def failure_status(self, now: float) -> E: ...
    def wave_failed(self, copyset: tuple[int, ...]) -> None: ...

class Appender:
    ctx: AppenderContext
    request_id: Hashable
    lsn: int
    timestamp: int
    flags: int
    payload_len: int
    wave: int
    copyset: tuple[int, ...]
    stored: set[int]
    deadline: float | None
    armed: float | None
    last_status: E
    wave_started: float
    wave_backlog: float
    def __init__(
        self,
        ctx: AppenderContext,
        request_id: Hashable,
        lsn: int,
        timestamp: int,
        flags: int = 0,
        payload_len: int = 0,
    ) -> None: ...
    @property
    def state(self) -> AppenderState: ...
    @property
    def replicated(self) -> bool: ...
    def start(self, now: float, copyset: tuple[int, ...] | None = None) -> list[Any]: ...
    def on_stored(self, node: int, wave: int, status: E | int, now: float) -> list[Any]: ...
    def on_timeout(self, now: float) -> list[Any]: ...
    def on_node_down(self, node: int, now: float) -> list[Any]: ...
    def retry_now(self, now: float) -> list[Any]: ...
    def abort(self, status: E) -> list[Any]: ...

def draw_distinct(
    nodes: list[int], cum: list[float], r: int, rand: Callable[[], float], tries: int
) -> list[int]: ...
