"""Every LLM call of rubric learning, cached on disk by content hash, so an interrupted run resumes.

:class:`CachingClient` has the signature of :meth:`monitor.judge.JudgeClient.complete`, so the
judge's own scorers (SPUR, Likert) and the repair loop run through it unchanged; retries, rate
limits and the daily budget stay in the wrapped ``JudgeClient``. The key is the SHA-256 of the
request (model, messages, output limits, format, temperature) with the conversation block's random
nonce replaced by a constant: the nonce protects the prompt, it must not defeat the cache.

Entries are JSON files ``<root>/<2 hex>/<64 hex>.json`` holding only the answer text, usage and
cost, never the prompt (conversation text stays out of the cache). Writes are atomic.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from monitor.contracts.errors import ConfigError
from monitor.judge.client import JudgeClient
from monitor.judge.completion import Completion, Usage

log = logging.getLogger(__name__)
_NONCE = re.compile(r"<<<CONVERSATION (\w+)>>>")


def normalise_nonces(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    """The messages with every conversation-block nonce replaced by ``NONCE``.

    >>> normalise_nonces([{"role": "user", "content": "(nonce ab12)\\n<<<CONVERSATION ab12>>>"}])
    [{'role': 'user', 'content': '(nonce NONCE)\\n<<<CONVERSATION NONCE>>>'}]
    """
    nonces = {m for msg in messages for m in _NONCE.findall(str(msg.get("content") or ""))}
    out = []
    for msg in messages:
        content = str(msg.get("content") or "")
        for nonce in nonces:
            content = content.replace(nonce, "NONCE")
        out.append({**msg, "content": content})
    return out


def content_key(payload: dict[str, Any]) -> str:
    """SHA-256 of the canonical JSON of ``payload``."""
    return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


class ResponseCache:
    """A directory of JSON answers keyed by content hash."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        try:
            entry: dict[str, Any] = json.loads(self._path(key).read_text(encoding="utf-8"))
            return entry
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return None  # a corrupt entry is a miss; the next put replaces it

    def __contains__(self, key: str) -> bool:
        return self._path(key).is_file()

    def put(self, key: str, value: dict[str, Any]) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(value, handle)
        os.replace(tmp, path)


@dataclass
class CallStats:
    """Calls made (misses) and answered from the cache (hits), with the spend of the misses."""

    calls: int = 0
    hits: int = 0
    cost_usd: float = 0.0
    usage: Usage = field(default_factory=Usage)
    cut_off: int = 0  # answers that stopped at the output limit (each retried larger or dropped, never used)

    def as_dict(self) -> dict[str, Any]:
        return {"calls": self.calls, "cache_hits": self.hits, "cost_usd": round(self.cost_usd, 6),
                "tokens": self.usage.as_dict(), "cut_off": self.cut_off}


class CachingClient:
    """``JudgeClient.complete`` with a content-hash cache in front; ``client=None`` is cache-only."""

    def __init__(self, client: JudgeClient | None, cache: ResponseCache, *, temperature: float = 0.0,
                 default_model: str = "") -> None:
        self.client = client
        self.cache = cache
        self.temperature = temperature
        self.default_model = client.settings.judge_model if client is not None else default_model
        self.stats = CallStats()

    def key(self, messages: list[dict[str, str]], *, model: str | None = None, max_tokens: int | None = None,
            response_format: dict[str, Any] | None = None, logprobs: bool = False) -> str:
        return content_key({
            "model": model or self.default_model, "messages": normalise_nonces(messages), "max_tokens": max_tokens,
            "response_format": response_format, "logprobs": logprobs, "temperature": self.temperature,
        })

    async def complete(
        self,
        messages: list[dict[str, str]],
        *,
        model: str | None = None,
        response_format: dict[str, Any] | None = None,
        plain_format: dict[str, Any] | None = None,
        logprobs: bool = False,
        top_logprobs: int | None = None,
        max_tokens: int | None = None,
    ) -> Completion:
        model = model or self.default_model
        key = self.key(messages, model=model, max_tokens=max_tokens, response_format=response_format,
                       logprobs=logprobs)
        hit = self.cache.get(key)
        if hit is not None:
            self.stats.hits += 1
            return Completion(text=hit["text"], model=model, finish_reason=hit.get("finish_reason"), usage=Usage(),
                              cost_usd=0.0, latency_s=0.0, structured=bool(hit.get("structured")),
                              top_logprobs=[[(str(t), float(p)) for t, p in token]
                                            for token in hit.get("top_logprobs") or []])
        if self.client is None:
            raise ConfigError("an LLM call is not in the cache and no judge endpoint is configured: set "
                              "OPENAI_API_KEY / OPENAI_BASE_URL (or CONVMON_OPENAI_*)")
        completion = await self.client.complete(messages, model=model, response_format=response_format,
                                                plain_format=plain_format, logprobs=logprobs,
                                                top_logprobs=top_logprobs, max_tokens=max_tokens)
        self.stats.calls += 1
        self.stats.cost_usd += completion.cost_usd
        self.stats.usage += completion.usage
        if not completion.cut_off:  # a cut-off answer is not worth replaying
            self.cache.put(key, {"text": completion.text, "finish_reason": completion.finish_reason,
                                 "structured": completion.structured, "usage": completion.usage.as_dict(),
                                 "top_logprobs": [[list(alt) for alt in token] for token in completion.top_logprobs],
                                 "cost_usd": completion.cost_usd, "model": completion.response_model or model})
        return completion

    async def complete_whole(self, messages: list[dict[str, str]], *, model: str | None = None, max_tokens: int,
                             attempts: int = 2) -> Completion | None:
        """An answer that was not cut off at the output limit, or None.

        A cut-off answer (``finish_reason=length``) is a prefix of what the model meant: a reason list
        that ends in "The use", a rubric whose last item is "Th". It is asked again with twice the limit,
        ``attempts`` times in all; None tells the caller to count the answer as dropped.
        """
        limit = max_tokens
        for attempt in range(1, attempts + 1):
            completion = await self.complete(messages, model=model, max_tokens=limit)
            if not completion.cut_off:
                return completion
            self.stats.cut_off += 1
            log.warning("an answer stopped at the output limit of %d tokens; %s", limit,
                        f"asking again with {2 * limit}" if attempt < attempts else "dropping it")
            limit *= 2
        return None
