from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

FLAG_HOLE: int  # 1 << 6
FLAG_WRITTEN_BY_RECOVERY: int  # 1 << 13
FLAG_BRIDGE: int  # 1 << 15
FLAG_DRAINED: int  # 1 << 19
MAX_NODES: int  # 65536: node indices are in [0, MAX_NODES)
HAVE_SSE2: bool  # the plain path's classify step is SSE2 (else a portable loop)

def ship_mask(
    copysets: npt.ArrayLike,
    me: int | None,
    known_down: Iterable[int] = (),
    *,
    seed: int | None = None,
    local_nodes: Iterable[int] | None = None,
    flags: npt.ArrayLike | None = None,
    rebuilding: Iterable[int] | None = None,
) -> npt.NDArray[np.bool_]: ...
def first_eligible(
    copysets: npt.ArrayLike,
    known_down: Iterable[int] = (),
    *,
    seed: int | None = None,
    local_nodes: Iterable[int] | None = None,
) -> npt.NDArray[np.int32]: ...
def shuffle_copysets(copysets: npt.ArrayLike, seed: int) -> npt.NDArray[np.signedinteger]: ...
def use_simd(enabled: bool) -> bool: ...  # False forces the portable classify step
