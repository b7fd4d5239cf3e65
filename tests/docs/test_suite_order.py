"""``make test`` hands out its longest files first (tests/support/work_units.py): the table names files that exist,
the order is what xdist receives, and the Makefile keeps xdist from sorting it again."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from monitor.contracts.settings import REPO_ROOT
from tests.support.work_units import LONGEST, longest_first


def _items(*nodeids: str) -> list[Any]:
    return [SimpleNamespace(nodeid=nodeid) for nodeid in nodeids]


def test_every_longest_file_exists() -> None:
    missing = [path for path in LONGEST if not (REPO_ROOT / path).is_file()]
    assert not missing, f"tests/support/work_units.py names files that are gone: {missing}"


def test_longest_files_first_then_by_number_of_tests_each_file_in_its_own_order() -> None:
    slow, slower = sorted(LONGEST, key=LONGEST.__getitem__)[:2]
    items = _items("tests/a.py::one", f"{slow}::x", "tests/b.py::one", "tests/b.py::two", f"{slower}::y",
                   f"{slow}::z")
    assert [i.nodeid for i in longest_first(items)] == [
        f"{slower}::y", f"{slow}::x", f"{slow}::z", "tests/b.py::one", "tests/b.py::two", "tests/a.py::one"]


def test_make_test_keeps_the_order() -> None:
    makefile = (REPO_ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = makefile[makefile.index("\ntest:"):].split("\n\n", 1)[0]
    assert "--dist loadfile --no-loadscope-reorder" in recipe
