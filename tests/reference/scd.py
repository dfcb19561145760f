"""Plain-Python reference for ``ldcore.scd``: single copy delivery, one record at a time.

Written for clarity, not speed: the shipping rules in order, and the shuffle
of the module comment in ``src/ldcore/scd.pyx`` done in full (the kernel shuffles lazily).
"""

from collections.abc import Iterable, Sequence

FLAG_HOLE = 1 << 6
FLAG_WRITTEN_BY_RECOVERY = 1 << 13
FLAG_BRIDGE = 1 << 15
FLAG_DRAINED = 1 << 19

MASK64 = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15


def mix64(z: int) -> int:
    """splitmix64's finalizer."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def members(row: Iterable[int]) -> list[int]:
    """A copyset row without its padding (negative entries)."""
    return [int(x) for x in row if int(x) >= 0]


def shuffle(copyset: Sequence[int], seed: int) -> list[int]:
    """The deterministic shuffle of one copyset (members only)."""
    c = list(copyset)
    n = len(c)
    h = mix64((seed + GAMMA) & MASK64) ^ n
    for k in range(0, n, 4):
        w = sum(m << (16 * i) for i, m in enumerate(c[k : k + 4]))
        h = ((h ^ w) * 0xBF58476D1CE4E5B9) & MASK64
    state = h
    for i in range(n - 1):
        state = (state + GAMMA) & MASK64
        r = mix64(state)
        j = i + (((r >> 32) * (n - i)) >> 32)
        c[i], c[j] = c[j], c[i]
    return c


def ordered(row: Iterable[int], seed: int | None) -> list[int]:
    c = members(row)
    return c if seed is None else shuffle(c, seed)


def ships(
    row: Iterable[int],
    me: int | None,
    known_down: Iterable[int] = (),
    *,
    seed: int | None = None,
    local_nodes: Iterable[int] | None = None,
    flags: int = 0,
    rebuilding: Iterable[int] | None = None,
) -> bool:
    """Does node ``me`` ship the record with copyset ``row``?"""
    c = members(row)
    down = set(known_down)
    if flags & FLAG_DRAINED:  # 1
        return False
    rebuilding = set(rebuilding or ())
    if rebuilding and not rebuilding.intersection(c):  # 2
        return False
    if flags & (FLAG_HOLE | FLAG_BRIDGE):  # 3
        return True
    if me is None:  # 4
        return True
    if seed is not None:  # 5
        c = shuffle(c, seed)
    # A node that sees itself in the known-down list acts as if it were not in it.
    down.discard(me)
    if local_nodes is not None:  # 6
        local = set(local_nodes)
        for node in c:
            if node in local and node not in down:
                return node == me
    for node in c:  # 7
        if node not in down:
            return node == me
    return True  # 8


def ship_mask(
    copysets, me, known_down=(), *, seed=None, local_nodes=None, flags=None, rebuilding=None
) -> list[bool]:
    """``ships`` for every row."""
    rows = [list(r) for r in copysets]
    fl = [0] * len(rows) if flags is None else [int(f) for f in flags]
    kd = list(known_down)
    return [
        ships(r, me, kd, seed=seed, local_nodes=local_nodes, flags=f, rebuilding=rebuilding)
        for r, f in zip(rows, fl, strict=True)
    ]


def first_eligible(copysets, known_down=(), *, seed=None, local_nodes=None) -> list[int]:
    """The node the reader expects to ship each record; -1 if every member is down."""
    down = set(known_down)
    local = None if local_nodes is None else set(local_nodes)
    out = []
    for row in copysets:
        c = ordered(row, seed)
        pick = -1
        if local is not None:
            pick = next((x for x in c if x in local and x not in down), -1)
        if pick < 0:
            pick = next((x for x in c if x not in down), -1)
        out.append(pick)
    return out


def shuffle_copysets(copysets, seed) -> list[list[int]]:
    """Shuffled members of each row, padded with -1 to the row's width."""
    out = []
    for row in copysets:
        row = list(row)
        c = shuffle(members(row), seed)
        out.append(c + [-1] * (len(row) - len(c)))
    return out
