import numpy as np
import numpy.typing as npt

def merge_holders(
    size: int,
    slots: npt.ArrayLike,
    rows: npt.ArrayLike,
    offsets: npt.ArrayLike,
    positions: npt.ArrayLike,
    member_of: npt.ArrayLike,
) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64]]: ...
