# LSN = (epoch << 32) | esn, a uint64.  Scalars in, scalars out; uint64 arrays in, arrays out.
#
#   63                 32 31                  0
#   +--------------------+--------------------+
#   |       epoch        |        esn         |
#   +--------------------+--------------------+
#
# Printed as e<epoch>n<esn> ("e5n12"); LSN_INVALID and LSN_MAX print by name.
import re

import numpy as np

cimport numpy as cnp
from libc.stdint cimport uint64_t

cnp.import_array()

LSN_INVALID = 0
LSN_OLDEST = 1
LSN_MAX = 0xFFFFFFFFFFFFFFFF
EPOCH_INVALID = 0
EPOCH_MIN = 1
EPOCH_MAX = 0xFFFFFFFE
ESN_INVALID = 0
ESN_MIN = 1
ESN_MAX = 0xFFFFFFFF

_LSN_RE = re.compile(r"e(\d+)n(\d+)\Z")


def _is_array(x):
    return isinstance(x, np.ndarray)


def _as_u64(x):
    return np.ascontiguousarray(x, dtype=np.uint64)


def compose(epoch, esn):
    """LSN from epoch and esn (scalars or arrays, broadcast together)."""
    if _is_array(epoch) or _is_array(esn):
        e, n = np.broadcast_arrays(_as_u64(epoch), _as_u64(esn))
        if (e > 0xFFFFFFFF).any() or (n > 0xFFFFFFFF).any():
            raise ValueError("epoch and esn must fit in 32 bits")
        return (e << np.uint64(32)) | n
    if not (0 <= epoch <= 0xFFFFFFFF and 0 <= esn <= 0xFFFFFFFF):
        raise ValueError(f"epoch {epoch} and esn {esn} must fit in 32 bits")
    return LD_COMPOSE(epoch, esn)


def epoch_of(lsn):
    """The epoch (high 32 bits) of an LSN or of each LSN in an array."""
    if _is_array(lsn):
        return (_as_u64(lsn) >> np.uint64(32)).astype(np.uint32)
    return LD_EPOCH_OF(lsn)


def esn_of(lsn):
    """The epoch sequence number (low 32 bits) of an LSN or of each LSN in an array."""
    if _is_array(lsn):
        return (_as_u64(lsn) & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    return LD_ESN_OF(lsn)


cdef str _one_to_string(uint64_t x):
    if x == 0:
        return "LSN_INVALID"
    if x == 0xFFFFFFFFFFFFFFFF:
        return "LSN_MAX"
    return f"e{LD_EPOCH_OF(x)}n{LD_ESN_OF(x)}"


def to_string(lsn):
    """``e5n12`` for one LSN; a list of strings for an array."""
    cdef const uint64_t[::1] view
    if _is_array(lsn):
        view = _as_u64(lsn).ravel()
        return [_one_to_string(view[i]) for i in range(view.shape[0])]
    return _one_to_string(lsn)


def parse(text):
    """Inverse of ``to_string``; also accepts a plain decimal LSN."""
    text = text.strip()
    if text == "LSN_INVALID":
        return 0
    if text == "LSN_MAX":
        return LSN_MAX
    m = _LSN_RE.match(text)
    if m:
        return compose(int(m.group(1)), int(m.group(2)))
    if text.isdigit() and int(text) <= LSN_MAX:
        return int(text)
    raise ValueError(f"not an LSN: {text!r} (expected e<epoch>n<esn>, LSN_MAX or an integer)")
