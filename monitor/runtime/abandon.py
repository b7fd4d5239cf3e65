"""A judge call must not hold a worker's shutdown: abandon it and put its record back, to be judged again.

faust's ``stream_wait_empty`` (on by default) makes ``App.stop`` wait until every event in flight is
acknowledged, with no time limit, so a SIGTERM would wait for the current judge call: minutes with a local
model (``judge_profile=local``), past Kubernetes' grace period, then SIGKILL. Turning the wait off is no fix:
faust's stream iterator acknowledges a cancelled event, and its judgement would be lost.

So the judge agent races each call against the app stopping. When the app stops first, the call is cancelled
(its HTTP request is closed), the record goes back on the judge topic (through the checkpoint: on the broker
*before* its offset can be committed), and the event is then acknowledged as usual: the next owner of
the partition judges it again, and the score is deduplicated like any redelivery.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
POLL_S = 0.5  # how soon a stopping app is noticed; faust's wait_empty itself polls once a second


async def until_stopping(app: Any) -> None:
    """Return once ``app`` (a faust App: a mode Service) has begun to stop."""
    while not app.should_stop:
        await asyncio.sleep(POLL_S)


async def unless_stopping(app: Any, work: Coroutine[Any, Any, T], requeue: Callable[[], Awaitable[object]]) -> T | None:
    """``work``'s result; or, if ``app`` begins to stop first, None after cancelling ``work`` and ``requeue``."""
    call = asyncio.ensure_future(work)
    stopping = asyncio.ensure_future(until_stopping(app))
    try:
        await asyncio.wait({call, stopping}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:  # the agent itself is cancelled: so is its call
        call.cancel()
        raise
    finally:
        stopping.cancel()
    if call.done():
        return call.result()
    call.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await call
    await requeue()
    return None
