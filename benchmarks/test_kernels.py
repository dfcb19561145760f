"""Kernel speed against plain-Python references and a memory-bandwidth anchor.

ship_mask: the Cython kernel vs the plain-Python reference of tests/reference/scd.py and
vs a numpy copy of the same copyset array (what merely touching the data costs).
codec: blob encode/decode vs raw zstandard on the same bytes.
window: the read stream's ring buffer moving its head over an epoch jump (2**32 LSNs and
more) vs over just its own slots: the far move must cost what the near one costs.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import zstandard

from ldcore import codec
from ldcore.scd import ship_mask
from ldcore.window import Window
from tests.reference import scd as scd_ref

N_RECORDS = 1_000_000


def random_copysets(n: int, nodes: int = 10, r: int = 3, seed: int = 7) -> np.ndarray:
    rng = np.random.default_rng(seed)
    # r distinct nodes per row: the first r of a random permutation of the nodeset
    return np.argsort(rng.random((n, nodes)), axis=1)[:, :r].astype(np.int16)


@pytest.fixture(scope="module")
def copysets():
    return random_copysets(N_RECORDS)


def _info(benchmark, items, reference=False, unit="records"):
    benchmark.extra_info.update(items=items, unit=unit, reference=reference)


@pytest.mark.benchmark(group="ship_mask 1M records")
def test_ship_mask_kernel(benchmark, copysets):
    """The steady state: copyset order as written, one node known down."""
    _info(benchmark, len(copysets))
    mask = benchmark(ship_mask, copysets, 3, known_down=(1,))
    assert mask.shape == (len(copysets),)


@pytest.mark.benchmark(group="ship_mask 1M records")
def test_ship_mask_kernel_seeded_shuffle(benchmark, copysets):
    """With a per-reader shuffle of every copyset (a 64-bit hash per row)."""
    _info(benchmark, len(copysets))
    benchmark(ship_mask, copysets, 3, known_down=(1,), seed=42)


@pytest.mark.benchmark(group="ship_mask 1M records")
def test_ship_mask_python_reference(benchmark, copysets):
    _info(benchmark, len(copysets), reference=True)
    rows = copysets.tolist()
    benchmark.pedantic(scd_ref.ship_mask, args=(rows, 3), kwargs={"known_down": (1,)}, rounds=2)


@pytest.mark.benchmark(group="ship_mask 1M records")
def test_ship_mask_numpy_copy(benchmark, copysets):
    _info(benchmark, len(copysets), reference=True)
    benchmark(np.copy, copysets)


def log_lines(n: int, seed: int = 1) -> list[bytes]:
    """JSON-like log lines of about 100 bytes, compressible the way real logs are."""
    rng = np.random.default_rng(seed)
    levels = ["INFO", "WARN", "DEBUG", "ERROR"]
    return [
        json.dumps(
            {
                "ts": 1_700_000_000_000 + i,
                "lvl": levels[int(rng.integers(4))],
                "svc": f"api-{int(rng.integers(16))}",
                "msg": "request served",
                "ms": int(rng.integers(1000)),
                "uid": int(rng.integers(1_000_000)),
            }
        ).encode()
        for i in range(n)
    ]


@pytest.fixture(scope="module")
def payloads():
    return log_lines(4096)


@pytest.fixture(scope="module")
def framed(payloads):
    # the bytes raw zstd compresses: the same payloads, length-prefixed as in the blob
    return b"".join(len(p).to_bytes(1, "little") + p for p in payloads)


@pytest.mark.benchmark(group="codec encode 4096 x ~100 B")
def test_codec_encode(benchmark, payloads):
    _info(benchmark, sum(map(len, payloads)), unit="bytes")
    benchmark(codec.encode, payloads)


@pytest.mark.benchmark(group="codec encode 4096 x ~100 B")
def test_raw_zstd_compress(benchmark, framed):
    _info(benchmark, len(framed), reference=True, unit="bytes")
    cctx = zstandard.ZstdCompressor(level=1)
    benchmark(cctx.compress, framed)


@pytest.mark.benchmark(group="codec decode 4096 x ~100 B")
def test_codec_decode(benchmark, payloads):
    blob = codec.encode(payloads)
    _info(benchmark, sum(map(len, payloads)), unit="bytes")
    buf, offsets = benchmark(codec.decode, blob)
    assert len(offsets) == len(payloads) + 1


@pytest.mark.benchmark(group="codec decode 4096 x ~100 B")
def test_raw_zstd_decompress(benchmark, framed):
    compressed = zstandard.ZstdCompressor(level=1).compress(framed)
    _info(benchmark, len(framed), reference=True, unit="bytes")
    dctx = zstandard.ZstdDecompressor()
    benchmark(dctx.decompress, compressed)


def _half_full_window() -> tuple[tuple[Window], dict]:
    w = Window(5, 512)
    w.insert_many(np.arange(5, 517, 2, dtype=np.uint64), np.arange(256))
    return (w,), {}


def _advance_near(w: Window) -> None:
    w.advance(517)  # just past its last slot


def _advance_far(w: Window) -> None:
    w.advance((7 << 32) | 1)  # an epoch jump
    w.advance(1 << 63)
    w.advance(2**64 - 1)


@pytest.mark.benchmark(group="window advance 256 of 512 slots")
def test_window_advance_near(benchmark):
    _info(benchmark, 256, reference=True)
    benchmark.pedantic(_advance_near, setup=_half_full_window, rounds=2000)


@pytest.mark.benchmark(group="window advance 256 of 512 slots")
def test_window_advance_far(benchmark):
    _info(benchmark, 256)
    benchmark.pedantic(_advance_far, setup=_half_full_window, rounds=2000)
