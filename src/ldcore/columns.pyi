import numpy as np
import numpy.typing as npt

def gather_payloads(
    src: npt.NDArray[np.uint8],
    starts: npt.NDArray[np.uint64],
    ends: npt.NDArray[np.uint64],
    dst: npt.NDArray[np.uint8],
    dst_starts: npt.NDArray[np.uint64],
) -> None: ...
