"""Concurrent judge calls that fail together: the first fatal error cancels the others.

``asyncio.gather`` raises the first error but leaves the sibling calls running; they keep retrying
(and logging "connection error, retry") after the caller has given up and closed the client.
:func:`gather_or_cancel` runs them in a ``TaskGroup``, so by the time the error reaches the caller
every sibling is cancelled and finished, and re-raises that error itself, not an ``ExceptionGroup``,
so callers catch ``JudgeError`` / ``JudgeUnavailable`` as before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterable
from typing import Any, TypeVar

T = TypeVar("T")


async def gather_or_cancel(calls: Iterable[Coroutine[Any, Any, T]]) -> list[T]:
    """Every call's result in order; on the first failure, cancel the rest and raise that failure."""
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(call) for call in calls]
    except BaseExceptionGroup as failed:
        first: BaseException = failed
        while isinstance(first, BaseExceptionGroup):
            first = first.exceptions[0]
        raise first from first.__cause__
    return [task.result() for task in tasks]
