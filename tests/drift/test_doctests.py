"""The seeded doctests in each detector's docstring are part of the test suite."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["agreement", "anchor_drift", "cusum", "exchangeability", "feature_drift", "jsd", "page_hinkley", "psi"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(f"monitor.drift.{name}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"monitor.drift.{name} has no doctest"
    assert result.failed == 0
