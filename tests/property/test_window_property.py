"""ldcore.window.Window against the dict-based reference (tests/reference/window.py):
random sequences of inserts, pops, advances (small steps, epoch jumps, past LSN_MAX) and
rewinds, compared after every step.  Small windows wrap their ring often; large ones
(past the slots a window allocates at first) grow their ring as LSNs land farther out."""

import numpy as np
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from ldcore.window import INITIAL_SLOTS, Window
from tests.reference.window import Window as RefWindow

LSN_MAX = 2**64 - 1
PAST_END = 2**64

HEADS = st.one_of(
    st.integers(0, 40),
    st.sampled_from([2**32 - 3, 2**32, (5 << 32) | 1, 2**63, LSN_MAX - 20, LSN_MAX - 1]),
    st.integers(LSN_MAX - 12, PAST_END),
)
HANDLES = st.integers(0, 2**63 - 1)
CAPACITIES = st.one_of(st.integers(1, 9), st.integers(INITIAL_SLOTS - 2, 4 * INITIAL_SLOTS))


class WindowMachine(RuleBasedStateMachine):
    @initialize(head=HEADS, capacity=CAPACITIES)
    def start(self, head, capacity):
        self.w = Window(head, capacity)
        self.ref = RefWindow(head, capacity)

    def _lsn(self, data):
        """An LSN around the window: a little below head to a little past its end."""
        off = data.draw(st.integers(-3, self.ref.capacity + 2))
        # Clamped rather than assumed: near 2**64 most offsets would be rejected.
        return min(max(self.ref.head + off, 0), LSN_MAX)

    @rule(handle=HANDLES, data=st.data())
    def insert(self, handle, data):
        lsn = self._lsn(data)
        assert self.w.insert(lsn, handle) == self.ref.insert(lsn, handle)

    @rule(n=st.integers(0, 12), data=st.data())
    def insert_many(self, n, data):
        lsns = [self._lsn(data) for _ in range(n)]
        handles = data.draw(st.lists(HANDLES, min_size=len(lsns), max_size=len(lsns)))
        codes = self.w.insert_many(np.array(lsns, dtype=np.uint64), np.array(handles, np.int64))
        assert codes.tolist() == self.ref.insert_many(lsns, handles)

    @rule()
    def pop_ready(self):
        lsns, handles = self.w.pop_ready()
        assert (lsns.tolist(), handles.tolist()) == self.ref.pop_ready()

    @rule(
        step=st.one_of(
            st.integers(0, 12),
            st.integers(INITIAL_SLOTS - 2, 4 * INITIAL_SLOTS + 2),
            st.sampled_from([2**32, 2**32 + 5, 2**40]),
            st.just("past_end"),
        )
    )
    def advance(self, step):
        target = PAST_END if step == "past_end" else min(self.ref.head + step, PAST_END)
        lsns, handles = self.w.advance(target)
        assert (lsns.tolist(), handles.tolist()) == self.ref.advance(target)

    @rule(head=HEADS)
    def clear(self, head):
        self.w.clear(head)
        self.ref.clear(head)

    @rule(handle=HANDLES, data=st.data())
    def replace(self, handle, data):
        lsn = self._lsn(data)
        assert self.w.replace(lsn, handle) == self.ref.replace(lsn, handle)

    @rule(data=st.data())
    def get(self, data):
        lsn = self._lsn(data)
        assert self.w.get(lsn) == self.ref.get(lsn)

    @invariant()
    def same_state(self):
        assert self.w.head == self.ref.head
        assert len(self.w) == len(self.ref)
        assert self.w.first_filled() == self.ref.first_filled()
        assert min(self.ref.capacity, INITIAL_SLOTS) <= self.w.allocated <= self.ref.capacity
        for lsn in range(self.ref.head - 1, self.ref.head + self.ref.capacity + 1):
            if 0 <= lsn <= LSN_MAX:
                assert self.w.get(lsn) == self.ref.get(lsn)


WindowMachine.TestCase.settings = settings(max_examples=300, stateful_step_count=40, deadline=None)
TestWindow = WindowMachine.TestCase
