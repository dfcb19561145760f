"""AppendBatcher's batching policy: which appends travel together, and when.

The batcher runs on a real client loop; the stand-in for ``ClientCore`` below records
the frames it is asked to send and answers each when the test says so, so every step
is deterministic.
"""

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logdevice.client.net.loop import LoopThread
from logdevice.client.settings import ClientSettings
from logdevice.client.write.append_batcher import FRAMES_IN_FLIGHT, AppendBatcher
from logdevice.client.write.append_slots import AppendSlots
from logdevice.errors import E, LogDeviceError
from tests.waiting import async_wait_until

PAYLOAD = b"x" * 100


class FrameRecorder:
    """What the batcher needs of ClientCore: settings, stats, the in-flight limit, and
    ``append_batches``, which records each frame (and the logs handed over together, in
    ``turns``) and holds each until ``answer``."""

    def __init__(self, **settings):
        self.settings = ClientSettings(**settings)
        self.stats = {"appends_waited": 0}
        self.frames: list[list[bytes]] = []
        self.turns: list[list[int]] = []  # the logs of each append_batches call
        self._held: list[asyncio.Future] = []
        self.slots: dict[int, AppendSlots] = {}  # log -> its in-flight limit, while held
        self._next_lsn = 1

    def append_slots(self, log_id):
        if log_id not in self.slots:
            self.slots[log_id] = AppendSlots(self.settings.max_appends_in_flight)
        return self.slots[log_id]

    def release_append_slots(self, log_id, slots):
        if not slots.idle:
            return False
        if self.slots.get(log_id) is slots:
            del self.slots[log_id]
        return True

    def append_batches(self, calls):
        self.turns.append([log_id for log_id, *_ in calls])
        return [asyncio.ensure_future(self.append_batch(*call)) for call in calls]

    async def append_batch(self, log_id, payloads, checksums, timeout):
        self.frames.append(list(payloads))
        answer = asyncio.get_running_loop().create_future()
        self._held.append(answer)
        await answer
        first, self._next_lsn = self._next_lsn, self._next_lsn + len(payloads)
        return list(range(first, first + len(payloads)))

    @property
    def held(self) -> int:
        """Frames sent and not answered yet."""
        return len(self._held)

    def take_held(self, index: int) -> asyncio.Future:
        """The answer of the ``index``-th frame held, to settle out of order."""
        return self._held.pop(index)

    def answer(self, count: int = 1) -> None:
        """Let the ``count`` oldest held frames come back (called on the loop)."""
        for _ in range(count):
            self._held.pop(0).set_result(None)


@pytest.fixture
def loop():
    thread = LoopThread("test-append-batcher")
    yield thread
    thread.stop()


def settle(loop: LoopThread) -> None:
    """Wait until the loop has run what was handed to it so far, and the tasks that
    started."""
    async def a_few_turns():
        for _ in range(5):
            await asyncio.sleep(0)
    loop.run(a_few_turns, timeout=5)


def sizes(core: FrameRecorder) -> list[int]:
    return [len(frame) for frame in core.frames]


def test_appends_made_while_frames_are_in_flight_leave_together(loop):
    core = FrameRecorder()
    batcher = AppendBatcher(loop, core)
    first = batcher.submit(1, b"a", 0, 10.0)
    settle(loop)
    assert sizes(core) == [1]  # an idle log: no waiting for company
    batcher.submit(1, b"b", 0, 10.0)
    settle(loop)
    assert sizes(core) == [1, 1]
    later = [batcher.submit(1, b"c%d" % i, 0, 10.0) for i in range(5)]
    settle(loop)
    assert sizes(core) == [1] * FRAMES_IN_FLIGHT  # the log has its frames out: they queue
    loop.call_soon(core.answer)
    assert first.result(5) == 1
    settle(loop)
    assert core.frames[2] == [b"c%d" % i for i in range(5)]
    loop.call_soon(core.answer, 2)
    assert [f.result(5) for f in later] == [3, 4, 5, 6, 7]


