from collections.abc import Callable, Sequence
from typing import Any

import msgspec
import numpy as np

PREFIX_SIZE: int

class EncodeError(ValueError): ...
class FrameTooBig(ValueError): ...
class BadFrame(ValueError): ...

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
