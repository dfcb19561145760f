"""Plain-Python reference for ``ldcore.window.Window``: a dict of LSN -> handle.

Same API and results, without the ring buffer: every slot is a dict entry and every
range is a Python range, so it is obviously right and only usable for small windows
(advance() over a huge distance is fine: it filters the dict, not the range).
"""

PAST_END = 1 << 64


class Window:
    def __init__(self, head: int, capacity: int = 512):
        assert 0 <= head <= PAST_END and capacity >= 1
        self.head = head
        self.capacity = capacity
        self.slots: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self.slots)

    def _code(self, lsn: int) -> int:
        if lsn < self.head:
            return -1
        if lsn >= self.head + self.capacity:
            return -2
        return 0 if lsn in self.slots else 1

    def insert(self, lsn: int, handle: int) -> int:
        assert handle >= 0
        code = self._code(lsn)
        if code == 1:
            self.slots[lsn] = handle
        return code

    def insert_many(self, lsns, handles) -> list[int]:
        return [self.insert(int(x), int(h)) for x, h in zip(lsns, handles, strict=True)]

    def get(self, lsn: int) -> int:
        return self.slots.get(lsn, -1)

    def replace(self, lsn: int, handle: int) -> int:
        assert handle >= 0
        old = self.slots.get(lsn, -1) if self._code(lsn) == 0 else -1
        if old >= 0:
            self.slots[lsn] = handle
        return old

    def _drop_below(self, end: int) -> tuple[list[int], list[int]]:
        lsns = sorted(x for x in self.slots if x < end)
        return lsns, [self.slots.pop(x) for x in lsns]

    def pop_ready(self) -> tuple[list[int], list[int]]:
        end = self.head
        while end in self.slots:
            end += 1
        out = self._drop_below(end)
        self.head = end
        return out

    def advance(self, new_head: int) -> tuple[list[int], list[int]]:
        assert self.head <= new_head <= PAST_END
        out = self._drop_below(new_head)
        self.head = new_head
        return out

    def first_filled(self) -> int:
        return min(self.slots, default=0)

    def clear(self, new_head: int) -> None:
        self.slots.clear()
        self.head = new_head
