"""The SPUR A.1 / A.2 stand-in the rubric tests script the test OpenAI server with
(see tests/distill/rubrics/conftest.py).

Extraction requests (``<REASONS>``) are answered from keywords in the user turns, restricted to the
label's polarity (supervised extraction); summarization requests (``<Rubric>``) count which pattern
names the examples mention and return the most frequent as a numbered list; anything else (scoring)
gets the server's own rubric-aware answer. :func:`reply` wraps any text as a completion, optionally cut
off at the output limit.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from typing import Any

from monitor.tools.stand_in_judge import KEYWORDS, answer, conversation_users

PATTERNS = {
    "satisfied": {
        "gratitude": ("Gratitude", "The user thanks the agent for its help."),
        "farewell": ("Farewell", "The user ends the conversation with a friendly goodbye."),
        "booking_acceptance": ("Booking Acceptance", "The user accepts the booking the agent offers."),
        "request_fulfillment": ("Request Fulfillment", "The user gets the details they asked for."),
        "praise": ("Praise", "The user praises the agent's answer."),
    },
    "dissatisfied": {
        "repetition": ("Repetition", "The user has to repeat a request."),
        "request_flexibility": ("Request Flexibility", "The user has to ask for an alternative instead."),
        "clarification": ("Clarification", "The user has to restate what they need."),
        "ignored": ("Ignored", "The user says the agent did not answer what they asked."),
        "negative_feedback": ("Negative Feedback", "The user complains about the agent."),
    },
}


def _extraction(content: str, user_text: str) -> str:
    feeling = "dissatisfied" if "**dissatisfied**" in content else "satisfied"
    max_reasons = int(re.search(r"at most (\d+) reasons", content).group(1))  # type: ignore[union-attr]
    text = user_text.lower()
    found = [f"{name}: {description}" for key, (name, description) in PATTERNS[feeling].items()
             if any(word in text for word in KEYWORDS[key])]
    body = "\n".join(f"- {r}" for r in found[:max_reasons]) or "NONE"
    return f"<REASONS>\n{body}\n</REASONS>"


def _summarization(content: str) -> str:
    feeling = "dissatisfied" if "**dissatisfied**" in content else "satisfied"
    limit = int(re.search(r"fewer than (\d+) items", content).group(1)) - 1  # type: ignore[union-attr]
    examples = content.split("# Example explanations", 1)[1].split("# Now summarize", 1)[0]
    counts = Counter({key: examples.count(name + ":") for key, (name, _) in PATTERNS[feeling].items()})
    top = [key for key, count in counts.most_common() if count][:limit]
    lines = [f"{i}. {PATTERNS[feeling][k][0]}: {PATTERNS[feeling][k][1]}" for i, k in enumerate(top, 1)]
    return "Here is the rubric.\n<Rubric>\n" + "\n".join(lines) + "\n</Rubric>"


def rubric_text(body: dict[str, Any]) -> str:
    """The stand-in's answer text: extraction, summarization, or the server's own scoring answer."""
    messages = body.get("messages") or []
    content = str(messages[-1].get("content", "")) if messages else ""
    if "<REASONS>" in content:
        return _extraction(content, conversation_users(messages)[0])
    if "<Rubric>" in content:
        return _summarization(content)
    return answer(body)[0]


def rubric_llm(body: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
    return reply(body, rubric_text(body))


def reply(body: dict[str, Any], text: str, finish_reason: str = "stop") -> tuple[int, dict[str, Any], dict[str, str]]:
    """A 200 chat completion carrying ``text``; ``finish_reason="length"`` is an answer cut off at the limit."""
    messages = body.get("messages") or []
    prompt = sum(len(str(m.get("content") or "")) for m in messages) // 4 + 1
    payload = {
        "id": "chatcmpl-rubrics", "object": "chat.completion", "created": int(time.time()),
        "model": body.get("model", "unknown"),
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish_reason,
                     "logprobs": None}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": len(text) // 4 + 1,
                  "total_tokens": prompt + len(text) // 4 + 1},
    }
    return 200, payload, {}
