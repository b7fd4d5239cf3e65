"""The LLM judge: redact, score with the configured mode (or jury), and build the score record (with the
evaluator's provenance, :mod:`monitor.judge.provenance`)."""

from __future__ import annotations

import logging
import time

from monitor.contracts.errors import JudgeResponseError
from monitor.contracts.events import Conversation
from monitor.contracts.rubric_set import RubricSet
from monitor.contracts.scores import ScoreRecord, check_complete, judge_record
from monitor.judge.client import JudgeClient
from monitor.judge.jury import Scorer
from monitor.judge.provenance import Provenance
from monitor.judge.redact import Redactor

log = logging.getLogger(__name__)


class LLMJudge:
    """Satisfies ``monitor.judge.base.Judge`` for any OpenAI-compatible endpoint."""

    def __init__(
        self,
        *,
        name: str,
        model_version: str,
        client: JudgeClient,
        scorer: Scorer,
        rubric: RubricSet,
        redactor: Redactor,
        provenance: Provenance | None = None,
    ) -> None:
        self.name = name
        self.model_version = model_version
        self.client = client
        self.scorer = scorer
        self.rubric = rubric
        self.redactor = redactor
        self.provenance = provenance

    async def score(self, conversation: Conversation) -> ScoreRecord:
        started = time.perf_counter()
        scored = await self.scorer.score_items(self.redactor.redact_conversation(conversation))
        by_id = {item.item_id: item for item in scored.items}
        items = [by_id[i] for i in self.rubric.item_ids if i in by_id]
        problems = check_complete(scored.items, self.rubric)
        if problems:  # a mode bug, not a model answer: the parsers already enforce completeness
            raise JudgeResponseError(f"judge result incomplete: {'; '.join(problems[:5])}")
        log.debug(
            "judged %s: %d calls, %d prompt tokens, $%.5f%s",
            conversation.conversation_id, scored.calls, scored.usage.prompt, scored.cost_usd,
            " (truncated)" if scored.truncated else "",
        )
        evaluator = await self.provenance.stamp(scored.models) if self.provenance is not None else None
        return judge_record(conversation, items, judge=self.name, rubric=self.rubric,
                            model_version=self.model_version, latency_s=time.perf_counter() - started,
                            tokens=scored.usage.as_dict(), cost_usd=scored.cost_usd, evaluator=evaluator)

    def accepting(self) -> bool:
        return self.client.accepting()

    def on_pace(self) -> bool:
        return self.client.on_pace()

    async def aclose(self) -> None:
        await self.client.aclose()
