"""A bound on how much of a judge's HTTP answer is read: no answer is parsed that is larger than the cap.

Without it a judge answer padded to 60 MB is read, parsed and kept (RSS 395 -> 1,065 MB). The
judge's HTTP client gets two event hooks: requests ask for ``Accept-Encoding: identity`` (so the bytes on
the wire are the bytes parsed), and every response is refused when its ``Content-Length`` is above
``judge_max_answer_bytes``, or, without one (chunked), as soon as more than that has been read. The
openai client is never handed the rest. Error answers are capped too (their body names the refusal).
Tokens are capped separately, on the usage the server reports (:meth:`JudgeClient._record`).
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator
from functools import cache
from typing import Any

from monitor.contracts.errors import JudgeError


class AnswerTooLarge(JudgeError):
    """The judge's answer is larger than the configured cap: refused unread, dead-lettered, never retried."""

    reason = "judge_answer_too_large"

    def __init__(self, detail: str, *, limit: str) -> None:
        super().__init__(detail)
        self.limit = limit  # "bytes" or "tokens": the counter's label


def _too_large(size: str, cap: int) -> AnswerTooLarge:
    return AnswerTooLarge(f"the judge endpoint's answer is {size} bytes, more than judge_max_answer_bytes={cap}; "
                          "refused unread (CONVMON_JUDGE_MAX_ANSWER_BYTES)", limit="bytes")


@cache
def _capped_stream(base: type) -> type:
    """A body stream of the client's own library (httpx or httpx2 checks the base class) that raises
    :class:`AnswerTooLarge` once more than ``cap`` bytes have come."""

    class CappedStream(base):  # type: ignore[misc]
        def __init__(self, inner: Any, cap: int) -> None:
            self.inner = inner
            self.cap = cap

        async def __aiter__(self) -> AsyncIterator[bytes]:
            seen = 0
            async for chunk in self.inner:
                seen += len(chunk)
                if seen > self.cap:
                    raise _too_large(f"over {self.cap}", self.cap)
                yield chunk

        async def aclose(self) -> None:
            await self.inner.aclose()

    return CappedStream


def cap_answers(http_client: Any, cap: int) -> None:
    """Add the two hooks to an ``httpx`` / ``httpx2`` ``AsyncClient`` (the openai client's transport)."""

    async def identity(request: Any) -> None:
        request.headers["Accept-Encoding"] = "identity"

    async def check(response: Any) -> None:
        length = response.headers.get("content-length", "")
        if length.isdigit() and int(length) > cap:
            await response.aclose()
            raise _too_large(length, cap)
        library = importlib.import_module(type(response).__module__.split(".")[0])  # httpx or httpx2
        response.stream = _capped_stream(library.AsyncByteStream)(response.stream, cap)

    hooks = http_client.event_hooks
    http_client.event_hooks = {"request": [*hooks.get("request", []), identity],
                               "response": [*hooks.get("response", []), check]}
