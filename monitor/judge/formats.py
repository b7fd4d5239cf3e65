"""Which structured output an endpoint takes, learned from how it refuses, remembered per model.

Real OpenAI-compatible servers refuse a JSON-schema ``response_format`` in different ways (see
docs/judge.md and the server modes in :mod:`monitor.tools.openai_server`):

- llama-cpp-python's ``llama_cpp.server`` validates the body with pydantic and wraps the validation
  error as **HTTP 500** ``internal_server_error`` whose message names ``response_format`` and
  ``Input should be 'text' or 'json_object'``;
- llama.cpp's ``llama-server`` answers ``response_format type must be one of "text" or "json_object"``
  or ``JSON schema conversion failed`` with **400** ``invalid_request_error`` (older builds: **500**
  ``server_error``);
- vLLM answers a schema its guided-decoding backend cannot compile with **400** ``BadRequestError``;
- FastAPI servers that keep FastAPI's own validation handler answer **422**.

So a 400 or 422 to a request carrying ``response_format``, or a 5xx whose body names
``response_format`` / ``json_schema``, steps the request one level down the ladder: the schema with
the answer rules (``anyOf`` + ``minimum``/``maximum``) -> the plain schema -> ``json_object`` (any
one JSON object: what llama-cpp-python, ``llama-server``, Ollama and vLLM take when they refuse a
schema; the prompt states the answer's shape and :mod:`monitor.judge.strict` checks it) -> free
text. A step is not a retry. A level is remembered (``convmon_judge_structured_fallback``) only once a request at it
succeeds, so a 400 that was about something else (a too-long prompt) does not switch JSON off for
good; later calls start at the remembered level and do not pay for the refusal again.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from monitor.contracts.metrics import Metrics

RULES, PLAIN, JSON_OBJECT, TEXT = 0, 1, 2, 3  # the fallback levels; the gauge's values
ANY_OBJECT: dict[str, Any] = {"type": "json_object"}
Rung = tuple[int, dict[str, Any] | None]  # (level, the response_format sent at it)
_NAMES_FORMAT = re.compile(r"response_format|json[_ ]?schema|json_object", re.I)
_SHOWN_BODY = 2000  # characters of an error body searched for a format word


def refuses_format(status: int, body: str) -> bool:
    """Whether an error answer to a request with ``response_format`` is a refusal of that format."""
    if status in (400, 422):
        return True
    return status >= 500 and bool(_NAMES_FORMAT.search(body[:_SHOWN_BODY]))


def endpoint_label(base_url: str | None) -> str:
    """A bounded metric label for the configured endpoint: its host and port, never credentials or a path."""
    if not base_url:
        return "api.openai.com"
    parts = urlsplit(base_url if "//" in base_url else f"//{base_url}")
    host = (parts.hostname or "unknown")[:64]
    return f"{host}:{parts.port}" if parts.port else host


class FormatLadder:
    """The level each model of one endpoint answers at, and the formats a request tries in order."""

    def __init__(self, metrics: Metrics, endpoint: str, *, enabled: bool) -> None:
        self.metrics = metrics
        self.endpoint = endpoint
        self.enabled = enabled
        self._levels: dict[str, int] = {}

    def level(self, model: str) -> int:
        return self._levels.get(model, RULES) if self.enabled else TEXT

    def tries(self, model: str, rules: dict[str, Any] | None, plain: dict[str, Any] | None) -> list[Rung]:
        """(level, response_format) to send, best first, from the model's remembered level down."""
        if rules is None:
            return [(TEXT, None)]
        if not self.enabled:  # judge_structured_output=false: free text, and the gauge says so
            self.metrics.judge_structured_fallback.labels(self.endpoint, model).set(TEXT)
        ladder: list[Rung] = [(RULES, rules), (PLAIN, plain), (JSON_OBJECT, ANY_OBJECT), (TEXT, None)]
        start = self.level(model)
        return [(level, fmt) for level, fmt in ladder if level >= start and (fmt is not None or level == TEXT)]

    def remember(self, model: str, level: int) -> None:
        """A request at ``level`` succeeded: later requests for this model start there."""
        if level > self._levels.get(model, RULES):
            self._levels[model] = level
        self.metrics.judge_structured_fallback.labels(self.endpoint, model).set(self.level(model))
