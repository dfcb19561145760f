"""Synthetic JSON-like log lines, generated with numpy (no per-line Python work).

Every line has the same length, so a block of ``n`` lines is one buffer plus the offsets
``0, size, 2*size, ...`` -- the ``(buffer, offsets)`` form ``append_many`` takes::

    {"ts":1700000000123,"lvl":"INFO","svc":"checkout","req":"001234","msg":"GET /v1/ite 7f3a09c1"}

Timestamps, request ids, levels, services and messages vary per line (a cheap hash of the
line number), so the lines compress like real logs do, not like a repeated constant.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["generate", "MIN_SIZE"]

_LEVELS = [b"INFO", b"INFO", b"INFO", b"DBUG", b"WARN", b"ERR "]
_SERVICES = [b"checkout", b"payments", b"search  ", b"catalog ", b"auth    ", b"frontend",
             b"shipping", b"pricing "]
_MESSAGES = [b"GET /v1/items 200", b"POST /v1/cart 201", b"GET /v1/search?q= 200",
             b"cache miss key=item", b"slow query table=orders", b"GET /healthz 200",
             b"retrying upstream call", b"token refreshed for user"]

_PREFIX = b'{"ts":'
# literal, then a field of that width; the message fills what is left
_PARTS = [(b'{"ts":', 13), (b',"lvl":"', 4), (b'","svc":"', 8), (b'","req":"', 6),
          (b'","msg":"', 0)]
_SUFFIX = b'"}'
MIN_SIZE = sum(len(p) + w for p, w in _PARTS) + len(_SUFFIX) + 16


def _mix(x: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    with np.errstate(over="ignore"):
        x = (x + np.uint64(0x9E3779B97F4A7C15)) * np.uint64(0xBF58476D1CE4E5B9)
        x ^= x >> np.uint64(31)
        x *= np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(29))


def _digits(out: npt.NDArray[np.uint8], col: int, values: npt.NDArray[np.int64],
            width: int) -> None:
    v = values.copy()
    for d in range(width - 1, -1, -1):
        out[:, col + d] = 48 + (v % 10)
        v //= 10


def _table(out: npt.NDArray[np.uint8], col: int, choices: list[bytes],
           pick: npt.NDArray[np.int64], width: int) -> None:
    table = np.array([list(c.ljust(width)[:width]) for c in choices], dtype=np.uint8)
    out[:, col:col + width] = table[pick]


def generate(start: int, n: int, size: int = 100, *, base_ms: int = 1_700_000_000_000
             ) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint64]]:
    """Lines ``start .. start + n - 1``, each exactly ``size`` bytes (``size >= MIN_SIZE``).

    Returns
    -------
    (buffer, offsets)
        uint8 buffer of ``n * size`` bytes and n + 1 uint64 boundaries.
    """
    if size < MIN_SIZE:
        raise ValueError(f"log lines need at least {MIN_SIZE} bytes, got {size}")
    i = np.arange(start, start + n, dtype=np.int64)
    h = _mix(i.astype(np.uint64))
    out = np.full((n, size), ord(" "), dtype=np.uint8)
    col = 0
    fields = [
        lambda c: _digits(out, c, base_ms + i * 3, 13),
        lambda c: _table(out, c, _LEVELS, (h % np.uint64(len(_LEVELS))).astype(np.int64), 4),
        lambda c: _table(out, c, _SERVICES,
                         ((h >> np.uint64(8)) % np.uint64(len(_SERVICES))).astype(np.int64), 8),
        lambda c: _digits(out, c, i % 1_000_000, 6),
    ]
    for (lit, width), fill in zip(_PARTS[:-1], fields, strict=True):
        out[:, col:col + len(lit)] = np.frombuffer(lit, dtype=np.uint8)
        col += len(lit)
        fill(col)
        col += width
    lit = _PARTS[-1][0]
    out[:, col:col + len(lit)] = np.frombuffer(lit, dtype=np.uint8)
    col += len(lit)
    msg_width = size - col - len(_SUFFIX)
    tail = 8  # the message ends with " <8 hex digits>", so lines differ there too
    _table(out, col, _MESSAGES,
           ((h >> np.uint64(24)) % np.uint64(len(_MESSAGES))).astype(np.int64),
           msg_width - tail - 1)
    hexd = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
    for d in range(tail):
        out[:, size - len(_SUFFIX) - tail + d] = hexd[
            ((h >> np.uint64(32 + 4 * d)) & np.uint64(15)).astype(np.int64)]
    out[:, size - len(_SUFFIX):] = np.frombuffer(_SUFFIX, dtype=np.uint8)
    offsets = np.arange(0, n * size + 1, size, dtype=np.uint64)
    return out.reshape(-1), offsets