def test_the_batches_of_several_logs_made_in_one_turn_are_handed_over_together(loop):
    core = FrameRecorder()
    batcher = AppendBatcher(loop, core)

    def burst():  # on the loop: nothing runs between these
        return [batcher.submit(log, b"to %d" % log, 0, 10.0) for log in (4, 2, 9)]

    futures = loop.run(_async, burst, timeout=5)
    settle(loop)
    assert core.turns == [[4, 2, 9]]  # one call: the core may send them in one frame
    loop.call_soon(core.answer, 3)
    assert [f.result(5) for f in futures] == [1, 2, 3]
    batcher.submit(4, b"alone", 0, 10.0)
    settle(loop)
    assert core.turns[-1] == [4]


async def _async(fn):
    return fn()


def test_an_idle_log_leaves_nothing_behind_and_its_next_append_starts_afresh(loop):
    core = FrameRecorder()
    batcher = AppendBatcher(loop, core)
    appends = [batcher.submit(log, b"x", 0, 10.0) for log in (1, 2, 3)]
    settle(loop)
    assert sorted(core.slots) == [1, 2, 3] and core.held == 3
    loop.call_soon(core.answer, 2)
    assert [f.result(5) for f in appends[:2]] == [1, 2]
    settle(loop)
    assert sorted(core.slots) == [3]  # logs 1 and 2 are idle: their slots went
    again = batcher.submit(1, b"y", 0, 10.0)
    settle(loop)
    assert sorted(core.slots) == [1, 3] and core.frames[-1] == [b"y"]
    loop.call_soon(core.answer, 2)
    assert appends[2].result(5) == 3 and again.result(5) == 4
    settle(loop)
    assert core.slots == {}


def test_what_is_left_after_a_full_frame_keeps_lingering(loop):
    # A byte limit of 250 holds two 100-byte records.  With a long linger, one record
    # waits; two more fill a frame with it; the one left over waits again for company:
    # it does not leave alone on the full frame's heels.
    core = FrameRecorder(append_linger=30.0, append_batch_bytes=250)
    batcher = AppendBatcher(loop, core)
    batcher.submit(1, PAYLOAD, 0, 100.0)
    settle(loop)
    assert sizes(core) == []
    batcher.submit(1, PAYLOAD, 0, 100.0)
    batcher.submit(1, PAYLOAD, 0, 100.0)
    settle(loop)
    assert sizes(core) == [2]
    batcher.submit(1, PAYLOAD, 0, 100.0)
    settle(loop)
    assert sizes(core) == [2]  # 200 bytes: still room in a frame
    batcher.submit(1, PAYLOAD, 0, 100.0)
    settle(loop)
    assert sizes(core) == [2, 2]


def test_a_linger_ends_by_itself_and_never_takes_more_than_half_the_timeout(loop):
    core = FrameRecorder(append_linger=60.0)
    batcher = AppendBatcher(loop, core)
    fut = batcher.submit(1, PAYLOAD, 0, 0.6)  # lingers 0.3 s, not 60

    async def first_frame():
        await async_wait_until(lambda: core.frames, 5, 0.01, "no frame went out")
        core.answer()

    loop.run(first_frame, timeout=5)
    assert fut.result(5) == 1 and sizes(core) == [1]


def test_a_frame_answered_before_an_earlier_one_keeps_its_slots_until_then(loop):
    # The sequencer acks out of LSN order but frees its window in LSN order: slots come
    # back in send order, so the client never has more records out than the window holds.
    core = FrameRecorder(max_appends_in_flight=4)
    batcher = AppendBatcher(loop, core)
    first = batcher.submit(1, b"a", 0, 10.0)
    settle(loop)
    batcher.submit(1, b"b", 0, 10.0)
    settle(loop)
    assert sizes(core) == [1, 1]
    later = [batcher.submit(1, b"c%d" % i, 0, 10.0) for i in range(4)]
    settle(loop)
    slots = core.append_slots(1)
    second = core.take_held(1)  # the second frame is answered first
    loop.call_soon(second.set_result, None)
    settle(loop)
    assert slots.used == 4  # its slot is held for the first frame: 2 left for a frame
    assert sizes(core) == [1, 1, 2]
    loop.call_soon(core.answer)  # the first frame: both frames' slots come back
    assert first.result(5) > 0
    settle(loop)
    assert sizes(core) == [1, 1, 2, 2]
    loop.call_soon(core.answer, 2)
    assert len({f.result(5) for f in later}) == 4


