"""LLM judges: ``build_judge`` returns the configured one (or the simulator's stand-in).

    build_judge(settings, rubric, metrics, http_client=None) -> Judge
        judge_configured False        -> SimulatedJudge (simulated ground truth only)
        judge_mode spur | likert | logprobs, one model       -> LLMJudge "openai:<model>" / "azure:<model>"
        several judge_models or judge_jury_size > 1          -> LLMJudge "jury:<n>" over a JuryScorer

``JudgeClient.complete`` is the reusable low-level call (retries, rate limits, budget, metrics).
"""

from __future__ import annotations

import httpx

from monitor.contracts.metrics import Metrics
from monitor.contracts.rubric_set import RubricItem, RubricSet
from monitor.contracts.settings import Settings
from monitor.judge.base import Judge
from monitor.judge.client import JudgeClient
from monitor.judge.jury import JuryScorer, Scorer, permuted
from monitor.judge.ledger import SqlLedger
from monitor.judge.likert import LikertScorer
from monitor.judge.llm import LLMJudge
from monitor.judge.logprobs import LogprobsScorer
from monitor.judge.redact import Redactor
from monitor.judge.simulated import SimulatedJudge
from monitor.judge.spur import SpurScorer

_MODES: dict[str, type[SpurScorer | LikertScorer | LogprobsScorer]] = {
    "spur": SpurScorer, "likert": LikertScorer, "logprobs": LogprobsScorer,
}


def _scorer(settings: Settings, client: JudgeClient, metrics: Metrics, items: list[RubricItem], model: str) -> Scorer:
    return _MODES[settings.judge_mode](settings, client, metrics, items, model=model)


def build_judge(
    settings: Settings, rubric: RubricSet, metrics: Metrics, *, http_client: httpx.AsyncClient | None = None
) -> Judge:
    """The judge the settings ask for; see the module docstring for the cases."""
    if not settings.judge_configured:
        return SimulatedJudge(rubric)
    redactor = Redactor.from_settings(settings.judge)
    # the budget is booked in the label store's database: shared by every worker, kept across restarts
    client = JudgeClient(settings, metrics, http_client=http_client, ledger=SqlLedger(settings.label_store_url))
    models = list(settings.judge_models) or [settings.judge_model]
    size = max(len(models), settings.judge_jury_size)
    if size == 1:
        scorer = _scorer(settings, client, metrics, list(rubric.items), models[0])
        name, version = f"{client.provider}:{models[0]}", models[0]
    else:
        members = [
            _scorer(settings, client, metrics, permuted(list(rubric.items), k), models[k % len(models)])
            for k in range(size)
        ]
        scorer = JuryScorer(members, metrics)
        name = f"jury:{size}"
        version = ",".join(models) if len(models) > 1 else f"{models[0]}x{size}"
    return LLMJudge(name=name, model_version=version, client=client, scorer=scorer, rubric=rubric, redactor=redactor)


