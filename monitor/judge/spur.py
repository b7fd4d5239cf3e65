"""SPUR mode (Lin et al. 2024, Appendix A.3): one call answers every item with Y/N and a 1-10 score.

R = sum of SAT scores - sum of DSAT scores. Maxim items (AMULET) are answered S / V / NA in the
same call. A JSON schema ``response_format`` is sent when enabled; free text is parsed otherwise.
"""

from __future__ import annotations

from typing import Any

from monitor.contracts.events import Conversation
from monitor.contracts.metrics import Metrics
from monitor.contracts.rubric_set import RubricItem
from monitor.contracts.sections import JudgeSettings, RubricSettings
from monitor.judge.ask import ModeScorer, Scored
from monitor.judge.client import JudgeClient
from monitor.judge.interpret import parse_spur
from monitor.judge.prompt import conversation_budget, conversation_message, render, rubric_sections, spur_answer_format
from monitor.judge.strict import EXPLANATION, MAX_EXPLANATION

_MAXIM_RULES = "- For the conversational maxims, judge the assistant's turns: S, V or NA, with score 0.\n"


def spur_schema(items: list[RubricItem], *, explanations: bool = False) -> dict[str, Any]:
    """Strict JSON schema: one ``{"answer", "score"}`` object per item id (plus ``"why"`` with
    ``explanations``), all required. The length bound of ``why`` is checked by monitor.judge.strict, not
    sent: strict structured outputs do not take ``maxLength`` everywhere, and a 400 would switch the
    client to free text for good."""
    fields: dict[str, Any] = {"score": {"type": "integer"}}
    if explanations:
        fields[EXPLANATION] = {"type": "string"}
    properties = {
        item.id: {
            "type": "object",
            "properties": {
                "answer": {"type": "string", "enum": ["S", "V", "NA"] if item.polarity == "maxim" else ["Y", "N"]},
                **fields,
            },
            "required": ["answer", *fields],
            "additionalProperties": False,
        }
        for item in items
    }
    schema = {"type": "object", "properties": properties, "required": [i.id for i in items],
              "additionalProperties": False}
    return {"type": "json_schema", "json_schema": {"name": "rubric_answers", "strict": True, "schema": schema}}


class SpurScorer(ModeScorer):
    def __init__(
        self, judge: JudgeSettings, rubrics: RubricSettings, client: JudgeClient, metrics: Metrics,
        items: list[RubricItem], *, model: str
    ) -> None:
        super().__init__(judge, rubrics, client, metrics, items, model=model)
        explanations = judge.judge_explanations
        self.answer_format = spur_answer_format(items, explanations=MAX_EXPLANATION if explanations else 0)
        self.system = render(
            rubrics.prompts_dir,
            "spur_estimation",
            domain=rubrics.domain_description,
            rubric_sections=rubric_sections(items),
            n_items=len(items),
            extra_rules=_MAXIM_RULES if any(i.polarity == "maxim" for i in items) else "",
            answer_format=self.answer_format,
        )
        self.max_chars = conversation_budget(judge.judge_max_prompt_chars, self.system)
        self.response_format = spur_schema(items, explanations=explanations)

    async def score_items(self, conversation: Conversation) -> Scored:
        user, truncated = conversation_message(self.rubrics.prompts_dir, conversation, max_chars=self.max_chars)
        scored = Scored(items=[], truncated=truncated)
        scored.items = await self.ask(self.system, user, scored, items=self.items, parse=parse_spur,
                                      answer_format=self.answer_format, response_format=self.response_format)
        return scored