def test_close_fails_what_is_queued_with_the_reason(loop):
    core = FrameRecorder(append_linger=30.0)
    batcher = AppendBatcher(loop, core)
    fut = batcher.submit(1, PAYLOAD, 0, 100.0)
    settle(loop)
    batcher.close(LogDeviceError(E.SHUTDOWN, "closing"))
    with pytest.raises(LogDeviceError) as info:
        fut.result(5)
    assert info.value.status == E.SHUTDOWN
    assert sizes(core) == []


# -- the policy under random traffic ---------------------------------------------------

MAX_BYTES = 250
_step = st.one_of(
    st.tuples(st.just("submit"), st.sampled_from([1, 2]),
              st.lists(st.integers(1, 2 * MAX_BYTES // 3), min_size=1, max_size=6)),
    st.tuples(st.just("answer"), st.integers(1, 3)),
)


class Traffic(FrameRecorder):
    """A FrameRecorder that also knows, per log, every record submitted (in order) and
    how many had been submitted when each frame left."""

    def __init__(self, **settings):
        super().__init__(**settings)
        self.submitted: dict[int, list[bytes]] = {1: [], 2: []}
        self.sent: dict[int, list[tuple[int, list[bytes]]]] = {1: [], 2: []}
        self.out: dict[int, int] = {1: 0, 2: 0}  # frames in flight per log
        self.most_out = 0

    async def append_batch(self, log_id, payloads, checksums, timeout):
        self.sent[log_id].append((len(self.submitted[log_id]), list(payloads)))
        self.out[log_id] += 1
        self.most_out = max(self.most_out, self.out[log_id])
        try:
            return await super().append_batch(log_id, payloads, checksums, timeout)
        finally:
            self.out[log_id] -= 1

    def queued(self, log_id: int) -> list[bytes]:
        n = sum(len(p) for _, p in self.sent[log_id])
        return self.submitted[log_id][n:]


@settings(max_examples=80, deadline=None)
@given(steps=st.lists(_step, max_size=20), linger=st.sampled_from([0.0, 1000.0]))
def test_batches_keep_order_limits_and_linger_under_random_traffic(steps, linger):
    loop = LoopThread("test-append-batcher-traffic")
    try:
        core = Traffic(append_linger=linger, append_batch_bytes=MAX_BYTES)
        batcher = AppendBatcher(loop, core)
        counter = iter(range(10**6))

        async def run(step):
            if step[0] == "submit":
                _, log_id, sizes = step
                for size in sizes:
                    data = next(counter).to_bytes(4, "little") * (size // 4 + 1)
                    core.submitted[log_id].append(data[:size])
                    batcher.submit(log_id, data[:size], 0, 3600.0)
            else:
                core.answer(min(step[1], core.held))

        for step in steps:
            loop.run(run, step, timeout=5)
            settle(loop)
            for log_id in (1, 2):
                left = core.queued(log_id)
                full = sum(map(len, left)) >= MAX_BYTES
                if left and (linger == 0 or full):  # sendable: held back only by the limit
                    assert core.out[log_id] == FRAMES_IN_FLIGHT
        assert core.most_out <= FRAMES_IN_FLIGHT
        for log_id in (1, 2):
            frames = core.sent[log_id]
            # In order, each record once.
            assert [p for _, f in frames for p in f] == \
                core.submitted[log_id][:sum(len(f) for _, f in frames)]
            done = 0
            for known, frame in frames:
                size = sum(map(len, frame))
                assert size <= MAX_BYTES or len(frame) == 1
                done += len(frame)
                if linger:  # no partial frame left: the next record was there, and did not fit
                    nxt = core.submitted[log_id][done] if done < known else None
                    assert size >= MAX_BYTES or (nxt is not None and size + len(nxt) > MAX_BYTES)
        batcher.close(LogDeviceError(E.SHUTDOWN, "the test is over"))
    finally:
        loop.stop()
