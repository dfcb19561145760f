from collections.abc import Iterable
from typing import Literal

import numpy as np
import numpy.typing as npt

_Bytes = bytes | bytearray | memoryview | npt.NDArray[np.uint8]

MAGIC: int
COMPRESSION_NONE: int
COMPRESSION_ZSTD: int
FLAG_CHECKSUM_CRC32C: int
FLAG_PRODUCER: int
DEFAULT_MAX_SIZE: int

class CodecError(ValueError): ...

def encode(
    payloads: Iterable[_Bytes] | tuple[_Bytes, npt.NDArray[np.integer]],
    *,
    compression: Literal["zstd", "none"] | str | None = "zstd",
    level: int = 1,
    checksum: bool = True,
    producer: tuple[int, int] | None = None,
) -> bytes: ...
def producer_of(blob: _Bytes) -> tuple[int, int] | None: ...
def decode(
    blob: _Bytes, *, max_size: int = ...
) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint64]]: ...
def decode_count(blob: _Bytes) -> int: ...
