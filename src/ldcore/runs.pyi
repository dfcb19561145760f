import numpy as np
import numpy.typing as npt

def copyset_runs(
    copysets: npt.ArrayLike,
) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint32], npt.NDArray[np.int16]]: ...
