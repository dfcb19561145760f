"""Plain-Python BP-34 condensed availability: the reference for ``ldcore.availability``.

Groups are ``(first_start, last_start, size, period)``; bytes are a 64-byte big-endian
header (int32 version 0, int32 group count, zeros) and 24 bytes a group
(int64, int64, int32, int32).
"""

import struct

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


def sequences(values) -> list[tuple[int, int]]:
    """Runs of consecutive values as (start, size), runs cut at INT32_MAX."""
    out: list[tuple[int, int]] = []
    for v in values:
        v = int(v)
        if out and out[-1][0] + out[-1][1] == v and out[-1][1] < INT32_MAX:
            out[-1] = (out[-1][0], out[-1][1] + 1)
        else:
            out.append((v, 1))
    return out


def groups_of(values) -> list[tuple[int, int, int, int]]:
    """Greedy grouping, as BP-34's own examples group."""
    groups: list[list[int]] = []
    for start, size in sequences(values):
        if groups:
            first, last, gsize, period = groups[-1]
            if gsize == size:
                if first == last and start - first <= INT32_MAX:
                    groups[-1] = [first, start, size, start - first]
                    continue
                if first != last and start - last == period:
                    groups[-1][1] = start
                    continue
        groups.append([start, start, size, 0])
    return [tuple(g) for g in groups]


def encode(values) -> bytes:
    vals = [int(v) for v in values]
    if any(b <= a for a, b in zip(vals, vals[1:], strict=False)):
        raise ValueError("not strictly increasing")
    if vals and (vals[0] < 0 or vals[-1] > INT64_MAX):
        raise ValueError("out of range")
    gs = groups_of(vals)
    head = struct.pack(">ii", 0, len(gs)) + bytes(56)
    return head + b"".join(struct.pack(">qqii", *g) for g in gs)


def decode(data: bytes) -> list[tuple[int, int, int, int]]:
    data = bytes(data)
    if len(data) < 64 or (len(data) - 64) % 24:
        raise ValueError("bad length")
    version, count = struct.unpack(">ii", data[:8])
    if version != 0 or count != (len(data) - 64) // 24 or any(data[8:64]):
        raise ValueError("bad header")
    groups = [struct.unpack(">qqii", data[64 + 24 * i : 88 + 24 * i]) for i in range(count)]
    prev_end = -1
    for first, last, size, period in groups:
        if first < 0 or last < first or size <= 0:
            raise ValueError("bad group")
        if first == last and period != 0:
            raise ValueError("period on a single sequence")
        if first != last and (period < size or (last - first) % period):
            raise ValueError("bad period")
        if last + size - 1 > INT64_MAX or first <= prev_end:
            raise ValueError("overflow or overlap")
        prev_end = last + size - 1
    return groups


def count(groups) -> int:
    return sum(
        size if first == last else ((last - first) // period + 1) * size
        for first, last, size, period in groups
    )


def expand(groups) -> list[int]:
    out: list[int] = []
    for first, last, size, period in groups:
        start = first
        while True:
            out.extend(range(start, start + size))
            if start == last:
                break
            start += period
    return out


def round_robin(bookie: int, ensemble: int, quorum: int, entries: int) -> list[int]:
    """Entries of ``bookie`` under BookKeeper's round-robin schedule: e with
    (e - bookie) mod ensemble < quorum."""
    return [e for e in range(entries) if (e - bookie) % ensemble < quorum]
