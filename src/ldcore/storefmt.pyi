import numpy as np
import numpy.typing as npt

_Bytes = bytes | bytearray | memoryview | npt.NDArray[np.uint8]

DATA_KEY_LEN: int
CSI_KEY_LEN: int
HEAD_FIXED: int
FORMAT: int
MAX_COPYSET: int
LSN_MAX: int

class RecordFormatError(ValueError): ...
class RecordTooBigError(RecordFormatError): ...

def encode_data(
    log_id: int,
    lsns: npt.NDArray[np.uint64],
    timestamps: npt.NDArray[np.int64],
    flags: npt.NDArray[np.uint32],
    waves: npt.NDArray[np.uint32],
    copysets: npt.NDArray[np.int16],
    payloads: _Bytes,
    offsets: npt.NDArray[np.uint64],
    max_payload: int = -1,
) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint8], npt.NDArray[np.uint64]]: ...
def encode_csi(
    log_id: int,
    lsns: npt.NDArray[np.uint64],
    flags: npt.NDArray[np.uint32],
    copysets: npt.NDArray[np.int16],
) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint8], npt.NDArray[np.uint64]]: ...
def decode_heads(
    heads: npt.NDArray[np.uint8], offsets: npt.NDArray[np.uint64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint32], npt.NDArray[np.uint32],
           npt.NDArray[np.uint32], npt.NDArray[np.int16]]: ...
def key_lsns(keys: npt.NDArray[np.uint8], n: int, width: int) -> npt.NDArray[np.uint64]: ...
def decode_csi_runs(
    values: list[bytes],
) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint32], npt.NDArray[np.int16]]: ...

class Run:
    @property
    def plan(self) -> bytes: ...
    @property
    def first_lsn(self) -> int: ...
    @property
    def last_lsn(self) -> int: ...
    @property
    def min_ts(self) -> int: ...
    @property
    def max_ts(self) -> int: ...
    @property
    def records(self) -> int: ...
    @property
    def payload_bytes(self) -> int: ...
    @property
    def head_bytes(self) -> int: ...
    @property
    def blobs(self) -> int: ...

def encode_run(
    log_id: int,
    lsns: npt.NDArray[np.uint64],
    timestamps: npt.NDArray[np.int64],
    flags: npt.NDArray[np.uint32],
    waves: npt.NDArray[np.uint32] | None,
    copysets: npt.NDArray[np.int16],
    payloads: _Bytes,
    offsets: npt.NDArray[np.uint64],
    max_payload: int = -1,
    grouped: bool = False,
    blob_flags: int = 0,
) -> Run: ...
def encode_runs(
    log_ids: npt.NDArray[np.uint64],
    ends: npt.NDArray[np.uint64],
    lsns: npt.NDArray[np.uint64],
    timestamps: npt.NDArray[np.int64],
    flags: npt.NDArray[np.uint32],
    waves: npt.NDArray[np.uint32] | None,
    copysets: npt.NDArray[np.int16],
    payloads: _Bytes,
    offsets: npt.NDArray[np.uint64],
    max_payload: int = -1,
    grouped: bool = False,
    blob_flags: int = 0,
) -> tuple[bytes, npt.NDArray[np.int64]]: ...
def plan_of(entries: list[tuple[bytes, bytes]]) -> bytes: ...
def check_records(
    lsns: npt.NDArray[np.uint64],
    timestamps: npt.NDArray[np.int64],
    flags: npt.NDArray[np.uint32],
    waves: npt.NDArray[np.uint32] | None,
    copysets: npt.NDArray[np.int16],
    payloads: _Bytes,
    offsets: npt.NDArray[np.uint64],
    max_payload: int = -1,
) -> None: ...
def time_range(timestamps: npt.NDArray[np.int64]) -> tuple[int, int]: ...
