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


def spur_schema(items: list[RubricItem], *, explanations: bool = False, rules: bool = True) -> dict[str, Any]:
    """Strict JSON schema: one ``{"answer", "score"}`` object per item id (plus ``"why"`` with
    ``explanations``), all required. With ``rules`` the schema also says which scores go with which
    answer (``anyOf``: Y with an integer 1-10, N with 0; maxims S/V/NA with 0), so grammar-constrained
    decoding cannot produce ``{"answer": "Y", "score": 0}``; without, it is the plain shape some
    endpoints need (the client steps down to it when the rules schema is refused, see
    monitor.judge.formats). Either way monitor.judge.strict checks the rules locally. The length bound
    of ``why`` is checked there too, not sent: strict structured outputs do not take ``maxLength`` everywhere."""
    extra: dict[str, Any] = {EXPLANATION: {"type": "string"}} if explanations else {}

    def shape(answers: list[str], score: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {"answer": {"type": "string", "enum": answers}, "score": {"type": "integer", **score},
                           **extra},
            "required": ["answer", "score", *extra],
            "additionalProperties": False,
        }

    def item_schema(item: RubricItem) -> dict[str, Any]:
        if item.polarity == "maxim":
            return shape(["S", "V", "NA"], {"minimum": 0, "maximum": 0} if rules else {})
        if not rules:
            return shape(["Y", "N"], {})
        return {"anyOf": [shape(["Y"], {"minimum": 1, "maximum": 10}), shape(["N"], {"minimum": 0, "maximum": 0})]}

    schema = {"type": "object", "properties": {item.id: item_schema(item) for item in items},
              "required": [i.id for i in items], "additionalProperties": False}
    name = "rubric_answers" if rules else "rubric_answers_plain"
    return {"type": "json_schema", "json_schema": {"name": name, "strict": True, "schema": schema}}


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
        self.plain_format = spur_schema(items, explanations=explanations, rules=False)

    async def score_items(self, conversation: Conversation) -> Scored:
        user, truncated = conversation_message(self.rubrics.prompts_dir, conversation, max_chars=self.max_chars)
        scored = Scored(items=[], truncated=truncated)
        scored.items = await self.ask(self.system, user, scored, items=self.items, parse=parse_spur,
                                      answer_format=self.answer_format, response_format=self.response_format,
                                      plain_format=self.plain_format)
        return scored
