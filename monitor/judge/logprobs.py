"""Logprobs mode (LLM-Rubric, Hashemi et al. 2024): one yes/no question per item, answer read as a distribution.

The first output token's ``top_logprobs`` give P(yes) and P(no); ``probability`` is
P(yes) / (P(yes) + P(no)) and ``mass`` = P(yes) + P(no) is kept unnormalised, so a calibration
model can tell a confident answer from one where the judge wanted to say something else.
R is the sum of SAT probabilities minus DSAT probabilities (as for distilled records).
"""

from __future__ import annotations

import math

from monitor.contracts.errors import JudgeError, JudgeResponseError
from monitor.contracts.events import Conversation
from monitor.contracts.metrics import Metrics
from monitor.contracts.rubric_set import RubricItem
from monitor.contracts.scores import ItemResult
from monitor.contracts.sections import JudgeSettings, RubricSettings
from monitor.judge.ask import ModeScorer, Scored
from monitor.judge.client import JudgeClient
from monitor.judge.gather import gather_or_cancel
from monitor.judge.prompt import conversation_budget, conversation_message, new_nonce, render

YES = frozenset({"yes", "y", "true"})
NO = frozenset({"no", "n", "false"})
TOP_LOGPROBS = 20


def yes_no_mass(alternatives: list[tuple[str, float]]) -> tuple[float, float]:
    """(P(yes), P(no)) summed over token variants (" Yes", "YES", "yes."), from one token's top logprobs."""
    p_yes = p_no = 0.0
    for token, logprob in alternatives:
        word = token.strip().strip(".,!:;\"'*").lower()
        if word in YES:
            p_yes += math.exp(logprob)
        elif word in NO:
            p_no += math.exp(logprob)
    return p_yes, p_no


def item_result(item: RubricItem, alternatives: list[tuple[str, float]]) -> ItemResult:
    p_yes, p_no = yes_no_mass(alternatives)
    mass = p_yes + p_no
    if mass <= 1e-9:
        raise JudgeResponseError(f"judge answer unusable: item {item.id}: no Yes/No token among the top logprobs")
    probability = min(1.0, p_yes / mass)
    return ItemResult(
        item_id=item.id, polarity=item.polarity, verdict=probability >= 0.5, probability=probability,
        mass=min(1.0, mass),
    )


class LogprobsScorer(ModeScorer):
    def __init__(
        self, judge: JudgeSettings, rubrics: RubricSettings, client: JudgeClient, metrics: Metrics,
        items: list[RubricItem], *, model: str
    ) -> None:
        super().__init__(judge, rubrics, client, metrics, items, model=model)
        self.systems = {
            item.id: render(
                rubrics.prompts_dir,
                "logprobs",
                domain=rubrics.domain_description,
                item_id=item.id,
                item_name=item.name,
                item_description=item.description,
            )
            for item in items
        }
        self.max_chars = min(conversation_budget(judge.judge_max_prompt_chars, s) for s in self.systems.values())

    async def score_items(self, conversation: Conversation) -> Scored:
        nonce = new_nonce()
        user, truncated = conversation_message(
            self.rubrics.prompts_dir, conversation, max_chars=self.max_chars, nonce=nonce
        )
        scored = Scored(items=[], truncated=truncated)
        scored.items = await gather_or_cancel(self._ask(item, user, scored) for item in self.items)
        return scored

    async def _ask(self, item: RubricItem, user: str, scored: Scored) -> ItemResult:
        messages = [{"role": "system", "content": self.systems[item.id]}, {"role": "user", "content": user}]
        completion = await self.client.complete(
            messages, model=self.model, logprobs=True, top_logprobs=TOP_LOGPROBS, max_tokens=1
        )
        scored.add(completion)
        if not completion.top_logprobs:
            raise JudgeError(
                f"the judge endpoint returned no logprobs for model {self.model!r}; use judge_mode=spur or likert "
                "with this endpoint", reason="judge_logprobs_unsupported"
            )
        try:
            return item_result(item, completion.top_logprobs[0])
        except JudgeResponseError:
            self.metrics.judge_parse_failures.inc()
            raise
