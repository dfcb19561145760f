from typing import Any

import numpy as np
import numpy.typing as npt

def store_columns(
    waves: list[tuple[Any, ...]], entries: list[tuple[Any, int]], checksum_flag: int
) -> tuple[
    npt.NDArray[np.uint64],  # lsns
    npt.NDArray[np.int64],  # timestamps
    npt.NDArray[np.uint32],  # flags
    npt.NDArray[np.uint32],  # waves
    npt.NDArray[np.int16],  # copysets
    npt.NDArray[np.uint64],  # payload offsets
    Any,  # payloads
    npt.NDArray[np.uint32],  # checksums
    int,  # last known good
]: ...
def store_logs_columns(
    waves: list[tuple[Any, ...]], entries: list[tuple[Any, int]], checksum_flag: int
) -> tuple[
    npt.NDArray[np.uint64],  # lsns
    npt.NDArray[np.int64],  # timestamps
    npt.NDArray[np.uint32],  # flags
    npt.NDArray[np.uint32],  # waves
    npt.NDArray[np.int16],  # copysets
    npt.NDArray[np.uint64],  # payload offsets
    Any,  # payloads
    npt.NDArray[np.uint32],  # checksums
    npt.NDArray[np.uint64],  # log ids, one per part
    npt.NDArray[np.uint64],  # last known good, one per part
]: ...
def stored_replies(
    node: int,
    sent_lsns: npt.NDArray[np.uint64],
    sent_waves: npt.NDArray[np.uint32],
    lsns: npt.ArrayLike,
    statuses: npt.ArrayLike,
    status: int,
    flagged: int,
) -> tuple[list[tuple[int, int, int, int]], bool]: ...
def reply_columns(
    statuses: list[int], lsns: list[int], timestamps: list[int]
) -> tuple[npt.NDArray[np.uint16], npt.NDArray[np.uint64], npt.NDArray[np.int64]]: ...
