"""Typed access to faust's batch reader: ``noack_take`` yields lists of events, but faust declares it on
``Stream`` only (``StreamT``, what an agent receives, lacks it) and types its items as values. One place says
what they really are."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, cast

import faust
from faust.types import EventT


def unacked_event_batches(stream: faust.StreamT[Any], size: int, *,
                          within: float) -> AsyncIterator[list[EventT[Any]]]:
    """Batches of events the caller acknowledges itself (``await stream.ack(event)``), once they are safe."""
    return cast(AsyncIterator[list[EventT[Any]]], cast(Any, stream).noack_take(size, within=within))
