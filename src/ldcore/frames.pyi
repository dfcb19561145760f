from collections.abc import Callable, Container, Sequence
from typing import Any

import msgspec
import numpy as np

PREFIX_SIZE: int

class EncodeError(ValueError): ...
class FrameTooBig(ValueError): ...
class BadFrame(ValueError): ...
class UnsupportedVersion(BadFrame): ...

class FramePlan:
    type_id: int
    name: str
    n_raw: int
    def __init__(
        self,
        type_id: int,
        cls: type,
        decoder: msgspec.msgpack.Decoder[Any],
        encoder: msgspec.msgpack.Encoder,
        raw: Sequence[
            tuple[int, str, np.dtype[Any] | None, int, Any, Callable[[Any], tuple[Any, Any, Any]]]
        ],
    ) -> None: ...

def encode(
    plan: FramePlan, msg: Any, version: int, max_frame_size: int
) -> list[bytes | bytearray | memoryview]: ...
def decode(plan: FramePlan, frame: memoryview, header_length: int) -> Any: ...
def check_prefix(
    plans: dict[int, FramePlan],
    total: int,
    type_id: int,
    version: int,
    header_length: int,
    max_frame_size: int,
    versions: Container[int],
    what: str = "frame",
) -> FramePlan: ...
def decode_frames(
    src: memoryview,
    pos: int,
    plans: dict[int, FramePlan],
    max_frame_size: int,
    versions: Container[int],
    admit: Callable[[int, int], BaseException | None] | None,
    out: list[Any],
) -> int: ...

def coalesce(buffers: list[Any], small: int = 16384) -> list[Any]: ...
