import numpy as np
import numpy.typing as npt

_Bytes = bytes | bytearray | memoryview | npt.NDArray[np.uint8]

HAVE_SSE42: bool

def crc32c(data: _Bytes, value: int = 0) -> int: ...
def crc32c_portable(data: _Bytes, value: int = 0) -> int: ...
def crc32c_many(buffer: _Bytes, offsets: npt.ArrayLike) -> npt.NDArray[np.uint32]: ...
