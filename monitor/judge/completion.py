"""What a chat completion is and how a response is read: usage, cost, token bounds, Retry-After.

Plain functions and records with no client state, so budget planning (``distill.rubrics.learn``) and the
response cache share them with :class:`monitor.judge.client.JudgeClient` without building one.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # httpx (~0.04 s of CPU, rich included) is imported with the openai client, not the worker
    import httpx


@dataclass(frozen=True)
class Usage:
    prompt: int = 0
    completion: int = 0
    cached: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.prompt + other.prompt, self.completion + other.completion, self.cached + other.cached)

    def as_dict(self) -> dict[str, int]:
        return {"prompt": self.prompt, "completion": self.completion, "cached": self.cached}


@dataclass(frozen=True)
class Completion:
    """One successful chat completion: the text and what it cost."""

    text: str
    model: str  # the model (or Azure deployment) asked for
    finish_reason: str | None
    usage: Usage
    cost_usd: float
    latency_s: float
    response_model: str | None = None  # what the endpoint reports, e.g. a dated version
    structured: bool = False  # a response_format (a JSON schema or json_object) was sent and accepted
    top_logprobs: list[list[tuple[str, float]]] = field(default_factory=list)  # per output token

    @property
    def cut_off(self) -> bool:
        """The answer stopped at the output limit: a prefix of what the model meant, not an answer."""
        return self.finish_reason == "length"


_MESSAGE_OVERHEAD = 8  # role and delimiter tokens per message (4 in OpenAI's chat format)


def prompt_bound(messages: list[dict[str, str]], response_format: dict[str, Any] | None = None) -> int:
    """An upper bound on prompt tokens without a tokenizer: every BPE token covers at least one byte.

    A JSON-schema ``response_format`` is added to the prompt by the server, so its bytes count too.
    """
    content = sum(len((m.get("content") or "").encode("utf-8")) + _MESSAGE_OVERHEAD for m in messages)
    schema = len(json.dumps(response_format).encode("utf-8")) if response_format is not None else 0
    return content + schema + _MESSAGE_OVERHEAD


estimate_tokens = prompt_bound  # the old name


def price_for(model: str, prices: dict[str, tuple[float, float]]) -> tuple[float, float] | None:
    """USD per 1M (input, output) tokens: exact name, else the longest configured prefix."""
    if model in prices:
        return prices[model]
    matches = [name for name in prices if model.startswith(name)]
    return prices[max(matches, key=len)] if matches else None


def retry_after(headers: httpx.Headers | Any) -> float | None:
    """Seconds the server asks us to wait: ``retry-after-ms``, ``retry-after`` seconds or HTTP date."""
    try:
        if (ms := headers.get("retry-after-ms")) is not None:
            return max(0.0, float(ms) / 1000.0)
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError, AttributeError):
        return None


class BadResponse(Exception):
    """A 200 response that is not a chat completion."""


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def reported_usage(response: Any) -> Usage | None:
    """Reported usage, or None when it is missing or malformed (the caller then books its bound)."""
    usage = getattr(response, "usage", None)
    prompt = _count(getattr(usage, "prompt_tokens", None))
    completion = _count(getattr(usage, "completion_tokens", None))
    if prompt is None or completion is None:
        return None
    cached = _count(getattr(getattr(usage, "prompt_tokens_details", None), "cached_tokens", None)) or 0
    return Usage(prompt=prompt, completion=completion, cached=min(cached, prompt))


def choice_logprobs(choice: Any) -> list[list[tuple[str, float]]]:
    content = getattr(getattr(choice, "logprobs", None), "content", None) or []
    out = []
    for token in content:
        alternatives = [  # log-probabilities are <= 0; clamp what a broken server sends
            (str(t.token), min(0.0, float(t.logprob)))
            for t in (token.top_logprobs or [])
            if math.isfinite(float(t.logprob))
        ]
        out.append(alternatives or [(str(token.token), min(0.0, float(token.logprob)))])
    return out
