"""The judge's provenance: what must stay the same for two anchor runs to be the same judge.

The model as the endpoint reports it (a silent version bump behind the same name shows there), a hash of the
prompt templates, rubric items and judge mode, and the rubric version. A configured endpoint is asked with
one short call (16 output tokens at most), booked in the daily budget like every judge call; the simulator's
stand-in needs none.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from monitor.contracts.rubric_set import RubricSet
from monitor.judge.base import Judge
from monitor.judge.llm import LLMJudge

_PROBE = [{"role": "system", "content": "You answer with exactly one word."},
          {"role": "user", "content": "Answer Yes."}]


def prompt_hash(rubric: RubricSet, prompts_dir: Path, judge_mode: str) -> str:
    """First 12 hex digits of a SHA-256 over the judge mode, every prompt template and the rubric's items."""
    digest = hashlib.sha256(judge_mode.encode())
    for path in sorted((prompts_dir / "templates").glob("*.txt")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    for item in rubric.items:
        digest.update(item.model_dump_json().encode())
    return digest.hexdigest()[:12]


async def reported_model(judge: Judge) -> str:
    """The model the endpoint says answered (its dated version, where it gives one)."""
    if isinstance(judge, LLMJudge):
        completion = await judge.client.complete(_PROBE, max_tokens=16)
        return completion.response_model or completion.model
    return judge.name


async def provenance(judge: Judge, rubric: RubricSet, prompts_dir: Path, judge_mode: str) -> dict[str, str]:
    return {"judge": judge.name, "model": await reported_model(judge),
            "prompt_hash": prompt_hash(rubric, prompts_dir, judge_mode), "rubric_version": rubric.key}
