import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ldcore import lsn
from tests.reference import lsn as ref

u32 = st.integers(0, 2**32 - 1)
u64 = st.integers(0, 2**64 - 1)


@pytest.mark.parametrize(
    ("value", "text"),
    [(0, "LSN_INVALID"), (2**64 - 1, "LSN_MAX"), ((5 << 32) | 12, "e5n12"), (1, "e0n1")],
)
def test_to_string_and_parse_golden(value, text):
    assert lsn.to_string(value) == text
    assert lsn.parse(text) == value


def test_constants():
    assert (lsn.LSN_INVALID, lsn.LSN_OLDEST, lsn.LSN_MAX) == (0, 1, 2**64 - 1)
    assert lsn.EPOCH_MAX == 0xFFFFFFFE and lsn.ESN_MAX == 0xFFFFFFFF


@given(u32, u32)
def test_scalars_match_reference(epoch, esn):
    x = lsn.compose(epoch, esn)
    assert x == ref.compose(epoch, esn)
    assert (lsn.epoch_of(x), lsn.esn_of(x)) == (epoch, esn)
    assert lsn.parse(lsn.to_string(x)) == x


@given(st.lists(u64, max_size=50))
def test_arrays_match_reference(values):
    a = np.array(values, dtype=np.uint64)
    assert lsn.epoch_of(a).tolist() == [ref.epoch_of(v) for v in values]
    assert lsn.esn_of(a).tolist() == [ref.esn_of(v) for v in values]
    assert lsn.compose(lsn.epoch_of(a), lsn.esn_of(a)).tolist() == values
    assert lsn.to_string(a) == [ref.to_string(v) for v in values]


@pytest.mark.parametrize("bad", ["", "e1", "n5", "e-1n2", "5e1", str(2**64), "e1n2x"])
def test_parse_rejects_garbage(bad):
    with pytest.raises(ValueError, match="not an LSN"):
        lsn.parse(bad)


def test_compose_rejects_out_of_range():
    with pytest.raises(ValueError):
        lsn.compose(2**32, 0)
    with pytest.raises(ValueError):
        lsn.compose(np.array([1]), np.array([2**32]))
