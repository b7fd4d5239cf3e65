"""LLM judges: ``build_judge`` returns the configured one (or the simulator's stand-in).

    build_judge(judge, rubrics, rubric, metrics, ledger_url=..., http_client=None) -> Judge
        judge_configured False        -> SimulatedJudge (simulated ground truth only)
        judge_mode spur | likert | logprobs, one model       -> LLMJudge "openai:<model>" / "azure:<model>"
        several judge_models or judge_jury_size > 1          -> LLMJudge "jury:<n>" over a JuryScorer

``JudgeClient.complete`` is the reusable low-level call (retries, rate limits, budget, metrics).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from monitor.contracts.metrics import Metrics
from monitor.contracts.rubric_set import RubricSet
from monitor.contracts.sections import JudgeSettings, RubricSettings
from monitor.judge.base import Judge
from monitor.judge.client import JudgeClient
from monitor.judge.jury import JuryScorer, Scorer, permuted
from monitor.judge.likert import LikertScorer
from monitor.judge.llm import LLMJudge
from monitor.judge.logprobs import LogprobsScorer
from monitor.judge.provenance import Provenance, endpoint_url, prompt_hash
from monitor.judge.redact import Redactor
from monitor.judge.simulated import SimulatedJudge
from monitor.judge.spur import SpurScorer

if TYPE_CHECKING:
    import httpx

_MODES: dict[str, type[SpurScorer | LikertScorer | LogprobsScorer]] = {
    "spur": SpurScorer, "likert": LikertScorer, "logprobs": LogprobsScorer,
}


def build_judge(
    judge: JudgeSettings, rubrics: RubricSettings, rubric: RubricSet, metrics: Metrics, *, ledger_url: str,
    http_client: httpx.AsyncClient | None = None,
) -> Judge:
    """The judge the settings ask for; see the module docstring for the cases.

    ``ledger_url`` is the label store's database (``label_store_url``): the daily budget is booked there,
    shared by every worker and kept across restarts.
    """
    if not judge.judge_configured:
        return SimulatedJudge(rubric)
    from monitor.judge.sql_ledger import SqlLedger  # SQLAlchemy: imported when a judge needs its ledger
    from monitor.judge.sql_provenance import SqlProvenance

    redactor = Redactor.from_settings(judge)
    ledger = SqlLedger(ledger_url)
    client = JudgeClient(judge, metrics, http_client=http_client, ledger=ledger)
    models = list(judge.judge_models) or [judge.judge_model]
    size = max(len(models), judge.judge_jury_size)
    mode = _MODES[judge.judge_mode]
    if size == 1:
        scorer: Scorer = mode(judge, rubrics, client, metrics, list(rubric.items), model=models[0])
        name, version = f"{client.provider}:{models[0]}", models[0]
    else:
        members: list[Scorer] = [
            mode(judge, rubrics, client, metrics, permuted(list(rubric.items), k), model=models[k % len(models)])
            for k in range(size)
        ]
        scorer = JuryScorer(members, metrics)
        name = f"jury:{size}"
        version = ",".join(models) if len(models) > 1 else f"{models[0]}x{size}"
    provenance = Provenance(metrics, judge=name, endpoint=endpoint_url(judge.openai_base_url),
                            prompt=prompt_hash(rubrics.prompts_dir, judge.judge_mode, rubrics.domain_description),
                            rubric=rubric, mode=judge.judge_mode, book=SqlProvenance(ledger.engine))
    return LLMJudge(name=name, model_version=version, client=client, scorer=scorer, rubric=rubric, redactor=redactor,
                    provenance=provenance)
