"""Which judge made a verdict: the evaluator's provenance on every judge score record.

A verdict rate that moves may mean the product changed or the judge did; the record says which judge it
was, so the two can be told apart afterwards (the score store keeps it per row, OTLP evaluation events
carry it as ``gen_ai.evaluation.evaluator.*`` attributes)::

    Evaluator(model="gpt-4o-mini-2024-07-18", endpoint="https://api.openai.com/v1",
              prompt="sha256:3f0c...", rubric="spur-copilot@2", mode="spur", version="0.1.0")

No field holds a secret or user data: the endpoint keeps scheme, host, port and path only.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

# The fields whose change is logged and counted (convmon_judge_provenance_changes_total{what}).
PROVENANCE_FIELDS = ("model", "endpoint", "prompt", "rubric", "mode", "version")


class Evaluator(BaseModel):
    """The judge behind one verdict; every field is a short, bounded string."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(max_length=300)  # the model(s) the endpoint's responses named, comma-separated if several
    endpoint: str = Field(max_length=300)  # scheme://host[:port]/path: no credentials, query or fragment
    prompt: str = Field(max_length=80)  # "sha256:<hex>" of the mode's prompt templates and domain description
    rubric: str = Field(max_length=200)  # "<rubric set>@<version>"
    mode: str = Field(max_length=40)  # judge_mode: spur | likert | logprobs
    version: str = Field(max_length=40)  # convmon's version
