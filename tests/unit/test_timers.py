"""DeadlineTimers: many keys' deadlines on one loop timer, on uvloop and asyncio's loop."""

from __future__ import annotations

import asyncio

import pytest

from logdevice.client.net.loop import new_loop
from logdevice.timers import DeadlineTimers

pytest.importorskip("uvloop")

MS = 0.001


def run(kind: str, body) -> None:
    loop = new_loop(kind)
    try:
        loop.run_until_complete(asyncio.wait_for(body(loop), timeout=10))
    finally:
        loop.close()


@pytest.fixture(params=["uvloop", "asyncio"])
def kind(request) -> str:
    return request.param


def test_keys_fire_once_each_in_deadline_order_and_never_before_it(kind):
    async def body(loop):
        fired: list[tuple[str, float]] = []
        done = loop.create_future()
        t0 = loop.time()
        deadlines = {"c": t0 + 30 * MS, "a": t0 + 10 * MS, "b": t0 + 20 * MS}

        def fire(key):
            fired.append((key, loop.time()))
            if len(fired) == 3:
                done.set_result(None)

        timers = DeadlineTimers(loop, fire)
        for key, when in deadlines.items():
            timers.arm(key, when)
        assert len(timers) == 3 and timers.deadline("a") == deadlines["a"]
        await done
        assert [k for k, _ in fired] == ["a", "b", "c"]
        # uvloop counts whole milliseconds: a timer may run up to one early
        assert all(at >= deadlines[k] - MS for k, at in fired)
        assert len(timers) == 0 and timers.deadline("a") is None

    run(kind, body)


def test_a_later_deadline_keeps_the_sooner_one_and_cancel_forgets_a_key(kind):
    async def body(loop):
        fired: list[str] = []
        done = loop.create_future()

        def fire(key):
            fired.append(key)
            if key == "last":
                done.set_result(None)

        timers = DeadlineTimers(loop, fire)
        t0 = loop.time()
        timers.arm("soon", t0 + 10 * MS)
        timers.arm("soon", t0 + 500 * MS)  # keeps 10 ms
        assert timers.deadline("soon") == t0 + 10 * MS
        timers.arm("moved", t0 + 500 * MS)
        timers.arm("moved", t0 + 15 * MS)  # comes sooner
        timers.arm("gone", t0 + 5 * MS)
        timers.cancel("gone")
        timers.arm("last", t0 + 40 * MS)
        await done
        assert fired == ["soon", "moved", "last"]

    run(kind, body)


def test_a_key_armed_while_keys_fire_does_not_delay_an_earlier_deadline(kind):
    async def body(loop):
        fired: list[tuple[str, float]] = []
        done = loop.create_future()
        t0 = loop.time()

        def fire(key):
            fired.append((key, loop.time()))
            if key == "first":  # arms a late key while "second" is still waiting
                timers.arm("late", t0 + 2.0)
            if key == "second":
                done.set_result(None)

        timers = DeadlineTimers(loop, fire)
        timers.arm("first", t0 + 10 * MS)
        timers.arm("second", t0 + 50 * MS)
        await done
        assert [k for k, _ in fired] == ["first", "second"]
        assert fired[1][1] < t0 + 1.0  # not held until the late key's deadline
        assert timers.deadline("late") == t0 + 2.0
        timers.close()
        assert len(timers) == 0

    run(kind, body)


def test_keys_moved_sooner_many_times_each_fire_once(kind):
    async def body(loop):
        fired: list[int] = []
        done = loop.create_future()

        def fire(key):
            fired.append(key)
            if len(fired) == 100:
                done.set_result(None)

        timers = DeadlineTimers(loop, fire)
        t0 = loop.time()
        for step in range(50):  # every key moved sooner 50 times (the heap compacts)
            for key in range(100):
                timers.arm(key, t0 + (0.5 - step * 0.0095) + key * 0.0001)
        assert len(timers) == 100
        await done
        assert fired == list(range(100)) and len(timers) == 0

    run(kind, body)
