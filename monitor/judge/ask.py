"""One question to the judge with one repair attempt: the loop every rubric mode shares.

The first answer is parsed; if it is unusable (parse error, missing or conflicting items, cut off
by ``finish_reason=length``) the conversation continues with the answer and a repair prompt naming
the problems. A second failure raises :class:`JudgeResponseError`, which the caller dead-letters.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from monitor.contracts.errors import JudgeResponseError
from monitor.contracts.events import Conversation
from monitor.contracts.metrics import Metrics
from monitor.contracts.rubric_set import RubricItem
from monitor.contracts.scores import ItemResult
from monitor.contracts.sections import JudgeSettings, RubricSettings
from monitor.judge.client import JudgeClient
from monitor.judge.completion import Completion, Usage
from monitor.judge.interpret import Interpreter, interpret_likert, interpret_spur, parse_likert, parse_spur
from monitor.judge.prompt import render
from monitor.judge.strict import parse_strict, schema_of

Parse = Callable[[str, list[RubricItem]], list[ItemResult]]
_INTERPRETERS: dict[Parse, Interpreter] = {parse_spur: interpret_spur, parse_likert: interpret_likert}

_MAX_ECHO_CHARS = 6000


@dataclass
class Scored:
    """What a mode returns for one conversation: item results plus what they cost."""

    items: list[ItemResult]
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    calls: int = 0
    truncated: bool = False
    repaired: bool = False
    models: set[str] = field(default_factory=set)  # as the endpoint's responses named them (else as asked)

    def add(self, completion: Completion) -> None:
        self.usage += completion.usage
        self.cost_usd += completion.cost_usd
        self.calls += 1
        self.models.add(completion.response_model or completion.model)


async def ask_with_repair(
    client: JudgeClient,
    messages: list[dict[str, str]],
    *,
    items: list[RubricItem],
    parse: Callable[[str, list[RubricItem]], list[ItemResult]],
    answer_format: str,
    prompts_dir: Path,
    metrics: Metrics,
    scored: Scored,
    model: str | None = None,
    response_format: dict[str, Any] | None = None,
    plain_format: dict[str, Any] | None = None,
    repair_prompt: bool = True,
) -> list[ItemResult]:
    completion = await client.complete(messages, model=model, response_format=response_format,
                                       plain_format=plain_format)
    scored.add(completion)
    try:
        return _parse(completion, items, parse)
    except JudgeResponseError as err:
        metrics.judge_parse_failures.inc()
        if not repair_prompt:
            metrics.judge_repairs.labels("skipped").inc()
            raise
        problems = list(getattr(err, "problems", [str(err)]))
    repair = render(
        prompts_dir,
        "repair",
        problems="; ".join(problems[:10]),
        n_items=len(items),
        item_ids=", ".join(item.id for item in items),
        answer_format=answer_format,
    )
    retry = [
        *messages,
        {"role": "assistant", "content": completion.text[:_MAX_ECHO_CHARS]},
        {"role": "user", "content": repair},
    ]
    completion = await client.complete(retry, model=model, response_format=response_format, plain_format=plain_format)
    scored.add(completion)
    scored.repaired = True
    try:
        results = _parse(completion, items, parse)
    except JudgeResponseError as err:
        metrics.judge_parse_failures.inc()
        metrics.judge_repairs.labels("failed").inc()
        raise JudgeResponseError(f"after a repair prompt, {err}") from err
    metrics.judge_repairs.labels("ok").inc()
    return results


class ModeScorer(ABC):
    """What every rubric mode holds; subclasses render their prompts and implement ``score_items``."""

    def __init__(
        self, judge: JudgeSettings, rubrics: RubricSettings, client: JudgeClient, metrics: Metrics,
        items: list[RubricItem], *, model: str
    ) -> None:
        self.judge = judge
        self.rubrics = rubrics
        self.client = client
        self.metrics = metrics
        self.items = items
        self.model = model

    @abstractmethod
    async def score_items(self, conversation: Conversation) -> Scored:
        """Every item of ``self.items`` for one conversation (the ``Scorer`` protocol of the jury)."""

    async def ask(
        self, system: str, user: str, scored: Scored, *, items: list[RubricItem],
        parse: Callable[[str, list[RubricItem]], list[ItemResult]], answer_format: str,
        response_format: dict[str, Any] | None, plain_format: dict[str, Any] | None = None,
    ) -> list[ItemResult]:
        """One system + user question about ``items``, through :func:`ask_with_repair`."""
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        return await ask_with_repair(
            self.client, messages, items=items, parse=self.reader(parse, response_format),
            answer_format=answer_format,
            prompts_dir=self.rubrics.prompts_dir, metrics=self.metrics, scored=scored, model=self.model,
            response_format=response_format, plain_format=plain_format, repair_prompt=self.repairs(),
        )

    def repairs(self) -> bool:
        """Whether an unusable answer gets a repair prompt (``judge_repair_prompt``; 'auto': not at temperature 0)."""
        mode = self.judge.judge_repair_prompt
        return mode == "always" or mode == "auto" and self.judge.judge_temperature > 0

    def reader(self, parse: Parse, response_format: dict[str, Any] | None) -> Parse:
        """How answers are read (``judge_answer_repair``): strictly against the mode's schema, with prose
        stripped when configured, or by the tolerant free-text parser (``lenient``, counted)."""
        mode = self.judge.judge_answer_repair
        schema = schema_of(response_format)
        interpret = _INTERPRETERS.get(parse)
        if mode != "lenient" and schema is not None and interpret is not None:
            def strict(text: str, items: list[RubricItem]) -> list[ItemResult]:
                return parse_strict(text, items, schema, interpret, strip_prose=mode == "strip_prose",
                                    metrics=self.metrics)
            return strict

        def lenient(text: str, items: list[RubricItem]) -> list[ItemResult]:
            results = parse(text, items)
            self.metrics.judge_answer_repairs.labels("lenient").inc()
            return results
        return lenient


def _parse(
    completion: Completion, items: list[RubricItem], parse: Callable[[str, list[RubricItem]], list[ItemResult]]
) -> list[ItemResult]:
    cut = "the answer was cut off at the output limit: answer compactly"
    try:
        results = parse(completion.text, items)
    except JudgeResponseError as err:
        if completion.cut_off:
            err.problems = [cut, *getattr(err, "problems", [])]  # type: ignore[attr-defined]
        raise
    if completion.cut_off:  # it parsed, but its last value may be a prefix ("1" of "10"): never used
        cut_off = JudgeResponseError(f"judge answer unusable: {cut}")
        cut_off.problems = [cut]  # type: ignore[attr-defined]
        raise cut_off
    return results
