from typing import Any

import numpy as np
import numpy.typing as npt

def gather_payloads(
    src: npt.NDArray[np.uint8],
    starts: npt.NDArray[np.uint64],
    ends: npt.NDArray[np.uint64],
    dst: npt.NDArray[np.uint8],
    dst_starts: npt.NDArray[np.uint64],
) -> None: ...

def pack_written(
    lsns: npt.NDArray[np.uint64],
    timestamps: npt.NDArray[np.int64],
    flags: npt.NDArray[np.uint32],
    waves: npt.NDArray[np.uint32] | None,
    copysets: npt.NDArray[np.int16],
    payloads: Any,
    offsets: npt.NDArray[np.uint64],
) -> tuple[npt.NDArray[np.uint8], int]: ...

def pack_written_runs(
    ends: npt.NDArray[np.uint64],
    lsns: npt.NDArray[np.uint64],
    timestamps: npt.NDArray[np.int64],
    flags: npt.NDArray[np.uint32],
    waves: npt.NDArray[np.uint32] | None,
    copysets: npt.NDArray[np.int16],
    payloads: Any,
    offsets: npt.NDArray[np.uint64],
    runs: list[int] | None = None,
) -> list[tuple[npt.NDArray[np.uint8], int]]: ...

def unpack_written(
    buf: npt.NDArray[np.uint8], n: int, width: int
) -> tuple[
    npt.NDArray[np.uint64],
    npt.NDArray[np.int64],
    npt.NDArray[np.uint32],
    npt.NDArray[np.uint32],
    npt.NDArray[np.int16],
    npt.NDArray[np.uint32],
    npt.NDArray[np.uint8],
    npt.NDArray[np.uint64],
]: ...

def read_packed(
    bufs: list[npt.NDArray[np.uint8]],
    ns: list[int],
    widths: list[int],
    lo: int,
    hi: int,
    max_records: int,
    max_bytes: int,
) -> tuple[npt.NDArray[np.uint8], int, int, bool]: ...

_Columns = tuple[
    npt.NDArray[np.uint64],
    npt.NDArray[np.int64],
    npt.NDArray[np.uint32],
    npt.NDArray[np.uint8],
    npt.NDArray[np.uint64],
    npt.NDArray[np.uint32] | None,
]

def concat_columns(parts: list[Any]) -> _Columns: ...
def take_columns(
    parts: list[Any], part: npt.NDArray[np.int64], row: npt.NDArray[np.int64]
) -> _Columns: ...
def split_handles(
    handles: npt.NDArray[np.int64],
) -> tuple[list[int], npt.NDArray[np.int64], npt.NDArray[np.int64], list[int]]: ...
