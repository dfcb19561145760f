from typing import ClassVar

class Usage:
    min_lsn: int
    max_lsn: int
    min_ts: int
    max_ts: int
    records: int
    nbytes: int
    __hash__: ClassVar[None]  # type: ignore[assignment]
    def __init__(self, min_lsn: int, max_lsn: int, min_ts: int, max_ts: int, records: int,
                 nbytes: int) -> None: ...
    def encode(self) -> bytes: ...
    @staticmethod
    def decode(value: bytes) -> Usage: ...
    def copy(self) -> Usage: ...
    def merged(self, other: Usage | None) -> Usage: ...
