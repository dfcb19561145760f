from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

def merge_holders(
    starts: npt.ArrayLike,
    bases: npt.ArrayLike,
    lengths: npt.ArrayLike,
    holders: Sequence[tuple[npt.ArrayLike, npt.ArrayLike, npt.ArrayLike, npt.ArrayLike, int]],
    member_of: npt.ArrayLike,
    unknown: npt.ArrayLike | None = None,
) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint16], npt.NDArray[np.int64]]: ...
