"""Typed access to faust's batch readers: ``take_events`` and ``noack_take`` yield lists of events, but
faust declares them on ``Stream`` only (``StreamT``, what an agent receives, lacks them) and types
``noack_take``'s items as values. One place says what they really are."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, cast

import faust
from faust.types import EventT


def event_batches(stream: faust.StreamT[Any], size: int, *, within: float) -> AsyncIterator[list[EventT[Any]]]:
    """Batches of events (acknowledged when the next batch is asked for)."""
    return cast(AsyncIterator[list[EventT[Any]]], cast(Any, stream).take_events(size, within=within))


def unacked_event_batches(stream: faust.StreamT[Any], size: int, *,
                          within: float) -> AsyncIterator[list[EventT[Any]]]:
    """Batches of events the caller acknowledges itself (``await stream.ack(event)``), once they are safe."""
    return cast(AsyncIterator[list[EventT[Any]]], cast(Any, stream).noack_take(size, within=within))
