"""The judge as the worker wires it (monitor/runtime/wiring.py), for tests that hold one ``Settings``; the
conversations, scripted answers and metric reads the judge tests share."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from monitor.contracts.events import Conversation
from monitor.contracts.metrics import Metrics
from monitor.contracts.rubric_set import RubricSet
from monitor.contracts.settings import Settings
from monitor.judge.base import Judge
from monitor.judge.build import build_judge
from monitor.tools.stand_in_judge import answer


def judge_from(settings: Settings, rubric: RubricSet, metrics: Metrics, **kw: Any) -> Judge:
    """``build_judge`` with the judge and rubric sections, the budget booked in the label store's database."""
    return build_judge(settings.judge, settings.rubrics, rubric, metrics, ledger_url=settings.label_store_url, **kw)


API_KEY = "sk-test-DO-NOT-LEAK-1234567890"


def make_conversation(*texts: str, conversation_id: str = "c-1", **overrides: Any) -> Conversation:
    """Alternating user/assistant turns from ``texts`` (the first is the user's)."""
    turns = [{"index": i, "role": "user" if i % 2 == 0 else "assistant", "text": t} for i, t in enumerate(texts)]
    return Conversation.model_validate({"conversation_id": conversation_id, "turns": turns, **overrides})


def sample(metrics: Metrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


def respond(transform: Callable[[dict[str, Any], dict[str, Any]], str]) -> Callable[..., Any]:
    """A scripted behaviour: the server's rubric-aware JSON answer, rewritten by ``transform``."""

    def behaviour(body: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
        text, _ = answer(body)
        content = transform(json.loads(text), body)
        return 200, {"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                     "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                  "finish_reason": "stop"}],
                     "usage": {"prompt_tokens": 100, "completion_tokens": 50, "total_tokens": 150}}, {}

    return behaviour
