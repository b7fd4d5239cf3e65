"""The stand-in judge's answers: deterministic, rubric-aware verdicts read from the users' words.

:class:`monitor.tools.openai_server.OpenAIServer` serves them over HTTP; tests and the rubric-learning
stand-in call :func:`answer` directly. Each item line ``- [id] Name: ...`` of the system prompt is
answered from keywords in the user turns of the nonce-delimited conversation block (:func:`decide`),
as SPUR JSON / free text, Likert ratings or yes/no logprobs depending on the request; behaviour ``fenced``
answers the JSON inside a Markdown code fence, as instruction-tuned models do when nothing constrains them.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Any

_NEGATIVE = ["wrong", "useless", "terrible", "not helpful", "unhelpful", "stupid", "waste", "frustrat", "annoying",
             "disappoint", "awful"]
KEYWORDS: dict[str, list[str]] = {
    "gratitude": ["thank", "thanks", "appreciate", "grateful"],
    "praise": ["great", "awesome", "perfect", "excellent", "amazing", "love it"],
    "follow_up": ["tell me more", "what about", "how about", "more detail", "can you also", "follow up"],
    "compliance": ["i'll try", "i will try", "i'll do that", "will do", "sounds good", "let's do"],
    "personal_details": ["my wife", "my husband", "my son", "my daughter", "i am a ", "i'm a ", "my name is",
                         "how are you"],
    "task_request": ["write", "draft", "generate", "summarize", "translate", "create"],
    "correction": ["actually", "i meant", "to clarify", "correction"],
    "learning": ["i learned", "i didn't know", "interesting", "now i understand", "makes sense"],
    "humor": ["haha", "lol", "😂"],
    "acknowledgment": ["got it", "i see", "makes sense", "okay"],
    "positive_closure": ["bye", "have a nice", "that's all", "that is all"],
    "progress": ["it worked", "works now", "that worked", "fixed it"],
    "negative_feedback": _NEGATIVE,
    "repetition": ["again", "i already said", "i already asked", "as i said"],
    "factual_error": ["incorrect", "not true", "not correct", "mistake", "outdated", "error"],
    "topic_switch": ["anyway", "never mind", "nevermind", "different question", "change the subject"],
    "lack_visualization": ["image", "picture", "chart", "graph", "diagram"],
    "no_engagement": ["whatever", "no thanks", "not interested"],
    "irrelevance": ["irrelevant", "not what i asked", "off topic", "doesn't answer", "not relevant"],
    "complex_answer": ["too long", "too complex", "too complicated", "confusing", "too technical", "tl;dr"],
    "sudden_end": ["i give up", "forget it", "figure it out myself"],
    "lack_diversity": ["boring", "more creative", "more fun", "robotic"],
    "revision": ["i meant", "let me rephrase", "what i mean"],
    "unrealistic_expectation": ["why can't you", "you can't even", "can't you just"],
    "lack_of_specificity": ["vague", "more specific", "be specific", "generic"],
    "ignored_request": ["you ignored", "you missed", "you forgot", "didn't answer"],
    "refusal": ["why won't you", "you refused", "just answer"],
    "booking_acceptance": ["book it", "that works", "yes please"],
    "booking_confirmation": ["that's correct", "confirm"],
    "farewell": ["bye", "goodbye", "have a nice day"],
    "cooperation": ["sure", "okay"],
    "clarification": ["i need", "i want", "i'd like", "i would like"],
    "request_fulfillment": ["phone number", "price", "address", "postcode"],
    "request_flexibility": ["instead", "how about"],
    "lack_feedback": ["hello?", "are you there", "did you get"],
    "ignored": ["you didn't answer", "you ignored", "i asked"],
    "compromise_preference": ["i guess", "i suppose"],
    "lack_of_proactivity": ["why didn't you tell", "you should have"],
    "plan_adaption": ["change my mind", "changed my mind"],
    "failed_bookings": ["booking failed", "unavailable", "fully booked"],
    "false_confirmation": ["you said it was booked", "there is no booking"],
}
_ITEM_LINE = re.compile(r"^(?:- )?\[([a-z][a-z0-9_]*\.[a-z0-9_]+)\] ([^:\n]+):", re.M)
_BLOCK = re.compile(r"<<<CONVERSATION (\w+)>>>\n(.*?)\n<<<END CONVERSATION \1>>>", re.S)


def decide(item_id: str, name: str, user_text: str, user_turns: int) -> tuple[bool, float]:
    """The server's deterministic verdict and 1-10 score for one item, from the users' words."""
    text = user_text.lower()
    suffix = item_id.split(".", 1)[1]
    if suffix == "no_frustration":
        hits = 0 if any(k in text for k in _NEGATIVE) else 1
    elif suffix == "engagement":
        hits = 1 if user_turns >= 4 else 0
    elif item_id.startswith("maxim."):
        hits = 0 if any(k in text for k in _NEGATIVE) else 1
    else:
        words = KEYWORDS.get(suffix) or [w for w in re.findall(r"[a-z]{5,}", name.lower())]
        hits = sum(text.count(k) for k in words)
    return hits > 0, float(min(10, 5 + hits)) if hits else 0.0


def conversation_users(messages: list[dict[str, Any]]) -> tuple[str, int]:
    """All user-turn text of the (first) delimited conversation block, and the number of user turns."""
    for message in messages:
        block = _BLOCK.search(str(message.get("content") or ""))
        if block:
            turns = [json.loads(line) for line in block.group(2).splitlines() if line.strip()]
            users = [t.get("text", "") for t in turns if t.get("role") == "user"]
            return "\n".join(users), len(users)
    return "", 0


def answer(body: dict[str, Any], behaviour: str = "good") -> tuple[str, dict[str, Any] | None]:
    """The rubric-aware answer text (and logprobs) for a chat request."""
    messages = body.get("messages") or []
    system = str(messages[0].get("content", "")) if messages else ""
    items = _ITEM_LINE.findall(system)
    user_text, user_turns = conversation_users(messages)
    if behaviour == "malformed":
        return "I think the user was fairly happy overall, but it is hard to say.", None
    if body.get("logprobs"):
        return _logprobs_answer(items, user_text, user_turns, behaviour)
    if behaviour == "missing":
        items = items[:-2]
    likert = "5-point scale" in system
    rows = []
    for item_id, name in items:
        yes, score = decide(item_id, name, user_text, user_turns)
        rows.append((item_id, name, yes, score))
    structured = ("response_format" in body or behaviour == "fenced") and behaviour != "text"
    fence = (lambda text: f"```json\n{text}\n```") if behaviour == "fenced" else (lambda text: text)
    if likert:
        ratings = {i: (5 if s >= 7 else 4) if y else 2 for i, _, y, s in rows}
        if structured:
            return fence(json.dumps(ratings)), None
        return "\n".join(f"{n}: {ratings[i]}" for i, n, _, _ in rows), None
    def spur(item_id: str, yes: bool, score: float) -> dict[str, Any]:
        if item_id.startswith("maxim."):
            return {"answer": "S" if yes else "V", "score": 0}
        return {"answer": "Y" if yes else "N", "score": int(score)}
    if structured:
        why = _asks_why(body)  # judge_explanations: a reason quoting the user, as real judges do (redact on output)
        return fence(json.dumps({i: {**spur(i, y, s), **({"why": f"the user wrote {user_text.strip()[:80]!r}"[:160]}
                                                        if why else {})} for i, _, y, s in rows})), None
    lines = [f"{k}. [{i}] {n}: {spur(i, y, s)['answer']}, {spur(i, y, s)['score']}"
             for k, (i, n, y, s) in enumerate(rows, 1)]
    return "Here is my evaluation.\n" + "\n".join(lines), None


def _asks_why(body: dict[str, Any]) -> bool:
    """Whether the request asks for a ``why`` per item (convmon's judge_explanations): its JSON schema says so, or,
    without one, the answer format in its system prompt does."""
    schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("schema") or {}
    if not schema:
        messages = body.get("messages") or []
        return bool(messages) and '"why"' in str(messages[0].get("content", ""))
    shapes = [shape for p in (schema.get("properties") or {}).values() if isinstance(p, dict)
              for shape in p.get("anyOf", [p]) if isinstance(shape, dict)]  # answer rules: one shape per branch
    return any("why" in (shape.get("properties") or {}) for shape in shapes)


def _logprobs_answer(
    items: list[tuple[str, str]], user_text: str, user_turns: int, behaviour: str
) -> tuple[str, dict[str, Any] | None]:
    yes = decide(items[0][0], items[0][1], user_text, user_turns)[0] if items else False
    p_yes = 0.9 if yes else 0.15
    top: list[dict[str, Any]] = [{"token": "Yes", "logprob": math.log(p_yes)},
                                 {"token": "No", "logprob": math.log(0.95 - p_yes)},
                                 {"token": "The", "logprob": math.log(0.05)}]
    top.sort(key=lambda t: -t["logprob"])
    content = str(top[0]["token"])
    if behaviour == "no_logprobs":
        return content, None
    token = {"token": content, "logprob": top[0]["logprob"], "bytes": None,
             "top_logprobs": [{**t, "bytes": None} for t in top]}
    return content, {"content": [token]}


def embed(text: str, dims: int = 64) -> list[float]:
    """Signed hashed bag of words, L2-normalised: equal texts get equal vectors, shared words similar ones."""
    vector = [0.0] * dims
    for word in re.findall(r"\w+", text.lower()):
        digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
        slot = int.from_bytes(digest[:4], "big") % dims
        vector[slot] += 1.0 if digest[4] & 1 else -1.0
    norm = math.sqrt(sum(v * v for v in vector))
    if norm == 0:
        vector[0], norm = 1.0, 1.0
    return [v / norm for v in vector]
