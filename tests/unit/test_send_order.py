"""SendOrder: a blob's attempt is written only when no earlier blob of the log waits to
be written; one that comes back for another try holds the later ones again."""

from __future__ import annotations

import asyncio

from logdevice.client.write.send_order import SendOrder


async def _written_in_order(order: SendOrder, tickets: list[int], log: list[int],
                            delays: dict[int, float]) -> None:
    async def send(t: int) -> None:
        await asyncio.sleep(delays.get(t, 0))  # held up before writing (connecting, ...)
        await order.turn(t)
        log.append(t)
        order.written(t)

    await asyncio.gather(*(send(t) for t in tickets))


def test_later_blobs_wait_for_an_earlier_one_held_up():
    order = SendOrder()
    tickets = [order.take() for _ in range(5)]
    log: list[int] = []
    asyncio.run(_written_in_order(order, tickets, log, {0: 0.02, 2: 0.01}))
    assert log == tickets


def test_a_blob_back_for_another_try_holds_the_later_unwritten_ones():
    async def main() -> list[str]:
        order = SendOrder()
        a, b, c = order.take(), order.take(), order.take()
        events: list[str] = []
        await order.turn(a)
        order.written(a)
        await order.turn(b)
        order.written(b)  # a and b on the wire; c not yet
        order.unwritten(a)  # a was refused: it goes again

        async def send_c() -> None:
            await order.turn(c)
            events.append("c")

        task = asyncio.ensure_future(send_c())
        await asyncio.sleep(0)
        events.append("a again")
        order.written(a)
        await asyncio.wait_for(task, 1)
        order.done(a)
        order.done(b)
        order.done(c)
        assert order.active == 0
        return events

    assert asyncio.run(main()) == ["a again", "c"]


def test_done_lets_the_next_go():
    async def main() -> bool:
        order = SendOrder()
        a, b = order.take(), order.take()
        task = asyncio.ensure_future(order.turn(b))
        await asyncio.sleep(0)
        assert not task.done()
        order.done(a)  # failed before it was ever written
        await asyncio.wait_for(task, 1)
        return True

    assert asyncio.run(main())
