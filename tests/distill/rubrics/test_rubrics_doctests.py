"""The examples in the rubric-learning docstrings are tests too."""

from __future__ import annotations

import doctest
import importlib

import pytest


@pytest.mark.parametrize("module", ["cache", "extract", "summarize"])
def test_doctests(module: str) -> None:
    result = doctest.testmod(importlib.import_module(f"distill.rubrics.{module}"))
    assert result.attempted > 0 and result.failed == 0
