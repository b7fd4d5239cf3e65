"""The worker's consumer delivers a record in place when nothing has to wait, and through faust's race against
a suspended flow when something does (runtime/eager.py)."""

from __future__ import annotations

import asyncio
import warnings
from typing import Any

import pytest

from monitor.runtime.app import create_app
from monitor.runtime.eager import EagerConsumer, resume


def consumer(make_settings) -> Any:
    """The worker's consumer; made inside the test's event loop, which its events then use."""
    app, _ = create_app(make_settings(broker_url="kafka://127.0.0.1:1"))
    assert isinstance(app.consumer, EagerConsumer)
    return app.consumer


async def deliver(c: Any, callback: Any) -> Any:
    """The drain loop's call."""
    return await c.wait_first(callback, c.suspend_flow.wait())


def test_a_delivery_that_never_waits_makes_no_task(make_settings) -> None:
    delivered: list[str] = []

    async def callback(message: str) -> None:
        delivered.append(message)

    async def main() -> tuple[Any, int]:
        c = consumer(make_settings)
        tasks: list[int] = []
        loop = asyncio.get_running_loop()
        loop.set_task_factory(lambda lp, coro, **kw: (tasks.append(1), asyncio.Task(coro, loop=lp, **kw))[1])
        result = await deliver(c, callback("m1"))
        loop.set_task_factory(None)
        return result, len(tasks)

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the flow coroutine is closed, not left "never awaited"
        result, tasks = asyncio.run(main())
    assert delivered == ["m1"]
    assert tasks == 0
    assert not result.stopped and result.results == [None]


def test_a_delivery_that_waits_goes_on_as_a_task_and_finishes(make_settings) -> None:
    delivered: list[str] = []

    async def main() -> Any:
        c = consumer(make_settings)
        room = asyncio.get_running_loop().create_future()

        async def callback(message: str) -> str:
            await room  # a full stream queue
            await asyncio.sleep(0)  # a bare yield on the way
            delivered.append(message)
            return message

        asyncio.get_running_loop().call_later(0.05, room.set_result, None)
        return await deliver(c, callback("m1"))

    result = asyncio.run(main())
    assert delivered == ["m1"]
    assert not result.stopped and "m1" in result.results


def test_a_waiting_delivery_is_abandoned_when_flow_is_suspended(make_settings) -> None:
    """A rebalance while the queue is full: faust's race, unchanged (the callback is cancelled)."""
    seen: list[str] = []

    async def main() -> Any:
        c = consumer(make_settings)

        async def callback(message: str) -> None:
            try:
                await asyncio.Event().wait()  # never room
            except asyncio.CancelledError:
                seen.append("cancelled")
                raise

        asyncio.get_running_loop().call_later(0.05, c.stop_flow)
        result = await deliver(c, callback("m1"))
        await asyncio.sleep(0)  # the cancelled callback's task runs its cleanup
        return result

    result = asyncio.run(main())
    assert seen == ["cancelled"]
    assert len(result.done) == 1 and not result.stopped


def test_errors_reach_the_drain_loop_whether_or_not_the_delivery_waited(make_settings) -> None:
    async def at_once(message: str) -> None:
        raise ValueError(message)

    async def later(message: str) -> None:
        await asyncio.sleep(0.01)
        raise KeyError(message)

    async def main(callback: Any) -> Any:
        return await deliver(consumer(make_settings), callback)

    with pytest.raises(ValueError, match="m1"):
        asyncio.run(main(at_once("m1")))
    with pytest.raises(KeyError, match="m2"):
        asyncio.run(main(later("m2")))


def test_while_flow_is_suspended_faust_decides(make_settings) -> None:
    """Suspended flow: faust's own path, where the flow event wins and a delivery that has to wait is dropped
    (the partitions are sought back to their committed offsets after the rebalance)."""
    ran: list[str] = []

    async def main() -> Any:
        c = consumer(make_settings)
        c.stop_flow()

        async def callback(message: str) -> None:
            await asyncio.sleep(0.01)
            ran.append(message)

        return await deliver(c, callback("m1"))

    result = asyncio.run(main())
    assert ran == [] and len(result.done) == 1


def test_resume_passes_sends_and_throws_to_the_coroutine() -> None:
    async def waits_twice() -> int:
        loop = asyncio.get_running_loop()
        first: asyncio.Future[int] = loop.create_future()
        loop.call_soon(first.set_result, 1)
        a = await first
        second: asyncio.Future[int] = loop.create_future()
        loop.call_soon(second.set_exception, RuntimeError("x"))
        try:
            await second
        except RuntimeError:
            return a + 10
        return a

    async def main() -> int:
        coro = waits_twice()
        waiting_on = coro.send(None)

        async def rest() -> int:
            return await resume(coro, waiting_on)

        return await asyncio.ensure_future(rest())

    assert asyncio.run(main()) == 11
