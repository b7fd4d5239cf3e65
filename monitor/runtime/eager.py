"""A consumed record reaches its stream without four tasks when nothing has to wait (#18 item 9).

faust's fetcher hands each record to the streams with ``wait_first(callback(message),
suspend_flow.wait())`` (``Consumer._drain_messages``): so that a rebalance can abandon a delivery that
waits for room in a full stream queue. That call creates four tasks (the callback, the flow event, the
consumer's stopped and crashed events) and an ``asyncio.wait`` per record: in a prototype it was most
of faust's per-record cost, and awaiting the callback directly cut the CPU per event 2.35×.

Almost every delivery needs none of it: the callback decodes the record and puts it into a queue that
has room, without ever suspending. :class:`EagerConsumer` starts the callback in place (what Python
3.12's eager tasks do): when it finishes without suspending, that is the whole delivery. When it does
suspend (a full queue, flow control, the producer buffer), the started callback goes on as a task and
faust's ``wait_first`` races it against a suspended flow exactly as before, so rebalances behave as
they did. While flow is suspended, or once the consumer stopped or crashed, faust's path runs unchanged.
"""

from __future__ import annotations

import types
from collections.abc import Coroutine, Generator
from typing import Any

from faust.transport.drivers import aiokafka as faust_aiokafka
from mode.services import WaitResults


@types.coroutine
def resume(coro: Coroutine[Any, Any, Any], waiting_on: Any) -> Generator[Any, Any, Any]:
    """The rest of a coroutine that was stepped by hand and suspended on ``waiting_on``, as an awaitable
    a task can run: what the coroutine waits on is passed up to the task, and what the task sends or
    throws back goes down to the coroutine, until it returns."""
    while True:
        try:
            sent = yield waiting_on
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:  # a cancellation or the awaited future's error, thrown in by the task
            try:
                waiting_on = coro.throw(exc)
            except StopIteration as done:
                return done.value
        else:
            try:
                waiting_on = coro.send(sent)
            except StopIteration as done:
                return done.value


async def finish(coro: Coroutine[Any, Any, Any], waiting_on: Any) -> Any:
    return await resume(coro, waiting_on)


class EagerConsumer(faust_aiokafka.Consumer):
    """faust's aiokafka consumer that delivers a record in place when its stream queue has room."""

    async def wait_first(self, *coros: Any, timeout: Any = None) -> WaitResults:
        # The fetcher's drain loop is this consumer's only caller: (callback(message), suspend_flow.wait()).
        if (len(coros) != 2 or timeout is not None or not all(isinstance(c, types.CoroutineType) for c in coros)
                or self.suspend_flow.is_set() or self.should_stop or self._crashed.is_set()):
            return await super().wait_first(*coros, timeout=timeout)
        callback, flow = coros
        try:
            waiting_on = callback.send(None)
        except BaseException as exc:
            flow.close()  # never started: nothing waits on it
            if isinstance(exc, StopIteration):  # delivered without suspending: the common case
                return WaitResults([callback], [exc.value], False)
            raise
        return await super().wait_first(finish(callback, waiting_on), flow)
