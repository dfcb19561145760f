from typing import overload

import numpy as np
import numpy.typing as npt

LSN_INVALID: int
LSN_OLDEST: int
LSN_MAX: int
EPOCH_INVALID: int
EPOCH_MIN: int
EPOCH_MAX: int
ESN_INVALID: int
ESN_MIN: int
ESN_MAX: int

@overload
def compose(epoch: int, esn: int) -> int: ...
@overload
def compose(epoch: npt.ArrayLike, esn: npt.ArrayLike) -> npt.NDArray[np.uint64]: ...
@overload
def epoch_of(lsn: int) -> int: ...
@overload
def epoch_of(lsn: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint32]: ...
@overload
def esn_of(lsn: int) -> int: ...
@overload
def esn_of(lsn: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint32]: ...
@overload
def to_string(lsn: int) -> str: ...
@overload
def to_string(lsn: npt.NDArray[np.uint64]) -> list[str]: ...
def parse(text: str) -> int: ...
