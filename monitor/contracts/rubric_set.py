"""Rubric sets: versioned lists of SAT/DSAT items loaded from ``prompts/rubrics/*.yaml``.

Every output of convmon names items by their stable ``id`` (``sat.gratitude``); the set's
``id@version`` travels in every score so models of different rubric versions are never mixed.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from monitor.contracts.errors import RubricError

Polarity = Literal["sat", "dsat", "maxim"]
_ITEM_ID = re.compile(r"^[a-z][a-z0-9_]*\.[a-z0-9_]+$")


class RubricItem(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    name: str = Field(min_length=1)
    polarity: Polarity
    description: str = Field(min_length=1)

    @model_validator(mode="after")
    def _check_id(self) -> RubricItem:
        if not _ITEM_ID.match(self.id):
            raise ValueError(f"item id {self.id!r} must look like 'sat.gratitude' (lower case, one dot)")
        return self


class RubricSet(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    version: str = Field(min_length=1)
    name: str = ""
    description: str = ""
    provenance: dict[str, Any] = Field(default_factory=dict)
    items: list[RubricItem] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_ids(self) -> RubricSet:
        seen: set[str] = set()
        for item in self.items:
            if item.id in seen:
                raise ValueError(f"duplicate item id {item.id!r}")
            seen.add(item.id)
        return self

    @property
    def key(self) -> str:
        """``id@version``: the identity models and scores are tied to."""
        return f"{self.id}@{self.version}"

    @property
    def item_ids(self) -> list[str]:
        return [item.id for item in self.items]

    def by_polarity(self, polarity: Polarity) -> list[RubricItem]:
        return [item for item in self.items if item.polarity == polarity]

    def item(self, item_id: str) -> RubricItem:
        for item in self.items:
            if item.id == item_id:
                return item
        raise KeyError(item_id)


def rubric_path(name_or_path: str | Path, prompts_dir: Path) -> Path:
    """A rubric set is named (``spur-copilot``) or given as a path to a YAML file."""
    path = Path(name_or_path)
    if path.suffix in {".yaml", ".yml"}:
        return path
    return prompts_dir / "rubrics" / f"{name_or_path}.yaml"


def load_rubric_set(name_or_path: str | Path, prompts_dir: Path) -> RubricSet:
    path = rubric_path(name_or_path, prompts_dir)
    if not path.is_file():
        available = sorted(p.stem for p in (prompts_dir / "rubrics").glob("*.yaml"))
        raise RubricError(f"rubric set {str(name_or_path)!r} not found at {path}; available: {available}")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise RubricError(f"{path}: invalid YAML: {exc}") from exc
    try:
        return RubricSet.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise RubricError(f"{path}: field '{loc}': {err['msg']}") from exc


def dump_rubric_set(rubric: RubricSet, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        yaml.safe_dump(rubric.model_dump(mode="json"), sort_keys=False, allow_unicode=True), encoding="utf-8"
    )
