"""Likert mode (RUBICON-style): 5-point agreement per item, at most 10 items per call.

Ratings map to 0 / 2.5 / 5 / 7.5 / 10 (verdict yes from "agree" up); DSAT items count negatively
in R, as in SPUR. Batches are scored concurrently; each has its own static system prompt.
"""

from __future__ import annotations

from typing import Any

from monitor.contracts.events import Conversation
from monitor.contracts.metrics import Metrics
from monitor.contracts.rubric_set import RubricItem
from monitor.contracts.sections import JudgeSettings, RubricSettings
from monitor.judge.ask import ModeScorer, Scored
from monitor.judge.client import JudgeClient
from monitor.judge.gather import gather_or_cancel
from monitor.judge.interpret import parse_likert
from monitor.judge.prompt import conversation_budget, conversation_message, render, rubric_sections

MAX_ITEMS_PER_CALL = 10
_FORMAT = 'Answer with one JSON object mapping each statement id to its rating (an integer 1-5), e.g. {{"{0}": 4}}.'


def likert_schema(items: list[RubricItem]) -> dict[str, Any]:
    properties = {item.id: {"type": "integer", "enum": [1, 2, 3, 4, 5]} for item in items}
    schema = {"type": "object", "properties": properties, "required": [i.id for i in items],
              "additionalProperties": False}
    return {"type": "json_schema", "json_schema": {"name": "likert_answers", "strict": True, "schema": schema}}


class _Batch:
    def __init__(self, rubrics: RubricSettings, items: list[RubricItem]) -> None:
        self.items = items
        self.system = render(
            rubrics.prompts_dir,
            "likert",
            domain=rubrics.domain_description,
            rubric_sections=rubric_sections(items),
            n_items=len(items),
            example_id=items[0].id,
        )
        self.response_format = likert_schema(items)
        self.answer_format = _FORMAT.format(items[0].id)


class LikertScorer(ModeScorer):
    def __init__(
        self, judge: JudgeSettings, rubrics: RubricSettings, client: JudgeClient, metrics: Metrics,
        items: list[RubricItem], *, model: str
    ) -> None:
        super().__init__(judge, rubrics, client, metrics, items, model=model)
        self.batches = [
            _Batch(rubrics, items[i : i + MAX_ITEMS_PER_CALL]) for i in range(0, len(items), MAX_ITEMS_PER_CALL)
        ]
        self.max_chars = min(conversation_budget(judge.judge_max_prompt_chars, b.system) for b in self.batches)

    async def score_items(self, conversation: Conversation) -> Scored:
        user, truncated = conversation_message(self.rubrics.prompts_dir, conversation, max_chars=self.max_chars)
        scored = Scored(items=[], truncated=truncated)
        results = await gather_or_cancel(
            self.ask(batch.system, user, scored, items=batch.items, parse=parse_likert,
                     answer_format=batch.answer_format, response_format=batch.response_format)
            for batch in self.batches
        )
        scored.items = [item for batch in results for item in batch]
        return scored
